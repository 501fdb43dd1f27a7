"""``pvegym/Cluster-v1``: layout, conformance, the deployed encoder's bits, motion memory, mask."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest

import pvegym.env  # noqa: F401  (registers the environments)
from pvegym.env import observation_layout as L
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.env.view_encoding_v1 import ViewEncoderV1
from pvegym.errors import ConfigError
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.scenarios import names as scenario_names
from pvegym.sim.scenarios import scenario_data
from pvegym.sim.view import Motion
from pvegym.testing import check_scenario


def _feature(env: ClusterEnvV1, obs: np.ndarray, block: str, name: str) -> np.ndarray:
    """One feature's slots: globals (scalar), node (max_nodes), guest (max_guests), pair (g × n)."""
    lay = env.layout
    if block == "global":
        return obs[L.G_INDEX[name] : L.G_INDEX[name] + 1]
    if block == "node":
        f = L.N_INDEX[name]
        return obs[lay.node_offset + f * lay.max_nodes : lay.node_offset + (f + 1) * lay.max_nodes]
    if block == "guest":
        f = L.GU_INDEX[name]
        start = lay.guest_offset + f * lay.max_guests
        return obs[start : start + lay.max_guests]
    f = L.P_INDEX[name]
    size = lay.max_guests * lay.max_nodes
    start = lay.pair_offset + f * size
    return obs[start : start + size].reshape(lay.max_guests, lay.max_nodes)


def test_make_and_layout_offsets() -> None:
    env = gymnasium.make("pvegym/Cluster-v1", scenario="small")
    base = env.unwrapped
    assert isinstance(base, ClusterEnvV1)
    lay = base.layout
    assert (lay.max_nodes, lay.max_guests) == (4, 40)
    assert lay.size == (
        len(L.GLOBAL_FEATURES)
        + 4 * len(L.NODE_FEATURES)
        + 40 * len(L.GUEST_FEATURES)
        + 160 * len(L.PAIR_FEATURES)
    )
    assert env.observation_space.shape == (lay.size,)
    assert env.action_space == gymnasium.spaces.Discrete(lay.n_actions)
    obs, _ = env.reset(seed=3)
    n, g = len(base.view.node_names), len(base.view.sids)
    assert _feature(base, obs, "node", "present").tolist() == [1.0] * n + [0.0] * (4 - n)
    assert _feature(base, obs, "guest", "present").sum() == g
    # indices decode exactly: the guest's node
    node = np.round(_feature(base, obs, "guest", "node")[:g] * 4) - 1
    assert node.tolist() == list(base.view.guest_node)
    # the HA stack does not report maintenance or fencing yet: 0
    assert not _feature(base, obs, "node", "maintenance").any()
    assert not _feature(base, obs, "node", "fenced").any()
    # padding is zero in every block
    assert not _feature(base, obs, "pair", "cpu_after")[g:].any()
    assert not _feature(base, obs, "pair", "mem_after")[:, n:].any()


@pytest.mark.parametrize("scenario", ["small", "failure-loop", "contended-3node"])
def test_conformance_v1(scenario: str) -> None:
    check_scenario(scenario, seeds=(0,), steps=12, env_class=ClusterEnvV1)


def test_conformance_v1_with_skipping_masking_and_noop_twin() -> None:
    check_scenario(
        "small",
        seeds=(4,),
        steps=20,
        env_class=ClusterEnvV1,
        skip_idle_rounds=True,
        mask_unmigratable=True,
        mask_headroom=0.05,
        reward_baseline="noop",
        reward_scale=10.0,
    )


