"""The train file: one TOML file that fully determines a training run (rl-zoo3-like).

```toml
name = "train-maskable-ppo"        # default: the file's stem; results go to results/<output or name>/
description = "MaskablePPO on the small family"
algo = "MaskablePPO"               # PPO | MaskablePPO | DQN | A2C
policy = "MlpPolicy"
n_envs = 2                         # stepped together in one process (pvegym.vector)
total_timesteps = 200_000          # environment steps (agent decisions) summed over all envs
checkpoint_every = 20_000          # steps between checkpoints (0 = none); a killed run resumes
eval_every = 20_000                # steps between held-out evaluations (0 = only at the end)
eval_seeds = { start = 1000000, count = 5 }   # test seeds only
seed = 0
torch_threads = 1

[hyperparams]                      # keyword arguments of the algorithm's constructor
learning_rate = 3e-4
n_steps = 512
policy_kwargs = { net_arch = [128, 128], activation_fn = "tanh" }

[env]
scenario = "small"                 # a family (instances drawn from train_seeds) or a named scenario
train_seeds = { start = 0, count = 1000 }     # default: the family's whole train range
episode_seconds = "1h"             # default: the scenario's duration
skip_idle_rounds = true
reward_weights = { guest_stall_s = 1.0, moves = 60.0 }  # by metric name (docs/metrics.md); default: the env's
reward_baseline = "noop"           # reward = what the agent changed against a noop twin
reward_scale = 100.0               # the cost is divided by it
```

Errors are :class:`~pvegym.errors.ConfigError` naming the key path (``hyperparams.n_stepz``,
``env.train_seeds[3]``), which ``pvegym train`` prints as one line with exit code 2.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pvegym.config import check_dir_names, field, load, read_json, read_toml
from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS
from pvegym.errors import ConfigError, show
from pvegym.limits import (
    MAX_BUFFER_BYTES,
    MAX_DURATION_S,
    MAX_ENVS,
    MAX_SEED,
    MAX_SEEDS,
    MAX_THREADS,
    MAX_TIMESTEPS,
    MAX_WEIGHT,
    check_number,
    whole_number,
)
from pvegym.policies import agent_spec
from pvegym.policies.agent_spec import ALGOS, algo_class
from pvegym.sim import catalog, families
from pvegym.sim.cost import check_weights

Algo = Literal["PPO", "MaskablePPO", "DQN", "A2C"]

#: constructor arguments the trainer sets itself (not hyperparameters)
_RESERVED = frozenset(
    {"self", "policy", "env", "seed", "verbose", "device", "tensorboard_log", "_init_setup_model"}
)


#: what a train file may give each hyperparameter (stable-baselines3's constructor keywords):
#: ``(type, bounds)`` with type "int", "float", "bool" or "float?" (``None`` allowed). A keyword of
#: the algorithm that is not here (buffer classes and their kwargs) cannot be set from a file.
#: Sizes are bounded too: the buffers they make are checked against
#: :data:`~pvegym.limits.MAX_BUFFER_BYTES` (:meth:`TrainConfig.validate`).
HYPERPARAMS: dict[str, tuple[str, dict[str, float]]] = {
    "learning_rate": ("float", {"gt": 0.0, "le": 10.0}),
    "n_steps": ("int", {"ge": 1, "le": 2**20}),
    "batch_size": ("int", {"ge": 2, "le": 2**20}),  # PPO normalizes advantages over a batch
    "n_epochs": ("int", {"ge": 1, "le": 10_000}),
    "gamma": ("float", {"ge": 0.0, "le": 1.0}),
    "gae_lambda": ("float", {"ge": 0.0, "le": 1.0}),
    "clip_range": ("float", {"gt": 0.0, "le": 100.0}),
    "clip_range_vf": ("float?", {"gt": 0.0, "le": 100.0}),
    "normalize_advantage": ("bool", {}),
    "ent_coef": ("float", {"ge": 0.0, "le": 1e6}),
    "vf_coef": ("float", {"ge": 0.0, "le": 1e6}),
    "max_grad_norm": ("float", {"gt": 0.0, "le": 1e6}),
    "use_sde": ("bool", {"le": 0}),  # state-dependent exploration is for continuous actions
    "sde_sample_freq": ("int", {"ge": -1, "le": MAX_TIMESTEPS}),
    "target_kl": ("float?", {"gt": 0.0, "le": 1e6}),
    "stats_window_size": ("int", {"ge": 1, "le": 1_000_000}),
    "rms_prop_eps": ("float", {"gt": 0.0, "le": 1.0}),
    "use_rms_prop": ("bool", {}),
    "buffer_size": ("int", {"ge": 1, "le": 10**8}),
    "learning_starts": ("int", {"ge": 0, "le": MAX_TIMESTEPS}),
    "tau": ("float", {"gt": 0.0, "le": 1.0}),
    "train_freq": ("int", {"ge": 1, "le": 1_000_000}),
    "gradient_steps": ("int", {"ge": -1, "le": 100_000}),
    "optimize_memory_usage": ("bool", {"le": 0}),  # SB3 refuses it with timeout handling
    "target_update_interval": ("int", {"ge": 1, "le": MAX_TIMESTEPS}),
    "exploration_fraction": ("float", {"ge": 0.0, "le": 1.0}),
    "exploration_initial_eps": ("float", {"ge": 0.0, "le": 1.0}),
    "exploration_final_eps": ("float", {"ge": 0.0, "le": 1.0}),
}


def check_hyperparam(key: str, value: Any, path: str) -> None:
    """One hyperparameter against :data:`HYPERPARAMS` (``policy_kwargs`` is checked by
    :func:`pvegym.policies.agent_spec.check_policy_kwargs`)."""
    if key not in HYPERPARAMS:
        raise ConfigError(path, "cannot be set from a train file (a class or its kwargs)")
    kind, bounds = HYPERPARAMS[key]
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(path, f"must be true or false, not {show(value)}")
        if bounds.get("le") == 0 and value:
            raise ConfigError(path, "must be false here (discrete actions, timeout handling)")
        return
    if value is None and kind == "float?":
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, f"must be a number, not {show(value)}")
    if kind == "int":
        n = whole_number(value, path, ge=int(bounds["ge"]), le=int(bounds["le"]))
        if key == "gradient_steps" and n == 0:
            raise ConfigError(path, "must be ≥ 1, or -1 (as many as environment steps)")
        return
    check_number(
        float(value),
        path,
        ge=bounds.get("ge"),
        gt=bounds.get("gt"),
        le=bounds.get("le"),
        lt=bounds.get("lt"),
    )


def allowed_hyperparams(algo: str) -> list[str]:
    """The constructor keywords of ``algo`` that a train file may set."""
    params = inspect.signature(algo_class(algo).__init__).parameters
    return sorted(p for p in params if p not in _RESERVED)


def _parse_seeds(value: Any, path: str) -> tuple[int, ...]:
    from pvegym.experiments.config import parse_seeds as parse

    return parse(value, path)


def _parse_optional_seeds(value: Any, path: str) -> tuple[int, ...] | None:
    return None if value is None else _parse_seeds(value, path)


@dataclass(frozen=True)
class EnvOptions:
    """What the agent trains on: ``pvegym/Cluster-<version>`` with these arguments.

    ``scenario`` is a family (each episode draws an instance from ``train_seeds``) or a named
    scenario / TOML file (then ``train_seeds`` are episode seeds). ``episode_seconds`` is simulated
    time per episode (``"1h"`` accepted). ``version`` picks the observation (``v0``: the flat
    layout of the first agents; ``v1``: :mod:`pvegym.env.observation_layout`); ``mask_unmigratable``,
    ``mask_headroom`` and ``memory`` are ``Cluster-v1`` options.
    """

    version: Literal["v0", "v1"] = "v0"
    mask_unmigratable: bool = False
    mask_headroom: float | None = field(None, ge=0.0, lt=1.0)
    memory: dict[str, float] = dataclasses.field(default_factory=dict)

    scenario: str = "small"
    train_seeds: tuple[int, ...] | None = field(None, parse=_parse_optional_seeds)
    episode_seconds: float | None = field(None, gt=0.0, le=MAX_DURATION_S, unit="duration")
    reward_weights: dict[str, float] = dataclasses.field(default_factory=dict)
    reward_baseline: Literal["none", "noop"] = "none"
    reward_scale: float = field(1.0, gt=0.0, le=MAX_WEIGHT)
    skip_idle_rounds: bool = True

    def validate(self, path: str) -> None:
        check_weights(self.reward_weights, f"{path}.reward_weights", additive_only=True)
        if self.version == "v0" and (
            self.mask_unmigratable or self.memory or self.mask_headroom is not None
        ):
            raise ConfigError(
                f"{path}.version",
                "mask_unmigratable, mask_headroom and memory are options of v1, not v0",
            )
        from pvegym.env.cluster_env_v1 import memory_options

        try:
            memory_options(self.memory)
        except ConfigError as err:
            raise ConfigError(f"{path}.{err.path}", err.message) from None
        for i, s in enumerate(self.train_seeds or ()):
            families.require_train_seed(s, f"{path}.train_seeds[{i}]")
        if not catalog.is_family(self.scenario):
            catalog.resolve(self.scenario, name_key=f"{path}.scenario")

    def weights(self) -> dict[str, float]:
        """The reward's cost weights: ``reward_weights``, or the environment's default."""
        return dict(self.reward_weights or DEFAULT_REWARD_WEIGHTS)

    def sizes(self) -> tuple[int, int]:
        """``(max_nodes, max_guests)``: the padded sizes of the spaces (as ``ClusterEnv``)."""
        nodes, guests = catalog.max_sizes(self.scenario)
        return nodes, max(1, guests)


@dataclass(frozen=True)
class ImitationOptions:
    """Behaviour cloning from a heuristic with learner-collected data (DAgger) before PPO.

    Iteration 0 collects ``episodes`` episodes with the ``expert`` acting; iteration ``k ≥ 1``
    lets the expert act with probability ``beta^k`` at each decision and the learner otherwise
    (its argmax action, as deployed). Every visited decision state is labelled with the expert's
    answer, and the policy is trained on all data so far for ``epochs`` passes (cross-entropy
    over the masked actions; a sample whose label is a move weighs ``move_weight``: moves are
    rare, and without it the argmax of a calibrated policy is almost always no motion). Calm
    decisions (no node at the pressure gate, the expert waiting) are subsampled to ``calm_keep``
    with weight ``1 / calm_keep``. Then
    ``value_episodes`` episodes of the learner alone fit the value function to their discounted
    returns for ``value_epochs`` passes, so that PPO starts with a critic of the cloned policy.
    """

    expert: str = "guest-centric"
    expert_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    iterations: int = field(4, ge=1, le=1000)
    episodes: int = field(16, ge=1, le=MAX_SEEDS)
    beta: float = field(0.5, ge=0.0, le=1.0)
    epochs: int = field(10, ge=1, le=10_000)
    batch_size: int = field(256, ge=1, le=2**20)
    learning_rate: float = field(1e-3, gt=0.0, le=10.0)
    move_weight: float = field(1.0, gt=0.0, le=MAX_WEIGHT)
    calm_keep: float = field(1.0, gt=0.0, le=1.0)
    value_episodes: int = field(8, ge=0, le=MAX_SEEDS)
    value_epochs: int = field(10, ge=0, le=10_000)

    def validate(self, path: str) -> None:
        from pvegym.learning.lookahead import make_expert

        make_expert(self.expert, f"{path}.expert_params", **self.expert_params)


@dataclass(frozen=True)
class SelectionOptions:
    """Checkpoint selection on validation instances drawn from the *training* seed range.

    Each candidate (the cloned policy, then PPO every ``every`` steps and at the end) is evaluated
    deterministically on ``seeds`` (instances left out of ``env.train_seeds``; never the
    benchmark's test instances) through the balancer interface. A candidate is feasible when the
    sums of the ``constraints`` metrics over the validation episodes stay within their bounds;
    among feasible ones (else the least violating) the best by ``objective`` is kept: ``"cost"``
    — the mean of the cost ``weights`` (default: the reward's); ``"wins"`` — the number of
    instances on which ``metric`` is strictly below the ``reference`` policy's, ties broken by
    the cost. ``relative`` constraints bound a metric's mean by a factor of the reference's
    (``{ migration_bytes = 1.1 }``: at most 10 % more bytes than the reference); their violation
    is the relative excess. ``reference_params`` are the reference's constants (e.g. a tuning
    study's best, to select against the tuned heuristic). The best seed's selected model becomes
    the run's ``model.zip``.

    ``noop_offsets`` calibrate the clone's operating point: each offset is added to the no-motion
    score (the PairScorer's ``noop_bias``: larger waits more), the clone is evaluated with each,
    and PPO starts from the best. Cloning with ``move_weight`` > 1 shifts the threshold at which
    the argmax moves; this puts it back where validation says.
    """

    seeds: tuple[int, ...] = field(parse=_parse_seeds)
    every: int = field(0, ge=0, le=MAX_TIMESTEPS)
    objective: Literal["cost", "wins"] = "wins"
    reference: str = "patched"
    reference_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    metric: str = "guest_stall_s"
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    constraints: tuple[str, ...] = ()
    relative: dict[str, float] = dataclasses.field(default_factory=dict)
    noop_offsets: tuple[float, ...] = (0.0,)

    def validate(self, path: str) -> None:
        from pvegym.sim.metrics import METRIC_KEYS

        if not self.noop_offsets or any(not math.isfinite(x) for x in self.noop_offsets):
            raise ConfigError(f"{path}.noop_offsets", "must be a non-empty list of numbers")
        from pvegym.tuning.study_config import parse_constraints

        if not self.seeds:
            raise ConfigError(f"{path}.seeds", "must name at least one validation instance")
        if self.metric not in METRIC_KEYS:
            raise ConfigError(
                f"{path}.metric", f"unknown metric (allowed: {', '.join(METRIC_KEYS)})"
            )
        check_weights(self.weights, f"{path}.weights")
        for key, factor in check_weights(self.relative, f"{path}.relative").items():
            if factor <= 0.0:
                raise ConfigError(f"{path}.relative.{key}", f"must be > 0, not {factor!r}")
        parse_constraints(list(self.constraints), f"{path}.constraints")
        from pvegym.policies.registry import make_policy

        if self.reference_params:
            make_policy(self.reference, f"{path}.reference_params", **self.reference_params)
        else:
            make_policy(self.reference, f"{path}.reference")


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run. Step counts are environment steps summed over the ``n_envs``."""

    name: str
    algo: Algo
    total_timesteps: int = field(ge=0, le=MAX_TIMESTEPS)
    policy: str = "MlpPolicy"  # a policy class name (policies.agent_spec: MlpPolicy, PairScorer, …)
    description: str = ""
    hyperparams: dict[str, Any] = dataclasses.field(default_factory=dict)
    env: EnvOptions = EnvOptions()
    n_envs: int = field(1, ge=1, le=MAX_ENVS)
    vec_env: Literal["auto", "vector", "subproc", "dummy"] = "auto"
    checkpoint_every: int = field(0, ge=0, le=MAX_TIMESTEPS)
    eval_every: int = field(0, ge=0, le=MAX_TIMESTEPS)
    eval_seeds: tuple[int, ...] = field(
        (families.TEST_SEEDS.start, families.TEST_SEEDS.start + 1, families.TEST_SEEDS.start + 2),
        parse=_parse_seeds,
    )
    seed: int = field(0, ge=0, le=MAX_SEED)
    seeds: tuple[int, ...] | None = None
    torch_threads: int = field(1, ge=1, le=MAX_THREADS)
    output: str = ""
    imitation: ImitationOptions | None = None
    selection: SelectionOptions | None = None

    @property
    def out_name(self) -> str:
        return self.output or self.name

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        check_dir_names(pre, self.name, self.out_name)
        agent_spec.policy_class(self.algo, self.policy, f"{pre}policy")
        allowed = allowed_hyperparams(self.algo)
        for key, value in self.hyperparams.items():
            if key not in allowed:
                raise ConfigError(
                    f"{pre}hyperparams.{key}",
                    f"not a parameter of {self.algo} (allowed: {', '.join(allowed)})",
                )
            if key == "policy_kwargs":
                agent_spec.check_policy_kwargs(
                    self.algo, self.policy, value, f"{pre}hyperparams.policy_kwargs"
                )
            else:
                check_hyperparam(key, value, f"{pre}hyperparams.{key}")
        self._check_buffers(pre)
        is_family = families.is_family(self.env.scenario)
        train = set(self.env.train_seeds or ())
        for i, s in enumerate(self.eval_seeds):
            if is_family and s not in families.TEST_SEEDS:
                raise ConfigError(
                    f"{pre}eval_seeds[{i}]",
                    f"{s} is not a test seed (allowed: {families.TEST_SEEDS.start}.."
                    f"{families.TEST_SEEDS.stop - 1}); evaluation must be on held-out instances",
                )
            if s in train:
                raise ConfigError(f"{pre}eval_seeds[{i}]", f"{s} is also a training seed")
        if self.policy == "PairScorer":
            if self.env.version != "v1":
                raise ConfigError(f"{pre}env.version", "the PairScorer policy reads layout v1")
            if self.algo not in ("PPO", "MaskablePPO"):
                raise ConfigError(f"{pre}algo", "the PairScorer policy is for PPO or MaskablePPO")
        if self.total_timesteps == 0 and self.imitation is None:
            raise ConfigError(f"{pre}total_timesteps", "must be > 0 without [imitation]")
        if self.imitation is not None and self.algo not in ("PPO", "MaskablePPO"):
            raise ConfigError(f"{pre}imitation", "behaviour cloning initialises PPO/MaskablePPO")
        for i, s in enumerate(self.seeds or ()):
            whole_number(s, f"{pre}seeds[{i}]", ge=0, le=MAX_SEED)
        if self.seeds is not None and len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"{pre}seeds", "must not repeat a seed")
        if self.selection is not None:
            if self.env.train_seeds is None:
                raise ConfigError(
                    f"{pre}env.train_seeds",
                    "is required with [selection]: validation instances must be left out of it",
                )
            for i, s in enumerate(self.selection.seeds):
                families.require_train_seed(s, f"{pre}selection.seeds[{i}]")
                if s in train:
                    raise ConfigError(
                        f"{pre}selection.seeds[{i}]",
                        f"{s} is also in env.train_seeds (validation must be held out)",
                    )

    def _check_buffers(self, pre: str) -> None:
        """The rollout (on-policy) or replay (DQN) buffer these settings make, estimated as
        transitions × observation bytes (float32), must fit :data:`~pvegym.limits.MAX_BUFFER_BYTES`;
        PPO needs more than one step per rollout."""
        from pvegym.env.observation_layout import Layout
        from pvegym.env.view_encoding import observation_size

        params = inspect.signature(algo_class(self.algo).__init__).parameters

        def value(key: str) -> Any:
            return self.hyperparams.get(key, params[key].default if key in params else None)

        if self.env.version == "v1":
            obs_size = Layout(*self.env.sizes()).size
        else:
            obs_size = observation_size(*self.env.sizes())
        obs_bytes = 4 * (obs_size + 8)
        if self.algo == "DQN":
            size, key = int(value("buffer_size")) * (2 * obs_bytes), "buffer_size"
        else:
            steps = int(value("n_steps")) * self.n_envs
            if self.algo != "A2C" and steps < 2:
                raise ConfigError(
                    f"{pre}hyperparams.n_steps", "n_steps × n_envs must be > 1 for PPO's batches"
                )
            size, key = steps * obs_bytes, "n_steps"
        if size > MAX_BUFFER_BYTES:
            raise ConfigError(
                f"{pre}hyperparams.{key}",
                f"{value(key)} makes a {'replay' if self.algo == 'DQN' else 'rollout'} buffer of "
                f"~{size / 2**30:.1f} GiB (at most {MAX_BUFFER_BYTES / 2**30:g} GiB: set a "
                f"smaller {key})",
            )

    # ------------------------------------------------------------------ derived
    def algo_kwargs(self) -> dict[str, Any]:
        """The constructor keywords: ``hyperparams`` with ``activation_fn`` names made classes."""
        kwargs = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.hyperparams.items()}
        if "policy_kwargs" in kwargs:
            kwargs["policy_kwargs"] = agent_spec.policy_kwargs(kwargs["policy_kwargs"])
        return kwargs

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the environment class (:meth:`env_class`; training split)."""
        e = self.env
        kwargs: dict[str, Any] = {
            "scenario": e.scenario,
            "episode_seconds": e.episode_seconds,
            "reward_weights": e.weights(),
            "reward_baseline": e.reward_baseline,
            "reward_scale": e.reward_scale,
            "skip_idle_rounds": e.skip_idle_rounds,
            "seed_split": "train",
        }
        if e.version == "v1":
            kwargs["mask_unmigratable"] = e.mask_unmigratable
            kwargs["mask_headroom"] = e.mask_headroom
            kwargs["memory"] = dict(e.memory)
        return kwargs

    def env_class(self) -> Any:
        """``ClusterEnv`` (v0) or ``ClusterEnvV1`` (v1)."""
        from pvegym.env import ENV_CLASSES

        return ENV_CLASSES[self.env.version]

    @property
    def is_recipe(self) -> bool:
        """Whether ``pvegym train`` runs :mod:`pvegym.learning.recipe` (clone, fine-tune, select,
        per seed) rather than one SB3 training."""
        return self.imitation is not None or self.selection is not None or self.seeds is not None

    @property
    def run_seeds(self) -> tuple[int, ...]:
        """The training seeds: ``seeds`` if given, else ``(seed,)``."""
        return self.seeds or (self.seed,)

    def resolved(self) -> dict[str, Any]:
        """The resolved config as plain JSON data, plus the space sizes a loader needs."""
        data = json.loads(json.dumps(dataclasses.asdict(self)))
        max_nodes, max_guests = self.env.sizes()
        data["spaces"] = {"max_nodes": max_nodes, "max_guests": max_guests}
        return dict(data)

    def config_hash(self) -> str:
        text = json.dumps(self.resolved(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def train_data(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.suffix == ".json":  # a run's resolved config.json
        doc = read_json(p, "train", "train config")
        if not isinstance(doc, dict):
            raise ConfigError("train", f"{show(str(p), 100)} is not a resolved train config")
        doc.pop("spaces", None)
        return doc
    from pvegym.experiments.config import check_file_kind

    data = read_toml(p, "train", "train")
    check_file_kind(data, p, "training")
    data.setdefault("name", p.stem)
    return data


def load_train_config(path: str | Path) -> TrainConfig:
    """Read and validate a train file (TOML) or a run's resolved ``config.json``."""
    return parse_train_config(train_data(path))


def parse_train_config(data: dict[str, Any]) -> TrainConfig:
    """Validate plain data (a parsed train file) into a :class:`TrainConfig`."""
    if isinstance(data, dict) and "algo" in data:
        agent_spec.algo_class(data["algo"], "algo")  # an unknown one: one line naming the key
    return load(TrainConfig, data)


__all__ = [
    "ALGOS",
    "EnvOptions",
    "ImitationOptions",
    "SelectionOptions",
    "TrainConfig",
    "algo_class",
    "allowed_hyperparams",
    "load_train_config",
    "parse_train_config",
]
