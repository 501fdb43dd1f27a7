"""``learned``: a stable-baselines3 / sb3-contrib agent trained by ``pvegym train``, as a balancer.

The agent was trained on ``pvegym/Cluster-v0`` or ``-v1``; here it acts through the
:class:`Balancer` interface, from the :class:`ClusterView` alone: for v0,
:func:`~pvegym.env.view_encoding.encode_view` rebuilds the environment's observation bit for bit
and :func:`~pvegym.env.view_encoding.mask_from_view` its action mask; for v1,
:class:`~pvegym.env.view_encoding_v1.ViewEncoderV1` keeps the HA manager's motion memory from the
views it is handed every round and encodes with the environment's own kernel. So the same model
runs in ``pvegym simulate``, in experiments (``params = {model = "train-maskable-ppo"}``) and
against any source of views.

A model trained in the proposal action space (``env.version = "proposals"``,
:mod:`pvegym.env.proposal_env`) is rebuilt with its proposer
(:class:`~pvegym.policies.proposals.HeuristicProposer`, from ``env.proposals`` of its config):
the proposer sees every view, and the network chooses among its slots on the rounds that have a
proposal — exactly as the environment asked it — so it acts on any cluster size.

A model whose policy is not SB3's own (``policy = "PairScorer"`` in its train file) is loaded with
its class resolved by that name (:data:`pvegym.policies.agent_spec.POLICY_MODULE`), not unpickled from
the file.

* Maskable algorithms (MaskablePPO) predict with the mask and never choose a masked action.
* The others may choose a masked action (a guest that is not ``started``, its own node, a busy
  pipeline, a negative-affinity conflict, a padding slot): that is mapped to *no motion* and
  counted in :attr:`LearnedPolicy.masked_actions` — in the environment it would be a no-op too.
* While the pipeline is busy every motion is masked, so the policy answers ``None`` without
  running the network (identical result, ~10× cheaper in migration-heavy episodes).
* A v1 pair scorer acts on clusters larger than its training padding (``medium``, ``trace``
  after training on ``small``): v1's features do not depend on the padding and the network's
  weights are shared by every slot, so the encoder is rebuilt with the smallest layout holding
  the view (:meth:`Layout.fitting`) and the network scores that layout. Within the padding the
  training layout is kept (bit for bit the environment's observation). A flat MLP (v0 or v1)
  has one output per padded slot and refuses a larger cluster.

``model`` is a run name (``results/<name>/model.zip`` with its resolved ``config.json``), a run
directory, or a path to a ``.zip`` (its ``config.json`` is looked up beside it and one directory
up, which covers ``results/<name>/checkpoints/*.zip``). The config gives the algorithm, the policy
class (by name, :mod:`pvegym.policies.agent_spec`), its ``policy_kwargs``, the padded space sizes and the
training episode length (the ``time_frac`` feature divides by it).

Loading never unpickles: the network is rebuilt from that config and only the weights are read
from the archive (:mod:`pvegym.policies.model_file`); a ``model.zip`` carrying a pickle that would call
anything outside stable-baselines3's own classes is refused with one line.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pvegym import limits
from pvegym.config import read_json
from pvegym.env.observation_layout import Layout, MemoryOptions
from pvegym.env.view_encoding import encode_view, mask_from_view, negative_partners
from pvegym.env.view_encoding_v1 import ViewEncoderV1
from pvegym.errors import ConfigError, show
from pvegym.policies import agent_spec
from pvegym.policies.proposals import HeuristicProposer, ProposerConfig
from pvegym.sim.view import ClusterView, Motion

#: the environments an agent may have been trained on: Cluster-v0, Cluster-v1, and the proposal
#: action space (:mod:`pvegym.env.proposal_env` over :mod:`pvegym.policies.proposals`)
VERSIONS = ("v0", "v1", "proposals")
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
    """What rebuilds the agent besides its weights, from the run's resolved ``config.json``:
    algorithm, policy class name, hyperparameters (``policy_kwargs``), padded space sizes and the
    training episode length (s)."""

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
    hyperparams: dict[str, Any] = field(default_factory=dict)
    #: ``version = "proposals"``: the proposer whose slots are the agent's actions
    proposals: ProposerConfig | None = None

    def memory_options(self) -> MemoryOptions:
        return MemoryOptions(**dict(self.memory))


def _find_config(zip_path: Path) -> Path | None:
    for d in (zip_path.parent, zip_path.parent.parent):
        if (d / "config.json").is_file():
            return d / "config.json"
    return None


def resolve_model(model: str, path: str = "model") -> ModelInfo:
    """Find a model's ``.zip`` and its resolved config; a missing or malformed one is a
    one-line ConfigError at ``path``."""
    if not model:
        raise ConfigError(path, "is required (a run name under results/, a run dir or a .zip)")
    if "\x00" in model:
        raise ConfigError(path, f"{show(model)} is not a path (NUL byte)")
    p = Path(model)
    candidates = [
        p,
        p / "model.zip",
        Path(os.environ.get(RESULTS_ENV, "results")) / model / "model.zip",
    ]
    try:
        zip_path = next((c for c in candidates if c.suffix == ".zip" and c.is_file()), None)
    except OSError as err:  # e.g. a name too long for the file system
        raise ConfigError(path, f"{show(model)} is not a usable path ({err.strerror})") from None
    if zip_path is None:
        looked = show(", ".join(dict.fromkeys(map(str, candidates[1:]))), 200, quote=False)
        raise ConfigError(path, f"no trained model {show(model)} (looked for {looked})")
    cfg_path = _find_config(zip_path)
    if cfg_path is None:
        raise ConfigError(
            path,
            f"{show(str(zip_path), 120)} has no config.json beside it (written by pvegym train)",
        )
    where = show(str(cfg_path), 120)
    cfg = read_json(cfg_path, path, "train config")
    try:
        return _model_info(zip_path, cfg, path)
    except ConfigError as err:
        raise ConfigError(path, f"{where}: {err}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(
            path, f"{where} is not a pvegym train config: {show(str(err), 120, quote=False)}"
        ) from None


def _model_info(zip_path: Path, cfg: Any, path: str) -> ModelInfo:
    """Check the fields of a resolved train config that rebuild the agent."""
    if not isinstance(cfg, dict):
        raise ValueError("not a JSON object")
    algo = cfg.get("algo")
    if algo not in agent_spec.ALGOS:
        raise ConfigError("algo", f"{show(algo)} is not allowed ({', '.join(agent_spec.ALGOS)})")
    env = cfg.get("env", {})
    if not isinstance(env, dict):
        raise ConfigError("env", "must be a table")
    proposals = None
    if env.get("version") == "proposals":
        # the action space is the proposer's slots: rebuilt from its config, no padded sizes
        from pvegym.policies.proposals import proposer_config

        proposals = proposer_config(env.get("proposals", {}), "env.proposals")
        sizes = [0, 0]
    else:
        sizes = _space_sizes(cfg.get("spaces"))
    seconds = env.get("episode_seconds")
    if seconds is None:
        seconds = _scenario_duration(str(env.get("scenario", "small")))
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ConfigError("env.episode_seconds", f"must be a number, not {show(seconds)}")
    limits.check_number(float(seconds), "env.episode_seconds", gt=0.0, le=limits.MAX_DURATION_S)
    policy = cfg.get("policy", "MlpPolicy")
    if not isinstance(policy, str):
        raise ConfigError("policy", f"must be a policy class name, not {show(policy)}")
    hyper = cfg.get("hyperparams", {})
    if not isinstance(hyper, dict):
        raise ConfigError("hyperparams", "must be a table")
    agent_spec.check_policy_kwargs(
        algo, policy, hyper.get("policy_kwargs"), "hyperparams.policy_kwargs"
    )
    version, mask_unmigratable, memory, headroom = _env_options(env)
    return ModelInfo(
        zip_path,
        algo,
        sizes[0],
        sizes[1],
        float(seconds),
        policy,
        version,
        mask_unmigratable,
        memory,
        headroom,
        dict(hyper),
        proposals,
    )


def _space_sizes(spaces: Any) -> list[int]:
    if not isinstance(spaces, dict):
        raise ConfigError("spaces", "is required (max_nodes, max_guests)")
    sizes = []
    for key, limit in (("max_nodes", limits.MAX_NODES), ("max_guests", limits.MAX_GUESTS)):
        v = spaces.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= limit:
            raise ConfigError(
                f"spaces.{key}", f"must be a whole number in 1..{limit}, not {show(v)}"
            )
        sizes.append(v)
    return sizes


def _env_options(
    env: dict[str, Any],
) -> tuple[str, bool, tuple[tuple[str, float], ...], float | None]:
    """The observation options of a resolved config's ``env`` (Cluster-v1's)."""
    from pvegym.env.cluster_env_v1 import memory_options

    version = env.get("version", "v0")
    if version not in VERSIONS:
        allowed = ", ".join(VERSIONS)
        raise ConfigError("env.version", f"{show(version)} is not allowed (allowed: {allowed})")
    mask = env.get("mask_unmigratable", False)
    if not isinstance(mask, bool):
        raise ConfigError("env.mask_unmigratable", f"must be true or false, not {show(mask)}")
    raw = env.get("memory") or {}
    if not isinstance(raw, dict):
        raise ConfigError("env.memory", f"must be a table, not {show(raw)}")
    try:
        memory_options(raw)
    except ConfigError as err:
        raise ConfigError(f"env.{err.path}", err.message) from None
    headroom = env.get("mask_headroom")
    if headroom is not None:
        if isinstance(headroom, bool) or not isinstance(headroom, int | float):
            raise ConfigError("env.mask_headroom", f"must be a number, not {show(headroom)}")
        headroom = limits.check_number(float(headroom), "env.mask_headroom", ge=0.0, lt=1.0)
    memory = tuple(sorted((str(k), float(v)) for k, v in raw.items()))
    return version, mask, memory, headroom


def _scenario_duration(scenario: str) -> float:
    from pvegym.sim import catalog

    return catalog.duration(scenario)


class Agent:
    """A trained agent rebuilt for inference: the policy network of ``info``'s config with the
    weights of its ``model.zip`` (read by :func:`pvegym.policies.model_file.read_model_file`: nothing is
    unpickled). ``predict`` and ``set_random_seed`` behave as the algorithm's (DQN: ε-greedy with
    the saved exploration rate when not deterministic)."""

    def __init__(self, info: ModelInfo) -> None:
        from gymnasium import spaces

        from pvegym.env.observation_layout import Layout
        from pvegym.env.view_encoding import observation_size
        from pvegym.policies.model_file import (
            check_policy_class,
            load_state,
            plain_float,
            plain_int,
            read_model_file,
        )

        mf = read_model_file(info.path, "params.model")
        if info.proposals is not None:
            from pvegym.policies import proposals

            size = proposals.observation_size(info.proposals.candidates)
            n_actions = info.proposals.n_slots
            layout_dict = None
        else:
            layout = Layout(info.max_nodes, info.max_guests)
            size = layout.size if info.version == "v1" else observation_size(*astuple(layout))
            n_actions = 1 + info.max_nodes * info.max_guests
            layout_dict = layout.as_dict()
        obs_space = spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        act_space = spaces.Discrete(n_actions)
        cls = agent_spec.policy_class(info.algo, info.policy, "params.model")
        check_policy_class(mf, cls, "params.model")
        try:
            self.policy = agent_spec.build_policy_network(
                info.algo, info.policy, obs_space, act_space, info.hyperparams, layout_dict
            )
        except ValueError as err:  # a network that does not fit the config's spaces
            raise ConfigError("params.model", show(str(err), 200, quote=False)) from None
        if "policy" not in mf.params:
            raise ConfigError("params.model", f"{show(str(info.path), 120)} holds no policy.pth")
        load_state(
            self.policy, mf.params["policy"], f"{info.path.name}: policy.pth", "params.model"
        )
        self.policy.set_training_mode(False)
        self.action_space = act_space
        self.epsilon = plain_float(mf, "exploration_rate", 0.0) if info.algo == "DQN" else 0.0
        self.num_timesteps = plain_int(mf, "num_timesteps")  # training steps behind the weights
        self._rng = np.random.default_rng()

    def predict(self, obs: np.ndarray, deterministic: bool = True, **kwargs: Any) -> Any:
        if not deterministic and self.epsilon > 0 and self._rng.random() < self.epsilon:
            return np.int64(self._rng.integers(self.action_space.n)), None
        return self.policy.predict(obs, deterministic=deterministic, **kwargs)

    def set_random_seed(self, seed: int) -> None:
        from stable_baselines3.common.utils import set_random_seed

        set_random_seed(seed)
        self._rng = np.random.default_rng(seed)


_CACHE: dict[tuple[str, float, str], Any] = {}


def load_model(info: ModelInfo) -> Agent:
    """The agent on CPU, loaded once per process per file version (runners build the policy
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
        model = Agent(info)
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
        # keyed by the rules object itself (an id() can be reused once the object is freed)
        self._partners: tuple[object, list[list[int]]] | None = None
        self._encoder: ViewEncoderV1 | None = None
        self._train_layout: Layout | None = None
        self._proposer: HeuristicProposer | None = None

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
        self.maskable = info.algo in agent_spec.MASKABLE
        self.max_nodes, self.max_guests = info.max_nodes, info.max_guests
        self.episode_seconds = float(info.episode_seconds)
        self._info = info
        if info.version == "v1":
            self._train_layout = Layout(info.max_nodes, info.max_guests)
            self._encoder = self._new_encoder(self._train_layout)
        if info.proposals is not None:
            self._proposer = HeuristicProposer(info.proposals, "params.model")

    def _new_encoder(self, lay: Layout) -> ViewEncoderV1:
        info = self._info
        return ViewEncoderV1(
            lay.max_nodes,
            lay.max_guests,
            info.episode_seconds,
            info.memory_options(),
            info.mask_unmigratable,
            mask_headroom=info.mask_headroom,
        )

    def _v1_encoder(self, view: ClusterView) -> ViewEncoderV1:
        """The v1 encoder for ``view``'s cluster: the training layout if the cluster fits it, else
        (a pair scorer only) the smallest layout that holds it, chosen at the episode's start."""
        enc, train = self._encoder, self._train_layout
        assert enc is not None and train is not None
        if enc.memory is None:  # the episode's first view
            lay = train.fitting(len(view.node_names), len(view.sids))
            if lay != enc.layout and (lay == train or self._info.policy != "MlpPolicy"):
                enc = self._encoder = self._new_encoder(lay)
                self.max_nodes, self.max_guests = lay.max_nodes, lay.max_guests
        return enc

    def reset(self, seed: int | None = None) -> None:
        """A new episode: the v1 encoder forgets its motion memory; a seed makes sampled
        (non-deterministic) actions repeatable."""
        self.masked_actions = 0
        self.decisions = 0
        if self._encoder is not None:
            self._encoder.reset()
        if self._proposer is not None:
            self._proposer.reset(seed)
        if seed is not None and not self.config.deterministic:
            self.model.set_random_seed(seed)

    def observation(self, view: ClusterView) -> tuple[np.ndarray, np.ndarray]:
        """The observation and mask the model sees for ``view`` (after :meth:`decide` saw the
        rounds before it: v1 remembers motion results)."""
        if self._encoder is not None:
            enc = self._v1_encoder(view)
            enc.observe(view)
            return enc.encode(view), enc.mask(view)
        rules = view.rules
        if self._partners is None or self._partners[0] is not rules:
            self._partners = (rules, negative_partners(view))
        mask = mask_from_view(view, self.max_nodes, self.max_guests, self._partners[1])
        return encode_view(view, self.max_nodes, self.max_guests, self.episode_seconds), mask

    def action(self, view: ClusterView) -> tuple[int, np.ndarray]:
        """The model's action on ``view`` and the view's mask (for tests and diagnostics)."""
        obs, mask = self.observation(view)
        if self._encoder is not None and self._encoder.layout != self._train_layout:
            registry = importlib.import_module(agent_spec.POLICY_MODULE)
            act = registry.predict_in_layout(
                self.model.policy,
                obs,
                mask if self.maskable else None,
                self._encoder.layout,
                self.config.deterministic,
            )
            return int(act), mask
        kwargs: dict[str, Any] = {"deterministic": self.config.deterministic}
        if self.maskable:
            kwargs["action_masks"] = mask
        action, _ = self.model.predict(obs, **kwargs)
        return int(action), mask

    def decide(self, view: ClusterView) -> Motion | None:
        self.decisions += 1
        if self._proposer is not None:
            return self._decide_proposal(view, self._proposer)
        if view.motion_active:  # every motion is masked: no need to ask the network
            if self._encoder is not None:
                self._v1_encoder(view).observe(view)  # results arrive in these rounds
            return None
        action, mask = self.action(view)
        if action == 0:
            return None
        if not mask[action]:
            self.masked_actions += 1
            return None
        g, n = divmod(action - 1, self.max_nodes)
        return Motion(view.sids[g], view.node_names[n])

    def _decide_proposal(self, view: ClusterView, proposer: HeuristicProposer) -> Motion | None:
        """The proposal agent's round, as :class:`~pvegym.env.proposal_env.ProposalEnv` plays it:
        the proposer sees every view; the network is asked only when a slot holds a motion."""
        p = proposer.propose(view)
        motion = None
        if p.any_motion:
            kwargs: dict[str, Any] = {"deterministic": self.config.deterministic}
            if self.maskable:
                kwargs["action_masks"] = p.mask
            action, _ = self.model.predict(p.observation, **kwargs)
            a = int(action)
            if p.mask[a]:
                motion = p.motions[a]
            else:
                self.masked_actions += 1
        proposer.adopt(view, motion)
        return motion


Config = LearnedConfig  # the registry convention: ``<module>.Config``

__all__ = ["Config", "LearnedConfig", "LearnedPolicy", "ModelInfo", "load_model", "resolve_model"]
