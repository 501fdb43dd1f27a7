"""The study file: one TOML file in ``experiments/`` that fully determines an Optuna study (``docs/experiments.md``).

```toml
name = "tune-patched"                     # default: the file's stem; results/<output or name>/
description = "..."
n_trials = 200                            # the study's total budget (all workers, all runs)
timeout_s = "15m"                         # optional: each worker stops after this wall time
enqueue_defaults = true                   # trial 0 = the policy's (and migration's) defaults

[policy]                                  # the base policy and constants that are not tuned
name = "patched"
params = { method = "bruteforce" }

[params.min_improvement]                  # one search dimension; the Optuna parameter's name
target = "policy.min_improvement"         # default policy.<name>; or scenario.migration.<field>
low = 0.0
high = 0.3
# log = true (low > 0) | step = 0.01 | int = true | choices = [true, false] (instead of low/high)

[[train]]                                 # instances the candidates are scored on
name = "failure-loop"                     # a named scenario, a family or a .toml scenario file
seeds = [0, 1, 2]                         # or {start = 0, count = 3}; families: train seeds
duration = "20m"                          # optional; qemu_server, set, label as in experiments
[[test]]                                  # held-out instances (disjoint from [[train]])
name = "failure-loop"
seeds = { start = 100, count = 10 }       # families: test seeds

[[objectives]]                            # one: single-objective; several: a Pareto front
name = "cost"
weights = { guest_stall_s = 1.0, moves = 60.0 }   # or metric = "guest_stall_s"
direction = "minimize"

constraints = ["failed_repeats <= 0"]     # mean over training instances; feasible when true

[sampler]
type = "tpe"                              # or "nsga2"
seed = 0

[pruner]                                  # or pruner = "wilcoxon"
type = "wilcoxon"                         # single-objective only; "none" by default
p_threshold = 0.1
```

An objective's value for a candidate is the **mean over the training instances** (one simulation
per scenario × seed) of the per-instance value ``Σ weight × metric`` — a mean, because
:class:`optuna.pruners.WilcoxonPruner` compares trials instance by instance and requires the
objective to be the average of the reported per-instance values. A metric without a value on an
episode (``evacuation_latency_s`` when nothing moved off the hot node) counts as the episode's
length: "never evacuated" is as late as it gets.

Every error is a :class:`~pvegym.errors.ConfigError` naming the key path (``params.ema_alpha.low``,
``test[0].seeds[2]``, ``objectives[0].weights.stall``), printed by the CLI as one line, exit code 2.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pvegym.config import check_dir_names, field, load, read_json
from pvegym.errors import ConfigError, show
from pvegym.experiments.config import (
    EpisodeOptions,
    ScenarioEntry,
    build_policy,
    check_file_kind,
    experiment_data,
    sha256_json,
)
from pvegym.limits import (
    MAX_BOOTSTRAP_DRAWS,
    MAX_DURATION_S,
    MAX_RESAMPLES,
    MAX_SEED,
    MAX_SEEDS,
    MAX_TIMELINES,
    MAX_TRIALS,
    check_number,
)
from pvegym.provenance import plain
from pvegym.sim import catalog
from pvegym.sim.cost import COSTS, check_weights
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import MigrationSettings

#: keys of a study file that do not change what a trial means (budget, reporting): left out of the
#: hash that must match when a worker joins an existing study.
BUDGET_KEYS = ("n_trials", "timeout_s", "report", "description")

POLICY_PREFIX = "policy."
SCENARIO_PREFIX = "scenario.migration."


# ------------------------------------------------------------------------------------------ parts
@dataclass(frozen=True)
class PolicySpec:
    """The base policy (a registered name) and its constants that stay fixed during the study."""

    name: str = "patched"
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    def validate(self, path: str) -> None:
        build_policy(self.name, self.params, path)


@dataclass(frozen=True)
class ParamSpec:
    """One search dimension. ``target`` is ``policy.<constant>`` (a field of the policy's
    ``Config``) or ``scenario.migration.<field>`` (qemu-server's migration settings, e.g. the
    convergence patch's ``boost_factor``/``abort_factor``). A numeric range ``[low, high]`` (``log`` for a
    log-uniform prior, ``step`` for a grid, ``int`` for whole numbers) or a list of ``choices``.
    ``int`` is the last field: as a class attribute it shadows the builtin in this class body."""

    target: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple[Any, ...] | None = None
    int: bool = False

    def validate(self, path: str) -> None:
        if self.choices is not None:
            if self.low is not None or self.high is not None:
                raise ConfigError(f"{path}.choices", "give either choices or low/high, not both")
            if self.log or self.step is not None or self.int:
                raise ConfigError(f"{path}.choices", "log, step and int apply to ranges only")
            if not self.choices:
                raise ConfigError(f"{path}.choices", "must list at least one value")
            for i, c in enumerate(self.choices):
                if not isinstance(c, bool | int | float | str):
                    raise ConfigError(f"{path}.choices[{i}]", f"must be a scalar, not {show(c)}")
                if isinstance(c, float):
                    check_number(c, f"{path}.choices[{i}]")
            return
        for key in ("low", "high"):
            if getattr(self, key) is None:
                raise ConfigError(f"{path}.{key}", "is required (or give choices)")
            if not math.isfinite(getattr(self, key)):
                raise ConfigError(f"{path}.{key}", "must be finite")
        low, high = float(self.low), float(self.high)  # type: ignore[arg-type]
        if not low < high:
            raise ConfigError(
                f"{path}.high", f"empty range: high ({high:g}) must be > low ({low:g})"
            )
        if self.log and low <= 0:
            raise ConfigError(
                f"{path}.low", f"a log scale needs low > 0, not {low:g} (use a linear range)"
            )
        if self.int:
            for key in ("low", "high", "step"):
                v = getattr(self, key)
                if v is not None and float(v) != int(v):
                    raise ConfigError(f"{path}.{key}", f"must be a whole number (int), not {v!r}")
        if self.step is not None:
            if self.log:
                raise ConfigError(f"{path}.step", "a log scale takes no step (Optuna)")
            if not (0 < self.step <= high - low):
                raise ConfigError(
                    f"{path}.step",
                    f"must be in (0, high − low = {high - low:g}], not {self.step!r}",
                )

    @property
    def is_policy(self) -> bool:
        return self.target.startswith(POLICY_PREFIX)

    @property
    def key(self) -> str:
        """The constant's name (``ema_alpha``) or the scenario override key (``migration.x``)."""
        if self.is_policy:
            return self.target[len(POLICY_PREFIX) :]
        return self.target[len("scenario.") :]

    def probe_values(self) -> list[tuple[str, Any]]:
        """(key path suffix, value) pairs that must all be acceptable: the bounds or each choice."""
        if self.choices is not None:
            return [(f"choices[{i}]", c) for i, c in enumerate(self.choices)]
        low, high = float(self.low or 0.0), float(self.high or 0.0)  # validated: not None
        if self.int:
            return [("low", round(low)), ("high", round(high))]
        return [("low", low), ("high", high)]


