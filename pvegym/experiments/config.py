"""The experiment file: one TOML file in ``experiments/`` that fully determines a run (``docs/experiments.md``).

```toml
name = "field-scenarios"                 # default: the file's stem (never inherited via extends)
description = "noop vs upstream vs patched on the field scenarios"
extends = "base.toml"                    # optional: another experiment file, relative to this one
metrics = ["moves", "moves_failed"]      # which metrics the summary and charts report (default all)
output = "field-scenarios"               # results/<output>/ (default: name)

[episode]
duration = "20m"                         # default episode length (default: each scenario's own)

[report]
bootstrap_resamples = 2000               # 95 % percentile bootstrap over seeds
bootstrap_seed = 0
timeline_seeds = 1                       # timelines for the first N seeds of each scenario

[[scenarios]]
name = "failure-loop"                    # a named scenario, a randomized family, or a .toml file
seeds = [0, 1, 2]                        # or {start = 0, count = 10}
duration = "20m"                         # optional, wins over [episode]
qemu_server = "patched"                  # optional: shorthand for set."migration.qemu_server"
set = { "migration.bandwidth" = "1GiB/s" }   # optional scenario overrides (like --set)
label = "failure-loop-1g"                # optional: tell two entries of one scenario apart

[[scenarios]]
name = "small"                           # a family: seeds must be test seeds ...
seeds = { start = 1000000, count = 10 }
split = "test"                           # ... unless split = "train"

[[policies]]
name = "upstream"                        # a registered policy (see `pvegym policies`)
label = "upstream-t0.4"                  # optional: the same policy twice with other constants
params = { threshold = 0.4 }             # its constants
```

``extends`` deep-merges tables (the child wins key by key); lists, including ``[[scenarios]]`` and
``[[policies]]``, are replaced as a whole, so what a file lists is exactly what runs. Every error is a
:class:`~pvegym.errors.ConfigError` naming the key path (``policies[1].params.threshold``), which the
CLI prints as one line with exit code 2.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pvegym.config import (
    check_dir_names,
    check_name,
    field,
    key_path,
    load,
    path_component,
    read_json,
    read_toml,
)
from pvegym.errors import ConfigError, show
from pvegym.limits import (
    MAX_BOOTSTRAP_DRAWS,
    MAX_CELLS,
    MAX_DURATION_S,
    MAX_RESAMPLES,
    MAX_SEED,
    MAX_SEEDS,
    MAX_TIMELINES,
    whole_number,
)
from pvegym.provenance import plain, sha256_json
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS

ScenarioData = dict[str, Any]


def parse_seeds(value: Any, path: str) -> tuple[int, ...]:
    """Seeds as a list (``[0, 1, 2]``) or a range table (``{start = 0, count = 10}``): whole
    numbers in ``0..``:data:`~pvegym.limits.MAX_SEED`, at most :data:`~pvegym.limits.MAX_SEEDS`
    of them, no duplicates."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"start", "count"})
        if unknown:
            raise ConfigError(key_path(path, unknown[0]), "unknown key (allowed: count, start)")
        for key in ("start", "count"):
            if key not in value:
                raise ConfigError(f"{path}.{key}", "is required")
        start = whole_number(value["start"], f"{path}.start", ge=0, le=MAX_SEED)
        count = whole_number(value["count"], f"{path}.count", ge=1, le=MAX_SEEDS)
        if start + count - 1 > MAX_SEED:
            raise ConfigError(
                f"{path}.count", f"the last seed would be {start + count - 1} (at most {MAX_SEED})"
            )
        return tuple(range(start, start + count))
    if not isinstance(value, list | tuple):
        raise ConfigError(path, f"must be a list of seeds or {{start, count}}, not {show(value)}")
    if not value:
        raise ConfigError(path, "must not be empty (list at least one seed)")
    if len(value) > MAX_SEEDS:
        raise ConfigError(path, f"at most {MAX_SEEDS} seeds, not {len(value)}")
    seeds: list[int] = []
    seen: set[int] = set()
    for i, v in enumerate(value):
        if isinstance(v, float):  # a JSON manifest may hold 3.0; a TOML file never
            v = whole_number(v, f"{path}[{i}]", ge=0, le=MAX_SEED)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{path}[{i}]", f"must be a whole number ≥ 0, not {show(v)}")
        whole_number(v, f"{path}[{i}]", ge=0, le=MAX_SEED)
        if v in seen:
            raise ConfigError(f"{path}[{i}]", f"duplicate seed {v}")
        seen.add(v)
        seeds.append(v)
    return tuple(seeds)


