"""``learned``: a stable-baselines3 / sb3-contrib agent trained by ``pvegym train``, as a balancer.

The agent was trained on ``pvegym/Cluster-v0`` or ``-v1``; here it acts through the
:class:`Balancer` interface, from the :class:`ClusterView` alone: for v0,
:func:`~pvegym.env.view_encoding.encode_view` rebuilds the environment's observation bit for bit
and :func:`~pvegym.env.view_encoding.mask_from_view` its action mask; for v1,
:class:`~pvegym.env.view_encoding_v1.ViewEncoderV1` keeps the HA manager's motion memory from the
views it is handed every round and encodes with the environment's own kernel. So the same model
runs in ``pvegym simulate``, in experiments (``params = {model = "train-maskable-ppo"}``) and
against any source of views.

A model whose policy is not SB3's own (``policy = "PairScorer"`` in its train file) is loaded with
its class resolved by that name (:data:`POLICY_MODULE`), not unpickled from the file.

* Maskable algorithms (MaskablePPO) predict with the mask and never choose a masked action.
* The others may choose a masked action (a guest that is not ``started``, its own node, a busy
  pipeline, a negative-affinity conflict, a padding slot): that is mapped to *no motion* and
  counted in :attr:`LearnedPolicy.masked_actions` — in the environment it would be a no-op too.
* While the pipeline is busy every motion is masked, so the policy answers ``None`` without
  running the network (identical result, ~10× cheaper in migration-heavy episodes).

``model`` is a run name (``results/<name>/model.zip`` with its resolved ``config.json``), a run
directory, or a path to a ``.zip`` (its ``config.json`` is looked up beside it and one directory
up, which covers ``results/<name>/checkpoints/*.zip``). The config gives the algorithm, the padded
space sizes and the training episode length (the ``time_frac`` feature divides by it).
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.env.observation_layout import MemoryOptions
from pvegym.env.view_encoding import encode_view, mask_from_view, negative_partners
from pvegym.env.view_encoding_v1 import ViewEncoderV1
from pvegym.errors import ConfigError
from pvegym.sim.view import ClusterView, Motion

#: algorithm name -> (module, class); the same table as ``pvegym.learning.train_config.ALGOS``
#: (kept here so that the policies layer does not import the training code)
ALGOS: dict[str, tuple[str, str]] = {
    "PPO": ("stable_baselines3", "PPO"),
    "A2C": ("stable_baselines3", "A2C"),
    "DQN": ("stable_baselines3", "DQN"),
    "MaskablePPO": ("sb3_contrib", "MaskablePPO"),
}
MASKABLE = frozenset({"MaskablePPO"})
#: where named policy classes are registered (``POLICY_CLASSES``, ``policy_class``): the training
#: layer; imported only when a model with such a policy is loaded
POLICY_MODULE = "pvegym.learning.pair_policy"
#: where run names are looked up (``results/`` of the working directory unless overridden)
RESULTS_ENV = "PVEGYM_RESULTS"


@dataclass(frozen=True)
class LearnedConfig:
    """``model``: run name, run directory or ``.zip`` path; ``deterministic``: argmax action (else
    sampled from the policy's distribution)."""

    model: str = ""
    deterministic: bool = True


@dataclass(frozen=True)
class ModelInfo:
    """What the policy needs besides the weights, from the run's resolved ``config.json``."""

    path: Path
    algo: str
    max_nodes: int
    max_guests: int
    episode_seconds: float
    policy: str = "MlpPolicy"
    version: str = "v0"
    mask_unmigratable: bool = False
    memory: tuple[tuple[str, float], ...] = ()
    mask_headroom: float | None = None

    def memory_options(self) -> MemoryOptions:
        return MemoryOptions(**dict(self.memory))


def _find_config(zip_path: Path) -> Path | None:
    for d in (zip_path.parent, zip_path.parent.parent):
        if (d / "config.json").is_file():
            return d / "config.json"
    return None


def resolve_model(model: str, path: str = "model") -> ModelInfo:
    """Find a model's ``.zip`` and its resolved config; a missing one is a ConfigError."""
    if not model:
        raise ConfigError(path, "is required (a run name under results/, a run dir or a .zip)")
    p = Path(model)
    candidates = [
        p,
        p / "model.zip",
        Path(os.environ.get(RESULTS_ENV, "results")) / model / "model.zip",
    ]
    zip_path = next((c for c in candidates if c.suffix == ".zip" and c.is_file()), None)
    if zip_path is None:
        raise ConfigError(
            path, f"no trained model {model!r} (looked for {', '.join(map(str, candidates[1:]))})"
        )
    cfg_path = _find_config(zip_path)
    if cfg_path is None:
        raise ConfigError(
            path, f"{zip_path} has no config.json beside it (written by pvegym train)"
        )
    try:
        cfg = json.loads(cfg_path.read_text())
        algo = str(cfg["algo"])
        spaces = cfg["spaces"]
        env = cfg.get("env", {})
        seconds = env.get("episode_seconds")
        if seconds is None:
            seconds = _scenario_duration(str(env.get("scenario", "small")))
        info = ModelInfo(
            zip_path,
            algo,
            int(spaces["max_nodes"]),
            int(spaces["max_guests"]),
            float(seconds),
            str(cfg.get("policy", "MlpPolicy")),
            str(env.get("version", "v0")),
            bool(env.get("mask_unmigratable", False)),
            tuple(sorted((str(k), float(v)) for k, v in (env.get("memory") or {}).items())),
            None if env.get("mask_headroom") is None else float(env["mask_headroom"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(path, f"{cfg_path} is not a pvegym train config: {err!r}") from None
    if info.algo not in ALGOS:
        raise ConfigError(path, f"{cfg_path}: unknown algo {info.algo!r}")
    if info.version not in ("v0", "v1"):
        raise ConfigError(path, f"{cfg_path}: unknown observation version {info.version!r}")
    return info


def _scenario_duration(scenario: str) -> float:
    from pvegym.sim import catalog

    return catalog.duration(scenario)


_CACHE: dict[tuple[str, float, str], Any] = {}


def load_model(info: ModelInfo) -> Any:
    """The SB3 model on CPU, loaded once per process per file version (runners build the policy
    once per episode)."""
    key = (str(info.path.resolve()), info.path.stat().st_mtime, info.algo)
    model = _CACHE.get(key)
    if model is None:
        try:
            import torch
        except ImportError:
            raise ConfigError(
                "policy learned", "needs the rl extra (PyTorch): .venv/bin/pip install -e '.[rl]'"
            ) from None

        # One observation per decision: intra-op threads only cost. And a thread pool started
        # here would deadlock the workers the experiment runner forks after validating the
        # policy (OpenMP is not fork-safe), so the process stays single-threaded in torch.
        torch.set_num_threads(1)
        module, attr = ALGOS[info.algo]
        cls = getattr(importlib.import_module(module), attr)
        custom: dict[str, Any] = {}
        if info.policy != "MlpPolicy":
            registry = importlib.import_module(POLICY_MODULE)
            custom["policy_class"] = registry.policy_class(info.policy, info.algo in MASKABLE)
        model = cls.load(str(info.path), device="cpu", custom_objects=custom)
        _CACHE.clear()  # one model per process is what runners need; keep memory flat
        _CACHE[key] = model
    return model


class LearnedPolicy:
    """A trained agent behind the :class:`~pvegym.sim.view.Balancer` protocol."""

    Config = LearnedConfig
    name = "learned"

    def __init__(self, config: LearnedConfig | None = None) -> None:
        self._init_state(config or LearnedConfig())
        # the error path names the experiment key (``policies[i].params.model``) via make_policy
        info = resolve_model(self.config.model, "params.model")
        self._bind(load_model(info), info)

    @staticmethod
    def artifact_fingerprint(params: dict[str, Any]) -> str:
        """SHA-256 of the model file (and its config) the params name: part of an experiment
        cell's key, so a retrained model under the same name is never mixed with old results."""
        import hashlib

        info = resolve_model(str(params.get("model", "")), "params.model")
        h = hashlib.sha256(info.path.read_bytes())
        cfg = _find_config(info.path)
        if cfg is not None:
            h.update(cfg.read_bytes())
        return h.hexdigest()

    def _init_state(self, config: LearnedConfig) -> None:
        self.config = config
        self.masked_actions = 0  # chosen actions that were masked (mapped to no motion)
        self.decisions = 0
        self._partners: tuple[int, list[list[int]]] | None = None
        self._encoder: ViewEncoderV1 | None = None

    @classmethod
    def from_model(cls, model: Any, info: ModelInfo, deterministic: bool = True) -> LearnedPolicy:
        """A policy around a model in memory (evaluation during training); ``info.path`` unused."""
        policy = cls.__new__(cls)
        policy._init_state(LearnedConfig("", deterministic))
        policy._bind(model, info)
        return policy

    def _bind(self, model: Any, info: ModelInfo) -> None:
        self.model = model
        self.algo = info.algo
        self.maskable = info.algo in MASKABLE
        self.max_nodes, self.max_guests = info.max_nodes, info.max_guests
        self.episode_seconds = float(info.episode_seconds)
        if info.version == "v1":
            self._encoder = ViewEncoderV1(
                info.max_nodes,
                info.max_guests,
                info.episode_seconds,
                info.memory_options(),
                info.mask_unmigratable,
                mask_headroom=info.mask_headroom,
            )

    def reset(self, seed: int | None = None) -> None:
        """A new episode: the v1 encoder forgets its motion memory; a seed makes sampled
        (non-deterministic) actions repeatable."""
        self.masked_actions = 0
        self.decisions = 0
        if self._encoder is not None:
            self._encoder.reset()
        if seed is not None and not self.config.deterministic:
            self.model.set_random_seed(seed)

    def observation(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
        """The observation and mask the model sees for ``view`` (after :meth:`decide` saw the
        rounds before it: v1 remembers motion results)."""
        if self._encoder is not None:
            self._encoder.observe(view)
            return self._encoder.encode(view), self._encoder.mask(view)
        key = id(view.rules)
        if self._partners is None or self._partners[0] != key:
            self._partners = (key, negative_partners(view))
        mask = mask_from_view(view, self.max_nodes, self.max_guests, self._partners[1])
        return encode_view(view, self.max_nodes, self.max_guests, self.episode_seconds), mask

    def action(self, view: ClusterView) -> tuple[int, np.ndarray]:
        """The model's action on ``view`` and the view's mask (for tests and diagnostics)."""
        obs, mask = self.observation(view)
        kwargs: dict[str, Any] = {"deterministic": self.config.deterministic}
        if self.maskable:
            kwargs["action_masks"] = mask
        action, _ = self.model.predict(obs, **kwargs)
        return int(action), mask

    def decide(self, view: ClusterView) -> Motion | None:
        self.decisions += 1
        if view.motion_active:  # every motion is masked: no need to ask the network
            if self._encoder is not None:
                self._encoder.observe(view)  # results arrive in these rounds
            return None
        action, mask = self.action(view)
        if action == 0:
            return None
        if not mask[action]:
            self.masked_actions += 1
            return None
        g, n = divmod(action - 1, self.max_nodes)
        return Motion(view.sids[g], view.node_names[n])


Config = LearnedConfig  # the registry convention: ``<module>.Config``

__all__ = ["Config", "LearnedConfig", "LearnedPolicy", "ModelInfo", "load_model", "resolve_model"]