def _check_view_encoder(env: ClusterEnvV1, seed: int, move_prob: float) -> tuple[int, int]:
    """A whole episode with random valid moves: the deployed encoder (fed every round's view)
    gives the environment's observation and mask bit for bit. Returns (moves, failed)."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    enc = ViewEncoderV1(
        env.max_nodes,
        env.max_guests,
        env.episode_seconds or env.scenario.duration,
        env.memory_options,
        env.mask_unmigratable,
        env.sim.round_s,
        env.mask_headroom,
    )
    step = 0
    while True:
        view = env.view
        enc.observe(view)
        mine = enc.encode(view)
        diff = np.flatnonzero(mine != obs)
        assert diff.size == 0, f"seed {seed} step {step}: indices {diff[:8].tolist()} differ"
        mask = env.action_masks()
        assert np.array_equal(enc.mask(view), mask), f"seed {seed} step {step}: mask differs"
        valid = np.flatnonzero(mask[1:]) + 1
        a = int(valid[rng.integers(valid.size)]) if valid.size and rng.random() < move_prob else 0
        obs, _, _, trunc, info = env.step(a)
        step += 1
        if trunc:
            return int(info["moves"]), int(info["moves_failed"])


@pytest.mark.parametrize("masks", [(False, None), (True, 0.05)])
def test_view_encoder_equals_environment_on_small(masks: tuple[bool, float | None]) -> None:
    mask_unmigratable, headroom = masks
    env = ClusterEnvV1("small", mask_unmigratable=mask_unmigratable, mask_headroom=headroom)
    moves = failed = 0
    for seed in (1_000_001, 1_000_002):
        m, f = _check_view_encoder(env, seed, 0.1)
        moves, failed = moves + m, failed + f
    assert moves > 10
    if not mask_unmigratable:
        assert failed > 0  # the memory features were exercised by failures too


@pytest.mark.parametrize("scenario", scenario_names())
def test_view_encoder_equals_environment_on_named_scenarios(scenario: str) -> None:
    _check_view_encoder(ClusterEnvV1(scenario, episode_seconds=1800), 0, 0.1)


def test_view_encoder_with_telemetry_switched_off() -> None:
    data = scenario_data("contended-3node")
    data["telemetry"] = {"disabled": ["node_cpu_some", "guest_cpu", "guest_memhost"]}
    env = ClusterEnvV1(scenario_from_dict(data), episode_seconds=1800)
    _check_view_encoder(env, 0, 0.1)
    obs, _ = env.reset(seed=0)
    assert _feature(env, obs, "global", "missing_node_cpu_some")[0] == 1.0
    assert not _feature(env, obs, "node", "cpu_some").any()
    assert not _feature(env, obs, "guest", "transfer_s").any()  # memhost unknown: 0


def test_failed_motion_is_remembered_with_backoff() -> None:
    """failure-loop's best move fails (a local CD-ROM): afterwards the guest reads last_failed,
    one failure, a backoff of 60 s of the 3600 s cap to that node and a recent failure there."""
    env = ClusterEnvV1("failure-loop")
    obs, _ = env.reset(seed=0)
    view = env.view
    pinned = [i for i, ok in enumerate(view.guest_migratable) if not ok]
    assert pinned
    g = pinned[0]
    src = int(view.guest_node[g])
    target = next(n for n in range(len(view.node_names)) if n != src and view.node_online[n])
    a = env.encode_motion(Motion(view.sids[g], view.node_names[target]))
    assert env.action_masks()[a]
    obs, *_ = env.step(a)
    while _feature(env, obs, "guest", "last_failed")[g] == 0.0:
        obs, _, _, trunc, _ = env.step(0)
        assert not trunc
    t_end = env.memory.guest[0, g]
    assert _feature(env, obs, "guest", "last_ok")[g] == 0.0
    assert _feature(env, obs, "guest", "failures")[g] == pytest.approx(1 / L.FAILURES_SCALE)
    backoff = _feature(env, obs, "pair", "backoff")[g, target]
    expect = (t_end + 60.0 - env.sim.t) / 3600.0
    assert backoff == pytest.approx(expect, abs=1e-6) and backoff > 0
    assert _feature(env, obs, "guest", "backoff")[g] == pytest.approx(backoff)
    assert _feature(env, obs, "pair", "fail_recency")[g, target] > 0.9
    assert _feature(env, obs, "pair", "fail_recency")[g, src] == 0.0
    # the backoff runs out after 60 s; the recency fades over the hour
    for _ in range(8):
        obs, *_ = env.step(0)
    assert _feature(env, obs, "pair", "backoff")[g, target] == 0.0
    assert 0.0 < _feature(env, obs, "pair", "fail_recency")[g, target] < 1.0


def test_successful_motion_marks_the_node_left() -> None:
    """After a successful move, moving back to the source is flagged (left_recency) and the
    guest's last motion reads ok with its duration."""
    env = ClusterEnvV1("pressure-evacuation")
    obs, _ = env.reset(seed=0)
    view = env.view
    g = next(i for i, ok in enumerate(view.guest_migratable) if ok)
    src = int(view.guest_node[g])
    target = next(
        n
        for n in range(len(view.node_names))
        if n != src and env.action_masks()[1 + g * env.max_nodes + n]
    )
    obs, *_ = env.step(1 + g * env.max_nodes + target)
    while _feature(env, obs, "guest", "last_ok")[g] == 0.0:
        obs, _, _, trunc, _ = env.step(0)
        assert not trunc
    left = _feature(env, obs, "pair", "left_recency")
    assert left[g, src] > 0.99 and left[g, target] == 0.0
    assert _feature(env, obs, "guest", "last_duration")[g] > 0.0
    assert _feature(env, obs, "guest", "motion_recency")[g] > 0.99
    # the view shows service states before this round's state machine: the node changes next round
    obs, *_ = env.step(0)
    assert np.round(_feature(env, obs, "guest", "node")[g] * env.max_nodes) - 1 == target


