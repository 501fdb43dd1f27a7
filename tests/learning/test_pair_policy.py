"""The pair scorer: noop-biased start, permutation equivariance, structural mask, SB3 round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3 import PPO

from pvegym.env import observation_layout as L
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.learning.pair_policy import (
    IMPOSSIBLE,
    MaskablePairScorerPolicy,
    PairScorerNet,
    PairScorerPolicy,
    action_probabilities,
    greedy_actions,
    policy_class,
)

th.set_num_threads(1)


def _states(env: ClusterEnvV1, seed: int, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    while len(out) < n:
        mask = env.action_masks()
        out.append((obs, mask))
        valid = np.flatnonzero(mask[1:]) + 1
        a = int(valid[rng.integers(valid.size)]) if valid.size and rng.random() < 0.05 else 0
        obs, *_ = env.step(a)
    return out


def _randomize(net: PairScorerNet, seed: int) -> None:
    """Weights away from the zero start, so that scores differ between pairs."""
    g = th.Generator().manual_seed(seed)
    with th.no_grad():
        for p in net.parameters():
            p.copy_(th.randn(p.shape, generator=g) * 0.3)


def test_noop_probability_at_the_start_is_the_configured_one() -> None:
    env = ClusterEnvV1("small", skip_idle_rounds=True)
    model = MaskablePPO(
        MaskablePairScorerPolicy,
        env,
        policy_kwargs={"layout": env.layout.as_dict(), "noop_prob": 0.9},
        n_steps=64,
        device="cpu",
    )
    seen = 0
    for obs, mask in _states(env, 1_000_003, 30):
        p = action_probabilities(model.policy, obs, mask)
        structural = action_probabilities(model.policy, obs, None)
        assert p.sum() == pytest.approx(1.0, abs=1e-5)
        if mask.sum() > 1:
            seen += 1
            # without the env's mask: exactly noop_prob, whatever the cluster's size
            assert structural[0] == pytest.approx(0.9, abs=1e-5)
            # the env's mask only removes moves: noop's share can only grow
            assert p[0] >= 0.9 - 1e-5
        else:
            assert p[0] == pytest.approx(1.0)
    assert seen > 5


def _permute_guests(lay: L.Layout, obs: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Slot ``i`` of the result holds guest ``perm[i]``."""
    out = obs.copy()
    mg, mn = lay.max_guests, lay.max_nodes
    gb = out[lay.guest_offset : lay.pair_offset].reshape(-1, mg)
    gb[:] = obs[lay.guest_offset : lay.pair_offset].reshape(-1, mg)[:, perm]
    pb = out[lay.pair_offset :].reshape(-1, mg, mn)
    pb[:] = obs[lay.pair_offset :].reshape(-1, mg, mn)[:, perm, :]
    return out


