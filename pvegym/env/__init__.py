"""The Gymnasium environment over the pvegym model (``docs/model.md``, ``docs/reward.md``).

``import pvegym`` registers ``pvegym/Cluster-v0`` and ``pvegym/Cluster-v1`` with Gymnasium
(:mod:`pvegym.registration`)::

    import gymnasium as gym
    import pvegym

    gym.register_envs(pvegym)  # Gymnasium's idiom: a no-op that keeps the import "used"

    env = gym.make("pvegym/Cluster-v1", scenario="small", skip_idle_rounds=True)

Keyword arguments of ``gymnasium.make`` go to :class:`~pvegym.env.cluster_env.ClusterEnv` (v0)
or :class:`~pvegym.env.cluster_env_v1.ClusterEnvV1` (v1: the observation of
:mod:`pvegym.env.observation_layout`). v0 stays for the agents trained on it.
"""

from __future__ import annotations

from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS, ClusterEnv
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.registration import register_environments

ENV_ID = "pvegym/Cluster-v0"
ENV_ID_V1 = "pvegym/Cluster-v1"
#: observation version -> environment class (what a train file's ``env.version`` selects)
ENV_CLASSES: dict[str, type[ClusterEnv]] = {"v0": ClusterEnv, "v1": ClusterEnvV1}

register_environments()

__all__ = [
    "DEFAULT_REWARD_WEIGHTS",
    "ENV_CLASSES",
    "ENV_ID",
    "ENV_ID_V1",
    "ClusterEnv",
    "ClusterEnvV1",
]
