"""Does the reward say what the metrics say? Episode returns against the benchmark's cost.

For many episodes of varied policies (heuristics, random movers, trained agents) on *training*
instances, each episode is run in ``pvegym/Cluster-v1`` with the reward measured against a
``noop`` twin (``reward_baseline="noop"``), and separately scored by the benchmark — the
metrics of the same episode and of ``noop`` on the same instance and seed, as the runner measures
them. Printed: the Pearson correlation, over episodes, of the return with minus the change of

* the benchmark's cost (:data:`pvegym.sim.cost.BALANCER_COST`, the tuning objective), and
* ``guest_stall_s`` (the acceptance metric),

for each reward definition: the first agents' (``v0``: node stall, shortfall, moves, failures,
oscillations, GiB), the benchmark's own weights, and a train file's reward (``--train``). Also the
share of episodes that cut guest stall by more than 100 s yet have a negative return (a reward
that punishes what the benchmark rewards).

::

    python -m pvegym.learning.reward_check --instances 40 --train experiments/train-pair-scorer.toml

The correlation of the benchmark-weighted reward is 1 by construction (the reward is the cost's
per-round increment); what this checks is that it *is* — the environment's accounting equals the
runner's, skipped rounds and in-flight migrations included — and how far a training reward that
weighs moves and failures differently strays from the benchmark.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.policies.env_adapter import HeuristicAgent
from pvegym.sim import catalog, families
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.units import GiB

#: the first agents' reward (``Cluster-v0``'s defaults before the metric-named cost), by metric
V0_REWARD = {
    "stall_cpu_s": 1.0,
    "stall_mem_s": 1.0,
    "cpu_shortfall_core_s": 1.0,
    "moves": 10.0,
    "moves_failed": 60.0,
    "oscillations": 60.0,
    "migration_bytes": 1.0 / GiB,
}

#: the tuned ``patched`` constants of ``experiments/heuristics-vs-rl.toml`` (issue 8's study)
PATCHED_TUNED = {
    "backoff_base_s": 113.66150252477736,
    "backoff_cap_s": 7510.066889022052,
    "cooldown_s": 993.0934862205067,
    "ema_alpha": 0.7391921279290442,
    "hold_duration": 3,
    "margin": 0.11169402683544881,
    "min_improvement": 0.041003240792378076,
    "min_pressure_pct": 14.138661243006563,
    "threshold": 0.17228989108225468,
}


class RandomMover:
    """Moves a uniformly random allowed (guest, target) with probability ``p`` per round."""

    def __init__(self, p: float, seed: int) -> None:
        self.p = p
        self.rng = np.random.default_rng(seed)
        self.name = f"random-{p:g}"

    def run_episode(self, env: ClusterEnvV1, seed: int) -> dict[str, Any]:
        env.reset(seed=seed)
        total = 0.0
        while True:
            mask = env.action_masks()
            valid = np.flatnonzero(mask[1:]) + 1
            a = 0
            if valid.size and self.rng.random() < self.p:
                a = int(valid[self.rng.integers(valid.size)])
            _, r, _, trunc, info = env.step(a)
            total += float(r)
            if trunc:
                return {**info, "return": total}


def episodes(
    instances: list[int], env_weights: dict[str, float], agents: list[str]
) -> list[dict[str, Any]]:
    """Every policy on every instance, in ``Cluster-v1`` with reward ``env_weights`` against the
    noop twin: per episode the environment's return and final metrics, and noop's metrics on the
    same instance and seed as the runner measures them (``Simulation.run``)."""
    from pvegym.policies.registry import make_policy
    from pvegym.sim.simulation import Simulation

    players: list[Any] = [
        HeuristicAgent("upstream"),
        HeuristicAgent("patched"),
        HeuristicAgent("patched", **PATCHED_TUNED),
        HeuristicAgent("guest-centric"),
        HeuristicAgent("guest-centric", w_gib=30.0),
        RandomMover(0.02, 1),
        RandomMover(0.2, 2),
    ]
    players[2].name = "patched-tuned"
    players[4].name = "guest-centric-frugal"
    for model in agents:
        agent = HeuristicAgent("learned", model=model)
        agent.name = f"learned:{model}"
        players.append(agent)
    env = ClusterEnvV1("small", reward_weights=env_weights, reward_baseline="noop")
    rows = []
    for k, inst in enumerate(instances):
        scn = catalog.scenario("small", inst)
        noop = Simulation(scn, inst).run(make_policy("noop"))["metrics"]
        for player in players:
            info = player.run_episode(env, seed=inst)
            rows.append({"instance": inst, "policy": player.name, "return": float(info["return"]),
                         "metrics": info, "noop": noop})  # fmt: skip
        print(f"  instance {inst} ({k + 1}/{len(instances)})", file=sys.stderr, flush=True)
    return rows


def correlations(
    rows: list[dict[str, Any]], weight_sets: dict[str, dict[str, float]], env_weights: str
) -> list[str]:
    """The report's lines (a Markdown table). The return under ``weight_sets[env_weights]`` is
    the environment's; the others are ``−(cost − noop's cost)`` of the same episodes' metrics
    (what the environment returns for those weights: the first set shows it does)."""
    d_bench = np.array(
        [
            weighted_cost(BALANCER_COST, r["metrics"]) - weighted_cost(BALANCER_COST, r["noop"])
            for r in rows
        ]
    )
    d_stall = np.array([r["metrics"]["guest_stall_s"] - r["noop"]["guest_stall_s"] for r in rows])
    env_ret = np.array([r["return"] for r in rows])
    w = weight_sets[env_weights]
    formula = np.array(
        [-(weighted_cost(w, r["metrics"]) - weighted_cost(w, r["noop"])) for r in rows]
    )
    lines = [
        f"{len(rows)} episodes ({len({r['policy'] for r in rows})} policies × "
        f"{len({r['instance'] for r in rows})} training instances of `small`); the environment's "
        f"return ({env_weights}) vs −(cost − noop's cost) from the runner's metrics: max |difference| "
        f"{np.max(np.abs(env_ret - formula)):.3g}",
        "",
        "| reward | corr(return, −Δ benchmark cost) | corr(return, −Δ guest_stall_s) | "
        "episodes cutting guest stall > 100 s with return < 0 |",
        "|---|---:|---:|---:|",
    ]
    cut = d_stall < -100.0
    for name, weights in weight_sets.items():
        ret = (
            env_ret
            if name == env_weights
            else np.array(
                [
                    -(weighted_cost(weights, r["metrics"]) - weighted_cost(weights, r["noop"]))
                    for r in rows
                ]
            )
        )
        bad = int(np.sum(cut & (ret < 0.0)))
        lines.append(
            f"| {name} | {np.corrcoef(ret, -d_bench)[0, 1]:.3f} | "
            f"{np.corrcoef(ret, -d_stall)[0, 1]:.3f} | {bad} of {int(cut.sum())} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m pvegym.learning.reward_check", description=__doc__.split("\n")[0]
    )
    p.add_argument("--instances", type=int, default=40, help="training instances (from 0)")
    p.add_argument("--first", type=int, default=0, help="first training instance seed")
    p.add_argument("--train", default=None, help="a train file whose env reward to check too")
    p.add_argument(
        "--agent", action="append", default=[], help="a trained model (run name or .zip)"
    )
    p.add_argument("--save", default=None, help="write the episodes (metrics, returns) as JSON")
    args = p.parse_args(argv)
    weight_sets: dict[str, dict[str, float]] = {
        "v0 reward": V0_REWARD,
        "benchmark cost": BALANCER_COST,
    }
    if args.train:
        from pvegym.learning.train_config import load_train_config

        cfg = load_train_config(args.train)
        weight_sets[f"{cfg.name} reward"] = cfg.env.weights()
    instances = [
        families.require_train_seed(args.first + k, "--first") for k in range(args.instances)
    ]
    t0 = time.perf_counter()
    env_name = list(weight_sets)[-1]
    rows = episodes(instances, weight_sets[env_name], args.agent)
    print("\n".join(correlations(rows, weight_sets, env_name)))
    if args.save:
        import json

        with open(args.save, "w") as fh:
            json.dump(rows, fh, default=float)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
