"""``ClusterVectorEnv``: N pvegym clusters stepped together in one process, as a Gymnasium 1.x
``VectorEnv``.

Why not Gymnasium's ``SyncVectorEnv``: a learner of this environment needs the action masks of
all N clusters every step (MaskablePPO), and wants them — like the observations — as one
(N, ·) array written in place, not a list gathered env by env; and stable-baselines3's own
vector envs either copy every observation through a dict buffer (``DummyVecEnv``) or pay a pipe
round trip per step and worker (``SubprocVecEnv``: measured 29–35 % of a MaskablePPO run waiting
on it, issue 20). Each sub-environment is an ordinary ``ClusterEnv`` (``Cluster-v0`` or
``Cluster-v1``, possibly wrapped, e.g. by ``Monitor``) driven through its public API only: the
same ``reset``/``step``/``action_masks`` calls, in the same order, as a single environment —
which is why each sub-environment's trajectory is bit-identical to a single environment's with
the same seed (``tests/vector/test_cluster_vector_env.py``) and why nothing here re-implements the
model or the HA manager.

## Autoreset

``autoreset_mode`` (``metadata["autoreset_mode"]``) is Gymnasium's
:class:`~gymnasium.vector.AutoresetMode`:

* ``NEXT_STEP`` (default, Gymnasium's own default): the step that ends an episode returns its
  last observation; the *next* ``step`` resets that sub-environment (its action is ignored) and
  returns the first observation of the new episode with reward 0 and ``terminated = truncated =
  False``.
* ``SAME_STEP``: the step that ends an episode resets the sub-environment at once and returns the
  new episode's first observation; the last one is in ``infos["final_obs"]`` and the last
  step's info in ``infos["final_info"]`` (with ``infos["_final_obs"]`` marking which). This is
  stable-baselines3's convention (:class:`pvegym.vector.sb3.ClusterSB3VecEnv` uses it).
* ``DISABLED``: the caller resets ended sub-environments itself (``reset(options={"reset_mask":
  mask})``).

Sub-environment ``i`` of ``reset(seed=s)`` is reset with seed ``s + i`` (Gymnasium's
convention; a list gives each its own); unseeded resets draw from each sub-environment's own RNG.

## Batched arrays

``step`` returns observations (N, obs) float32, rewards (N,) float64, terminations and
truncations (N,) bool, and infos batched as Gymnasium does (``info[key]`` an (N,) array with
``info["_key"]`` marking the sub-environments that reported it). ``action_masks()`` is (N, A)
bool. The returned arrays are fresh copies unless ``copy=False`` (then the buffers are reused by
the next step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers import TimeLimit
from numpy.typing import NDArray

from pvegym.env.cluster_env import ClusterEnv
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.errors import ConfigError

EnvFn = Callable[[], gymnasium.Env[Any, Any]]
#: info values Gymnasium batches into a plain (N,) array of their own type
_SCALARS = (int, float, bool)


def _autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
    if isinstance(value, AutoresetMode):
        return value
    for mode in AutoresetMode:
        if value in (mode.value, mode.name, mode.name.lower()):
            return mode
    allowed = ", ".join(m.name.lower() for m in AutoresetMode)
    raise ConfigError("autoreset_mode", f"{value!r} is not allowed (allowed: {allowed})")


class ClusterVectorEnv(VectorEnv[NDArray[np.float32], NDArray[np.int64], NDArray[Any]]):
    """N ``pvegym`` cluster environments stepped together (see the module docstring).

    Either ``num_envs`` copies of ``env_class(**env_kwargs)`` (``Cluster-v1`` by default; what
    ``gymnasium.make_vec("pvegym/Cluster-v1", num_envs=N)`` builds), or ``env_fns``: one
    constructor per sub-environment, each returning a (possibly wrapped) ``ClusterEnv`` with the
    same spaces — how ``pvegym train`` adds its per-environment ``Monitor``. ``max_episode_steps``
    (a positive int; ``gymnasium.make_vec`` passes the registered one) wraps each constructed
    copy in Gymnasium's ``TimeLimit`` exactly as ``gymnasium.make`` does; ``None`` or ``-1``: none
    (the environment truncates at its scenario's end itself).

    Each sub-environment hands over its own observation buffer (``copy_observation = False``)
    and the batch copies it at once: a wrapper in ``env_fns`` that keeps observations across
    steps (a frame stack) must copy them.
    """

    metadata: dict[str, Any] = {  # noqa: RUF012
        "autoreset_mode": AutoresetMode.NEXT_STEP,
        "render_modes": ["ansi", "rgb_array"],
    }

    def __init__(
        self,
        num_envs: int | None = None,
        *,
        env_fns: Sequence[EnvFn] | None = None,
        env_class: type[ClusterEnv] = ClusterEnvV1,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        copy: bool = True,
        max_episode_steps: int | None = None,
        **env_kwargs: Any,
    ) -> None:
        if env_fns is None:
            if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
                raise ConfigError("num_envs", f"must be an integer >= 1, not {num_envs!r}")

            def make() -> gymnasium.Env[Any, Any]:
                env: gymnasium.Env[Any, Any] = env_class(**env_kwargs)
                if max_episode_steps is not None and max_episode_steps > 0:
                    env = TimeLimit(env, max_episode_steps)
                return env

            env_fns = [make] * num_envs
        elif env_kwargs or (num_envs is not None and num_envs != len(env_fns)):
            raise ConfigError("env_fns", "give either env_fns or num_envs with env_kwargs")
        if not env_fns:
            raise ConfigError("env_fns", "needs at least one environment")
        self.envs: list[gymnasium.Env[Any, Any]] = [fn() for fn in env_fns]
        bases = [env.unwrapped for env in self.envs]
        if len({id(b) for b in bases}) != len(bases):
            raise ConfigError("env_fns", "each constructor must build a new environment")
        for i, base in enumerate(bases):
            if not isinstance(base, ClusterEnv):
                raise ConfigError(
                    f"env_fns[{i}]", f"builds {type(base).__name__}, not a ClusterEnv"
                )
        first = self.envs[0]
        for i, env in enumerate(self.envs[1:], 1):
            if (
                env.observation_space != first.observation_space
                or env.action_space != first.action_space
            ):
                raise ConfigError(
                    f"env_fns[{i}]", "spaces differ from env_fns[0]'s (same scenario family?)"
                )
        self.num_envs = len(self.envs)
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.metadata = {**type(self).metadata, "autoreset_mode": self.autoreset_mode}
        self.copy = copy
        self.render_mode = first.render_mode
        self.spec = first.spec

        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        n = self.num_envs
        shape = self.single_observation_space.shape
        assert shape is not None
        self.n_actions = int(self.single_action_space.n)  # type: ignore[attr-defined]
        self._observations = np.zeros((n, *shape), dtype=np.float32)
        self._rewards = np.zeros(n, dtype=np.float64)
        self._terminations = np.zeros(n, dtype=np.bool_)
        self._truncations = np.zeros(n, dtype=np.bool_)
        self._autoreset_envs = np.zeros(n, dtype=np.bool_)
        self._masks = np.zeros((n, self.n_actions), dtype=np.bool_)
        self.bases: list[ClusterEnv] = [b for b in bases if isinstance(b, ClusterEnv)]
        for base in self.bases:  # each observation is copied into the batch at once: no copy before
            base.copy_observation = False
        # bound once: the outermost wrapper's action_masks (a wrapper may time or filter it)
        self._mask_fns: list[Callable[[], NDArray[np.bool_]]] = [
            env.get_wrapper_attr("action_masks") for env in self.envs
        ]

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        n = self.num_envs
        seeds: list[int | None]
        if seed is None:
            seeds = [None] * n
        elif isinstance(seed, int | np.integer):
            seeds = [int(seed) + i for i in range(n)]
        else:
            seeds = list(seed)
            if len(seeds) != n:
                raise ValueError(f"{len(seeds)} seeds for {n} environments")
        options = dict(options) if options else {}
        reset_mask = options.pop("reset_mask", None)
        if reset_mask is None:
            which = np.ones(n, dtype=np.bool_)
        else:
            which = np.asarray(reset_mask)
            if which.shape != (n,) or which.dtype != np.bool_ or not which.any():
                raise ValueError(
                    f"options['reset_mask'] must be a bool array of shape ({n},) with a True value"
                )
        infos: dict[str, Any] = {}
        for i in np.flatnonzero(which):
            obs, info = self.envs[i].reset(seed=seeds[i], options=options or None)
            self._observations[i] = obs
            mask = info.pop("action_mask", None)
            if mask is not None:
                self._masks[i] = mask
            infos = self._add_info(infos, info, int(i))
        self._terminations[which] = False
        self._truncations[which] = False
        self._autoreset_envs[which] = False
        infos["action_mask"] = self._masks.copy()
        infos["_action_mask"] = which.copy()
        return self._out(self._observations), infos

    def step(
        self, actions: NDArray[np.int64] | Sequence[int]
    ) -> tuple[
        NDArray[np.float32],
        NDArray[np.float64],
        NDArray[np.bool_],
        NDArray[np.bool_],
        dict[str, Any],
    ]:
        infos = self._batch_infos(self.step_envs(actions))
        infos["action_mask"] = self._masks.copy()  # (N, A): each sub-environment's info's mask
        infos["_action_mask"] = np.ones(self.num_envs, dtype=np.bool_)
        return (
            self._out(self._observations),
            self._out(self._rewards),
            self._out(self._terminations),
            self._out(self._truncations),
            infos,
        )

    def step_envs(self, actions: NDArray[np.int64] | Sequence[int]) -> list[dict[str, Any]]:
        """Step every sub-environment (with this env's autoreset) into the batch buffers and
        return the per-environment infos unbatched (for adapters that want them as a list);
        ``SAME_STEP`` puts ``final_obs`` and ``final_info`` into an ending one's info."""
        acts = np.asarray(actions)
        if acts.shape != (self.num_envs,):
            raise ValueError(f"actions of shape {acts.shape}, expected ({self.num_envs},)")
        action_list = acts.tolist()
        obs_buf, rew, term, trunc = (
            self._observations,
            self._rewards,
            self._terminations,
            self._truncations,
        )
        mode = self.autoreset_mode
        next_step = mode is AutoresetMode.NEXT_STEP
        same_step = mode is AutoresetMode.SAME_STEP
        pending = self._autoreset_envs
        masks = self._masks
        if mode is AutoresetMode.DISABLED and pending.any():
            raise RuntimeError(
                f"sub-environments {np.flatnonzero(pending).tolist()} ended: reset them first "
                "(autoreset_mode=disabled)"
            )
        infos: list[dict[str, Any]] = []
        for i, env in enumerate(self.envs):
            if next_step and pending[i]:
                obs, info = env.reset()
                rew[i] = 0.0
                term[i] = trunc[i] = False
            else:
                obs, r, te, tr, info = env.step(action_list[i])
                rew[i], term[i], trunc[i] = r, te, tr
                if same_step and (te or tr):
                    final = {"final_obs": obs.copy(), "final_info": info}
                    obs, info = env.reset()  # as SyncVectorEnv: the reset's info beside them
                    info = {**final, **info}
            obs_buf[i] = obs
            mask = info.pop("action_mask", None)  # batched by step() as infos["action_mask"]
            if mask is not None:
                masks[i] = mask
            infos.append(info)
        np.logical_or(term, trunc, out=pending)
        return infos

    def action_masks(self) -> NDArray[np.bool_]:
        """(N, A) bool: row ``i`` is sub-environment ``i``'s ``action_masks()`` (action 0 is
        always valid). A sub-environment waiting for its ``NEXT_STEP`` reset ignores its action;
        its row is the mask of the episode's last state."""
        masks = self._masks
        for i, fn in enumerate(self._mask_fns):
            masks[i] = fn()
        return masks.copy() if self.copy else masks

    def render(self) -> tuple[Any, ...] | None:
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``name`` of each sub-environment (called with the arguments if callable)."""
        out = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            out.append(attr(*args, **kwargs) if callable(attr) else attr)
        return tuple(out)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return tuple(env.get_wrapper_attr(name) for env in self.envs)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"{len(values)} values for {self.num_envs} environments")
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    # ------------------------------------------------------------------ internals
    def _batch_infos(self, infos: list[dict[str, Any]]) -> dict[str, Any]:
        """Gymnasium's batched infos (``VectorEnv._add_info``'s result); the common step — every
        sub-environment reporting the same scalar keys — in one array per key."""
        first = infos[0]
        keys = first.keys()
        kinds = {k: type(v) for k, v in first.items()}
        if all(kind in _SCALARS for kind in kinds.values()) and all(
            info.keys() == keys and all(type(info[k]) is kinds[k] for k in keys) for info in infos
        ):
            everyone = np.ones(self.num_envs, dtype=np.bool_)
            batched: dict[str, Any] = {}
            for k, kind in kinds.items():
                batched[k] = np.array([info[k] for info in infos], dtype=kind)
                batched[f"_{k}"] = everyone.copy()
            return batched
        out: dict[str, Any] = {}
        for i, info in enumerate(infos):
            out = self._add_info(out, info, i)
        return out

    def _out(self, array: NDArray[Any]) -> NDArray[Any]:
        return array.copy() if self.copy else array


def make_cluster_v0(num_envs: int, **kwargs: Any) -> ClusterVectorEnv:
    """``gymnasium.make_vec("pvegym/Cluster-v0", …)``'s vector entry point."""
    return ClusterVectorEnv(num_envs, env_class=ClusterEnv, **kwargs)


def make_cluster_v1(num_envs: int, **kwargs: Any) -> ClusterVectorEnv:
    """``gymnasium.make_vec("pvegym/Cluster-v1", …)``'s vector entry point."""
    return ClusterVectorEnv(num_envs, env_class=ClusterEnvV1, **kwargs)


__all__ = ["ClusterVectorEnv", "make_cluster_v0", "make_cluster_v1"]