@dataclass(frozen=True)
class ScenarioEntry:
    """Scenarios to evaluate every policy on: a named scenario or family, and its seeds.

    For a family a seed is the *instance* seed (which cluster) and also the episode seed; for a
    named scenario it is the episode seed (workload noise, LRM timing). ``duration`` is simulated
    seconds (``"20m"`` accepted).
    """

    name: str
    seeds: tuple[int, ...] = field(parse=parse_seeds)
    label: str = ""
    split: Literal["test", "train"] = "test"
    duration: float | None = field(None, gt=0.0, le=MAX_DURATION_S, unit="duration")
    qemu_server: Literal["unpatched", "patched"] | None = None
    set: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> str:
        """How reports name this entry: its label, else its scenario name."""
        return self.label or self.name

    def overrides(self) -> dict[str, Any]:
        """The scenario overrides of this entry, ``qemu_server`` included, in a stable order."""
        out = dict(sorted(self.set.items()))
        if self.qemu_server is not None:
            out["migration.qemu_server"] = self.qemu_server
        return out

    def validate(self, path: str) -> None:
        if self.label:
            check_name(self.label, f"{path}.label", "label")
        if catalog.is_family(self.name):
            allowed = catalog.seeds(self.name, self.split)
            for i, s in enumerate(self.seeds):
                if s not in allowed:
                    raise ConfigError(
                        f"{path}.seeds[{i}]",
                        f"{s} is not a {self.split} seed of family {self.name!r} "
                        f"(allowed: {allowed.start}..{allowed.stop - 1}"
                        + (
                            ")" if self.split == "train" else '; set split = "train" to use others)'
                        ),
                    )
        elif self.split != "test":
            raise ConfigError(f"{path}.split", "only families have train/test seeds")
        # build once: an unknown scenario or a bad override fails here, naming the key
        catalog.resolve(
            self.name,
            self.seeds[0],
            self.overrides(),
            name_key=f"{path}.name",
            set_key=f"{path}.set",
        )


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy with its constants; ``label`` tells two entries of one policy apart."""

    name: str
    label: str = ""
    params: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> str:
        return self.label or self.name

    def validate(self, path: str) -> None:
        if self.label:
            check_name(self.label, f"{path}.label", "label")
        build_policy(self.name, self.params, path)


def build_policy(name: str, params: dict[str, Any], path: str = "policy") -> Any:
    """``make_policy`` with every error rewritten to name this file's key path."""
    from pvegym.policies.registry import available, make_policy

    if name not in available():
        raise ConfigError(
            f"{path}.name", f"unknown policy {name!r} (allowed: {', '.join(available())})"
        )
    try:
        return make_policy(name, f"{path}.params", **params)
    except ConfigError as err:
        if err.path.startswith(f"{path}."):
            raise
        key = err.path.split(".", 1)[1] if "." in err.path else ""
        raise ConfigError(f"{path}.params" + (f".{key}" if key else ""), err.message) from None
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{path}.params", str(err)) from None


@dataclass(frozen=True)
class EpisodeOptions:
    """Episode settings shared by every scenario entry; ``duration`` in simulated seconds."""

    duration: float | None = field(None, gt=0.0, le=MAX_DURATION_S, unit="duration")


@dataclass(frozen=True)
class ReportOptions:
    """How the report summarizes seeds: a seeded percentile bootstrap (95 %), and how many seeds
    per scenario get a timeline plot (the first ones listed)."""

    bootstrap_resamples: int = field(2000, ge=100, le=MAX_RESAMPLES)
    bootstrap_seed: int = field(0, ge=0, le=MAX_SEED)
    timeline_seeds: int = field(1, ge=0, le=MAX_TIMELINES)


@dataclass(frozen=True)
class Experiment:
    """A whole experiment: policies × scenarios × seeds, what to report and where."""

    name: str
    scenarios: tuple[ScenarioEntry, ...] = field(max_items=10_000)
    policies: tuple[PolicyEntry, ...] = field(max_items=10_000)
    description: str = ""
    extends: str | None = None
    metrics: tuple[str, ...] = dataclasses.field(default_factory=lambda: tuple(METRIC_KEYS))
    episode: EpisodeOptions = EpisodeOptions()
    report: ReportOptions = ReportOptions()
    output: str = ""

    @property
    def out_name(self) -> str:
        return self.output or self.name

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        lists = {
            "scenarios": [e.key for e in self.scenarios],
            "policies": [p.key for p in self.policies],
        }
        for key, labels in lists.items():
            if not labels:
                raise ConfigError(f"{pre}{key}", "must list at least one entry")
            first: dict[str, int] = {}  # records/<scenario>/<policy>/: one file name each
            for i, label in enumerate(labels):
                j = first.setdefault(path_component(label), i)
                if j != i:
                    raise ConfigError(
                        f"{pre}{key}[{i}]",
                        f"{show(label)} is already {key}[{j}]"
                        + ("" if labels[j] == label else " as a file name")
                        + " (give one a label)",
                    )
        cells = sum(len(e.seeds) for e in self.scenarios) * len(self.policies)
        if cells > MAX_CELLS:
            raise ConfigError(
                f"{pre}scenarios", f"{cells} episodes (seeds × policies; at most {MAX_CELLS})"
            )
        most = max(len(e.seeds) for e in self.scenarios)
        if self.report.bootstrap_resamples * most > MAX_BOOTSTRAP_DRAWS:
            raise ConfigError(
                f"{pre}report.bootstrap_resamples",
                f"{self.report.bootstrap_resamples} resamples × {most} seeds is more than "
                f"{MAX_BOOTSTRAP_DRAWS} draws (use fewer resamples)",
            )
        if not self.metrics:
            raise ConfigError(f"{pre}metrics", "must name at least one metric")
        for i, m in enumerate(self.metrics):
            if m not in METRIC_KEYS:
                raise ConfigError(
                    f"{pre}metrics[{i}]",
                    f"unknown metric {m!r} (allowed: {', '.join(METRIC_KEYS)})",
                )
        check_dir_names(pre, self.name, self.out_name)

    def resolved(self) -> dict[str, Any]:
        """The fully resolved config (``extends`` merged, defaults filled) as plain JSON data.

        Loading it again gives the same experiment; its hash identifies the run.
        """
        data = plain(dataclasses.asdict(self))
        data.pop("extends", None)
        return dict(data)

    def config_hash(self) -> str:
        return sha256_json(self.resolved())


