"""stable-baselines3's ``VecEnv`` over a :class:`~pvegym.vector.ClusterVectorEnv`: PPO,
MaskablePPO, A2C and DQN train on N clusters in one process.

SB3's conventions differ from Gymnasium 1.x's in three ways, handled here and nowhere else:
autoreset is same-step with the last observation in ``info["terminal_observation"]`` (the vector
env runs in ``SAME_STEP`` mode), ``dones`` is ``terminated or truncated`` with
``info["TimeLimit.truncated"]`` telling a cut-off episode from an ended one (for bootstrapping),
and infos are a list of per-environment dicts. MaskablePPO fetches masks with
``env_method("action_masks")``: answered from the vector env's one (N, A) array.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from numpy.typing import NDArray
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from pvegym.vector.cluster_vector_env import ClusterVectorEnv, EnvFn


class ClusterSB3VecEnv(VecEnv):
    """SB3 ``VecEnv`` of N cluster environments built by ``env_fns`` (see the module docstring)."""

    def __init__(self, env_fns: Sequence[EnvFn]) -> None:
        self.venv = ClusterVectorEnv(
            env_fns=env_fns, autoreset_mode=AutoresetMode.SAME_STEP, copy=False
        )
        self.envs = self.venv.envs
        super().__init__(
            self.venv.num_envs, self.venv.single_observation_space, self.venv.single_action_space
        )
        self.metadata = self.envs[0].metadata
        self._actions: NDArray[np.int64] = np.zeros(self.num_envs, dtype=np.int64)

    def reset(self) -> VecEnvObs:
        venv = self.venv
        for i, env in enumerate(self.envs):
            options = self._options[i] or None
            obs, self.reset_infos[i] = env.reset(seed=self._seeds[i], options=options)
            venv._observations[i] = obs
        venv._autoreset_envs[:] = False
        self._reset_seeds()
        self._reset_options()
        return venv._observations.copy()

    def step_async(self, actions: NDArray[Any]) -> None:
        self._actions = np.asarray(actions).reshape(self.num_envs)

    def step_wait(self) -> VecEnvStepReturn:
        venv = self.venv
        infos = venv.step_envs(self._actions)
        dones = venv._terminations | venv._truncations
        for i in np.flatnonzero(dones):
            reset_info = infos[i]
            info = dict(reset_info["final_info"])
            info["terminal_observation"] = reset_info["final_obs"]
            info["TimeLimit.truncated"] = bool(venv._truncations[i] and not venv._terminations[i])
            infos[i] = info
            self.reset_infos[i] = {
                k: v for k, v in reset_info.items() if k not in ("final_obs", "final_info")
            }
        return (
            venv._observations.copy(),
            venv._rewards.astype(np.float32),
            dones,
            infos,
        )

    def action_masks(self) -> NDArray[np.bool_]:
        """(N, A) bool, as :meth:`ClusterVectorEnv.action_masks`."""
        masks: NDArray[np.bool_] = self.venv.action_masks()
        return masks.copy()

    def close(self) -> None:
        self.venv.close()

    def get_images(self) -> Sequence[NDArray[Any] | None]:
        return [env.render() for env in self.envs]  # type: ignore[misc]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [self.envs[i].get_wrapper_attr(attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self.envs[i], attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        if method_name == "action_masks" and indices is None and not method_args:
            return list(self.action_masks())  # rows of one array (sb3-contrib np.stacks them)
        fns: list[Callable[..., Any]] = [
            self.envs[i].get_wrapper_attr(method_name) for i in self._get_indices(indices)
        ]
        return [fn(*method_args, **method_kwargs) for fn in fns]

    def env_is_wrapped(
        self,
        wrapper_class: type[gymnasium.Wrapper[Any, Any, Any, Any]],
        indices: VecEnvIndices = None,
    ) -> list[bool]:
        return [
            env_util.is_wrapped(self.envs[i], wrapper_class) for i in self._get_indices(indices)
        ]


__all__ = ["ClusterSB3VecEnv"]
