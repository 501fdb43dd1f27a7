"""``encode_view``/``mask_from_view`` equal the environment's observation and mask, bit for bit.

Whole episodes with random valid motions (so that migrations run, fail, finish and their results
arrive), on ``small`` test instances and on every named scenario, with and without idle-round
skipping and with telemetry switched off.
"""

from __future__ import annotations

import numpy as np
import pytest

from pvegym.env.cluster_env import GLOBAL_FEATURES, GUEST_FEATURES, NODE_FEATURES, ClusterEnv
from pvegym.env.view_encoding import encode_view, mask_from_view, observation_size
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.scenarios import names as scenario_names
from pvegym.sim.scenarios import scenario_data


def _feature_name(i: int, max_nodes: int, max_guests: int) -> str:
    """Which feature (and slot) index ``i`` of the observation is, for readable failures."""
    if i < len(GLOBAL_FEATURES):
        return GLOBAL_FEATURES[i]
    i -= len(GLOBAL_FEATURES)
    if i < len(NODE_FEATURES) * max_nodes:
        return f"node.{NODE_FEATURES[i // max_nodes]}[{i % max_nodes}]"
    i -= len(NODE_FEATURES) * max_nodes
    return f"guest.{GUEST_FEATURES[i // max_guests]}[{i % max_guests}]"


def _check_episode(env: ClusterEnv, seed: int, move_prob: float = 0.08) -> int:
    """Run one whole episode; compare at every step. Returns the number of moves issued."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    seconds = env.episode_seconds if env.episode_seconds is not None else env.scenario.duration
    mn, mg = env.max_nodes, env.max_guests
    moves, step = 0, 0
    while True:
        view = env.view
        mine = encode_view(view, mn, mg, seconds, env.sim.round_s)
        bad = np.flatnonzero(mine != obs)
        assert bad.size == 0, f"seed {seed} step {step}: " + ", ".join(
            f"{_feature_name(i, mn, mg)} env={obs[i]!r} view={mine[i]!r}" for i in bad
        )
        mask = env.action_masks()
        np.testing.assert_array_equal(mask_from_view(view, mn, mg), mask)
        valid = np.flatnonzero(mask[1:]) + 1
        action = 0
        if valid.size and rng.random() < move_prob:
            action = int(valid[rng.integers(valid.size)])
            moves += 1
        obs, _, _, truncated, _ = env.step(action)
        step += 1
        if truncated:
            return moves


@pytest.mark.parametrize("skip", [False, True])
def test_small_family_whole_episodes(skip: bool) -> None:
    env = ClusterEnv("small", episode_seconds=1800.0, skip_idle_rounds=skip, seed_split="test")
    moves = sum(_check_episode(env, seed) for seed in (1_000_000, 1_000_001, 1_000_002))
    assert moves > 0


@pytest.mark.parametrize("name", scenario_names())
def test_named_scenarios_whole_episodes(name: str) -> None:
    env = ClusterEnv(name)
    assert _check_episode(env, 0, move_prob=0.05) >= 0


def test_missing_telemetry_and_padding() -> None:
    data = scenario_data("contended-3node")
    data["telemetry"] = {"disabled": ["node_cpu_some", "guest_cpu", "guest_mem"]}
    env = ClusterEnv(scenario_from_dict(data), episode_seconds=600.0)
    _check_episode(env, 3, move_prob=0.2)
    # a bigger padding than the scenario's own sizes: the real slots are unchanged, the rest is 0
    env.reset(seed=0)
    padded = encode_view(env.view, 8, 64, 600.0)
    assert padded.shape == (observation_size(8, 64),)
    assert not mask_from_view(env.view, 8, 64)[1 + 3 * 8 :].reshape(-1, 8)[7:].any()


def test_view_larger_than_the_padding_is_refused() -> None:
    env = ClusterEnv("contended-3node")
    env.reset(seed=0)
    with pytest.raises(ValueError, match="more than the encoding"):
        encode_view(env.view, 2, 40, 600.0)
