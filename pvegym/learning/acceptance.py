"""The learned balancer's acceptance figures from a run's ``metrics.csv`` (issue 19).

Per-instance comparison of a policy with a reference on one scenario (the held-out ``small``
instances): wins and losses on ``guest_stall_s`` (strictly lower / higher, paired by seed), the
paired mean difference with its 95 % bootstrap CI, the policy's means of ``downtime_s``,
``cpu_shortfall_core_s`` and ``migration_bytes`` relative to the reference's, and the sums of
failed moves, oscillations and churn moves over every scenario of the run (the field scenarios'
seeds included)::

    python -m pvegym.learning.acceptance results/heuristics-vs-rl/metrics.csv \\
        --policy learned-best --reference patched-tuned --reference guest-centric

The bootstrap resamples instances (pairs) with replacement, 10,000 times, from a fixed seed.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

RESAMPLES = 10_000
#: metrics whose mean may be at most ``1 + slack`` times the reference's
RATIO_METRICS = ("downtime_s", "cpu_shortfall_core_s", "migration_bytes")
#: metrics that must sum to 0 over every scenario and seed
ZERO_METRICS = ("moves_failed", "oscillations", "churn_moves")


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _by(rows: list[dict[str, Any]], scenario: str, policy: str) -> dict[int, dict[str, Any]]:
    return {int(r["seed"]): r for r in rows if r["scenario"] == scenario and r["policy"] == policy}


def paired(
    rows: list[dict[str, Any]],
    scenario: str,
    policy: str,
    reference: str,
    metric: str,
    seed: int = 0,
) -> dict[str, Any]:
    """Wins/losses/ties of ``policy`` against ``reference`` on ``metric`` (lower is better) and
    the paired mean difference (policy − reference) with its 95 % bootstrap CI."""
    mine, theirs = _by(rows, scenario, policy), _by(rows, scenario, reference)
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        raise ValueError(f"no common seeds of {policy!r} and {reference!r} on {scenario!r}")
    a = np.array([float(mine[s][metric]) for s in seeds])
    b = np.array([float(theirs[s][metric]) for s in seeds])
    d = a - b
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, d.size, size=(RESAMPLES, d.size))].mean(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return {
        "n": len(seeds),
        "wins": int(np.sum(a < b)),
        "losses": int(np.sum(a > b)),
        "ties": int(np.sum(a == b)),
        "mean_diff": float(d.mean()),
        "ci": (float(lo), float(hi)),
        "mean": float(a.mean()),
        "reference_mean": float(b.mean()),
    }


def ratios(
    rows: list[dict[str, Any]], scenario: str, policy: str, reference: str
) -> dict[str, float]:
    """Mean of each :data:`RATIO_METRICS` metric over the reference's mean (NaN if that is 0)."""
    mine, theirs = _by(rows, scenario, policy), _by(rows, scenario, reference)
    out = {}
    for m in RATIO_METRICS:
        a = np.mean([float(r[m]) for r in mine.values()])
        b = np.mean([float(r[m]) for r in theirs.values()])
        out[m] = float(a / b) if b > 0 else (math.nan if a > 0 else 1.0)
    return out


def zero_sums(rows: list[dict[str, Any]], policy: str) -> dict[str, dict[str, float]]:
    """Per scenario, the sums of :data:`ZERO_METRICS` over the policy's seeds."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(ZERO_METRICS, 0.0))
    for r in rows:
        if r["policy"] == policy:
            for m in ZERO_METRICS:
                out[r["scenario"]][m] += float(r[m])
    return dict(out)


def report(
    rows: list[dict[str, Any]], policy: str, references: list[str], scenario: str = "small"
) -> list[str]:
    """The acceptance figures as Markdown lines."""
    lines = [f"## `{policy}` on `{scenario}`", ""]
    lines += [
        "| reference | wins | losses | ties | mean guest_stall_s | reference's | paired mean "
        "difference [95 % CI] | " + " | ".join(f"{m} ratio" for m in RATIO_METRICS) + " |",
        "|---|---:|---:|---:|---:|---:|---|" + "---:|" * len(RATIO_METRICS),
    ]
    for ref in references:
        p = paired(rows, scenario, policy, ref, "guest_stall_s")
        r = ratios(rows, scenario, policy, ref)
        lines.append(
            f"| {ref} | {p['wins']} | {p['losses']} | {p['ties']} | {p['mean']:,.0f} | "
            f"{p['reference_mean']:,.0f} | {p['mean_diff']:+,.0f} [{p['ci'][0]:+,.0f}, "
            f"{p['ci'][1]:+,.0f}] | " + " | ".join(f"{r[m]:.2f}" for m in RATIO_METRICS) + " |"
        )
    sums = zero_sums(rows, policy)
    lines += ["", "| scenario | " + " | ".join(ZERO_METRICS) + " |", "|---|" + "---:|" * 3]
    for sc, vals in sums.items():
        lines.append(f"| {sc} | " + " | ".join(f"{vals[m]:g}" for m in ZERO_METRICS) + " |")
    total = {m: sum(v[m] for v in sums.values()) for m in ZERO_METRICS}
    lines.append("| **all** | " + " | ".join(f"**{total[m]:g}**" for m in ZERO_METRICS) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pvegym.learning.acceptance")
    p.add_argument("metrics", type=Path, help="a run's metrics.csv")
    p.add_argument("--policy", action="append", required=True, help="policy label(s) to judge")
    p.add_argument("--reference", action="append", required=True, help="reference label(s)")
    p.add_argument("--scenario", default="small", help="the per-instance scenario (small)")
    args = p.parse_args(argv)
    rows = read_rows(args.metrics)
    for policy in args.policy:
        print("\n".join(report(rows, policy, args.reference, args.scenario)))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["paired", "ratios", "report", "zero_sums"]
