"""The Gymnasium environment over the pvegym model (``MODEL.md`` §8).

Importing this package registers ``pvegym/Cluster-v0`` with Gymnasium::

    import gymnasium
    import pvegym.env  # noqa: F401  (registers pvegym/Cluster-v0)

    env = gymnasium.make("pvegym/Cluster-v0", scenario="small", skip_idle_rounds=True)

Keyword arguments of ``gymnasium.make`` go to :class:`~pvegym.env.cluster_env.ClusterEnv`.
"""

from __future__ import annotations

import gymnasium

from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS, ClusterEnv

ENV_ID = "pvegym/Cluster-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="pvegym.env.cluster_env:ClusterEnv")

__all__ = ["DEFAULT_REWARD_WEIGHTS", "ENV_ID", "ClusterEnv"]