@dataclass(frozen=True)
class ObjectiveSpec:
    """One objective: a single ``metric`` (``docs/metrics.md``), a weighted sum (``weights``: metric → weight, in
    the objective's unit per metric unit) or a named ``cost`` of :data:`pvegym.sim.cost.COSTS`
    (``"balancer"``: the one the environment's reward defaults to), minimized or maximized."""

    name: str = ""
    metric: str | None = None
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    cost: str | None = None
    direction: Literal["minimize", "maximize"] = "minimize"

    @property
    def label(self) -> str:
        return self.name or self.metric or self.cost or "cost"

    def terms(self) -> dict[str, float]:
        """metric → weight (a single metric has weight 1)."""
        if self.metric is not None:
            return {self.metric: 1.0}
        if self.cost is not None:
            return dict(COSTS[self.cost])
        return dict(self.weights)

    def validate(self, path: str) -> None:
        if sum((self.metric is not None, bool(self.weights), self.cost is not None)) != 1:
            raise ConfigError(path, "give exactly one of metric, weights or cost")
        if self.metric is not None and self.metric not in METRIC_KEYS:
            raise ConfigError(f"{path}.metric", _unknown_metric(self.metric))
        if self.cost is not None and self.cost not in COSTS:
            raise ConfigError(
                f"{path}.cost", f"unknown cost {self.cost!r} (allowed: {', '.join(COSTS)})"
            )
        check_weights(self.weights, f"{path}.weights")


def _unknown_metric(m: str) -> str:
    return f"unknown metric {m!r} (allowed: {', '.join(METRIC_KEYS)})"


