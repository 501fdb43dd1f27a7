"""``pvegym/Cluster-v0``: spaces, masks, determinism, reward, idle-round skipping, rendering."""

from typing import Any

import gymnasium
import numpy as np
import pytest
from stable_baselines3.common.monitor import Monitor

import pvegym.env  # noqa: F401  (registers pvegym/Cluster-v0)
from pvegym.env.cluster_env import (
    GLOBAL_FEATURES,
    GUEST_FEATURES,
    NODE_FEATURES,
    ClusterEnv,
)
from pvegym.errors import ConfigError
from pvegym.policies.registry import make_policy
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.scenarios import scenario_data
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion
from pvegym.units import GiB


def _random_episode(env: ClusterEnv, seed: int, steps: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    info: dict[str, Any] = {}
    for _ in range(steps):
        valid = np.flatnonzero(env.action_masks())
        _, _, term, trunc, info = env.step(int(valid[rng.integers(valid.size)]))
        if term or trunc:
            break
    # info["action_mask"] is an array: compared as a list
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()}


def test_make_registers_and_spaces_are_padded_to_family_maxima() -> None:
    env = gymnasium.make("pvegym/Cluster-v0", scenario="small")
    assert env.action_space == gymnasium.spaces.Discrete(1 + 40 * 4)
    size = len(GLOBAL_FEATURES) + 4 * len(NODE_FEATURES) + 40 * len(GUEST_FEATURES)
    assert env.observation_space.shape == (size,)
    obs, _ = env.reset(seed=1)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    base = env.unwrapped
    assert isinstance(base, ClusterEnv)
    n, g = len(base.view.node_names), len(base.view.sids)
    node_present = obs[len(GLOBAL_FEATURES) : len(GLOBAL_FEATURES) + 4]
    assert node_present.tolist() == [1.0] * n + [0.0] * (4 - n)
    guest_off = len(GLOBAL_FEATURES) + 4 * len(NODE_FEATURES)
    assert obs[guest_off : guest_off + 40].sum() == g


def test_named_scenario_uses_its_own_sizes() -> None:
    env = ClusterEnv("contended-3node")
    assert env.n_actions == 1 + 10 * 3
    assert env.action_space == gymnasium.spaces.Discrete(31)


def test_mask_equals_motion_possible_and_busy_pipeline_masks_all_motions() -> None:
    env = ClusterEnv("contended-3node", episode_seconds=1200)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    saw_busy = saw_idle = False
    for _ in range(60):
        mask = env.action_masks()
        assert mask[0]
        sim = env.sim
        for a in range(1, env.n_actions):
            g, n = divmod(a - 1, env.max_nodes)
            assert mask[a] == sim.motion_possible(int(sim.ha_idx[g]), n)
        if sim.motion_active():
            saw_busy = True
            assert mask.sum() == 1
        else:
            saw_idle = True
        valid = np.flatnonzero(mask)
        env.step(int(valid[rng.integers(valid.size)]))
    assert saw_busy and saw_idle


def test_masked_action_is_a_counted_no_op_and_out_of_space_raises() -> None:
    a, b = ClusterEnv("contended-3node"), ClusterEnv("contended-3node")
    a.reset(seed=2)
    b.reset(seed=2)
    same_node = a.encode_motion(Motion(a.view.sids[0], a.view.node_names[a.view.guest_node[0]]))
    assert not a.action_masks()[same_node]
    oa, ra, _, _, ia = a.step(same_node)
    ob, rb, _, _, ib = b.step(0)
    assert ia["invalid_action"] == 1 and ib["invalid_action"] == 0
    assert np.array_equal(oa, ob) and ra == rb
    with pytest.raises(ValueError):
        a.step(a.n_actions)


def test_padding_actions_are_masked_no_ops() -> None:
    env = ClusterEnv("small")
    env.reset(seed=0)
    g = len(env.view.sids)
    if g < env.max_guests:
        pad = 1 + g * env.max_nodes
        assert not env.action_masks()[pad]
        assert env.decode_action(pad) is None
        assert env.step(pad)[4]["invalid_action"] == 1


