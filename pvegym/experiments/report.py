"""The written report of a run: ``metrics.csv``, ``summary.md`` (bootstrap CIs) and ``manifest.json``.

Everything here is a pure function of the finished cells and the experiment, so two runs of the same
experiment write byte-identical ``metrics.csv`` and ``summary.md``; a rerun that reproduces them
leaves ``manifest.json`` untouched too, and records its own timestamps in an untracked ``run.json``. Floats in the CSV are written with ``repr`` (shortest exact round-trip): the CSV *is* the
data, not a rounded view of it.

Confidence intervals are 95 % BCa bootstraps of the mean over seeds and paired tests are Wilcoxon
signed-rank tests (:mod:`pvegym.experiments.stats`, by SciPy), with generators seeded by
``report.bootstrap_seed`` and the (scenario, policy, metric) names, so they are reproducible too.
Comparisons with ``noop`` and ``upstream`` are *paired by seed* (the same seed means the same
workload noise), which is why they are often much tighter than the two policies' own intervals.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import pvegym
from pvegym.experiments.cells import Row, RunStats
from pvegym.experiments.config import Experiment
from pvegym.experiments.files import write_json_atomic
from pvegym.experiments.record import LEGACY_CODE_KEY, write_json_stable
from pvegym.experiments.stats import (
    Estimate,
    bootstrap,
    bootstrap_change,
    fmt_p,
    paired_difference,
)
from pvegym.provenance import git_commit, machine, package_versions
from pvegym.sim import catalog
from pvegym.sim.metrics import GLANCE, METRIC_KEYS, metric_spec, metric_specs, metrics_in

REFERENCES = ("noop", "upstream")  # policy labels every other policy is compared with


# ------------------------------------------------------------------------------------------ CSV
def _csv_value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_metrics_csv(path: Path, rows: list[Row], docs: dict[str, dict[str, Any]]) -> None:
    """One row per scenario × policy × seed (plan order), every metric; missing values empty."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scenario", "policy", "seed", *METRIC_KEYS])
    for row in rows:
        m = docs[row.cell.key]["metrics"]
        w.writerow(
            [row.scenario, row.policy, row.seed, *(_csv_value(m.get(k)) for k in METRIC_KEYS)]
        )
    _write_text(path, buf.getvalue())