@dataclass(frozen=True)
class Constraint:
    """``metric op bound`` on the metric's mean over the training instances; Optuna's convention:
    :meth:`violation` ≤ 0 is feasible."""

    metric: str
    op: Literal["<=", ">="]
    bound: float

    def violation(self, mean: float) -> float:
        return mean - self.bound if self.op == "<=" else self.bound - mean

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


_CONSTRAINT = re.compile(r"^\s*([a-z_0-9]+)\s*(<=|>=)\s*([-+0-9.eE]+)\s*$")


def parse_constraints(value: Any, path: str) -> tuple[Constraint, ...]:
    if not isinstance(value, list):
        raise ConfigError(path, f'must be a list like ["failed_repeats <= 0"], not {value!r}')
    out = []
    for i, item in enumerate(value):
        m = _CONSTRAINT.match(item) if isinstance(item, str) else None
        if m is None:
            raise ConfigError(
                f"{path}[{i}]", f'must read "METRIC <= NUMBER" or ">=", not {show(item)}'
            )
        metric, op, bound = m.group(1), m.group(2), m.group(3)
        if metric not in METRIC_KEYS:
            raise ConfigError(f"{path}[{i}]", _unknown_metric(metric))
        try:
            b = float(bound)
        except ValueError:
            raise ConfigError(f"{path}[{i}]", f"{show(bound)} is not a number") from None
        check_number(b, f"{path}[{i}]")
        out.append(Constraint(metric, op, b))  # type: ignore[arg-type]
    return tuple(out)


@dataclass(frozen=True)
class SamplerSpec:
    """Optuna's sampler: TPE (single or multi-objective; ``n_startup_trials`` random trials first)
    or NSGA-II (multi-objective; ``population_size`` trials per generation); ``seed`` makes a
    sequential study reproducible."""

    type: Literal["tpe", "nsga2"] = "tpe"
    seed: int = field(0, ge=0, le=MAX_SEED)
    n_startup_trials: int = field(10, ge=0, le=MAX_TRIALS)
    multivariate: bool = True
    population_size: int = field(20, ge=2, le=10_000)


@dataclass(frozen=True)
class PrunerSpec:
    """``wilcoxon``: :class:`optuna.pruners.WilcoxonPruner` stops a trial once a one-sided
    Wilcoxon signed-rank test over the instances evaluated so far says it is worse than the best
    trial (``p < p_threshold``), after at least ``n_startup_steps`` instances."""

    type: Literal["none", "wilcoxon"] = "none"
    p_threshold: float = field(0.1, gt=0.0, lt=1.0)
    n_startup_steps: int = field(2, ge=0, le=MAX_SEEDS)


def _parse_pruner(value: Any, path: str) -> PrunerSpec:
    if isinstance(value, str):
        value = {"type": value}
    return load(PrunerSpec, value, path)


@dataclass(frozen=True)
class ReportSpec:
    """Held-out report: bootstrap settings (95 % percentile CIs over instances), how many
    Pareto-optimal trials to re-evaluate at most, timelines per test scenario."""

    bootstrap_resamples: int = field(2000, ge=100, le=MAX_RESAMPLES)
    bootstrap_seed: int = field(0, ge=0, le=MAX_SEED)
    pareto_max: int = field(5, ge=1, le=100)
    timeline_seeds: int = field(0, ge=0, le=MAX_TIMELINES)


def _suite(split: Literal["train", "test"]) -> Any:
    """Parse ``[[train]]``/``[[test]]``: experiment scenario entries, families on the right split."""

    def parse(value: Any, path: str) -> tuple[ScenarioEntry, ...]:
        if not isinstance(value, list):
            raise ConfigError(path, f"must be a list of [[{path}]] tables, not {value!r}")
        if not value:
            raise ConfigError(path, "must list at least one scenario")
        out = []
        for i, item in enumerate(value):
            where = f"{path}[{i}]"
            if not isinstance(item, dict):
                raise ConfigError(where, f"must be a table, not {item!r}")
            item = dict(item)
            if catalog.is_family(str(item.get("name", ""))):
                given = item.setdefault("split", split)
                if given != split:
                    raise ConfigError(
                        f"{where}.split",
                        f"the {split} suite uses {split} seeds of a family, not {given!r}",
                    )
            out.append(load(ScenarioEntry, item, where))
        return tuple(out)

    return parse


