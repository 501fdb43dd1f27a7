"""Conformance checks for ``pvegym/Cluster-v0`` and ``-v1`` on any scenario or family (like PettingZoo's API
tests): one call, :func:`check_scenario`, that a new scenario, family or environment change must
pass.

What it checks, on each seed:

* Gymnasium's ``check_env`` and stable-baselines3's ``check_env``;
* determinism: the same seed gives identical observations, rewards and infos under the same
  actions, also when ``reset(seed)`` follows other episodes, and unseeded resets continue the
  environment's RNG deterministically;
* masks: action 0 is always valid, the mask equals ``Simulation.motion_possible`` (and, with
  ``mask_unmigratable``, the guest's migratability; all pairs for
  small scenarios, a random sample otherwise), random masked actions never raise, every unmasked
  action taken is accepted, and a masked action is a no-op (the trajectory equals a twin
  environment's that chose 0) counted in ``info["invalid_action"]``;
* metric invariants of the final info: ``moves == moves_succeeded + moves_failed + still
  running``, ``moves_aborted ≤ moves_failed``, ``moves_guest_failed ≤ moves_succeeded``,
  non-negative costs, ``sim_seconds`` = decisions × round, and the rewards sum to minus the
  weighted final cost;
* a step-speed smoke test with a loose bound (seconds per step, never a tight timing): speed is
  measured by ``pvegym bench``, not here.

Raises :class:`ConformanceError` (an ``AssertionError``) naming the check that failed; returns a
small report (steps run, mean step µs) otherwise.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.env.cluster_env import ClusterEnv
from pvegym.sim.affinity import rebalance_movable
from pvegym.sim.cost import weighted_cost
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import Scenario

#: Loose per-step sanity bound (seconds): only a pathologically slow step fails it.
SMOKE_STEP_LIMIT_S = 2.0
#: Above this many guest × node pairs the mask is compared with ``motion_possible`` on a sample.
FULL_MASK_CHECK_PAIRS = 4096


class ConformanceError(AssertionError):
    """A conformance check failed; the message names the check, the scenario and the seed."""


def _fail(check: str, where: str, detail: str) -> ConformanceError:
    return ConformanceError(f"{check} [{where}]: {detail}")


def random_masked_action(mask: NDArray[np.bool_], rng: np.random.Generator) -> int:
    """A uniformly random valid action."""
    valid = np.flatnonzero(mask)
    return int(valid[rng.integers(valid.size)])


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _make(
    scenario: str | Scenario, steps: int | None, env_class: type[ClusterEnv], **kwargs: Any
) -> ClusterEnv:
    env = env_class(scenario, **kwargs)
    if steps is not None:
        env.reset(seed=0)
        env.episode_seconds = steps * env.sim.round_s
    return env


def _rollout(env: ClusterEnv, seed: int, steps: int, action_seed: int) -> list[tuple[Any, ...]]:
    """Trajectory of random masked actions: (obs, reward, terminated, truncated, info) per step."""
    rng = np.random.default_rng(action_seed)
    obs, info = env.reset(seed=seed)
    out: list[tuple[Any, ...]] = [(obs, info)]
    for _ in range(steps):
        a = random_masked_action(env.action_masks(), rng)
        step = env.step(a)
        out.append((a, *step))
        if step[2] or step[3]:
            break
    return out


def check_determinism(env_a: ClusterEnv, env_b: ClusterEnv, seed: int, steps: int) -> None:
    """Same seed and actions → identical trajectories, also after other episodes on ``env_b``."""
    where = f"{env_a.spec.id if env_a.spec else 'ClusterEnv'} seed {seed}"
    first = _rollout(env_a, seed, steps, action_seed=seed + 17)
    _rollout(env_b, seed + 1, max(steps // 2, 1), action_seed=3)  # another episode first
    second = _rollout(env_b, seed, steps, action_seed=seed + 17)
    if len(first) != len(second):
        raise _fail("determinism", where, "trajectory lengths differ")
    for k, (x, y) in enumerate(zip(first, second, strict=True)):
        if not _equal(x, y):
            raise _fail("determinism", where, f"step {k} differs after reset(seed)")
    env_a.reset(seed=seed)
    env_b.reset(seed=seed)
    for k in range(3):
        oa, _ = env_a.reset()
        ob, _ = env_b.reset()
        if not _equal(oa, ob) or env_a.episode_seed != env_b.episode_seed:
            raise _fail("determinism", where, f"unseeded reset {k} after reset(seed) differs")


def _mask_vs_motion_possible(env: ClusterEnv, rng: np.random.Generator, where: str) -> None:
    sim = env.sim
    mask = env.action_masks()
    if not mask[0]:
        raise _fail("mask", where, "action 0 is masked")
    mn = env.max_nodes
    n_real_g, n_real_n = int(sim.ha_idx.size), sim.cluster.n_nodes
    pairs = env.max_guests * mn
    if pairs <= FULL_MASK_CHECK_PAIRS:
        actions: Iterable[int] = range(1, env.n_actions)
    else:
        actions = [int(a) for a in rng.integers(1, env.n_actions, size=256)]
        actions += [int(a) + 1 for a in np.flatnonzero(mask[1:])[:64]]  # pairs only, not 0
    # Cluster-v1 may also leave out every motion of a guest that cannot migrate
    pinned = ~np.asarray(env.view.guest_migratable, dtype=bool)
    if not getattr(env, "mask_unmigratable", False):
        pinned[:] = False
    # ... and every motion of a guest its (or a positive partner's) auto-rebalance flag keeps
    v = env.view
    movable = rebalance_movable(v.rules, v.sids, v.guest_auto_rebalance)
    if movable is not None:
        pinned |= ~movable
    # ... and targets without memory room (telemetry, ``mask_headroom``)
    headroom = getattr(env, "mask_headroom", None)
    full = np.zeros((n_real_g, n_real_n), dtype=bool)
    if headroom is not None:
        v = env.view
        with np.errstate(invalid="ignore"):
            full = (
                np.asarray(v.node_mem)[None, :] + np.asarray(v.guest_memhost)[:, None]
                > (1.0 - headroom) * np.asarray(v.node_maxmem)[None, :]
            )
    for a in actions:
        g, n = divmod(a - 1, mn)
        expect = (
            g < n_real_g
            and n < n_real_n
            and not pinned[g]
            and not full[g, n]
            and sim.motion_possible(int(sim.ha_idx[g]), n)
        )
        if bool(mask[a]) != expect:
            raise _fail(
                "mask", where, f"action {a} (guest {g}, node {n}) mask {mask[a]} != {expect}"
            )


def check_masks(env: ClusterEnv, twin: ClusterEnv, seed: int, steps: int) -> None:
    """Mask = motion_possible; unmasked actions accepted; masked actions are counted no-ops."""
    where = f"seed {seed}"
    rng = np.random.default_rng(seed + 101)
    env.reset(seed=seed)
    twin.reset(seed=seed)
    for k in range(steps):
        _mask_vs_motion_possible(env, rng, f"{where} step {k}")
        mask = env.action_masks()
        masked = np.flatnonzero(~mask)
        use_masked = masked.size > 0 and rng.random() < 0.3
        if use_masked:
            a, b = int(masked[rng.integers(masked.size)]), 0
        else:
            a = b = random_masked_action(mask, rng)
        sa = env.step(a)
        sb = twin.step(b)
        if sa[4]["invalid_action"] != int(use_masked):
            raise _fail(
                "mask", where, f"step {k}: action {a} invalid_action={sa[4]['invalid_action']}"
            )
        ia = {
            key: v for key, v in sa[4].items() if key not in ("invalid_action", "invalid_actions")
        }
        ib = {
            key: v for key, v in sb[4].items() if key not in ("invalid_action", "invalid_actions")
        }
        if not (_equal(sa[0], sb[0]) and sa[1] == sb[1] and sa[2:4] == sb[2:4] and _equal(ia, ib)):
            raise _fail("mask", where, f"step {k}: masked action {a} was not a no-op")
        if sa[2] or sa[3]:
            break


def check_metrics(env: ClusterEnv, seed: int, steps: int) -> dict[str, Any]:
    """An episode of ``steps`` decisions: the final info's metric invariants and reward sum."""
    where = f"seed {seed}"
    rng = np.random.default_rng(seed + 7)
    env.reset(seed=seed)
    total, decisions = 0.0, 0
    info: dict[str, Any] = {}
    for _ in range(steps + 1):
        _, r, term, trunc, info = env.step(random_masked_action(env.action_masks(), rng))
        total += float(r)
        decisions += 1
        if not math.isfinite(float(r)):
            raise _fail("reward", where, f"non-finite reward {r}")
        if term or trunc:
            break
    else:
        raise _fail("episode end", where, f"no truncation after {steps + 1} steps")
    missing = [k for k in METRIC_KEYS if k not in info]
    if missing:
        raise _fail("final info", where, f"missing metric keys {missing}")
    running = sum(m["outcome"] == "running" for m in info["move_log"])
    if info["moves"] != info["moves_succeeded"] + info["moves_failed"] + running:
        raise _fail("metrics", where, "moves != succeeded + failed + still running")
    if info["moves"] != len(info["move_log"]):
        raise _fail("metrics", where, "moves != len(move_log)")
    if info["moves_aborted"] > info["moves_failed"]:
        raise _fail("metrics", where, "moves_aborted > moves_failed")
    if info["moves_guest_failed"] > info["moves_succeeded"]:
        raise _fail("metrics", where, "moves_guest_failed > moves_succeeded")
    for key in METRIC_KEYS:
        if info[key] is None:  # no value (evacuation_latency_s, recovery_s: nothing to time)
            continue
        if not info[key] >= 0:
            raise _fail("metrics", where, f"{key} = {info[key]} is negative")
    rounds = round(info["sim_seconds"] / env.sim.round_s)
    expect_rounds = round(env.episode_seconds / env.sim.round_s) if env.episode_seconds else None
    if not env.skip_idle_rounds and rounds != decisions:
        raise _fail("metrics", where, f"sim_seconds covers {rounds} rounds, {decisions} steps")
    if expect_rounds is not None and rounds != expect_rounds:
        raise _fail("metrics", where, f"sim_seconds covers {rounds} rounds, not {expect_rounds}")
    cost = weighted_cost(env.reward_weights, info) / env.reward_scale
    if "baseline_cost" in info:
        cost -= info["baseline_cost"] / env.reward_scale
    if not math.isclose(-total, cost, rel_tol=1e-6, abs_tol=1e-6):
        raise _fail("reward", where, f"Σ reward {total} != −weighted cost {-cost}")
    return info


