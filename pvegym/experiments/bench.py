"""How fast the environment and the simulator are, in one process (``pvegym bench`` prints it).

Figures (``--json`` keys):

* ``cartpole_step_us`` — µs per step of ``CartPole-v1`` through ``gymnasium.make`` (random
  actions): the yardstick for "a cheap environment".
* ``small_step_us`` / ``large_step_us`` — µs per step of ``pvegym/Cluster-v0`` through
  ``gymnasium.make`` on the ``bench-small`` (8 nodes, 64 guests) and ``bench-large`` (64 nodes,
  2,000 guests) families, with uniformly random *masked* actions: each step is ``action_masks()``,
  drawing a valid action, and ``step()`` (what a MaskablePPO rollout pays). ``*_env_step_us`` is the
  ``step()`` call alone. ``small_ratio`` / ``large_ratio`` are the ratios to CartPole, measured in
  alternating blocks (:func:`paired_ratio`: medians over 20 block pairs), because the speed of a
  shared machine drifts within seconds; ``cartpole_step_us`` is the median of the blocks paired
  with ``bench-small``.
* ``day_patched_s`` — wall seconds of a simulated day (8,640 rounds) of ``Simulation.run`` on
  ``bench-small`` with the ``patched`` balancer (``day_policy``). ``--quick`` runs one hour and
  multiplies by 24 (``day_extrapolated``).
* ``scaling`` — step µs for clusters from 2 nodes / 10 guests to 64 nodes / 2,000 guests, and
  ``scaling_exponent``: the slope of log(step µs) against log(guests) (least squares).

Progress goes to stderr; the numbers depend on the machine and its load. ``provenance`` records
the commit, package versions, interpreter and CPU count; ``--out FILE`` also writes the document.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np

DAY_ROUNDS = 8640
FULL_SCALING = ((2, 10), (4, 40), (8, 100), (16, 300), (32, 1000), (64, 2000))
QUICK_SCALING = ((2, 10), (8, 100), (32, 500))


def _progress(msg: str) -> None:
    print(f"pvegym bench: {msg}", file=sys.stderr, flush=True)


class CartPoleLoop:
    """``CartPole-v1`` through ``gymnasium.make`` with random actions drawn up front; resets are
    not timed."""

    def __init__(self, seed: int = 0) -> None:
        import gymnasium

        self.env = gymnasium.make("CartPole-v1")
        self.env.reset(seed=seed)
        self._rng = np.random.default_rng(seed)

    def run(self, steps: int) -> float:
        """Seconds spent in ``steps`` calls of ``step()``."""
        env = self.env
        actions = self._rng.integers(0, 2, size=steps).tolist()
        total = 0.0
        for a in actions:
            t0 = time.perf_counter()
            _, _, term, trunc, _ = env.step(a)
            total += time.perf_counter() - t0
            if term or trunc:
                env.reset()
        return total

    def close(self) -> None:
        self.env.close()


class ClusterLoop:
    """``pvegym/Cluster-v0`` through ``gymnasium.make`` with uniformly random *masked* actions: a
    step is ``action_masks()`` + picking a valid action + ``step()``, what a MaskablePPO rollout
    pays. The uniforms that pick the valid action are drawn up front (as :class:`CartPoleLoop`
    draws its actions), so the figure is the environment's cost, not ``Generator.integers``'
    per-call overhead. One episode long enough for every timed step, so no reset is timed."""

    def __init__(self, scenario: Any, steps: int, warmup: int = 5, seed: int = 0) -> None:
        import gymnasium

        import pvegym.env  # noqa: F401  (registers pvegym/Cluster-v0)

        self.env = gymnasium.make(
            "pvegym/Cluster-v0", scenario=scenario, episode_seconds=(steps + warmup + 1) * 10.0
        )
        self._base: Any = self.env.unwrapped
        self._rng = np.random.default_rng(seed)
        self.env.reset(seed=seed)
        for _ in range(warmup):  # JIT compilation and caches outside the timing
            self.env.step(0)

    def run(self, steps: int) -> tuple[float, float]:
        """``(seconds of the whole loop, seconds in step())`` for ``steps`` steps."""
        env, base = self.env, self._base
        # uniform in [0, 1): index int(u · n) is uniform over n valid actions
        picks = self._rng.random(steps).tolist()
        loop = inner = 0.0
        for u in picks:
            t0 = time.perf_counter()
            valid = base.action_masks().nonzero()[0]
            a = int(valid[int(u * valid.size)])
            t1 = time.perf_counter()
            env.step(a)
            t2 = time.perf_counter()
            loop += t2 - t0
            inner += t2 - t1
        return loop, inner

    def close(self) -> None:
        self.env.close()


def paired_ratio(
    cluster: ClusterLoop, cartpole: CartPoleLoop, steps: int, cartpole_steps: int, blocks: int
) -> dict[str, float]:
    """Step costs of ``cluster`` and ``cartpole`` measured in alternating blocks, and their ratio.

    Why blocks: on a shared machine the speed drifts within seconds (on the development machine
    the same code measured one figure after the other gave 6.6× and 5.1× a minute apart). Each block pair runs back to back
    (alternating which goes first); the ratio is the median of the per-pair ratios and the step
    costs are medians over blocks (µs)."""
    per = max(1, steps // blocks)
    per_cp = max(1, cartpole_steps // blocks)
    loop_us, inner_us, cp_us, ratios = [], [], [], []
    for b in range(blocks):
        if b % 2:
            loop, inner = cluster.run(per)
            cp = cartpole.run(per_cp)
        else:
            cp = cartpole.run(per_cp)
            loop, inner = cluster.run(per)
        loop_us.append(loop / per * 1e6)
        inner_us.append(inner / per * 1e6)
        cp_us.append(cp / per_cp * 1e6)
        ratios.append(loop_us[-1] / cp_us[-1])
    return {
        "step_us": float(np.median(loop_us)),
        "env_step_us": float(np.median(inner_us)),
        "cartpole_step_us": float(np.median(cp_us)),
        "ratio": float(np.median(ratios)),
    }


def cluster_step_us(scenario: Any, steps: int, seed: int = 0) -> tuple[float, float]:
    """``(loop µs, step() µs)`` per step of :class:`ClusterLoop` (one block, for the scaling)."""
    cl = ClusterLoop(scenario, steps, seed=seed)
    loop, inner = cl.run(steps)
    cl.close()
    return loop / steps * 1e6, inner / steps * 1e6


def day_seconds(rounds: int) -> tuple[float, str]:
    """Wall seconds of ``rounds`` rounds of ``Simulation.run`` on ``bench-small`` instance 0 with
    the ``patched`` balancer."""
    from policies import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    name = "patched"
    policy = make_policy(name)
    sim = Simulation(catalog.scenario("bench-small", 0), seed=0)
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
    blocks = 5 if quick else 20
    cartpole = CartPoleLoop()
    cartpole.run(200)  # warm-up
    _progress("bench-small vs CartPole-v1, alternating blocks …")
    small = paired_ratio(ClusterLoop("bench-small", steps_s), cartpole, steps_s, steps_cp, blocks)
    _progress(
        f"bench-small: {small['step_us']:.0f} µs/step, CartPole-v1 "
        f"{small['cartpole_step_us']:.1f} µs/step: ×{small['ratio']:.1f}; bench-large …"
    )
    large = paired_ratio(
        ClusterLoop("bench-large", steps_l), cartpole, steps_l, steps_cp // 4, blocks
    )
    _progress(f"bench-large: {large['step_us']:.0f} µs/step: ×{large['ratio']:.1f}; a day …")
    cartpole.close()
    cp = small["cartpole_step_us"]
    rounds = 360 if quick else DAY_ROUNDS
    day, policy = day_seconds(rounds)
    day *= DAY_ROUNDS / rounds
    day_noop = day_noop_seconds(rounds) * DAY_ROUNDS / rounds
    cartpole_day = cp * 1e-6 * DAY_ROUNDS
    _progress(f"day ({policy}): {day:.2f} s; scaling …")
    rows = scaling(QUICK_SCALING if quick else FULL_SCALING, steps_sc)
    return {
        "cartpole_step_us": cp,
        "small_step_us": small["step_us"],
        "large_step_us": large["step_us"],
        "small_env_step_us": small["env_step_us"],
        "large_env_step_us": large["env_step_us"],
        "small_ratio": small["ratio"],
        "large_ratio": large["ratio"],
        "large_cartpole_step_us": large["cartpole_step_us"],
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


def provenance() -> dict[str, Any]:
    """What the figures were measured with: commit, package versions, interpreter, CPUs."""
    import os
    import platform

    from pvegym.provenance import git_commit, package_versions

    commit, dirty = git_commit()
    return {
        "commit": commit,
        "dirty": dirty,
        "versions": package_versions(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