def test_encode_decode_roundtrip() -> None:
    env = ClusterEnv("small")
    env.reset(seed=3)
    for a in np.flatnonzero(env.action_masks())[1:]:
        motion = env.decode_action(int(a))
        assert motion is not None and env.encode_motion(motion) == a
    assert env.decode_action(0) is None and env.encode_motion(None) == 0
    with pytest.raises(ValueError):
        env.encode_motion(Motion("vm:99999", "node01"))


def test_same_seed_same_trajectory_and_unseeded_resets_continue_deterministically() -> None:
    a, b = ClusterEnv("small", episode_seconds=300), ClusterEnv("small", episode_seconds=300)
    _random_episode(b, 9, 10)
    assert _random_episode(a, 5, 40) == _random_episode(b, 5, 40)
    a.reset(seed=11)
    b.reset(seed=11)
    for _ in range(3):
        oa, _ = a.reset()
        ob, _ = b.reset()
        assert np.array_equal(oa, ob) and a.episode_seed == b.episode_seed


def test_seed_picks_family_instance_and_options_override_it() -> None:
    env = ClusterEnv("small")
    env.reset(seed=7)
    first = env.scenario
    env.reset(seed=7, options={"instance_seed": 8})
    assert env.scenario != first and env.episode_seed == 7
    test_env = ClusterEnv("small", seed_split="test")
    test_env.reset(seed=0)
    test_env.reset()
    assert test_env._instance is not None and test_env._instance >= 1_000_000


def test_reward_is_minus_weighted_cost_delta() -> None:
    weights = {
        "stall_cpu_s": 2.0,
        "guest_stall_s": 1.0,
        "cpu_shortfall_core_s": 0.5,
        "moves": 3.0,
        "moves_failed": 7.0,
        "oscillations": 11.0,
        "churn_moves": 5.0,
        "migration_bytes": 0.25 / GiB,
        "downtime_s": 13.0,
    }
    env = ClusterEnv(
        "contended-3node", episode_seconds=900, reward_weights=weights, reward_scale=4.0
    )
    assert env.reward_weights == weights
    rng = np.random.default_rng(1)
    env.reset(seed=1)

    def cost() -> float:
        return weighted_cost(weights, env.sim.result()["metrics"]) / 4.0

    before, total = 0.0, 0.0
    while True:
        valid = np.flatnonzero(env.action_masks())
        _, r, _, trunc, info = env.step(int(valid[rng.integers(valid.size)]))
        now = cost()
        assert float(r) == pytest.approx(-(now - before), rel=1e-9, abs=1e-9)
        before, total = now, total + float(r)
        if trunc:
            break
    assert info["moves"] > 0
    assert total == pytest.approx(-now)


def test_default_reward_weights_are_the_tuning_objective() -> None:
    assert ClusterEnv("small").reward_weights == BALANCER_COST


def test_noop_baseline_rewards_what_the_agent_changed() -> None:
    """With a noop twin, rounds before the first motion reward exactly 0, and the return is minus
    (the episode's cost − the noop episode's cost), the latter as the runner measures it."""
    weights = dict(BALANCER_COST)
    env = ClusterEnv(
        "contended-3node", episode_seconds=900, reward_weights=weights, reward_baseline="noop"
    )
    env.reset(seed=4)
    rewards = [float(env.step(0)[1]) for _ in range(5)]
    assert rewards == [0.0] * 5
    rng = np.random.default_rng(4)
    total = sum(rewards)
    while True:
        valid = np.flatnonzero(env.action_masks())
        _, r, _, trunc, info = env.step(int(valid[rng.integers(valid.size)]))
        total += float(r)
        if trunc:
            break
    assert info["moves"] > 0
    scn = env.scenario
    noop = Simulation(scn, 4).run(make_policy("noop"), 900)["metrics"]
    assert info["baseline_cost"] == pytest.approx(weighted_cost(weights, noop), rel=1e-12)
    assert total == pytest.approx(
        -(weighted_cost(weights, info) - weighted_cost(weights, noop)), rel=1e-9, abs=1e-6
    )


