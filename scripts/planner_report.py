"""The planner's figures (issue 32, item 1): paired BALANCER_COST differences and decision cost.

    # per-instance BALANCER_COST of every policy against the planner, from a run's metrics.csv
    .venv/bin/python scripts/planner_report.py paired /tmp/planner-val/metrics.csv
    # decision cost per round (ms of this thread's CPU time: one core), a few instances per family
    .venv/bin/python scripts/planner_report.py timing --start 9000 --count 3
    # the trade-off: cost and decision time of planner variants (--param k=v, one set per --variant)
    .venv/bin/python scripts/planner_report.py variants --family small --start 8000 --count 10 \\
        --variant futures=1 --variant futures=4

Only train-range seeds are accepted (``pvegym.sim.families.require_train_seed``).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.experiments.benchmark_episodes import PATCHED_TUNED
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.families import require_train_seed
from pvegym.sim.simulation import Simulation

#: patched-tuned's constants (the benchmark's copy of results/tune-patched/best_params.json)
TUNED = PATCHED_TUNED
RESAMPLES = 10_000


def paired(path: Path, policy: str) -> None:
    """Per family: mean BALANCER_COST of each policy, and the paired difference policy − other
    (mean, 95 % percentile bootstrap CI over instances, wins/losses)."""
    rows: dict[tuple[str, str], dict[int, float]] = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            metrics = {k: float(v) for k, v in r.items() if k in BALANCER_COST}
            key = (r["scenario"], r["policy"])
            rows.setdefault(key, {})[int(r["seed"])] = weighted_cost(BALANCER_COST, metrics)
    scenarios = sorted({s for s, _ in rows})
    others = sorted({p for _, p in rows if p != policy})
    rng = np.random.default_rng(0)
    print("| family | other | n | planner mean | other mean | planner − other [95 % CI] | W/L/T |")
    print("|---|---|---|---|---|---|---|")
    for s in scenarios:
        mine = rows[(s, policy)]
        for o in others:
            theirs = rows.get((s, o), {})
            seeds = sorted(set(mine) & set(theirs))
            a = np.array([mine[k] for k in seeds])
            b = np.array([theirs[k] for k in seeds])
            d = a - b
            boots = d[rng.integers(0, d.size, size=(RESAMPLES, d.size))].mean(axis=1)
            lo, hi = np.percentile(boots, [2.5, 97.5])
            wlt = f"{int((a < b).sum())}/{int((a > b).sum())}/{int((a == b).sum())}"
            print(
                f"| {s} | {o} | {d.size} | {a.mean():,.0f} | {b.mean():,.0f} | "
                f"{d.mean():+,.0f} [{lo:+,.0f}, {hi:+,.0f}] | {wlt} |"
            )


def episode(family: str, seed: int, params: dict[str, Any]) -> dict[str, Any]:
    """One episode under the planner: its cost, moves and per-round decision CPU times (ms)."""
    require_train_seed(seed)
    scenario = catalog.resolve(family, seed=seed).scenario
    pol: Any = make_policy("planner", **{"patched": TUNED, **params})
    sim = Simulation(scenario, seed)
    pol.reset(seed)
    view = sim.reset()
    times: list[float] = []
    for k in range(round(scenario.duration / sim.round_s)):
        t0 = time.thread_time()
        motion = pol.decide(view)
        times.append((time.thread_time() - t0) * 1e3)
        if k + 1 < round(scenario.duration / sim.round_s):
            view = sim.step(motion)
        else:
            sim.commit(motion)
    m = sim.result()["metrics"]
    return {
        "cost": weighted_cost(BALANCER_COST, m),
        "moves": m["moves"],
        "times": times,
        "planned": pol.planned,
    }


def _summary(times: list[float]) -> str:
    t = np.asarray(times)
    return f"median {np.median(t):.3f} ms, p95 {np.percentile(t, 95):.1f} ms, max {t.max():.0f} ms"


def timing(start: int, count: int, params: dict[str, Any]) -> None:
    episode("small", start, params)  # compile the kernels
    for family in ("small", "medium", "trace"):
        times: list[float] = []
        planned = rounds = 0
        for seed in range(start, start + count):
            e = episode(family, seed, params)
            times += e["times"]
            planned += e["planned"]
            rounds += len(e["times"])
        print(f"{family}: {rounds} rounds, {planned} planned: {_summary(times)}")


def variants(family: str, start: int, count: int, sets: list[dict[str, Any]]) -> None:
    episode("small", start, {})  # compile the kernels
    base: list[float] | None = None
    for params in sets:
        costs, times = [], []
        for seed in range(start, start + count):
            e = episode(family, seed, params)
            costs.append(e["cost"])
            times += e["times"]
        c = np.asarray(costs)
        vs = "" if base is None else f", vs first {np.mean(c - np.asarray(base)):+,.0f}"
        base = base or costs
        print(f"{json.dumps(params)}: mean cost {c.mean():,.0f}{vs}; {_summary(times)}")


def _params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        for kv in item.split(","):
            k, v = kv.split("=", 1)
            out[k] = json.loads(v)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("paired")
    a.add_argument("metrics", type=Path)
    a.add_argument("--policy", default="planner")
    t = sub.add_parser("timing")
    t.add_argument("--start", type=int, default=9000)
    t.add_argument("--count", type=int, default=3)
    t.add_argument("--param", action="append", default=[])
    v = sub.add_parser("variants")
    v.add_argument("--family", default="small")
    v.add_argument("--start", type=int, default=8000)
    v.add_argument("--count", type=int, default=10)
    v.add_argument("--variant", action="append", default=[])
    args = p.parse_args()
    if args.cmd == "paired":
        paired(args.metrics, args.policy)
    elif args.cmd == "timing":
        timing(args.start, args.count, _params(args.param))
    else:
        variants(args.family, args.start, args.count, [_params([s]) for s in args.variant])


if __name__ == "__main__":
    main()
