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
reward_weights = { guest_stall_s = 1.0, moves = 60.0 }  # by §9 metric name; default: the env's
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

from pvegym.config import check_dir_names, field, load, read_toml
from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS
from pvegym.errors import ConfigError
from pvegym.sim import catalog, families
from pvegym.sim.cost import check_weights

Algo = Literal["PPO", "MaskablePPO", "DQN", "A2C"]

#: algorithm name -> (module, class)
ALGOS: dict[str, tuple[str, str]] = {
    "PPO": ("stable_baselines3", "PPO"),
    "A2C": ("stable_baselines3", "A2C"),
    "DQN": ("stable_baselines3", "DQN"),
    "MaskablePPO": ("sb3_contrib", "MaskablePPO"),
}
#: constructor arguments the trainer sets itself (not hyperparameters)
_RESERVED = frozenset(
    {"self", "policy", "env", "seed", "verbose", "device", "tensorboard_log", "_init_setup_model"}
)
#: ``policy_kwargs`` a train file may give the PairScorer policy (its layout comes from the env)
PAIR_SCORER_KWARGS = ("hidden", "noop_prob", "pair_layers")
#: ``policy_kwargs.activation_fn`` by name (TOML cannot hold a class)
ACTIVATIONS = ("relu", "tanh", "elu", "leaky_relu", "silu")


def algo_class(name: str) -> Any:
    """The stable-baselines3 / sb3-contrib class of algorithm ``name`` (imported lazily)."""
    import importlib

    module, attr = ALGOS[name]
    return getattr(importlib.import_module(module), attr)


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
    episode_seconds: float | None = field(None, gt=0.0, unit="duration")
    reward_weights: dict[str, float] = dataclasses.field(default_factory=dict)
    reward_baseline: Literal["none", "noop"] = "none"
    reward_scale: float = field(1.0, gt=0.0)
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
    iterations: int = field(4, ge=1)
    episodes: int = field(16, ge=1)
    beta: float = field(0.5, ge=0.0, le=1.0)
    epochs: int = field(10, ge=1)
    batch_size: int = field(256, ge=1)
    learning_rate: float = field(1e-3, gt=0.0)
    move_weight: float = field(1.0, gt=0.0)
    calm_keep: float = field(1.0, gt=0.0, le=1.0)
    value_episodes: int = field(8, ge=0)
    value_epochs: int = field(10, ge=0)

    def validate(self, path: str) -> None:
        from policies.registry import make_policy

        make_policy(self.expert, f"{path}.expert_params", **self.expert_params)


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
    every: int = field(0, ge=0)
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
        from policies.registry import make_policy

        if self.reference_params:
            make_policy(self.reference, f"{path}.reference_params", **self.reference_params)
        else:
            make_policy(self.reference, f"{path}.reference")


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run. Step counts are environment steps summed over the ``n_envs``."""

    name: str
    algo: Algo
    total_timesteps: int = field(ge=0)
    policy: Literal["MlpPolicy", "PairScorer"] = "MlpPolicy"
    description: str = ""
    hyperparams: dict[str, Any] = dataclasses.field(default_factory=dict)
    env: EnvOptions = EnvOptions()
    n_envs: int = field(1, ge=1, le=64)
    vec_env: Literal["auto", "vector", "subproc", "dummy"] = "auto"
    checkpoint_every: int = field(0, ge=0)
    eval_every: int = field(0, ge=0)
    eval_seeds: tuple[int, ...] = field(
        (families.TEST_SEEDS.start, families.TEST_SEEDS.start + 1, families.TEST_SEEDS.start + 2),
        parse=_parse_seeds,
    )
    seed: int = field(0, ge=0)
    seeds: tuple[int, ...] | None = None
    torch_threads: int = field(1, ge=1)
    output: str = ""
    imitation: ImitationOptions | None = None
    selection: SelectionOptions | None = None

    @property
    def out_name(self) -> str:
        return self.output or self.name

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        check_dir_names(pre, self.name, self.out_name)
        allowed = allowed_hyperparams(self.algo)
        for key, value in self.hyperparams.items():
            if key not in allowed:
                raise ConfigError(
                    f"{pre}hyperparams.{key}",
                    f"not a parameter of {self.algo} (allowed: {', '.join(allowed)})",
                )
            if key == "policy_kwargs":
                if not isinstance(value, dict):
                    raise ConfigError(f"{pre}hyperparams.{key}", "must be a table")
                if self.policy == "PairScorer":
                    for k in value:
                        if k not in PAIR_SCORER_KWARGS:
                            raise ConfigError(
                                f"{pre}hyperparams.policy_kwargs.{k}",
                                f"not an option of PairScorer "
                                f"(allowed: {', '.join(PAIR_SCORER_KWARGS)})",
                            )
                act = value.get("activation_fn")
                if act is not None and act not in ACTIVATIONS:
                    raise ConfigError(
                        f"{pre}hyperparams.policy_kwargs.activation_fn",
                        f"{act!r} is not allowed (allowed: {', '.join(ACTIVATIONS)})",
                    )
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
            if s < 0:
                raise ConfigError(f"{pre}seeds[{i}]", f"must be ≥ 0, not {s}")
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

    # ------------------------------------------------------------------ derived
    def algo_kwargs(self) -> dict[str, Any]:
        """The constructor keywords: ``hyperparams`` with ``activation_fn`` names made classes."""
        import torch.nn as nn

        kwargs = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.hyperparams.items()}
        pk = kwargs.get("policy_kwargs")
        if isinstance(pk, dict) and isinstance(pk.get("activation_fn"), str):
            pk["activation_fn"] = {
                "relu": nn.ReLU,
                "tanh": nn.Tanh,
                "elu": nn.ELU,
                "leaky_relu": nn.LeakyReLU,
                "silu": nn.SiLU,
            }[pk["activation_fn"]]
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
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise ConfigError("train", f"cannot read {str(p)!r}: {err}") from None
        if not isinstance(doc, dict):
            raise ConfigError("train", f"{str(p)!r} is not a resolved train config")
        doc.pop("spaces", None)
        return doc
    data = read_toml(p, "train", "train")
    data.setdefault("name", p.stem)
    return data


def load_train_config(path: str | Path) -> TrainConfig:
    """Read and validate a train file (TOML) or a run's resolved ``config.json``."""
    return parse_train_config(train_data(path))


def parse_train_config(data: dict[str, Any]) -> TrainConfig:
    """Validate plain data (a parsed train file) into a :class:`TrainConfig`."""
    if "algo" in data and data["algo"] not in ALGOS:
        raise ConfigError("algo", f"{data['algo']!r} is not allowed (allowed: {', '.join(ALGOS)})")
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