def read_metrics_csv(path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """``metrics.csv`` back as (scenario, policy, seed) → metrics: ``""`` is None, a number
    without a point or exponent an int, any other a float (``repr`` round-trips exactly)."""

    def value(text: str) -> Any:
        if text == "":
            return None
        if text in ("true", "false"):
            return text == "true"
        try:
            return int(text)
        except ValueError:
            return float(text)

    with path.open(newline="") as fh:
        return {
            (r["scenario"], r["policy"], int(r["seed"])): {
                k: value(v) for k, v in r.items() if k not in ("scenario", "policy", "seed")
            }
            for r in csv.DictReader(fh)
        }


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


# ------------------------------------------------------------------------------------------ stats
# (the statistics themselves: pvegym.experiments.stats, by SciPy)


@dataclass
class Summary:
    """Per scenario and policy: an :class:`Estimate` of each metric, and of the paired difference
    (policy − reference) for each reference policy present. Keys are report labels."""

    scenarios: list[str]
    policies: list[str]
    seeds: dict[str, list[int]]
    about: dict[str, str]
    duration: dict[str, float]
    metrics: tuple[str, ...]
    est: dict[tuple[str, str, str], Estimate | None] = field(default_factory=dict)
    diff: dict[tuple[str, str, str, str], Estimate | None] = field(default_factory=dict)
    change: dict[tuple[str, str, str, str], Estimate | None] = field(default_factory=dict)


def comparison_pairs(policies: list[str]) -> list[tuple[str, str]]:
    """(policy, reference) pairs to compare: every policy with each reference present, except a
    reference with itself or with a reference listed after it in :data:`REFERENCES` (``noop`` is
    the floor, so "noop vs upstream" says nothing "upstream vs noop" does not)."""
    refs = [r for r in REFERENCES if r in policies]
    return [
        (p, r)
        for p in policies
        for r in refs
        if p != r and not (p in REFERENCES and REFERENCES.index(p) < REFERENCES.index(r))
    ]


def summarize(exp: Experiment, rows: list[Row], docs: dict[str, dict[str, Any]]) -> Summary:
    """Bootstrap every (scenario, policy, metric) over seeds, and the paired differences."""
    scenarios = [e.key for e in exp.scenarios]
    policies = [p.key for p in exp.policies]
    entry = {e.key: e for e in exp.scenarios}
    s = Summary(
        scenarios=scenarios,
        policies=policies,
        seeds={e.key: list(e.seeds) for e in exp.scenarios},
        about={k: _about(e.name) for k, e in entry.items()},
        duration={},
        metrics=tuple(exp.metrics),
    )
    value: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in rows:
        doc = docs[row.cell.key]
        value[(row.scenario, row.policy, row.seed)] = doc["metrics"]
        s.duration[row.scenario] = float(doc["config"]["duration"])
    resamples, bseed = exp.report.bootstrap_resamples, exp.report.bootstrap_seed
    pairs = comparison_pairs(policies)
    for sc in scenarios:
        for metric in METRIC_KEYS:
            col = {
                p: np.array(
                    [_num(value[(sc, p, seed)].get(metric)) for seed in s.seeds[sc]], dtype=float
                )
                for p in policies
            }
            for p in policies:
                s.est[(sc, p, metric)] = bootstrap(col[p], resamples, bseed, f"{sc}|{p}|{metric}")
            for p, ref in pairs:
                key = (sc, p, ref, metric)
                name = f"{sc}|{p}-{ref}|{metric}"
                s.diff[key] = paired_difference(col[p], col[ref], resamples, bseed, name)
                s.change[key] = bootstrap_change(col[p], col[ref], resamples, bseed, name)
    return s


def _num(v: Any) -> float:
    return math.nan if v is None else float(v)


def _about(name: str) -> str:
    return catalog.describe(name)


# ------------------------------------------------------------------------------------------ summary.md
def fmt(x: float) -> str:
    """A number for a reader: about three significant digits, thousands separated, no exponent."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    if a >= 0.01:
        return f"{x:.3f}"
    return f"{x:.2g}"


def fmt_estimate(e: Estimate | None, metric: str, n_seeds: int) -> str:
    if e is None:
        return "—"
    f = metric_spec(metric).report_scale
    text = fmt(e.mean * f)
    if e.hi > e.lo:
        text += f" [{fmt(e.lo * f)}, {fmt(e.hi * f)}]"
    if e.n < n_seeds:
        text += f" ({e.n}/{n_seeds} seeds)"
    return text


def fmt_relative(d: Estimate | None, change: Estimate | None, metric: str) -> str:
    """The paired comparison with a reference: the relative change of the mean in percent when the
    reference's mean is not zero, else the absolute difference in the metric's unit; then the
    Wilcoxon signed-rank p-value of the paired differences."""
    if d is None:
        return "—"
    if d.p is None:
        return "="
    if change is not None:
        pct = [100.0 * v for v in (change.mean, change.lo, change.hi)]
        text = f"{pct[0]:+.0f} % [{pct[1]:+.0f}, {pct[2]:+.0f}]"
    else:
        f = metric_spec(metric).report_scale
        text = f"{d.mean * f:+.3g} [{d.lo * f:+.3g}, {d.hi * f:+.3g}]"
    return f"{text} {fmt_p(d.p)}"


def _duration(seconds: float) -> str:
    if seconds >= 3600 and seconds % 1800 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def _seed_list(seeds: list[int]) -> str:
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def _directions() -> str:
    """Which way is better, from the registry: costs, and the compared metrics that are not."""
    compared = [m for m in metric_specs() if m.compared]
    neutral = [f"`{m.name}`" for m in compared if m.better is None]
    higher = [f"`{m.name}`" for m in compared if m.better == "higher"]
    text = "Every metric is a cost (lower is better)"
    if neutral:
        text += " except " + ", ".join(neutral)
    if higher:
        text += ("; " if neutral else " except: ") + "higher is better for " + ", ".join(higher)
    return text + "."


def write_summary(path: Path, exp: Experiment, s: Summary) -> None:
    """``summary.md``: an at-a-glance table, then one table per scenario with CIs and comparisons."""
    pairs = comparison_pairs(s.policies)
    glance = metrics_in(GLANCE)
    n_rows = sum(len(s.seeds[sc]) for sc in s.scenarios) * len(s.policies)
    out = [
        f"# {exp.name}",
        "",
        *([exp.description, ""] if exp.description else []),
        f"{len(s.policies)} policies ({', '.join(s.policies)}) × {len(s.scenarios)} scenarios "
        f"× their seeds = {n_rows} episodes. Config SHA-256 `{exp.config_hash()[:16]}` "
        "(see `manifest.json`).",
        "",
        "**How to read.** Each cell is the mean over seeds with its 95 % BCa bootstrap confidence "
        f"interval in brackets ({exp.report.bootstrap_resamples:,} resamples, "
        f"`scipy.stats.bootstrap`). {_directions()} *vs* columns compare with a reference policy, "
        "paired by seed (same seed, same workload noise): the relative change of the mean in "
        "percent with its paired CI — where the reference's mean is 0, the absolute difference in "
        "the metric's unit — and the p-value of the Wilcoxon signed-rank test of the per-seed "
        "differences (`scipy.stats.wilcoxon`, two-sided). `=` means identical on every seed; `—` "
        "no value (e.g. nothing moved off the hot node). Metric definitions: `docs/metrics.md`.",
        "",
        "## At a glance (means over seeds)",
        "",
        "| scenario | policy | "
        + " | ".join(f"{m} ({metric_spec(m).shown_unit})" for m in glance)
        + " |",
        "|---|---|" + "---:|" * len(glance),
    ]
    for sc in s.scenarios:
        for p in s.policies:
            cells = []
            for m in glance:
                e = s.est[(sc, p, m)]
                cells.append("—" if e is None else fmt(e.mean * metric_spec(m).report_scale))
            out.append(f"| {sc} | {p} | " + " | ".join(cells) + " |")
    for sc in s.scenarios:
        out += [
            "",
            f"## {sc}",
            "",
            f"{s.about[sc]}. {len(s.seeds[sc])} seeds ({_seed_list(s.seeds[sc])}), "
            f"{_duration(s.duration[sc])} per episode.",
            "",
            "| metric | unit | "
            + " | ".join(s.policies)
            + "".join(f" | {p} vs {r}" for p, r in pairs)
            + " |",
            "|---|---|" + "---:|" * (len(s.policies) + len(pairs)),
        ]
        n = len(s.seeds[sc])
        for m in s.metrics:
            vals = [fmt_estimate(s.est[(sc, p, m)], m, n) for p in s.policies]
            rel = [
                fmt_relative(s.diff[(sc, p, r, m)], s.change[(sc, p, r, m)], m) for p, r in pairs
            ]
            out.append(f"| `{m}` | {metric_spec(m).shown_unit} | " + " | ".join(vals + rel) + " |")
    _write_text(path, "\n".join(out) + "\n")


# ------------------------------------------------------------------------------------------ manifest
def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


#: who produced the results (not what they are): kept when a rerun reproduces them
MANIFEST_PROVENANCE = (
    "git_commit",
    "git_dirty",
    "code_sha256",
    LEGACY_CODE_KEY,
    "pvegym_version",
    "python",
    "packages",
)


def write_manifest(
    path: Path,
    exp: Experiment,
    rows: list[Row],
    stats: RunStats,
    started: float,
    command: list[str] | None,
) -> None:
    """``manifest.json``: the resolved config and its hash, the seeds, the cells, the metrics'
    hash and the code and packages that produced them. ``pvegym run manifest.json`` reruns exactly
    this config. A rerun that reproduces the metrics leaves it untouched (see
    :func:`~pvegym.experiments.record.write_json_stable`); what is particular to this run — when,
    how long, the command, the machine, the commit it ran at — goes to ``run.json`` beside it,
    which is not committed."""
    commit, dirty = git_commit()
    csv_bytes = (path.parent / "metrics.csv").read_bytes()
    code = rows[0].cell.config.get("code_sha256", "") if rows else ""
    doc = {
        "experiment": exp.name,
        "config": exp.resolved(),
        "config_sha256": exp.config_hash(),
        "seeds": {e.key: list(e.seeds) for e in exp.scenarios},
        "cells": [
            {"scenario": r.scenario, "policy": r.policy, "seed": r.seed, "key": r.cell.key}
            for r in rows
        ],
        "metrics_csv_sha256": hashlib.sha256(csv_bytes).hexdigest(),
        "code_sha256": code,
        "git_commit": commit,
        "git_dirty": dirty,
        "pvegym_version": pvegym.__version__,
        "python": sys.version.split()[0],
        "packages": package_versions(),
    }
    wrote = write_json_stable(path, doc, MANIFEST_PROVENANCE)
    run = {
        "command": command if command is not None else sys.argv,
        "started": _iso(started),
        "finished": _iso(time.time()),
        "wall_s": round(stats.wall_s, 2),
        "cells_computed": stats.computed,
        "cells_reused": stats.cached,
        "git_commit": commit,
        "git_dirty": dirty,
        "code_sha256": code,
        "metrics_csv_sha256": doc["metrics_csv_sha256"],
        "manifest_unchanged": not wrote,  # this run reproduced the manifest's results
        **machine(),
    }
    write_json_atomic(path.with_name("run.json"), run)
