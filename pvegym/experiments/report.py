"""The written report of a run: ``metrics.csv``, ``summary.md`` (bootstrap CIs) and ``manifest.json``.

Everything here is a pure function of the finished cells and the experiment, so two runs of the same
experiment write byte-identical ``metrics.csv`` and ``summary.md`` (only the manifest carries
timestamps). Floats in the CSV are written with ``repr`` (shortest exact round-trip): the CSV *is* the
data, not a rounded view of it.

Confidence intervals are 95 % percentile bootstraps of the mean over seeds, with a generator seeded by
``report.bootstrap_seed`` and the (scenario, policy, metric) names, so they are reproducible too.
Comparisons with ``noop`` and ``upstream`` are *paired by seed* (the same seed means the same
workload noise), which is why they are often much tighter than the two policies' own intervals.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import pvegym
from pvegym.experiments.cells import Row, RunStats
from pvegym.experiments.config import Experiment
from pvegym.experiments.record import write_json_atomic
from pvegym.provenance import git_commit, package_versions
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
    """One row per scenario × policy × seed (plan order), every §9 metric; missing values empty."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scenario", "policy", "seed", *METRIC_KEYS])
    for row in rows:
        m = docs[row.cell.key]["metrics"]
        w.writerow(
            [row.scenario, row.policy, row.seed, *(_csv_value(m.get(k)) for k in METRIC_KEYS)]
        )
    _write_text(path, buf.getvalue())


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


# ------------------------------------------------------------------------------------------ stats
@dataclass(frozen=True)
class Estimate:
    """Mean over seeds with a 95 % bootstrap CI; ``n`` seeds had a value (``None`` = no value,
    e.g. ``evacuation_latency_s`` when nothing moved off the hot node)."""

    mean: float
    lo: float
    hi: float
    n: int


def _rng(seed: int, name: str) -> np.random.Generator:
    tag = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, tag])


def bootstrap(values: np.ndarray, resamples: int, seed: int, name: str) -> Estimate | None:
    """Mean and 95 % percentile-bootstrap CI of the non-NaN ``values``; ``None`` if there are none.

    The generator is seeded from ``seed`` and ``name`` (e.g. ``failure-loop|upstream|moves``) so the
    interval is reproducible and independent of the order anything else was computed in.
    """
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None
    mean = float(v.mean())
    if v.size == 1:
        return Estimate(mean, mean, mean, 1)
    means = v[_rng(seed, name).integers(0, v.size, size=(resamples, v.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return Estimate(mean, float(lo), float(hi), int(v.size))


def bootstrap_change(
    x: np.ndarray, ref: np.ndarray, resamples: int, seed: int, name: str
) -> Estimate | None:
    """Relative change of the mean, ``mean(x)/mean(ref) − 1``, with a paired bootstrap CI
    (seeds resampled together). ``None`` when a value is missing or a resampled reference mean is
    0 — the report then shows the absolute difference instead."""
    if np.isnan(x).any() or np.isnan(ref).any() or ref.mean() == 0:
        return None
    change = float(x.mean() / ref.mean() - 1.0)
    if x.size == 1:
        return Estimate(change, change, change, 1)
    idx = _rng(seed, name).integers(0, x.size, size=(resamples, x.size))
    ref_means = ref[idx].mean(axis=1)
    if (ref_means == 0).any():
        return None
    lo, hi = np.percentile(x[idx].mean(axis=1) / ref_means - 1.0, [2.5, 97.5])
    return Estimate(change, float(lo), float(hi), int(x.size))


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
                s.diff[key] = bootstrap(col[p] - col[ref], resamples, bseed, name)
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
    reference's mean is not zero, else the absolute difference in the metric's unit."""
    if d is None:
        return "—"
    if d.lo == d.hi == 0.0:
        return "="
    if change is not None:
        pct = [100.0 * v for v in (change.mean, change.lo, change.hi)]
        return f"{pct[0]:+.0f} % [{pct[1]:+.0f}, {pct[2]:+.0f}]"
    f = metric_spec(metric).report_scale
    return f"{d.mean * f:+.3g} [{d.lo * f:+.3g}, {d.hi * f:+.3g}]"


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
        "**How to read.** Each cell is the mean over seeds with its 95 % bootstrap confidence "
        f"interval in brackets ({exp.report.bootstrap_resamples:,} resamples). {_directions()} "
        "*vs* columns compare with a reference policy, "
        "paired by seed (same seed, same workload noise): the relative change of the mean in "
        "percent with its CI; where the reference's mean is 0, the absolute difference in the "
        "metric's unit. `=` means identical on every seed; `—` no value (e.g. nothing moved off the hot "
        "node). Metric definitions: `MODEL.md` §9.",
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


def write_manifest(
    path: Path,
    exp: Experiment,
    rows: list[Row],
    stats: RunStats,
    started: float,
    command: list[str] | None,
) -> None:
    """``manifest.json``: the resolved config and its hash, the seeds, the code and environment it
    ran with, and when. ``pvegym run manifest.json`` reruns exactly this config."""
    commit, dirty = git_commit()
    csv_bytes = (path.parent / "metrics.csv").read_bytes()
    doc = {
        "experiment": exp.name,
        "config": exp.resolved(),
        "config_sha256": exp.config_hash(),
        "seeds": {e.key: list(e.seeds) for e in exp.scenarios},
        "cells": [
            {"scenario": r.scenario, "policy": r.policy, "seed": r.seed, "key": r.cell.key}
            for r in rows
        ],
        "cells_computed": stats.computed,
        "cells_reused": stats.cached,
        "metrics_csv_sha256": hashlib.sha256(csv_bytes).hexdigest(),
        "model_sha256": rows[0].cell.config.get("code_sha256", "") if rows else "",
        "git_commit": commit,
        "git_dirty": dirty,
        "pvegym_version": pvegym.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "started": _iso(started),
        "finished": _iso(time.time()),
        "wall_s": round(stats.wall_s, 2),
        "command": command if command is not None else sys.argv,
    }
    write_json_atomic(path, json.loads(json.dumps(doc)))
