"""pvegym.vector.sb3: PPO, MaskablePPO, A2C and DQN train on N clusters in one process, with SB3's
conventions (same-step reset, terminal_observation, TimeLimit.truncated, (N, A) masks)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.monitor import Monitor

from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.vector.sb3 import ClusterSB3VecEnv

#: 5 decisions an episode: a few hundred steps end dozens of episodes
KWARGS: dict[str, Any] = {"scenario": "contended-3node", "episode_seconds": 50.0}


def _venv(n: int = 2) -> ClusterSB3VecEnv:
    return ClusterSB3VecEnv([lambda: Monitor(ClusterEnvV1(**KWARGS)) for _ in range(n)])


def test_sb3_conventions() -> None:
    venv = _venv()
    venv.seed(5)
    obs = venv.reset()
    single = ClusterEnvV1(**KWARGS)
    np.testing.assert_array_equal(obs[1], single.reset(seed=6)[0])
    masks = np.stack(venv.env_method("action_masks"))
    assert masks.shape == (2, single.n_actions) and masks[:, 0].all()
    np.testing.assert_array_equal(masks[1], single.action_masks())
    for _ in range(5):
        venv.step_async(np.zeros(2, dtype=np.int64))
        obs, rewards, dones, infos = venv.step_wait()
        o, r, _, truncated, _ = single.step(0)
        assert rewards.dtype == np.float32 and rewards[1] == np.float32(r)
    assert truncated and dones.all()
    for info in infos:
        assert info["TimeLimit.truncated"] and "episode" in info and "moves" in info
    np.testing.assert_array_equal(infos[1]["terminal_observation"], o)
    np.testing.assert_array_equal(obs[1], single.reset()[0])  # reset at once, same draw


@pytest.mark.parametrize("algo", [PPO, MaskablePPO, A2C, DQN])
def test_algorithms_train_on_the_vector_env(algo: Any) -> None:
    venv = _venv()
    kwargs: dict[str, Any] = {"policy_kwargs": {"net_arch": [32]}, "seed": 0, "device": "cpu"}
    if algo in (PPO, MaskablePPO):
        kwargs.update(n_steps=64, batch_size=64, n_epochs=1)
    elif algo is A2C:
        kwargs.update(n_steps=8)
    else:
        kwargs.update(buffer_size=1000, learning_starts=64, train_freq=4)
    model = algo("MlpPolicy", venv, **kwargs)
    model.learn(total_timesteps=256)
    assert model.num_timesteps >= 256
    episodes = sum(len(m) for m in venv.get_attr("episode_returns"))
    assert episodes >= 256 // 5 - 2  # the adapter reset ended episodes (Monitor saw them end)
    venv.close()


def test_pvegym_train_uses_the_vector_env_by_default() -> None:
    from stable_baselines3.common.vec_env import DummyVecEnv

    from pvegym.learning.train import make_vec_env
    from pvegym.learning.train_config import TrainConfig

    assert TrainConfig.__dataclass_fields__["vec_env"].default == "auto"
    fns = [lambda: ClusterEnvV1(**KWARGS) for _ in range(2)]
    assert isinstance(make_vec_env("auto", fns), ClusterSB3VecEnv)
    assert isinstance(make_vec_env("vector", fns), ClusterSB3VecEnv)
    assert isinstance(make_vec_env("dummy", fns), DummyVecEnv)