def test_bad_reward_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"reward_weights\.latency"):
        ClusterEnv("small", reward_weights={"latency": 1.0})
    # a mean has no per-round increment: not a reward term
    with pytest.raises(ConfigError, match=r"reward_weights\.imbalance_mean"):
        ClusterEnv("small", reward_weights={"imbalance_mean": 1.0})
    with pytest.raises(ConfigError, match=r"reward_baseline"):
        ClusterEnv("small", reward_baseline="upstream")
    with pytest.raises(ConfigError, match=r"reward_scale"):
        ClusterEnv("small", reward_scale=0.0)


def test_skip_idle_rounds_covers_several_rounds_and_keeps_metrics() -> None:
    env = ClusterEnv("contended-3node", episode_seconds=1200, skip_idle_rounds=True)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps, rounds, total = 0, 1, 0.0
    while True:
        mask = env.action_masks()
        assert mask.sum() > 1 or env.sim.t == 10.0  # a step never starts on an idle round
        valid = np.flatnonzero(mask)
        _, r, _, trunc, info = env.step(int(valid[rng.integers(valid.size)]))
        steps += 1
        rounds += info["rounds"]
        total += float(r)
        if trunc:
            break
    assert info["sim_seconds"] == 1200.0 and rounds == 120
    assert steps < 120
    assert info["moves"] > 0


def test_final_info_has_metrics_and_moves_for_monitor() -> None:
    env = Monitor(ClusterEnv("contended-3node", episode_seconds=300), info_keywords=METRIC_KEYS)
    env.reset(seed=0)
    while True:
        _, _, term, trunc, info = env.step(0)
        if term or trunc:
            break
    assert set(METRIC_KEYS) <= info.keys()
    assert info["sim_seconds"] == 300.0 and info["move_log"] == []
    assert info["episode"]["l"] == 30
    assert "stall_cpu_s" in info["episode"]


def test_render_modes() -> None:
    env = ClusterEnv("contended-3node", render_mode="ansi")
    env.reset(seed=0)
    env.step(0)
    text = env.render()
    assert isinstance(text, str) and "node1" in text and "node3" in text
    # the columns say what they show: PSI some avg10 (percent) is not a utilisation
    lines = text.splitlines()
    assert lines[1].split()[-3:] == ["psi", "mem", "guests"] and "psi cpu" in lines[1]
    assert lines[2].split() == ["used/total", "used/total", "some", "%", "some", "%"]
    view = env.unwrapped.view
    row = lines[3].split()
    assert row[0] == "node1" and float(row[4]) == round(float(view.node_cpu_some[0]), 1)
    env = ClusterEnv("contended-3node", render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    img = env.render()
    assert isinstance(img, np.ndarray) and img.dtype == np.uint8
    assert img.ndim == 3 and img.shape[2] == 3 and img.shape[1] == 10
    with pytest.raises(ConfigError):
        ClusterEnv("small", render_mode="human")


def test_missing_telemetry_reads_zero_with_a_flag() -> None:
    data = scenario_data("contended-3node")
    data["telemetry"] = {"disabled": ["node_cpu_some", "guest_cpu"]}
    env = ClusterEnv(scenario_from_dict(data))
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(0)
    assert np.isfinite(obs).all()
    flags = dict(zip(GLOBAL_FEATURES, obs[: len(GLOBAL_FEATURES)], strict=True))
    assert flags["missing_node_cpu_some"] == 1.0 and flags["missing_guest_cpu"] == 1.0
    assert flags["missing_node_cpu"] == 0.0


def test_overrides_apply_to_families_and_fixed_scenarios() -> None:
    """One override syntax (dotted key → value, as an experiment's ``set``) for every scenario."""
    sets = {"migration.bandwidth": "1GiB/s"}
    for name in ("small", "idle-night"):
        env = ClusterEnv(name, overrides=sets)
        env.reset(seed=3)
        assert env.scenario.migration.bandwidth == 2**30
    with pytest.raises(ConfigError) as info:
        ClusterEnv("idle-night", overrides={"nodez": 1})
    assert info.value.path == "overrides"