#: most files an ``extends`` chain may have
MAX_EXTENDS = 32


def _deep_merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in child.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _relative_scenario_files(path: Path, data: dict[str, Any]) -> None:
    """``.toml`` scenario names are relative to their experiment file; make them usable from the
    working directory (relative to it when possible, so the resolved config stays portable)."""
    entries = data.get("scenarios")
    for entry in entries if isinstance(entries, list) else []:
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.endswith(".toml") and not Path(name).is_absolute():
            try:
                target = (path.parent / name).resolve()
            except (OSError, RuntimeError, ValueError):
                continue  # an unusable name: the scenario's own reader says why
            try:
                entry["name"] = str(target.relative_to(Path.cwd()))
            except ValueError:
                entry["name"] = str(target)


def _read_chain(path: Path, where: str, chain: tuple[Path, ...]) -> dict[str, Any]:
    """One file merged over what it ``extends`` (recursively; a cycle is an error)."""
    data = read_toml(path, where, "experiment")
    _relative_scenario_files(path, data)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent or "\x00" in parent:
        raise ConfigError("extends", f"must be a path (string), not {show(parent)}")
    if len(chain) >= MAX_EXTENDS:
        raise ConfigError("extends", f"more than {MAX_EXTENDS} files deep")
    try:
        parent_path = (path.parent / parent).resolve()
    except (OSError, RuntimeError) as err:
        raise ConfigError("extends", f"{show(parent)}: {type(err).__name__}") from None
    if parent_path in chain:
        raise ConfigError("extends", f"{show(parent)} extends itself (a cycle through {path.name})")
    base = _read_chain(parent_path, "extends", (*chain, parent_path))
    base.pop("name", None)  # a child is its own experiment: its own name, or its file's stem
    base.pop("output", None)
    try:
        return _deep_merge(base, data)
    except RecursionError:
        raise ConfigError("extends", "tables nested too deeply to merge") from None


def experiment_data(path: str | Path) -> dict[str, Any]:
    """The plain data of an experiment file with ``extends`` merged (not yet validated)."""
    if "\x00" in str(path) or not str(path):
        raise ConfigError("experiment", f"{show(str(path))} is not a file name")
    try:
        p = Path(path).resolve()
    except (OSError, RuntimeError) as err:  # a name too long, a symlink loop
        raise ConfigError("experiment", f"{show(str(path))}: {type(err).__name__}") from None
    data = _read_chain(p, "experiment", (p,))
    data.setdefault("name", p.stem)
    return data


def load_experiment(path: str | Path) -> Experiment:
    """Read, merge (``extends``) and validate an experiment file, or a run's ``manifest.json``
    (whose resolved config reruns that run exactly)."""
    p = Path(path)
    if p.suffix == ".json":
        doc = read_json(p, "experiment", "manifest")
        if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
            raise ConfigError("experiment", f"{show(str(p), 100)} is not a pvegym run manifest")
        return load(Experiment, doc["config"])
    data = experiment_data(p)
    check_file_kind(data, p, "experiment")
    return load(Experiment, data)


#: the keys that tell the other input files from an experiment, and the command that reads each
_FILE_KINDS = (
    ("scenario", ("nodes", "guests"), "pvegym simulate --scenario {file}"),
    ("study", ("objectives", "params", "n_trials"), "pvegym tune {file}"),
    ("training", ("algo", "total_timesteps", "hyperparams"), "pvegym train {file}"),
    ("experiment", ("policies", "scenarios"), "pvegym run {file}"),
)


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def check_file_kind(data: dict[str, Any], file: Path, want: str) -> None:
    """A file of another kind than ``want`` (a scenario or study file given to ``pvegym run``)
    is a one-line error naming the file, what it is and the command that reads it — not the
    first key the wrong schema does not know."""
    for kind, keys, command in _FILE_KINDS:
        if kind != want and any(k in data for k in keys):
            shown = show(str(file), 100, quote=False)
            raise ConfigError(
                shown,
                f"is {_a(kind)} file, not {_a(want)} file (it has "
                f"{', '.join(k for k in keys if k in data)}): run {command.format(file=shown)}",
            )
