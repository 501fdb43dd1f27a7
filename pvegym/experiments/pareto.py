"""The Pareto view of a run: what a balancer's guest stall costs in moves and in migration traffic.

Heuristics with tuned constants and learned agents trade the workload's stall against the
balancer's own work: a policy that moves more may stall the guests less. One number (a weighted
cost) hides that trade; the Pareto plot shows it. Per scenario of a run, every policy is a point
— the mean of a cost metric (default ``guest_stall_s``) over the scenario's seeds against the mean
of each work metric (default ``moves`` and ``migration_bytes``), each with its 95 % bootstrap CI
(:func:`pvegym.experiments.stats.bootstrap`, the report's own). A policy is *dominated* when
another is at least as good on both axes and better on one (the metric registry says which way is
better); the non-dominated ones form the front, drawn as a dashed line. Heuristics are circles,
learned agents (policy ``learned``) diamonds.

It is drawn from a finished run's ``metrics.csv`` and ``manifest.json`` alone (no simulation)::

    python -m pvegym.experiments.pareto results/heuristics-vs-rl

writes ``plots/pareto-<scenario>.png`` for every scenario of the run and ``pareto.md``: the points
and which are on the front. This is where "does tuning the constants reach what the learned
policies reach?" is answered, scenario by scenario.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from pvegym.experiments.plots import DPI, POLICY_COLORS, _save
from pvegym.experiments.report import _write_text, fmt, read_metrics_csv
from pvegym.experiments.stats import Estimate, bootstrap
from pvegym.sim.metrics import metric_spec

COST = "guest_stall_s"
WORK = ("moves", "migration_bytes")
RESAMPLES = 2000
#: policies of these registry names are drawn as agents (diamonds), the rest as heuristics
AGENTS = frozenset({"learned"})


@dataclass(frozen=True)
class Point:
    """One policy on one scenario: the mean (and 95 % CI) of each metric over its seeds."""

    policy: str
    agent: bool
    est: dict[str, Estimate]


def _oriented(metric: str, value: float) -> float:
    """``value`` such that lower is better (the registry's direction)."""
    return value if metric_spec(metric).better == "lower" else -value


def dominated(p: Point, q: Point, axes: tuple[str, str]) -> bool:
    """``q`` dominates ``p`` on ``axes``: at least as good on both means, better on one."""
    a = [_oriented(m, p.est[m].mean) for m in axes]
    b = [_oriented(m, q.est[m].mean) for m in axes]
    return all(y <= x for x, y in zip(a, b, strict=True)) and any(
        y < x for x, y in zip(a, b, strict=True)
    )


def front(points: list[Point], axes: tuple[str, str]) -> list[Point]:
    """The non-dominated points on ``axes``, ordered along the first axis."""
    keep = [p for p in points if not any(dominated(p, q, axes) for q in points if q is not p)]
    return sorted(keep, key=lambda p: p.est[axes[0]].mean)


def _float(v: object) -> float:
    return float(v) if isinstance(v, int | float) else float("nan")


def points(
    metrics: dict[tuple[str, str, int], dict[str, object]],
    scenario: str,
    policy_names: dict[str, str],
    names: tuple[str, ...],
    seed: int = 0,
) -> list[Point]:
    """Every policy of ``scenario`` with the bootstrap estimate of each of ``names``."""
    policies = list(dict.fromkeys(p for (sc, p, _) in metrics if sc == scenario))
    out = []
    for pol in policies:
        rows = [v for (sc, p, _), v in sorted(metrics.items()) if sc == scenario and p == pol]
        est: dict[str, Estimate] = {}
        for m in names:
            vals = np.array([_float(r.get(m)) for r in rows], dtype=np.float64)
            e = bootstrap(vals, RESAMPLES, seed, f"pareto|{scenario}|{pol}|{m}")
            if e is None:
                break
            est[m] = e
        else:
            out.append(Point(pol, policy_names.get(pol, pol) in AGENTS, est))
    return out


def figure(
    pts: list[Point], scenario: str, cost: str = COST, work: tuple[str, ...] = WORK
) -> Figure:
    """One panel per work metric: the cost metric against it, every policy with its CIs."""
    fig = Figure(figsize=(6.0 * len(work), 5.0), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(work), squeeze=False)).ravel()
    n = max((p.est[cost].n for p in pts), default=0)
    fig.suptitle(
        f"{scenario}: {cost} against the balancer's work, mean over {n} seeds "
        "(bars: 95 % bootstrap CI)\ncircles heuristics, diamonds learned agents; dashed: the "
        "Pareto front (not dominated on both means)",
        fontsize=10,
    )
    cspec = metric_spec(cost)
    for ax, w in zip(axes, work, strict=True):
        wspec = metric_spec(w)
        xs, ys = wspec.report_scale, cspec.report_scale
        for i, p in enumerate(pts):
            ex, ey = p.est[w], p.est[cost]
            color = POLICY_COLORS[i % len(POLICY_COLORS)]
            ax.errorbar(
                ex.mean * xs,
                ey.mean * ys,
                xerr=[[(ex.mean - ex.lo) * xs], [(ex.hi - ex.mean) * xs]],
                yerr=[[(ey.mean - ey.lo) * ys], [(ey.hi - ey.mean) * ys]],
                fmt="D" if p.agent else "o",
                color=color,
                ms=7,
                capsize=2,
                lw=0.8,
                label=p.policy,
            )
            ax.annotate(p.policy, (ex.mean * xs, ey.mean * ys), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")  # fmt: skip
        f = front(pts, (w, cost))
        ax.plot(
            [p.est[w].mean * xs for p in f],
            [p.est[cost].mean * ys for p in f],
            ls="--",
            color="black",
            lw=0.8,
            zorder=0,
        )
        ax.set_xlabel(f"{w} ({wspec.shown_unit}), {wspec.better} is better", fontsize=9)
        ax.set_ylabel(f"{cost} ({cspec.shown_unit}), {cspec.better} is better", fontsize=9)
        ax.tick_params(labelsize=8)
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


def table(pts: list[Point], scenario: str, cost: str, work: tuple[str, ...]) -> list[str]:
    """``pareto.md``'s lines for one scenario: means and whether each point is on a front."""
    fronts = {w: {p.policy for p in front(pts, (w, cost))} for w in work}
    head = [cost, *work]
    lines = [
        f"## {scenario}",
        "",
        "| policy | " + " | ".join(f"{m} ({metric_spec(m).shown_unit})" for m in head)
        + " | " + " | ".join(f"front vs {w}" for w in work) + " |",
        "|---|" + "---:|" * len(head) + ":-:|" * len(work),
    ]  # fmt: skip
    for p in pts:
        cells = [fmt(p.est[m].mean * metric_spec(m).report_scale) for m in head]
        marks = ["●" if p.policy in fronts[w] else "" for w in work]
        lines.append(f"| {p.policy} | " + " | ".join(cells + marks) + " |")
    return [*lines, ""]


def write(run: Path, cost: str = COST, work: tuple[str, ...] = WORK) -> list[Path]:
    """``plots/pareto-<scenario>.png`` per scenario and ``pareto.md`` of a finished run."""
    metrics = read_metrics_csv(run / "metrics.csv")
    manifest = json.loads((run / "manifest.json").read_text())
    cfg = manifest["config"]
    policy_names = {p["label"] or p["name"]: p["name"] for p in cfg["policies"]}
    seed = int(cfg.get("report", {}).get("bootstrap_seed", 0))
    scenarios = list(dict.fromkeys(sc for (sc, _, _) in metrics))
    written = []
    lines = [
        f"# Pareto view of `{cfg['name']}`",
        "",
        f"Mean over each scenario's seeds; ● = on the Pareto front of {cost} against that metric "
        "(no other policy at least as good on both means and better on one). Written by "
        f"`python -m pvegym.experiments.pareto {run}` from `metrics.csv`.",
        "",
    ]
    for sc in scenarios:
        pts = points(metrics, sc, policy_names, (cost, *work), seed)
        path = run / "plots" / f"pareto-{sc}.png"
        _save(figure(pts, sc, cost, work), path)
        written.append(path)
        lines += table(pts, sc, cost, work)
    _write_text(run / "pareto.md", "\n".join(lines))
    written.append(run / "pareto.md")
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pvegym.experiments.pareto")
    p.add_argument("run", type=Path, help="a finished run directory (metrics.csv, manifest.json)")
    p.add_argument("--cost", default=COST, help=f"the y metric (default {COST})")
    p.add_argument("--work", action="append", help=f"x metric(s) (default {', '.join(WORK)})")
    args = p.parse_args(argv)
    for m in [args.cost, *(args.work or [])]:
        try:
            metric_spec(m)
        except KeyError:
            p.error(f"--cost/--work: unknown metric {m!r}")
    for path in write(args.run, args.cost, tuple(args.work or WORK)):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["Point", "dominated", "figure", "front", "points", "table", "write"]
