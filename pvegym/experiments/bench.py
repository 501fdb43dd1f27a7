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
* ``day_s`` / ``day_ratio`` — per heuristic (``noop``, ``upstream``, ``patched``,
  ``guest-centric``): CPU seconds of a simulated day (8,640 rounds) of the simulation loop
  (``Simulation.step`` + the balancer's ``decide``) on ``bench-small`` instance 0, and its ratio to
  a CartPole day of as many steps. Each day runs in 24 one-hour blocks, each paired back to back
  with a block of as many CartPole steps (alternating which goes first), the heuristics taking
  turns hour by hour; the ratio is the sum over the day's blocks ÷ the sum over CartPole's, so both
  see the same drift of a shared machine. Both are timed in the thread's CPU time
  (:func:`days_paired` says why).
  ``day_decide_us`` is the mean µs per round inside ``decide`` (the heuristic alone; the rest of
  ``day_s`` is the model and its telemetry view). ``day_patched_ratio`` and
  ``day_guest_centric_ratio`` repeat two of the ratios; ``day_patched_s`` (with ``day_policy``) is
  ``day_s["patched"]``. ``--quick`` runs one hour (24 blocks of 15 rounds) and multiplies by 24
  (``day_extrapolated``).
* ``day_noop_3x30_s`` — the same loop with ``noop`` on a generated 3-node, 30-guest scenario (the
  model alone, wall time), ``day_noop_ratio`` its ratio to ``cartpole_day_s`` (8,640 ×
  ``cartpole_step_us``), as in earlier records.
* ``vector`` — rows ``{scenario, env, n, step_us, cartpole_step_us, sync_step_us, ratio,
  sync_ratio}``: µs per *sub-environment* step of :mod:`pvegym.vector` (``Cluster-v1``, random
  masked actions) for N = 1, 8, 64 on ``bench-small`` and N = 8 on ``bench-large``, ÷ a
  ``CartPole-v1`` step (``ratio``) and ÷ a sub-environment step of Gymnasium's ``SyncVectorEnv``
  of N CartPoles (``sync_ratio``); ``vector_small_n64_ratio``, ``vector_small_n64_sync_ratio``
  and ``vector_large_n8_ratio`` repeat three of them. ``vec_wait_share_maskable_ppo`` and
  ``vec_wait_share_ppo`` — the share of a short training run (two rollouts of the train file's
  ``n_steps`` × ``n_envs``) the learner waits on the vector env (``vec_wait`` has the details).
  ``--quick``: ``bench-large`` at N = 2 (no ``vector_large_n8_ratio``), a 256-step MaskablePPO run
  with a 64-step rollout, no PPO run (:mod:`pvegym.experiments.bench_vector`).
* ``ha_round_us`` / ``ha_round_ratio`` — µs of one *full* round of the HA stack's port (every
  CRM and LRM iteration of a 4-node, 12-service cluster with a migration pending, so that the
  steady-state skip does not apply) and its ratio to a CartPole step, in alternating blocks as
  above but in the thread's CPU time (:func:`paired_ratio` with CPU-time loops;
  :mod:`pvegym.experiments.bench_ha` describes the hardware it runs on).
  ``pvegym bench --only ha-round`` measures this figure alone (``--quick``: fewer rounds).
* ``scaling`` — step µs for clusters from 2 nodes / 10 guests to 64 nodes / 2,000 guests, and
  ``scaling_exponent``: the slope of log(step µs) against log(guests) (least squares).

Progress goes to stderr; the numbers depend on the machine and its load. ``provenance`` records
the commit, package versions, interpreter and CPU count; ``--out FILE`` also writes the document.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import numpy as np

#: the scenario key ``ha_stack`` (:class:`pvegym.sim.scenario.Scenario`)
HAStack = Literal["model", "full", "engine"]

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

    def run_cpu(self, steps: int) -> float:
        """CPU seconds of this thread in ``steps`` calls of ``step()`` (resets excluded): the
        block is timed as a whole, each reset on its own and subtracted."""
        env, clock = self.env, time.thread_time
        actions = self._rng.integers(0, 2, size=steps).tolist()
        resets = 0.0
        t0 = clock()
        for a in actions:
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                r0 = clock()
                env.reset()
                resets += clock() - r0
        return clock() - t0 - resets

    def close(self) -> None:
        self.env.close()


