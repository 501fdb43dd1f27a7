"""The Gymnasium environment over the pvegym model (``MODEL.md`` §8).

``import pvegym`` registers ``pvegym/Cluster-v0`` with Gymnasium (:mod:`pvegym.registration`)::

    import gymnasium as gym
    import pvegym

    gym.register_envs(pvegym)  # Gymnasium's idiom: a no-op that keeps the import "used"

    env = gym.make("pvegym/Cluster-v0", scenario="small", skip_idle_rounds=True)

Keyword arguments of ``gymnasium.make`` go to :class:`~pvegym.env.cluster_env.ClusterEnv`.
"""

from __future__ import annotations

from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS, ClusterEnv
from pvegym.registration import register_environments

ENV_ID = "pvegym/Cluster-v0"

register_environments()

__all__ = ["DEFAULT_REWARD_WEIGHTS", "ENV_ID", "ClusterEnv"]
