"""The Gymnasium environment over the pvegym model (``MODEL.md`` §8).

Importing this package registers ``pvegym/Cluster-v0`` and ``pvegym/Cluster-v1`` with Gymnasium::

    import gymnasium
    import pvegym.env  # noqa: F401  (registers the environments)

    env = gymnasium.make("pvegym/Cluster-v1", scenario="small", skip_idle_rounds=True)

Keyword arguments of ``gymnasium.make`` go to :class:`~pvegym.env.cluster_env.ClusterEnv` (v0)
or :class:`~pvegym.env.cluster_env_v1.ClusterEnvV1` (v1: the observation of
:mod:`pvegym.env.observation_layout`). v0 stays for the agents trained on it.
"""

from __future__ import annotations

import gymnasium

from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS, ClusterEnv
from pvegym.env.cluster_env_v1 import ClusterEnvV1

ENV_ID = "pvegym/Cluster-v0"
ENV_ID_V1 = "pvegym/Cluster-v1"
#: observation version -> environment class (what a train file's ``env.version`` selects)
ENV_CLASSES: dict[str, type[ClusterEnv]] = {"v0": ClusterEnv, "v1": ClusterEnvV1}

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="pvegym.env.cluster_env:ClusterEnv")
if ENV_ID_V1 not in gymnasium.registry:
    gymnasium.register(id=ENV_ID_V1, entry_point="pvegym.env.cluster_env_v1:ClusterEnvV1")

__all__ = [
    "DEFAULT_REWARD_WEIGHTS",
    "ENV_CLASSES",
    "ENV_ID",
    "ENV_ID_V1",
    "ClusterEnv",
    "ClusterEnvV1",
]
