"""The proposal action space (issue 32, item 2): conformance, slots, the patched-tuned twin."""

from __future__ import annotations

import numpy as np
import pytest

from pvegym import testing
from pvegym.env.proposal_env import ProposalEnv
from pvegym.experiments.benchmark_episodes import PATCHED_TUNED, balancer_episode, make_reference
from pvegym.policies.proposals import HeuristicProposer, ProposerConfig
from pvegym.sim.cost import BALANCER_COST
from pvegym.sim.tasks import TASKS


def _env(baseline: bool = True, candidates: int = 3) -> ProposalEnv:
    return ProposalEnv(
        "small",
        HeuristicProposer(ProposerConfig(candidates, dict(PATCHED_TUNED))),
        (lambda: make_reference("patched-tuned")) if baseline else None,
        reward_weights=BALANCER_COST,
    )


def _short(env: ProposalEnv, rounds: int) -> ProposalEnv:
    env.episode_seconds = rounds * 10.0
    return env


def test_gymnasium_and_sb3_checkers() -> None:
    testing.check_env_apis(_short(_env(), 30))  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [3, 11])
def test_determinism_and_metric_invariants(seed: int) -> None:
    a, b = _short(_env(), 120), _short(_env(), 120)
    testing.check_determinism(a, b, seed, 40)  # type: ignore[arg-type]
    testing.check_metrics(a, seed, 120)  # type: ignore[arg-type]


def _legal(env: ProposalEnv, sid: str, target: str) -> bool:
    view = env.view
    g = int(env.sim.ha_idx[view.sids.index(sid)])
    return env.sim.motion_possible(g, view.node_names.index(target))


@pytest.mark.parametrize("seed", [0, 5, 9000])
def test_noop_and_patched_slots(seed: int) -> None:
    """Slot 0 is always valid; slot 1 is patched-tuned's motion whenever it makes one, and legal;
    every unmasked slot is a motion the HA manager would queue now, no two alike."""
    env = _env(baseline=False)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    seen_patched = 0
    done = False
    while not done:
        p = env.proposals
        assert p.mask[0] and p.motions[0] is None
        assert list(p.mask[1:]) == [m is not None for m in p.motions[1:]]
        chosen = [m for m in p.motions if m is not None]
        assert len({(m.sid, m.target) for m in chosen}) == len(chosen)
        for m in chosen:
            assert _legal(env, m.sid, m.target), (env.sim.t, m)
        seen_patched += p.motions[1] is not None
        _, _, _, done, _ = env.step(testing.random_masked_action(p.mask, rng))
    assert env.observation_space.shape == (HeuristicProposer().observation_size,)
    if seed == 0:
        assert seen_patched > 0  # instance 0 is one where patched-tuned moves


@pytest.mark.parametrize("seed", [0, 9001])
def test_taking_the_patched_slot_replays_patched_tuned(seed: int) -> None:
    """An agent that always takes slot 1 when it holds a motion plays patched-tuned exactly: its
    episode cost is the benchmark's for patched-tuned, and every reward against the twin is 0."""
    env = _env()
    env.reset(seed=seed)
    rewards = []
    while True:
        a = 1 if env.proposals.mask[1] else 0
        _, r, _, done, info = env.step(a)
        rewards.append(float(r))
        if done:
            break
    ref = balancer_episode(TASKS["small"], seed, make_reference("patched-tuned"))
    from pvegym.sim.cost import weighted_cost

    assert weighted_cost(BALANCER_COST, info) == ref.cost
    assert info["baseline_cost"] == ref.cost
    assert all(r == 0.0 for r in rewards)


def test_rewards_sum_to_baseline_minus_agent_cost() -> None:
    env = _env()
    rng = np.random.default_rng(1)
    env.reset(seed=2)
    total = 0.0
    while True:
        _, r, _, done, info = env.step(testing.random_masked_action(env.action_masks(), rng))
        total += float(r)
        if done:
            break
    from pvegym.sim.cost import weighted_cost

    cost = weighted_cost(BALANCER_COST, info)
    assert total == pytest.approx(info["baseline_cost"] - cost, rel=1e-9, abs=1e-6)


def test_observation_is_independent_of_cluster_size() -> None:
    """The same proposer's observation on medium has small's size (the network runs there)."""
    small = _env(baseline=False)
    medium = ProposalEnv("medium", HeuristicProposer(), None)
    assert small.observation_space.shape == medium.observation_space.shape
    obs, _ = medium.reset(seed=0)
    assert obs.shape == medium.observation_space.shape
    assert medium.observation_space.contains(obs)


@pytest.mark.parametrize("seed", [2, 9002])
def test_taking_guest_centrics_choice_replays_guest_centric(seed: int) -> None:
    """The slot flagged ``gc_choice`` is guest-centric's own motion: always taking it plays
    guest-centric exactly (the agent can match either heuristic)."""
    from pvegym.policies.proposals import GLOBAL_FEATURES, SLOT_FEATURES
    from pvegym.sim.cost import weighted_cost

    env = _env(baseline=False)
    ng, nf, f = len(GLOBAL_FEATURES), len(SLOT_FEATURES), SLOT_FEATURES.index("gc_choice")
    obs, _ = env.reset(seed=seed)
    while True:
        flags = [obs[ng + k * nf + f] for k in range(env.proposer.n_slots)]
        a = next((k for k, x in enumerate(flags) if x == 1.0), 0)
        obs, _, _, done, info = env.step(a)
        if done:
            break
    ref = balancer_episode(TASKS["small"], seed, make_reference("guest-centric"))
    assert weighted_cost(BALANCER_COST, info) == ref.cost
