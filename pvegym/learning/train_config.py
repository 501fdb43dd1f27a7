"""The train file: one TOML file that fully determines a training run (rl-zoo3-like).

```toml
name = "train-maskable-ppo"        # default: the file's stem; results go to results/<output or name>/
description = "MaskablePPO on the small family"
algo = "MaskablePPO"               # PPO | MaskablePPO | DQN | A2C
policy = "MlpPolicy"
n_envs = 2                         # SubprocVecEnv when > 1, DummyVecEnv when 1
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
reward_weights = { moves = 10.0 }  # partial; the rest are the environment's defaults
```

Errors are :class:`~pvegym.errors.ConfigError` naming the key path (``hyperparams.n_stepz``,
``env.train_seeds[3]``), which ``pvegym train`` prints as one line with exit code 2.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from policies import agent_spec
from policies.agent_spec import ALGOS, algo_class
from pvegym.config import check_dir_names, field, load, read_toml
from pvegym.env.cluster_env import DEFAULT_REWARD_WEIGHTS
from pvegym.errors import ConfigError
from pvegym.sim import catalog, families

Algo = Literal["PPO", "MaskablePPO", "DQN", "A2C"]

#: constructor arguments the trainer sets itself (not hyperparameters)
_RESERVED = frozenset(
    {"self", "policy", "env", "seed", "verbose", "device", "tensorboard_log", "_init_setup_model"}
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
    """What the agent trains on: ``pvegym/Cluster-v0`` with these arguments.

    ``scenario`` is a family (each episode draws an instance from ``train_seeds``) or a named
    scenario / TOML file (then ``train_seeds`` are episode seeds). ``episode_seconds`` is simulated
    time per episode (``"1h"`` accepted).
    """

    scenario: str = "small"
    train_seeds: tuple[int, ...] | None = field(None, parse=_parse_optional_seeds)
    episode_seconds: float | None = field(None, gt=0.0, unit="duration")
    reward_weights: dict[str, float] = dataclasses.field(default_factory=dict)
    skip_idle_rounds: bool = True

    def validate(self, path: str) -> None:
        for key in self.reward_weights:
            if key not in DEFAULT_REWARD_WEIGHTS:
                raise ConfigError(
                    f"{path}.reward_weights.{key}",
                    f"unknown cost (allowed: {', '.join(DEFAULT_REWARD_WEIGHTS)})",
                )
        for i, s in enumerate(self.train_seeds or ()):
            families.require_train_seed(s, f"{path}.train_seeds[{i}]")
        if not catalog.is_family(self.scenario):
            catalog.resolve(self.scenario, name_key=f"{path}.scenario")

    def sizes(self) -> tuple[int, int]:
        """``(max_nodes, max_guests)``: the padded sizes of the spaces (as ``ClusterEnv``)."""
        nodes, guests = catalog.max_sizes(self.scenario)
        return nodes, max(1, guests)


@dataclass(frozen=True)
class TrainConfig:
    """A whole training run. Step counts are environment steps summed over the ``n_envs``."""

    name: str
    algo: Algo
    total_timesteps: int = field(gt=0)
    policy: str = "MlpPolicy"  # a policy class name (policies.agent_spec)
    description: str = ""
    hyperparams: dict[str, Any] = dataclasses.field(default_factory=dict)
    env: EnvOptions = EnvOptions()
    n_envs: int = field(1, ge=1, le=64)
    checkpoint_every: int = field(0, ge=0)
    eval_every: int = field(0, ge=0)
    eval_seeds: tuple[int, ...] = field(
        (families.TEST_SEEDS.start, families.TEST_SEEDS.start + 1, families.TEST_SEEDS.start + 2),
        parse=_parse_seeds,
    )
    seed: int = field(0, ge=0)
    torch_threads: int = field(1, ge=1)
    output: str = ""

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

    # ------------------------------------------------------------------ derived
    def algo_kwargs(self) -> dict[str, Any]:
        """The constructor keywords: ``hyperparams`` with ``activation_fn`` names made classes."""
        kwargs = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.hyperparams.items()}
        if "policy_kwargs" in kwargs:
            kwargs["policy_kwargs"] = agent_spec.policy_kwargs(kwargs["policy_kwargs"])
        return kwargs

    def env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``ClusterEnv`` (training split)."""
        e = self.env
        return {
            "scenario": e.scenario,
            "episode_seconds": e.episode_seconds,
            "reward_weights": dict(e.reward_weights),
            "skip_idle_rounds": e.skip_idle_rounds,
            "seed_split": "train",
        }

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
    if isinstance(data, dict) and "algo" in data:
        agent_spec.algo_class(data["algo"], "algo")  # an unknown one: one line naming the key
    return load(TrainConfig, data)


__all__ = [
    "ALGOS",
    "EnvOptions",
    "TrainConfig",
    "algo_class",
    "allowed_hyperparams",
    "load_train_config",
    "parse_train_config",
]
