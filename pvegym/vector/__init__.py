"""N pvegym clusters stepped together: a Gymnasium ``VectorEnv``
(:class:`~pvegym.vector.cluster_vector_env.ClusterVectorEnv`) and its stable-baselines3 ``VecEnv``
adapter (:mod:`pvegym.vector.sb3`, imported on its own: it loads PyTorch)."""

from pvegym.vector.cluster_vector_env import ClusterVectorEnv, make_cluster_v0, make_cluster_v1

__all__ = ["ClusterVectorEnv", "make_cluster_v0", "make_cluster_v1"]
