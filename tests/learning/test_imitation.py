"""DAgger collection and behaviour cloning: labels, decision grouping, cloning that fits."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO

from pvegym.env import observation_layout as L
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.learning.imitation import CollectStats, collect_episode, learner_actions, train_bc
from pvegym.learning.pair_policy import MaskablePairScorerPolicy
from pvegym.learning.train_config import ImitationOptions
from pvegym.policies.guest_centric import GuestCentricPolicy
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion

th.set_num_threads(1)
SECONDS = 1800.0


def _env(skip: bool) -> ClusterEnvV1:
    return ClusterEnvV1(
        "small",
        episode_seconds=SECONDS,
        skip_idle_rounds=skip,
        reward_baseline="noop",
        reward_scale=10.0,
        mask_unmigratable=True,
    )


def test_expert_only_collection_is_the_experts_episode() -> None:
    """β = 1: the episode is exactly the expert's (``Simulation.run``), its moves are the labels,
    and the rewards sum to minus its cost change against noop."""
    inst, ep_seed = 11, 5
    expert = make_policy("guest-centric")
    batch = collect_episode(
        _env(False), inst, ep_seed, expert, None, 1.0, np.random.default_rng(0), CollectStats()
    )
    scn = catalog.scenario("small", inst)
    ref = Simulation(scn, ep_seed).run(make_policy("guest-centric"), SECONDS)["metrics"]
    noop = Simulation(scn, ep_seed).run(make_policy("noop"), SECONDS)["metrics"]
    info = batch.infos[0]
    assert ref["moves"] > 0
    assert sum(a > 0 for a in batch.labels) == ref["moves"]
    assert batch.labels == batch.taken
    for key in ("guest_stall_s", "moves", "migration_bytes", "cpu_shortfall_core_s"):
        assert info[key] == ref[key]
    expect = -(weighted_cost(BALANCER_COST, ref) - weighted_cost(BALANCER_COST, noop)) / 10.0
    assert sum(batch.rewards) == pytest.approx(expect, rel=1e-9, abs=1e-9)
    assert batch.dones[-1] and not any(batch.dones[:-1])


def test_decisions_are_the_steps_of_the_skipping_environment() -> None:
    """Replaying the collected actions in the environment with idle rounds skipped gives the same
    observations and the same per-decision rewards: cloning sees PPO's states."""
    inst, ep_seed = 12, 6
    batch = collect_episode(
        _env(False),
        inst,
        ep_seed,
        make_policy("guest-centric"),
        None,
        1.0,
        np.random.default_rng(0),
        CollectStats(),
    )
    env = _env(True)
    obs, _ = env.reset(seed=ep_seed, options={"instance_seed": inst})
    for k, action in enumerate(batch.taken):
        assert np.array_equal(obs, batch.obs[k]), f"decision {k}"
        assert np.array_equal(env.action_masks(), batch.masks[k])
        obs, reward, _, trunc, _ = env.step(action)
        assert float(reward) == pytest.approx(batch.rewards[k], rel=1e-9, abs=1e-6)
        assert trunc == (k == len(batch.taken) - 1)


def _model(env: ClusterEnvV1) -> MaskablePPO:
    return MaskablePPO(
        MaskablePairScorerPolicy,
        env,
        policy_kwargs={"layout": env.layout.as_dict(), "hidden": 32},
        n_steps=64,
        seed=0,
        device="cpu",
    )


def test_cloning_learns_when_and_what_the_expert_moves() -> None:
    """A fresh policy (P(noop) ≈ 0.9) never moves. After cloning on a few episodes it moves in
    most states where the expert moved, never where no node is at the pressure gate, and picks
    the expert's exact (guest, target) far above chance. (Exact agreement stays partial: the
    expert holds for three rounds of pressure before it acts, so the states just before a move
    look like the move's and are labelled no motion.)"""
    env = _env(False)
    model = _model(env)
    rng = np.random.default_rng(0)
    data = None
    for inst in (11, 13, 21):
        b = collect_episode(
            env, inst, inst, make_policy("guest-centric"), None, 1.0, rng, CollectStats()
        )
        if data is None:
            data = b
        else:
            data.extend(b)
    assert data is not None
    obs, masks = np.stack(data.obs), np.stack(data.masks)
    labels = np.asarray(data.labels)
    moves = labels > 0
    assert moves.sum() >= 5
    assert not (learner_actions(model.policy, obs, masks) > 0).any()
    opts = ImitationOptions(epochs=60, batch_size=128, learning_rate=3e-3, move_weight=5.0)
    report = train_bc(model.policy, data, opts, np.random.default_rng(1))
    pred = learner_actions(model.policy, obs, masks)
    calm = obs[:, L.G_INDEX["pressure_max"]] < env.memory_options.pressure_pct / 100.0
    assert report["moved_when_expert_moved"] >= 0.75
    assert not (pred[calm] > 0).any()
    chance = float(np.mean(1.0 / (masks[moves].sum(axis=1) - 1)))
    assert report["move_recall"] >= 3.0 * chance


def test_learner_moves_are_adopted_by_the_expert() -> None:
    """When the learner moves instead of the expert, the expert tracks that motion's outcome as
    its own: after it succeeds, the guest is cooling down and not moved back to where it left."""
    env = ClusterEnvV1("pressure-evacuation")
    env.reset(seed=0)
    expert = GuestCentricPolicy()
    expert.reset(0)
    view = env.view
    expert.decide(view)
    g = next(i for i, ok in enumerate(view.guest_migratable) if ok)
    a = next(
        int(x) for x in np.flatnonzero(env.action_masks()[1:]) + 1 if (x - 1) // env.max_nodes == g
    )
    motion = env.decode_action(a)
    assert isinstance(motion, Motion)
    expert.adopt(view, motion)
    source = view.node_names[view.guest_node[g]]
    env.step(a)
    for _ in range(120):
        expert.decide(env.view)
        if (motion.sid, source) in expert.left_until:
            break
        env.step(0)
    assert expert.left_until[(motion.sid, source)] > env.view.t
    assert expert._base.cooldown_until[motion.sid] > env.view.t
