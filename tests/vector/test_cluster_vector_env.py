"""pvegym.vector: batched Gymnasium 1.x semantics, and each sub-environment's trajectory bit for bit
the single environment's with the same seed, across automatic resets."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import pvegym  # noqa: F401  (registers the environments)
from pvegym.env.cluster_env import ClusterEnv
from pvegym.errors import ConfigError
from pvegym.vector import ClusterVectorEnv

N = 3
#: 6 decisions an episode: a 20-step run crosses three automatic resets per sub-environment
KWARGS: dict[str, Any] = {"scenario": "small", "episode_seconds": 60.0}


def _singles(env_id: str) -> list[gymnasium.Env[Any, Any]]:
    return [gymnasium.make(env_id, **KWARGS) for _ in range(N)]


def _pick(mask: np.ndarray, u: float) -> int:
    """A valid action from a uniform draw (random moves exercise the motion path)."""
    valid = np.flatnonzero(mask)
    return int(valid[min(int(u * valid.size), valid.size - 1)])


@pytest.mark.parametrize("version", ["v0", "v1"])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_sub_environments_replay_single_environments_bit_for_bit(
    version: str, mode: AutoresetMode
) -> None:
    env_id = f"pvegym/Cluster-{version}"
    venv = gymnasium.make_vec(env_id, num_envs=N, autoreset_mode=mode, **KWARGS)
    assert isinstance(venv, ClusterVectorEnv)
    assert venv.metadata["autoreset_mode"] is mode
    singles = _singles(env_id)
    seed = 17
    obs, infos = venv.reset(seed=seed)
    single_obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    np.testing.assert_array_equal(obs, np.stack(single_obs))
    np.testing.assert_array_equal(infos["t"], [env.unwrapped.sim.t for env in singles])
    pending = np.zeros(N, dtype=bool)  # NEXT_STEP: this sub-environment resets on this step
    rng = np.random.default_rng(3)
    ends = 0
    for _ in range(20):
        masks = venv.action_masks()
        assert masks.shape == (N, venv.n_actions) and masks.dtype == np.bool_
        assert masks[:, 0].all()
        expect_masks = [env.unwrapped.action_masks() for env in singles]
        np.testing.assert_array_equal(masks, np.stack(expect_masks))
        actions = np.array([_pick(m, u) for m, u in zip(masks, rng.random(N), strict=True)])
        obs, rewards, terms, truncs, infos = venv.step(actions)
        assert obs.shape == (N, *venv.single_observation_space.shape)
        assert rewards.shape == terms.shape == truncs.shape == (N,)
        for i, env in enumerate(singles):
            if pending[i]:
                o, _ = env.reset()
                r, te, tr = 0.0, False, False
            else:
                o, r, te, tr, info = env.step(actions[i])
                assert infos["invalid_action"][i] == info["invalid_action"]
                if te or tr:
                    ends += 1
                    if mode is AutoresetMode.SAME_STEP:
                        np.testing.assert_array_equal(infos["final_obs"][i], o)
                        final = infos["final_info"]
                        assert final["_moves"][i] and final["moves"][i] == info["moves"]
                        assert final["stall_cpu_s"][i] == info["stall_cpu_s"]
                        o, _ = env.reset()
                    else:
                        assert infos["moves"][i] == info["moves"]
            np.testing.assert_array_equal(obs[i], o)
            assert rewards[i] == r and terms[i] == te and truncs[i] == tr
            pending[i] = mode is AutoresetMode.NEXT_STEP and (te or tr)
    assert ends >= 2 * N  # the run crossed automatic resets


def test_returned_arrays_are_copies_unless_asked_not_to() -> None:
    venv = ClusterVectorEnv(2, **KWARGS)
    obs, _ = venv.reset(seed=0)
    obs[:] = -1.0
    nxt, *_ = venv.step(np.zeros(2, dtype=np.int64))
    assert (nxt >= 0).all()
    shared = ClusterVectorEnv(2, copy=False, **KWARGS)
    a, _ = shared.reset(seed=0)
    b, *_ = shared.step(np.zeros(2, dtype=np.int64))
    assert a is b


def test_disabled_autoreset_resets_by_mask() -> None:
    venv = ClusterVectorEnv(2, autoreset_mode="disabled", scenario="small", episode_seconds=20.0)
    venv.reset(seed=0)
    truncs = np.zeros(2, dtype=bool)
    while not truncs.all():
        *_, truncs, _ = venv.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="reset them first"):
        venv.step(np.zeros(2, dtype=np.int64))
    venv.reset(options={"reset_mask": np.array([True, True])})
    venv.step(np.zeros(2, dtype=np.int64))


def test_bad_arguments_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="num_envs"):
        ClusterVectorEnv(0, **KWARGS)
    with pytest.raises(ConfigError, match="autoreset_mode"):
        ClusterVectorEnv(1, autoreset_mode="sometimes", **KWARGS)
    with pytest.raises(ConfigError, match="spaces differ"):
        ClusterVectorEnv(
            env_fns=[lambda: ClusterEnv("small"), lambda: ClusterEnv("contended-3node")]
        )
    with pytest.raises(ConfigError, match="not a ClusterEnv"):
        ClusterVectorEnv(env_fns=[lambda: gymnasium.make("CartPole-v1")])


def test_batched_infos_equal_gymnasiums_batching() -> None:
    venv = ClusterVectorEnv(3, **KWARGS)
    common = [{"rounds": 1, "t": 10.0 * i, "ok": i == 1} for i in range(3)]
    mixed = [{"rounds": 1}, {"rounds": 2, "episode": {"r": 1.5}}, {"rounds": 3.0}]
    for infos in (common, mixed):
        expect: dict[str, Any] = {}
        for i, info in enumerate(infos):
            expect = venv._add_info(expect, info, i)
        got = venv._batch_infos(infos)
        assert got.keys() == expect.keys()
        for key, value in expect.items():
            if isinstance(value, dict):
                assert value.keys() == got[key].keys()
                continue
            np.testing.assert_array_equal(got[key], value)
            assert got[key].dtype == value.dtype