def _permute_nodes(lay: L.Layout, obs: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Slot ``j`` of the result holds node ``perm[j]``; guests' node/target indices follow."""
    out = obs.copy()
    mg, mn = lay.max_guests, lay.max_nodes
    nb = out[lay.node_offset : lay.guest_offset].reshape(-1, mn)
    nb[:] = obs[lay.node_offset : lay.guest_offset].reshape(-1, mn)[:, perm]
    pb = out[lay.pair_offset :].reshape(-1, mg, mn)
    pb[:] = obs[lay.pair_offset :].reshape(-1, mg, mn)[:, :, perm]
    inverse = np.argsort(perm)
    gb = out[lay.guest_offset : lay.pair_offset].reshape(-1, mg)
    for name in ("node", "target"):
        row = gb[L.GU_INDEX[name]]
        idx = np.round(row * mn).astype(int) - 1
        row[:] = np.where(idx >= 0, (inverse[np.maximum(idx, 0)] + 1) / mn, 0.0)
    return out


def test_scores_are_permutation_equivariant() -> None:
    env = ClusterEnvV1("small")
    lay = env.layout
    net = PairScorerNet(lay.as_dict(), hidden=16)
    _randomize(net, 0)
    states = _states(env, 1_000_004, 40)
    obs = np.stack([s[0] for s in states[-3:]])
    n = len(env.view.node_names)
    g = len(env.view.sids)
    rng = np.random.default_rng(0)
    gperm = np.concatenate([rng.permutation(g), np.arange(g, lay.max_guests)])
    nperm = np.concatenate([rng.permutation(n), np.arange(n, lay.max_nodes)])
    with th.no_grad():
        base = net.forward_actor(th.as_tensor(obs)).numpy()
        value = net.forward_critic(th.as_tensor(obs)).numpy()
        pg = np.stack([_permute_guests(lay, o, gperm) for o in obs])
        pn = np.stack([_permute_nodes(lay, o, nperm) for o in obs])
        out_g = net.forward_actor(th.as_tensor(pg)).numpy()
        out_n = net.forward_actor(th.as_tensor(pn)).numpy()
        value_g = net.forward_critic(th.as_tensor(pg)).numpy()
    grid = base[:, 1:].reshape(-1, lay.max_guests, lay.max_nodes)
    np.testing.assert_allclose(out_g[:, 0], base[:, 0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(
        out_g[:, 1:].reshape(grid.shape), grid[:, gperm, :], rtol=1e-5, atol=1e-4
    )
    np.testing.assert_allclose(out_n[:, 0], base[:, 0], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(
        out_n[:, 1:].reshape(grid.shape), grid[:, :, nperm], rtol=1e-5, atol=1e-4
    )
    np.testing.assert_allclose(value_g, value, rtol=1e-5, atol=1e-4)
    # and the scores do differ between pairs (else equivariance would be vacuous)
    real = grid[-1, :g, :n]
    assert np.ptp(real[real > IMPOSSIBLE / 2]) > 1e-3


def test_structural_mask_covers_padding_own_node_and_busy_pipeline() -> None:
    env = ClusterEnvV1("small")
    lay = env.layout
    net = PairScorerNet(lay.as_dict(), hidden=16)
    _randomize(net, 1)
    rng = np.random.default_rng(5)
    obs, _ = env.reset(seed=1_000_005)
    busy = 0
    for _ in range(60):
        mask = env.action_masks()
        view = env.view
        with th.no_grad():
            logits = net.forward_actor(th.as_tensor(obs[None, :]))[0].numpy()
        impossible = logits[1:] <= IMPOSSIBLE / 2
        # every move the environment allows is structurally possible
        assert not (mask[1:] & impossible).any()
        grid = impossible.reshape(lay.max_guests, lay.max_nodes)
        g, n = len(view.sids), len(view.node_names)
        assert grid[g:].all() and grid[:, n:].all()
        assert grid[np.arange(g), np.asarray(view.guest_node)].all()
        if view.motion_active:
            busy += 1
            assert impossible.all()
        valid = np.flatnonzero(mask[1:]) + 1
        a = int(valid[rng.integers(valid.size)]) if valid.size and rng.random() < 0.1 else 0
        obs, *_ = env.step(a)
    assert busy > 0


@pytest.mark.parametrize("algo", ["MaskablePPO", "PPO"])
def test_learns_saves_and_loads_by_name(algo: str, tmp_path: Path) -> None:
    env = ClusterEnvV1("small", skip_idle_rounds=True, episode_seconds=300)
    cls = MaskablePPO if algo == "MaskablePPO" else PPO
    policy = policy_class("PairScorer", algo == "MaskablePPO")
    assert policy is (MaskablePairScorerPolicy if algo == "MaskablePPO" else PairScorerPolicy)
    model = cls(
        policy,
        env,
        policy_kwargs={"layout": env.layout.as_dict(), "hidden": 16},
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        seed=0,
        device="cpu",
    )
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(64)
    assert any(not th.equal(a, b) for a, b in zip(before, model.policy.parameters(), strict=True))
    model.save(tmp_path / "m.zip")
    loaded = cls.load(tmp_path / "m.zip", device="cpu", custom_objects={"policy_class": policy})
    assert type(loaded.policy) is policy
    obs, _ = env.reset(seed=1)
    kwargs = {"action_masks": env.action_masks()} if algo == "MaskablePPO" else {}
    a = model.predict(obs, deterministic=True, **kwargs)[0]
    b = loaded.predict(obs, deterministic=True, **kwargs)[0]
    assert a == b
    # the constructor arguments saved are plain data
    kw = loaded.policy_kwargs
    assert kw["layout"] == env.layout.as_dict() and kw["hidden"] == 16


def test_wrong_observation_layout_is_refused() -> None:
    env = ClusterEnvV1("small")
    with pytest.raises(ValueError, match="layout v1"):
        MaskablePPO(
            MaskablePairScorerPolicy,
            env,
            policy_kwargs={"layout": {"version": "v1", "max_nodes": 8, "max_guests": 100}},
            device="cpu",
        )
    with pytest.raises(ValueError, match="v0"):
        PairScorerNet({"version": "v0", "max_nodes": 4, "max_guests": 40})


def test_greedy_action_moves_when_moving_at_all_is_more_probable() -> None:
    # noop 0.3; five moves 0.14 each: noop is the single most probable action, moving is 70 %
    p = th.tensor([[0.3] + [0.14] * 5, [0.6] + [0.08] * 5])
    logits = th.log(p)
    assert logits[0].argmax() == 0
    acts = greedy_actions(logits).tolist()
    assert acts[0] in range(1, 6)
    assert acts[1] == 0
    # masked moves (−inf) take no part
    masked = logits.clone()
    masked[0, 1:4] = -th.inf
    assert greedy_actions(masked).tolist()[0] == 0
