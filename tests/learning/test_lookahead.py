"""The look-ahead expert: an exact fork, the cheapest rollout chosen, the privileged DAgger path."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.errors import ConfigError
from pvegym.experiments.record import play
from pvegym.learning.imitation import CollectStats, collect_episode
from pvegym.learning.lookahead import (
    DEFAULT_PROPOSER,
    LookaheadExpert,
    fork,
    make_expert,
    pressured_rounds,
    rollout_cost,
)
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.cost import RunningCost
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion

SECONDS = 900.0
#: a short, cheap expert: two candidates, a five-minute look-ahead
FAST = {"horizon_s": 300.0, "candidates": 2}
#: a proposer that attempts on the first pressured round it sees (a fresh expert mid-episode)
AT_ONCE = {**DEFAULT_PROPOSER, "hold_rounds": 1}


def _pressured(scenario: str = "pressure-evacuation", seed: int = 0) -> tuple[Simulation, list]:
    """A simulation at the first round guest-centric's proposer would attempt a motion, and the
    candidates it scored there."""
    sim = Simulation(catalog.scenario(scenario, seed), seed)
    proposer = make_policy("guest-centric")
    proposer.reset(seed)
    view = sim.reset()
    while sim.t < sim.scenario.duration:
        scored = proposer.propose(view)
        if scored:
            return sim, scored
        view = sim.step(None)
    raise AssertionError("the proposer never attempted a motion")


def test_fork_of_an_environment_episode_is_exact() -> None:
    """A fork of the environment's simulation (its motions committed by action index) stepped
    with the same motions as the original ends with identical metrics and telemetry."""
    env = ClusterEnvV1("small", episode_seconds=3600.0, mask_unmigratable=True)
    env.reset(seed=11)
    policy = make_policy("guest-centric")
    policy.reset(env.episode_seed)
    for _ in range(150):
        env.step(env.encode_motion(policy.decide(env.view)))
    sim = env.sim
    assert sim.metrics.moves, "the prefix must contain motions for the replay to matter"
    twin = fork(sim)
    assert twin.result()["metrics"] == sim.result()["metrics"]
    np.testing.assert_array_equal(twin.view.node_cpu_some, sim.view.node_cpu_some)
    other = copy.deepcopy(policy)
    v1, v2 = sim.view, twin.view
    for _ in range(150):
        v1, v2 = sim.step(policy.decide(v1)), twin.step(other.decide(v2))
    assert len(sim.metrics.moves) > 0
    assert twin.result()["metrics"] == sim.result()["metrics"]


def test_expert_picks_the_cheapest_rollout() -> None:
    """At a pressured round the expert's answer is the option whose rollout costs least (no
    motion unless a candidate is cheaper); a price that makes moving free of charge or ruinous
    turns the answer into a motion or none."""
    sim, scored = _pressured()
    expert = LookaheadExpert(**FAST, proposer=AT_ONCE)
    cost = RunningCost(expert.weights)
    options: list[Motion | None] = [None]
    ranked = sorted(scored, key=lambda c: -(c.relief - c.cost))[: expert.candidates]
    options += [Motion(sid=c.sid, target=c.target) for c in ranked]
    costs = [rollout_cost(sim, m, expert.horizon_s, cost) for m in options]
    assert len(set(costs)) > 1, "the options must differ for the choice to mean anything"
    expert.bind(sim)
    expert.reset(0)
    answer = expert.decide(sim.view)
    assert expert.attempts == 1
    assert answer == options[int(np.argmin(costs))]
    t = sim.t
    for moves, expect_motion in ((-1e9, True), (1e9, False)):
        other = LookaheadExpert(
            **FAST, proposer=AT_ONCE, weights={**expert.weights, "moves": moves}
        )
        other.bind(sim)
        other.reset(0)
        assert (other.decide(sim.view) is not None) is expect_motion
        assert sim.t == t  # the rollouts never touch the bound simulation


def test_expert_only_dagger_collection_is_the_experts_episode() -> None:
    """In DAgger the privileged expert is bound to the environment's simulation: with β = 1 the
    episode (motions by action index) is the expert's own run through the runner's loop."""
    env = ClusterEnvV1(
        "small", episode_seconds=SECONDS, skip_idle_rounds=False, mask_unmigratable=True
    )
    inst, ep_seed = 11, 5
    expert = make_expert("lookahead", "imitation.expert_params", **FAST)
    batch = collect_episode(
        env, inst, ep_seed, expert, None, 1.0, np.random.default_rng(0), CollectStats()
    )
    alone = LookaheadExpert(**FAST)
    sim = Simulation(catalog.scenario("small", inst), ep_seed)
    alone.bind(sim)
    alone.reset(ep_seed)
    ref, _ = play(sim, alone.decide, SECONDS)
    assert expert.rollouts > 0
    assert sum(a > 0 for a in batch.labels) == ref["metrics"]["moves"]
    for key in ("guest_stall_s", "moves", "migration_bytes", "cpu_shortfall_core_s"):
        assert batch.infos[0][key] == ref["metrics"][key]


def test_unknown_expert_constant_names_its_key() -> None:
    with pytest.raises(ConfigError, match=r"imitation\.expert_params\.depth"):
        make_expert("lookahead", "imitation.expert_params", depth=2)


def _first_possible(sim: Simulation) -> Motion:
    """Some motion the HA manager would accept now."""
    cl = sim.cluster
    for g in sim.ha_idx.tolist():
        for n in range(cl.n_nodes):
            if sim.motion_possible(g, n):
                return Motion(sid=cl.sids[g], target=cl.node_names[n])
    raise AssertionError("no motion possible")


def test_pressured_rounds_say_where_a_move_is_not_churn() -> None:
    """On an instance without a pressured round any move is a churn move; on one whose every
    round is pressured it is not (what bounds the wins a churn-free policy can have)."""
    for calm in (True, False):
        for seed in range(9000, 9040):
            scn = catalog.scenario("small", seed)
            n = pressured_rounds(scn, seed, 600.0)
            if n == (0 if calm else 60):
                break
        else:
            raise AssertionError(f"no {'calm' if calm else 'pressured'} instance in 9000–9039")
        sim = Simulation(scn, seed)
        sim.reset()
        for _ in range(30):
            sim.step(None)
        sim.step(_first_possible(sim))
        assert sim.metrics.churn_moves == (1 if calm else 0), (seed, n)


def test_shadow_motion_is_an_option() -> None:
    """A shadow proposer's motion is tried too: with its constants the expert compares on a round
    where only the shadow would move (the reference patched here, guest-centric never gated)."""
    sim, _ = _pressured()
    never = {**DEFAULT_PROPOSER, "min_pressure_pct": 100.0}
    alone = LookaheadExpert(**FAST, proposer=never)
    shadowed = LookaheadExpert(**FAST, proposer=never, shadow={"policy": "patched"})
    for expert in (alone, shadowed):
        expert.bind(sim)
        expert.reset(0)
    view = sim.view
    for _ in range(60):
        alone.decide(view)
        if shadowed.decide(view) is not None or shadowed.attempts:
            break
        view = sim.step(None)
    assert alone.attempts == 0
    assert shadowed.attempts > 0