def _parse_params(value: Any, path: str) -> dict[str, ParamSpec]:
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a table of [params.<name>] tables, not {value!r}")
    out = {}
    for name, spec in value.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{path}.{name}", f"must be a table, not {spec!r}")
        spec = dict(spec)
        spec.setdefault("target", f"{POLICY_PREFIX}{name}")
        out[str(name)] = load(ParamSpec, spec, f"{path}.{name}")
    return out


# ------------------------------------------------------------------------------------------ study
@dataclass(frozen=True)
class StudyConfig:
    """A whole study: what is tuned, on which instances, for what, with which sampler and budget."""

    name: str
    params: dict[str, ParamSpec] = field(parse=_parse_params)  # noqa: RUF009 (frozen, immutable)
    train: tuple[ScenarioEntry, ...] = field(parse=_suite("train"))
    test: tuple[ScenarioEntry, ...] = field(parse=_suite("test"))
    #: default: the benchmark's one cost (``BALANCER_COST``, also the environment's reward)
    objectives: tuple[ObjectiveSpec, ...] = (ObjectiveSpec(cost="balancer"),)
    policy: PolicySpec = PolicySpec()
    description: str = ""
    extends: str | None = None
    constraints: tuple[Constraint, ...] = field((), parse=parse_constraints)
    sampler: SamplerSpec = SamplerSpec()
    pruner: PrunerSpec = field(PrunerSpec(), parse=_parse_pruner)  # noqa: RUF009 (frozen, immutable)
    n_trials: int = field(100, ge=1, le=MAX_TRIALS)
    timeout_s: float | None = field(None, gt=0.0, le=MAX_DURATION_S, unit="duration")
    enqueue_defaults: bool = True
    episode: EpisodeOptions = EpisodeOptions()  # noqa: RUF009 (frozen, immutable)
    report: ReportSpec = ReportSpec()
    output: str = ""

    @property
    def out_name(self) -> str:
        return self.output or self.name

    @property
    def multi_objective(self) -> bool:
        return len(self.objectives) > 1

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        check_dir_names(pre, self.name, self.out_name)
        if not self.objectives:
            raise ConfigError(f"{pre}objectives", "must list at least one objective")
        labels = [o.label for o in self.objectives]
        for i, label in enumerate(labels):
            if labels.index(label) != i:
                raise ConfigError(f"{pre}objectives[{i}].name", f"{label!r} is already used")
        if self.multi_objective and self.pruner.type != "none":
            raise ConfigError(
                f"{pre}pruner.type",
                f"{self.pruner.type!r} prunes single-objective studies only "
                f"({len(self.objectives)} objectives here)",
            )
        if not self.params:
            raise ConfigError(f"{pre}params", "must define at least one [params.<name>]")
        instances = sum(len(e.seeds) for e in self.test)
        if self.report.bootstrap_resamples * instances > MAX_BOOTSTRAP_DRAWS:
            raise ConfigError(
                f"{pre}report.bootstrap_resamples",
                f"{self.report.bootstrap_resamples} resamples × {instances} test instances is "
                f"more than {MAX_BOOTSTRAP_DRAWS} draws (use fewer resamples)",
            )
        self._validate_params(pre)
        self._validate_disjoint(pre)

    def _validate_params(self, pre: str) -> None:
        policy = build_policy(self.policy.name, self.policy.params, f"{pre}policy")
        cfg = getattr(policy, "config", None)
        constants = (
            sorted(f.name for f in dataclasses.fields(cfg))
            if cfg is not None and dataclasses.is_dataclass(cfg)
            else []
        )
        migration = sorted(f.name for f in dataclasses.fields(MigrationSettings))
        seen: dict[str, str] = {}
        for name, spec in self.params.items():
            where = f"{pre}params.{name}"
            t = spec.target
            if spec.is_policy:
                const = spec.key
                if const not in constants:
                    raise ConfigError(
                        f"{where}.target",
                        f"unknown parameter {const!r}: not a constant of policy "
                        f"{self.policy.name!r} (allowed: {', '.join(constants) or 'none'})",
                    )
                if const in self.policy.params:
                    raise ConfigError(
                        f"{where}.target", f"{const!r} is also fixed in policy.params (choose one)"
                    )
            elif t.startswith(SCENARIO_PREFIX):
                fld = t[len(SCENARIO_PREFIX) :]
                if fld not in migration:
                    raise ConfigError(
                        f"{where}.target",
                        f"unknown parameter {fld!r}: not a migration setting "
                        f"(allowed: {', '.join(migration)})",
                    )
            else:
                raise ConfigError(
                    f"{where}.target",
                    f"unknown parameter {t!r}: must be policy.<constant> or "
                    f"scenario.migration.<setting>",
                )
            if t in seen:
                raise ConfigError(f"{where}.target", f"{t!r} is already tuned by params.{seen[t]}")
            seen[t] = name
            for suffix, value in spec.probe_values():
                self._probe(spec, value, f"{where}.{suffix}")

    def _probe(self, spec: ParamSpec, value: Any, where: str) -> None:
        """The policy / migration settings must accept ``value`` (a bound or a choice)."""
        try:
            if spec.is_policy:
                build_policy(self.policy.name, {**self.policy.params, spec.key: value}, "p")
            else:
                load(MigrationSettings, {spec.key.split(".", 1)[1]: value}, "m")
        except ConfigError as err:
            raise ConfigError(where, f"{value!r} is not accepted: {err.message}") from None

    def _validate_disjoint(self, pre: str) -> None:
        """No (scenario, seed) may be both a training and a held-out instance."""
        train: dict[tuple[str, int], int] = {}
        for k, entry in enumerate(self.train):
            for seed in entry.seeds:
                train.setdefault((entry.name, seed), k)
        for i, entry in enumerate(self.test):
            for j, seed in enumerate(entry.seeds):
                other = train.get((entry.name, seed))
                if other is not None:
                    raise ConfigError(
                        f"{pre}test[{i}].seeds[{j}]",
                        f"seed {seed} of {entry.name!r} is also in train[{other}]: "
                        "train and test instances must be disjoint",
                    )

    # -------------------------------------------------------------------------------- helpers
    def defaults(self) -> dict[str, Any]:
        """Parameter name → the value the base policy / migration settings use without tuning
        (the field report's constants: what the held-out report compares the tuned values with)."""
        policy = build_policy(self.policy.name, self.policy.params)
        cfg = getattr(policy, "config", None)
        ms = MigrationSettings()
        out: dict[str, Any] = {}
        for name, spec in self.params.items():
            if spec.is_policy:
                out[name] = getattr(cfg, spec.key)
            else:
                out[name] = getattr(ms, spec.key.split(".", 1)[1])
        return out

    def split_values(self, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Trial parameters → (policy constants incl. the fixed ones, scenario overrides)."""
        policy = dict(self.policy.params)
        scenario: dict[str, Any] = {}
        for name, value in values.items():
            spec = self.params[name]
            if spec.is_policy:
                policy[spec.key] = value
            else:
                scenario[spec.key] = value
        return dict(sorted(policy.items())), dict(sorted(scenario.items()))

    def resolved(self) -> dict[str, Any]:
        """The fully resolved study (defaults filled, ``extends`` merged) as plain JSON data."""
        data = plain(dataclasses.asdict(self))
        data.pop("extends", None)
        data["constraints"] = [str(c) for c in self.constraints]
        return dict(data)

    def study_hash(self) -> str:
        """SHA-256 of what a trial means (the resolved config without budget/report keys):
        workers may join a study only with the same hash."""
        data = self.resolved()
        for key in BUDGET_KEYS:
            data.pop(key, None)
        return sha256_json(data)

    def config_hash(self) -> str:
        return sha256_json(self.resolved())


def load_study_config(path: str | Path) -> StudyConfig:
    """Read, merge (``extends``) and validate a study file; errors name the key path."""
    p = Path(path)
    if p.suffix == ".json":
        doc = read_json(p, "study", "study")
        return study_from_dict(doc.get("config", doc) if isinstance(doc, dict) else doc)
    try:
        data = experiment_data(p)
    except ConfigError as err:
        if err.path == "experiment":
            raise ConfigError("study", err.message.replace("experiment", "study")) from None
        raise
    check_file_kind(data, p, "study")
    return study_from_dict(data)


def study_from_dict(data: Any) -> StudyConfig:
    """A validated study from plain data (a parsed TOML file, or a stored resolved config)."""
    if isinstance(data, dict) and isinstance(data.get("constraints"), list):
        data = dict(data)
    return load(StudyConfig, data)