class ClusterLoop:
    """``pvegym/Cluster-v0`` through ``gymnasium.make`` with uniformly random *masked* actions: a
    step is ``action_masks()`` + picking a valid action + ``step()``, what a MaskablePPO rollout
    pays. The uniforms that pick the valid action are drawn up front (as :class:`CartPoleLoop`
    draws its actions), so the figure is the environment's cost, not ``Generator.integers``'
    per-call overhead. One episode long enough for every timed step, and a ``TimeLimit`` of
    the same length, so no reset is timed and no step is truncated."""

    def __init__(
        self,
        scenario: Any,
        steps: int,
        warmup: int = 5,
        seed: int = 0,
        overrides: dict[str, Any] | None = None,
    ) -> None:
        import gymnasium

        from pvegym.env import ClusterEnv  # (and registers pvegym/Cluster-v0)

        rounds = steps + warmup + 1
        # the TimeLimit that make applies, at the episode's own length: no truncation inside the
        # timed steps (the registered limit, 2,880, is shorter than bench-small's 3,006 rounds)
        self.env = gymnasium.make(
            "pvegym/Cluster-v0",
            scenario=scenario,
            episode_seconds=rounds * 10.0,
            max_episode_steps=rounds,
            overrides=overrides,
        )
        base = self.env.unwrapped
        assert isinstance(base, ClusterEnv)
        base.warn_time_limit = False  # make got the episode's length just above
        self._base: Any = base
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
    cluster_run: Callable[[int], tuple[float, float]],
    cartpole_run: Callable[[int], float],
    steps: int,
    cartpole_steps: int,
    blocks: int,
) -> dict[str, float]:
    """Step costs of a loop and of CartPole measured in alternating blocks, and their ratio.

    The timer comes with the two callables: ``cluster_run(steps)`` → ``(s of the whole loop,
    s in step())`` and ``cartpole_run(steps)`` → s in ``step()``; wall time
    (``ClusterLoop.run``, ``CartPoleLoop.run``: ``perf_counter``) or this thread's CPU time
    (``HARoundLoop.run`` with ``clock=time.thread_time``, ``CartPoleLoop.run_cpu``), never mixed.

    Why blocks: on a shared machine the speed drifts within seconds (on the development machine
    the same code measured one figure after the other gave 6.6× and 5.1× a minute apart). Each
    block pair runs back to back (alternating which goes first); the ratio is the median of the
    per-pair ratios and the step costs are medians over blocks (µs): ``step_us``,
    ``env_step_us``, ``cartpole_step_us``, ``ratio``."""
    per = max(1, steps // blocks)
    per_cp = max(1, cartpole_steps // blocks)
    loop_us, inner_us, cp_us, ratios = [], [], [], []
    for b in range(blocks):
        if b % 2:
            loop, inner = cluster_run(per)
            cp = cartpole_run(per_cp)
        else:
            cp = cartpole_run(per_cp)
            loop, inner = cluster_run(per)
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


def cluster_step_us(
    scenario: Any, steps: int, seed: int = 0, overrides: dict[str, Any] | None = None
) -> tuple[float, float]:
    """``(loop µs, step() µs)`` per step of :class:`ClusterLoop` (one block, for the scaling)."""
    cl = ClusterLoop(scenario, steps, seed=seed, overrides=overrides)
    loop, inner = cl.run(steps)
    cl.close()
    return loop / steps * 1e6, inner / steps * 1e6


DAY_POLICIES = ("noop", "upstream", "patched", "guest-centric")


def days_paired(
    names: tuple[str, ...],
    cartpole: CartPoleLoop,
    rounds: int,
    blocks: int = 24,
    overrides: dict[str, Any] | None = None,
) -> dict[str, dict[str, float]]:
    """``rounds`` rounds of the simulation loop on ``bench-small`` instance 0 under each policy
    of ``names``, in ``blocks`` blocks per policy, each block paired with as many CartPole steps
    (alternating which goes first); the policies take turns block by block, so all of them see
    the same drift of the machine. Per policy: ``{"day_s", "cartpole_s", "ratio", "decide_us"}``
    (``day_s``, ``cartpole_s`` scaled to a whole day).

    Times are this thread's CPU time (``time.thread_time``), not wall time: a day block runs ~30×
    longer than its CartPole block, so on a shared machine it collects most of the preemptions
    (other processes' time slices), which CPU time leaves out."""
    from pvegym.policies import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    scenario = catalog.scenario("bench-small", 0, overrides)
    loops: dict[str, list[Any]] = {}
    for name in names:
        warm = Simulation(scenario, seed=0)
        warm.run(make_policy(name), 10 * warm.round_s)  # JIT compilation and caches
        policy = make_policy(name)
        sim = Simulation(scenario, seed=0)
        policy.reset(0)
        loops[name] = [policy, sim, sim.reset()]
    per = max(1, rounds // blocks)
    acc = {name: {"day": 0.0, "cp": 0.0, "decide": 0.0} for name in names}
    clock, perf = time.thread_time, time.perf_counter
    for b in range(blocks):
        for name in names:
            policy, sim, view = loops[name]
            a = acc[name]
            if b % 2 == 0:
                a["cp"] += cartpole.run_cpu(per)
            t0 = clock()
            inside = 0.0
            for _ in range(per):
                t1 = perf()  # decide's share: wall µs (preemption is rare at that scale)
                motion = policy.decide(view)
                inside += perf() - t1
                view = sim.step(motion)
            a["day"] += clock() - t0
            a["decide"] += inside
            loops[name][2] = view
            if b % 2 == 1:
                a["cp"] += cartpole.run_cpu(per)
    done = per * blocks
    return {
        name: {
            "day_s": a["day"] * DAY_ROUNDS / done,
            "cartpole_s": a["cp"] * DAY_ROUNDS / done,
            "ratio": a["day"] / a["cp"],
            "decide_us": a["decide"] / done * 1e6,
        }
        for name, a in acc.items()
    }


def day_noop_seconds(rounds: int, ha_stack: HAStack = "model") -> float:
    """Wall seconds of ``rounds`` rounds of ``Simulation.run`` with ``noop`` on a generated
    3-node, 30-guest scenario (the foundation's figure: the model alone, no environment)."""
    from pvegym.policies import make_policy
    from pvegym.sim.families import build_scenario, generate
    from pvegym.sim.simulation import Simulation

    scn = dataclasses.replace(build_scenario(generate(3, 30, 0)), ha_stack=ha_stack)
    sim = Simulation(scn, seed=0)
    policy = make_policy("noop")
    sim.run(policy, 10 * sim.round_s)  # warm-up (JIT)
    t0 = time.perf_counter()
    sim.run(policy, rounds * sim.round_s)
    return time.perf_counter() - t0


def scaling(
    sizes: tuple[tuple[int, int], ...], steps: int, ha_stack: HAStack = "model"
) -> list[dict[str, Any]]:
    from pvegym.sim.families import build_scenario, generate

    rows = []
    for nodes, guests in sizes:
        scn = dataclasses.replace(build_scenario(generate(nodes, guests, 0)), ha_stack=ha_stack)
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


def bench(quick: bool = False, ha_stack: HAStack = "model") -> dict[str, Any]:
    """Every figure of the module docstring. ``ha_stack`` is the scenarios' HA stack (the
    scenario key): ``"full"`` runs the port of pve-ha-manager (``"engine"``: the compiled
    engine's CRM round with the port's LRMs) in every environment and simulation measured here
    but the vector env's (``vector`` and ``vec_wait`` are then empty: its rows and short
    training runs would take most of an hour with the port's rounds)."""
    overrides = None if ha_stack == "model" else {"ha_stack": ha_stack}
    steps_cp, steps_s, steps_l, steps_sc = (2000, 150, 20, 30) if quick else (20000, 3000, 400, 300)
    blocks = 5 if quick else 20
    cartpole = CartPoleLoop()
    cartpole.run(200)  # warm-up
    _progress("bench-small vs CartPole-v1, alternating blocks …")
    small = paired_ratio(
        ClusterLoop("bench-small", steps_s, overrides=overrides).run,
        cartpole.run,
        steps_s,
        steps_cp,
        blocks,
    )
    _progress(
        f"bench-small: {small['step_us']:.0f} µs/step, CartPole-v1 "
        f"{small['cartpole_step_us']:.1f} µs/step: ×{small['ratio']:.1f}; bench-large …"
    )
    large = paired_ratio(
        ClusterLoop("bench-large", steps_l, overrides=overrides).run,
        cartpole.run,
        steps_l,
        steps_cp // 4,
        blocks,
    )
    _progress(f"bench-large: {large['step_us']:.0f} µs/step: ×{large['ratio']:.1f}; HA round …")
    ha = bench_ha_round(cartpole, quick)
    _progress("a day …")
    cp = small["cartpole_step_us"]
    rounds = 360 if quick else DAY_ROUNDS
    days = days_paired(DAY_POLICIES, cartpole, rounds, overrides=overrides)
    for name in DAY_POLICIES:
        _progress(
            f"day ({name}): {days[name]['day_s']:.2f} s, ×{days[name]['ratio']:.1f} a CartPole "
            f"day, decide {days[name]['decide_us']:.1f} µs/round"
        )
    day_noop = day_noop_seconds(rounds, ha_stack) * DAY_ROUNDS / rounds
    cartpole_day = cp * 1e-6 * DAY_ROUNDS
    cartpole.close()
    vector: dict[str, Any] = {"vector": [], "vec_wait": {}}
    if ha_stack == "model":
        vector = bench_vector(quick)
    _progress("scaling …")
    rows = scaling(QUICK_SCALING if quick else FULL_SCALING, steps_sc, ha_stack)
    return {
        "cartpole_step_us": cp,
        "small_step_us": small["step_us"],
        "large_step_us": large["step_us"],
        "small_env_step_us": small["env_step_us"],
        "large_env_step_us": large["env_step_us"],
        "small_ratio": small["ratio"],
        "large_ratio": large["ratio"],
        "large_cartpole_step_us": large["cartpole_step_us"],
        **ha,
        "day_s": {k: v["day_s"] for k, v in days.items()},
        "day_ratio": {k: v["ratio"] for k, v in days.items()},
        "day_decide_us": {k: v["decide_us"] for k, v in days.items()},
        "day_patched_ratio": days["patched"]["ratio"],
        "day_guest_centric_ratio": days["guest-centric"]["ratio"],
        "day_patched_s": days["patched"]["day_s"],
        "day_policy": "patched",
        "day_rounds": DAY_ROUNDS,
        "day_extrapolated": rounds != DAY_ROUNDS,
        "day_noop_3x30_s": day_noop,
        "cartpole_day_s": cartpole_day,
        "day_noop_ratio": day_noop / cartpole_day,
        **vector,
        "scaling_exponent": fit_exponent(rows),
        "scaling": rows,
        "quick": quick,
        "ha_stack": ha_stack,
    }


def bench_ha_round(cartpole: CartPoleLoop, quick: bool) -> dict[str, float]:
    """``ha_round_us``, ``ha_round_ratio``, ``ha_round_cartpole_step_us``
    (:func:`pvegym.experiments.bench_ha.ha_round`), with progress: :func:`paired_ratio` in this
    thread's CPU time, for the reason :func:`days_paired` gives: a block of full HA rounds runs
    several times longer than its CartPole block and would collect most of a shared machine's
    preemptions in wall time."""
    from pvegym.experiments.bench_ha import HARoundLoop

    steps, cp_steps, blocks = (200, 2000, 5) if quick else (2000, 20000, 20)
    loop = HARoundLoop()
    loop.run(20)  # warm-up
    cpu = paired_ratio(
        partial(loop.run, clock=time.thread_time), cartpole.run_cpu, steps, cp_steps, blocks
    )
    ha = {
        "ha_round_us": cpu["step_us"],
        "ha_round_ratio": cpu["ratio"],
        "ha_round_cartpole_step_us": cpu["cartpole_step_us"],
    }
    _progress(
        f"full HA round: {ha['ha_round_us']:.0f} µs, CartPole-v1 "
        f"{ha['ha_round_cartpole_step_us']:.1f} µs/step: ×{ha['ha_round_ratio']:.1f}"
    )
    return ha


def bench_only_ha_round(quick: bool = False) -> dict[str, Any]:
    """``pvegym bench --only ha-round``: the full HA round's figures alone."""
    cartpole = CartPoleLoop()
    cartpole.run(200)  # warm-up
    ha = bench_ha_round(cartpole, quick)
    cartpole.close()
    return {"cartpole_step_us": ha["ha_round_cartpole_step_us"], **ha, "quick": quick}


def bench_vector(quick: bool) -> dict[str, Any]:
    """The vector env's figures (:mod:`pvegym.experiments.bench_vector`) as ``--json`` keys."""
    from pvegym.experiments.bench_vector import (
        FULL_VECTOR,
        QUICK_VECTOR,
        WAIT_RUNS,
        vec_wait_share,
        vector_rows,
    )

    _progress("vector env vs CartPole-v1 and SyncVectorEnv(CartPole-v1) …")
    cp_steps, blocks = (2000, 5) if quick else (20000, 20)
    cartpole = CartPoleLoop()
    cartpole.run(200)  # warm-up
    rows = vector_rows(QUICK_VECTOR if quick else FULL_VECTOR, cartpole, cp_steps, blocks)
    cartpole.close()
    for r in rows:
        _progress(
            f"vector {r['scenario']} N={r['n']}: {r['step_us']:.0f} µs/sub-step, "
            f"×{r['ratio']:.1f} CartPole, ×{r['sync_ratio']:.1f} SyncVectorEnv(CartPole)"
        )
    by = {(r["scenario"], r["n"]): r for r in rows}
    out: dict[str, Any] = {
        "vector": rows,
        "vector_small_n64_ratio": by["bench-small", 64]["ratio"],
        "vector_small_n64_sync_ratio": by["bench-small", 64]["sync_ratio"],
        "vec_wait": {},
    }
    if ("bench-large", 8) in by:
        out["vector_large_n8_ratio"] = by["bench-large", 8]["ratio"]
    for key, path in WAIT_RUNS.items():
        if quick and key != "maskable_ppo":
            continue
        _progress(f"learner's wait on the vector env ({path.name}, a short run) …")
        steps = 256 if quick else 4096
        run = vec_wait_share(path, steps, quick)
        out["vec_wait"][key] = run
        out[f"vec_wait_share_{key}"] = run["share"]
        _progress(f"vec_wait_share_{key}: {run['share']:.3f} of {run['learn_s']:.1f} s")
    return out


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
