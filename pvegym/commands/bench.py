"""``pvegym bench``: how fast the environment and the simulator are, in one process.

Figures (``--json`` keys):

* ``cartpole_step_us`` — mean µs per step of ``CartPole-v1`` through ``gymnasium.make`` (random
  actions): the yardstick for "a cheap environment".
* ``small_step_us`` / ``large_step_us`` — mean µs per step of ``pvegym/Cluster-v0`` through
  ``gymnasium.make`` on the ``bench-small`` (8 nodes, 64 guests) and ``bench-large`` (64 nodes,
  2,000 guests) families, with uniformly random *masked* actions: each step is ``action_masks()``,
  drawing a valid action, and ``step()`` (what a MaskablePPO rollout pays). ``*_env_step_us`` is the
  ``step()`` call alone. ``small_ratio`` / ``large_ratio`` are the ratios to CartPole.
* ``day_patched_s`` — wall seconds of a simulated day (8,640 rounds) of ``Simulation.run`` on
  ``bench-small`` with the ``patched`` balancer, or ``upstream`` while ``patched`` does not exist
  (``day_policy`` says which). ``--quick`` runs one hour and multiplies by 24
  (``day_extrapolated``).
* ``scaling`` — step µs for clusters from 2 nodes / 10 guests to 64 nodes / 2,000 guests, and
  ``scaling_exponent``: the slope of log(step µs) against log(guests) (least squares).

Progress goes to stderr; the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from typing import Any

import numpy as np

DAY_ROUNDS = 8640
FULL_SCALING = ((2, 10), (4, 40), (8, 100), (16, 300), (32, 1000), (64, 2000))
QUICK_SCALING = ((2, 10), (8, 100), (32, 500))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure environment step cost and simulator speed")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--quick", action="store_true", help="a few seconds: fewer steps and sizes")
    p.set_defaults(func=run)


def _progress(msg: str) -> None:
    print(f"pvegym bench: {msg}", file=sys.stderr, flush=True)


def cartpole_step_us(steps: int, seed: int = 0) -> float:
    """Mean µs per ``CartPole-v1`` step (random actions, resets excluded)."""
    import gymnasium

    env = gymnasium.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    actions = rng.integers(0, 2, size=steps)
    total = 0.0
    for k in range(steps):
        t0 = time.perf_counter()
        _, _, term, trunc, _ = env.step(int(actions[k]))
        total += time.perf_counter() - t0
        if term or trunc:
            env.reset()
    env.close()
    return total / steps * 1e6


def cluster_step_us(
    scenario: Any, steps: int, warmup: int = 5, seed: int = 0
) -> tuple[float, float]:
    """``(loop µs, step() µs)`` per step of ``pvegym/Cluster-v0`` with random masked actions.

    The loop is ``action_masks()`` + drawing a valid action + ``step()``; the episode is long
    enough that no reset falls inside the timed steps. The uniforms that pick the valid action are
    drawn before the loop (as :func:`cartpole_step_us` pre-draws its actions), so the figure is the
    environment's cost, not ``Generator.integers``' per-call overhead (~1.5 µs).
    """
    import gymnasium

    import pvegym.env  # noqa: F401  (registers pvegym/Cluster-v0)

    env = gymnasium.make(
        "pvegym/Cluster-v0", scenario=scenario, episode_seconds=(steps + warmup + 1) * 10.0
    )
    base: Any = env.unwrapped
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    for _ in range(warmup):  # JIT compilation and caches outside the timing
        env.step(0)
    # uniform in [0, 1): index int(u · n) is uniform over n valid actions
    picks = rng.random(steps).tolist()
    loop = inner = 0.0
    for k in range(steps):
        t0 = time.perf_counter()
        valid = base.action_masks().nonzero()[0]
        a = int(valid[int(picks[k] * valid.size)])
        t1 = time.perf_counter()
        env.step(a)
        t2 = time.perf_counter()
        loop += t2 - t0
        inner += t2 - t1
    env.close()
    return loop / steps * 1e6, inner / steps * 1e6


def day_seconds(rounds: int) -> tuple[float, str]:
    """Wall seconds of ``rounds`` rounds of ``Simulation.run`` on ``bench-small`` instance 0."""
    from policies import make_policy
    from pvegym.sim.families import family_scenario
    from pvegym.sim.simulation import Simulation

    name = "patched" if importlib.util.find_spec("policies.patched") is not None else "upstream"
    try:
        policy = make_policy(name)
    except Exception:  # registered later than the module exists
        name, policy = "upstream", make_policy("upstream")
    sim = Simulation(family_scenario("bench-small", 0), seed=0)
    sim.run(policy, 10 * sim.round_s)  # warm-up (JIT)
    t0 = time.perf_counter()
    sim.run(policy, rounds * sim.round_s)
    return time.perf_counter() - t0, name


def day_noop_seconds(rounds: int) -> float:
    """Wall seconds of ``rounds`` rounds of ``Simulation.run`` with ``noop`` on a generated
    3-node, 30-guest scenario (the foundation's figure: the model alone, no environment)."""
    from policies import make_policy
    from pvegym.sim.families import build_scenario, generate
    from pvegym.sim.simulation import Simulation

    sim = Simulation(build_scenario(generate(3, 30, 0)), seed=0)
    policy = make_policy("noop")
    sim.run(policy, 10 * sim.round_s)  # warm-up (JIT)
    t0 = time.perf_counter()
    sim.run(policy, rounds * sim.round_s)
    return time.perf_counter() - t0


def scaling(sizes: tuple[tuple[int, int], ...], steps: int) -> list[dict[str, Any]]:
    from pvegym.sim.families import build_scenario, generate

    rows = []
    for nodes, guests in sizes:
        scn = build_scenario(generate(nodes, guests, 0))
        n = steps if guests <= 500 else max(20, steps // 4)
        loop, _ = cluster_step_us(scn, n)
        _progress(f"scaling {nodes} nodes × {guests} guests: {loop:.0f} µs/step")
        rows.append({"nodes": nodes, "guests": guests, "step_us": loop})
    return rows


def fit_exponent(rows: list[dict[str, Any]]) -> float:
    """Least-squares slope of log(step_us) vs log(guests)."""
    x = np.log([r["guests"] for r in rows])
    y = np.log([r["step_us"] for r in rows])
    return float(np.polyfit(x, y, 1)[0])


def bench(quick: bool = False) -> dict[str, Any]:
    steps_cp, steps_s, steps_l, steps_sc = (2000, 150, 20, 30) if quick else (20000, 3000, 400, 300)
    _progress("CartPole-v1 …")
    cp = cartpole_step_us(steps_cp)
    _progress(f"CartPole-v1: {cp:.1f} µs/step; bench-small …")
    small, small_inner = cluster_step_us("bench-small", steps_s)
    _progress(f"bench-small: {small:.0f} µs/step; bench-large …")
    large, large_inner = cluster_step_us("bench-large", steps_l)
    _progress(f"bench-large: {large:.0f} µs/step; a simulated day …")
    rounds = 360 if quick else DAY_ROUNDS
    day, policy = day_seconds(rounds)
    day *= DAY_ROUNDS / rounds
    day_noop = day_noop_seconds(rounds) * DAY_ROUNDS / rounds
    cartpole_day = cp * 1e-6 * DAY_ROUNDS
    _progress(f"day ({policy}): {day:.2f} s; scaling …")
    rows = scaling(QUICK_SCALING if quick else FULL_SCALING, steps_sc)
    return {
        "cartpole_step_us": cp,
        "small_step_us": small,
        "large_step_us": large,
        "small_env_step_us": small_inner,
        "large_env_step_us": large_inner,
        "small_ratio": small / cp,
        "large_ratio": large / cp,
        "day_patched_s": day,
        "day_policy": policy,
        "day_rounds": DAY_ROUNDS,
        "day_extrapolated": rounds != DAY_ROUNDS,
        "day_noop_3x30_s": day_noop,
        "cartpole_day_s": cartpole_day,
        "day_noop_ratio": day_noop / cartpole_day,
        "scaling_exponent": fit_exponent(rows),
        "scaling": rows,
        "quick": quick,
    }


def run(args: argparse.Namespace) -> int:
    doc = bench(quick=args.quick)
    if args.json:
        print(json.dumps(doc, sort_keys=True))
        return 0
    print(f"CartPole-v1                 {doc['cartpole_step_us']:10.1f} µs/step")
    for key, label in (("small", "bench-small (8×64)"), ("large", "bench-large (64×2000)")):
        print(
            f"{label:<27} {doc[f'{key}_step_us']:10.1f} µs/step "
            f"(step() {doc[f'{key}_env_step_us']:.1f})  ×{doc[f'{key}_ratio']:.1f} CartPole"
        )
    note = " (extrapolated from 1 h)" if doc["day_extrapolated"] else ""
    print(f"simulated day, {doc['day_policy']:<14} {doc['day_patched_s']:10.2f} s{note}")
    print("scaling (nodes × guests → µs/step)")
    for row in doc["scaling"]:
        print(f"  {row['nodes']:>3} × {row['guests']:<5} {row['step_us']:10.1f}")
    print(f"  exponent vs guests: {doc['scaling_exponent']:.2f}")
    return 0