def check_env_apis(env: ClusterEnv) -> None:
    """Gymnasium's and stable-baselines3's environment checkers."""
    from gymnasium.utils.env_checker import check_env as gym_check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # their advisory warnings (e.g. unnormalized rewards)
        gym_check_env(env, skip_render_check=env.render_mode is None)
        sb3_check_env(env, warn=False)


def check_speed(env: ClusterEnv, steps: int, limit_s: float = SMOKE_STEP_LIMIT_S) -> float:
    """Mean seconds per step with random masked actions; fails only above ``limit_s``."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    t0 = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(random_masked_action(env.action_masks(), rng))
        if term or trunc:
            env.reset()
    per_step = (time.perf_counter() - t0) / max(steps, 1)
    if per_step > limit_s:
        raise _fail("speed", "smoke", f"{per_step:.3f} s per step (limit {limit_s} s)")
    return per_step


def check_scenario(
    scenario_or_family: str | Scenario,
    seeds: Iterable[int] = (0, 1),
    steps: int = 30,
    env_class: type[ClusterEnv] = ClusterEnv,
    **env_kwargs: Any,
) -> dict[str, Any]:
    """Run every conformance check on ``scenario_or_family`` for each seed (``steps`` decisions).

    ``env_kwargs`` go to ``env_class`` (:class:`ClusterEnv`, or ``ClusterEnvV1``; e.g.
    ``skip_idle_rounds=True``). Returns
    ``{"scenario", "seeds", "steps", "step_us"}``.
    """
    seeds = list(seeds)
    kw = dict(env_kwargs)
    kw.pop("episode_seconds", None)
    check_env_apis(env_class(scenario_or_family, **kw))
    env_a = _make(scenario_or_family, steps, env_class, **kw)
    env_b = _make(scenario_or_family, steps, env_class, **kw)
    for seed in seeds:
        check_determinism(env_a, env_b, seed, steps)
        check_masks(env_a, env_b, seed, steps)
        check_metrics(env_a, seed, steps)
    per_step = check_speed(env_a, steps)
    name = scenario_or_family if isinstance(scenario_or_family, str) else scenario_or_family.name
    return {"scenario": name, "seeds": seeds, "steps": steps, "step_us": per_step * 1e6}
