"""MaskablePPO (sb3-contrib) trains on the environment through subprocess vector envs."""

import functools

import pytest

pytest.importorskip("sb3_contrib")

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.vec_env import SubprocVecEnv

from pvegym.env.cluster_env import ClusterEnv


def test_maskable_ppo_runs_with_subproc_envs() -> None:
    torch.set_num_threads(1)
    make = functools.partial(ClusterEnv, "small", episode_seconds=600.0, skip_idle_rounds=True)
    venv = SubprocVecEnv([make, make])
    try:
        venv.seed(0)
        model = MaskablePPO(
            "MlpPolicy",
            venv,
            n_steps=256,
            batch_size=128,
            n_epochs=2,
            seed=0,
            verbose=0,
            policy_kwargs={"net_arch": [64, 64]},
        )
        model.learn(total_timesteps=2048)
        obs = venv.reset()
        assert isinstance(obs, np.ndarray)
        masks = venv.env_method("action_masks")
        actions, _ = model.predict(obs, action_masks=np.stack(masks), deterministic=True)
        assert all(m[a] for m, a in zip(masks, actions, strict=True))
    finally:
        venv.close()