def test_mask_unmigratable_removes_exactly_the_pinned_guests() -> None:
    plain = ClusterEnvV1("failure-loop")
    masked = ClusterEnvV1("failure-loop", mask_unmigratable=True)
    plain.reset(seed=0)
    masked.reset(seed=0)
    a, b = plain.action_masks(), masked.action_masks()
    migratable = np.asarray(plain.view.guest_migratable, dtype=bool)
    grid_a = a[1:].reshape(plain.max_guests, plain.max_nodes)
    grid_b = b[1:].reshape(plain.max_guests, plain.max_nodes)
    assert (~migratable).any() and grid_a[~migratable].any()
    assert not grid_b[~migratable].any()
    assert np.array_equal(grid_a[migratable], grid_b[migratable])


def test_mask_headroom_removes_targets_without_room() -> None:
    """A target is masked exactly when its memory in use plus the guest's footprint passes
    (1 − headroom) of its memory; with no headroom mask the mask is v0's."""
    plain = ClusterEnvV1("small")
    roomy = ClusterEnvV1("small", mask_headroom=0.3)
    removed = 0
    for seed in (1_000_001, 1_000_006):
        plain.reset(seed=seed)
        roomy.reset(seed=seed)
        view = plain.view
        a, b = plain.action_masks(), roomy.action_masks()
        g, n = len(view.sids), len(view.node_names)
        grid_a = a[1:].reshape(plain.max_guests, plain.max_nodes)[:g, :n]
        grid_b = b[1:].reshape(plain.max_guests, plain.max_nodes)[:g, :n]
        full = (
            np.asarray(view.node_mem)[None, :] + np.asarray(view.guest_memhost)[:, None]
            > 0.7 * np.asarray(view.node_maxmem)[None, :]
        )
        assert np.array_equal(grid_b, grid_a & ~full)
        removed += int((grid_a & full).sum())
    assert removed > 0
    with pytest.raises(ConfigError, match="mask_headroom"):
        ClusterEnvV1("small", mask_headroom=1.0)


def test_what_if_pair_features() -> None:
    """cpu_after / mem_after of a target = (its load + the guest's) over its capacity, halved."""
    env = ClusterEnvV1("contended-3node")
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(0)
    view = env.view
    g = 0
    n = next(j for j in range(len(view.node_names)) if j != view.guest_node[g])
    expect_cpu = (view.node_cpu[n] + view.guest_cpu[g]) / view.node_maxcpu[n] / 2.0
    expect_mem = (view.node_mem[n] + view.guest_memhost[g]) / view.node_maxmem[n] / 2.0
    assert _feature(env, obs, "pair", "cpu_after")[g, n] == pytest.approx(
        min(expect_cpu, 1.0), rel=1e-6
    )
    assert _feature(env, obs, "pair", "mem_after")[g, n] == pytest.approx(
        min(expect_mem, 1.0), rel=1e-6
    )
    own = int(view.guest_node[g])
    assert _feature(env, obs, "pair", "cpu_after")[g, own] == pytest.approx(
        view.node_cpu[own] / view.node_maxcpu[own] / 2.0, rel=1e-6
    )
    x0, top = L.DURATION_LOG
    seconds = view.guest_memhost[g] / env.memory_options.bandwidth_bps
    assert math.isclose(
        _feature(env, obs, "guest", "transfer_s")[g],
        min(math.log1p(seconds / x0) / math.log1p(top / x0), 1.0),
        rel_tol=1e-6,
    )


def test_bad_memory_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"memory\.window"):
        ClusterEnvV1("small", memory={"window": 10.0})
    with pytest.raises(ConfigError, match=r"memory\.window_s"):
        ClusterEnvV1("small", memory={"window_s": -1.0})
    with pytest.raises(ConfigError, match=r"memory\.backoff_factor"):
        ClusterEnvV1("small", memory={"backoff_factor": 0.5})
