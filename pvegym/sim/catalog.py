"""The scenario catalog: every way to name a scenario, resolved by one function.

A scenario is named in one of three ways, and may be changed by overrides:

* a **named scenario** (:mod:`pvegym.sim.scenarios`: the field scenarios, ``contended-3node``) —
  a fixed cluster; a seed only drives the episode's randomness (workload noise, the LRM's timing);
* a randomized **family** (:mod:`pvegym.sim.families`: ``small``, ``medium``, ``trace``, …) — the
  seed picks the *instance* (which cluster), from the family's disjoint ``train`` and ``test``
  seed ranges (:func:`seeds`);
* a **scenario file** — a path ending in ``.toml``, in the format of the named scenarios' data.

**Overrides** are one mapping of dotted keys to values (``{"migration.bandwidth": "1GiB/s",
"nodes[0].maxcpu": 8}``), applied to the scenario's plain data before validation. An experiment
or study file writes them as ``set = {...}``, ``ClusterEnv`` takes them as ``overrides={...}``, and
the command line's ``--set KEY=VALUE`` is read into that mapping by :func:`parse_overrides`.

:func:`resolve` is the one lookup: ``simulate``, ``run``, ``tune``, ``train``, replays, the
environment and ``pvegym scenarios`` go through it. This module is part of the model (no
Gymnasium).
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pvegym.config import parse_value, read_toml, set_path
from pvegym.errors import ConfigError, show
from pvegym.sim import families, scenarios
from pvegym.sim.scenario import Scenario, scenario_from_dict
from pvegym.sim.trace_source import scenario_base

ScenarioData = dict[str, Any]
Overrides = Mapping[str, Any]
Split = Literal["train", "test"]


@dataclass(frozen=True)
class Resolved:
    """A validated scenario and its plain data (overrides applied: what a result is keyed on)."""

    scenario: Scenario
    data: ScenarioData


@dataclass(frozen=True)
class Entry:
    """One name of the catalog: a named scenario or a family (with its seed ranges)."""

    name: str
    kind: Literal["scenario", "family"]
    description: str
    train_seeds: range | None = None  # families: instance seeds for training and tuning
    test_seeds: range | None = None  # families: instance seeds for evaluation only


def is_family(name: str) -> bool:
    return families.is_family(name)


def is_file(name: str) -> bool:
    return name.endswith(".toml")


def names() -> list[str]:
    """Every catalog name: the named scenarios, then the families."""
    return [*scenarios.names(), *families.names()]


def entries() -> list[Entry]:
    """The named scenarios and the families, with descriptions and (families) seed ranges."""
    out = [Entry(n, "scenario", scenarios.describe(n)) for n in scenarios.names()]
    for n in families.names():
        spec = families.FAMILIES[n]
        out.append(Entry(n, "family", spec.description, spec.train_seeds, spec.test_seeds))
    return out


def describe(name: str) -> str:
    """One line about ``name`` (a family says so), or ``name`` itself for a file."""
    if is_family(name):
        return f"randomized family: {families.FAMILIES[name].description}"
    if name in scenarios.names():
        return scenarios.describe(name)
    return name


def seeds(name: str, split: Split) -> range:
    """The instance seeds of family ``name`` for ``split`` (``ConfigError`` for a non-family)."""
    if not is_family(name):
        raise ConfigError("split", f"{name!r} is not a family: only families have train/test seeds")
    spec = families.FAMILIES[name]
    return spec.train_seeds if split == "train" else spec.test_seeds


def parse_overrides(items: Iterable[str], where: str = "--set") -> dict[str, Any]:
    """``KEY=VALUE`` strings (the command line's ``--set``) as the overrides mapping; a value is
    read as TOML when it is one (``8``, ``true``, ``["a"]``), else taken as a string (``1GiB/s``)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(where, f"{item!r} is not KEY=VALUE")
        key, value = item.split("=", 1)
        out[key.strip()] = parse_value(value.strip())
    return out


def _source(name: str, seed: int, name_key: str) -> ScenarioData:
    """The plain data of ``name`` (a fresh copy): family instance ``seed``, a named scenario or a
    scenario file."""
    if is_family(name):
        return families.family_data(name, seed)
    if name in scenarios.names():
        return scenarios.scenario_data(name)
    if is_file(name):
        data = read_toml(Path(name), name_key, "scenario")
        data.setdefault("name", Path(name).stem)
        return data
    raise ConfigError(name_key, _unknown_scenario(name))


def _unknown_scenario(name: str) -> str:
    """The message for an unknown scenario: the closest names first (difflib, as Python's own
    "did you mean"), then every name when they fit in the line, else where they are listed."""
    allowed = names()
    close = difflib.get_close_matches(name, allowed, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    listed = ", ".join(allowed)
    if len(listed) > 120:
        listed = f"one of the {len(allowed)} names `pvegym scenarios` lists"
    return f"unknown scenario {show(name)} ({hint}allowed: {listed}, or a .toml file)"


def _subkey(base: str, key: str) -> str:
    return f"{base} {key}" if base.startswith("--") else f"{base}.{key}"


def resolve(
    name: str,
    seed: int = 0,
    overrides: Overrides | None = None,
    *,
    name_key: str = "scenario",
    set_key: str = "set",
) -> Resolved:
    """The validated scenario ``name`` (instance ``seed`` of a family) with ``overrides``.

    Errors are :class:`ConfigError`s at the caller's key paths: an unknown name or an unreadable
    file at ``name_key`` (``--scenario``, ``scenarios[0].name``); an override that names no key at
    ``set_key`` + the key (``--set nodes[9].maxcpu``, ``scenarios[0].set.nodes[9].maxcpu``); a
    scenario that does not validate at ``set_key`` when overrides were given, else at
    ``name_key``, with the scenario's own key path in the message.
    """
    sets = dict(overrides or {})
    data = _source(name, seed, name_key)
    for key, value in sets.items():
        try:
            set_path(data, key, copy.deepcopy(value))
        except ConfigError as err:
            raise ConfigError(_subkey(set_key, key), err.message) from None
    try:
        if is_family(name) and not sets:
            scn = families.build_scenario(data)  # valid by construction; much faster
        else:  # a file's relative trace_dirs are beside it (pvegym.sim.trace_source)
            with scenario_base(Path(name).resolve().parent if is_file(name) else None):
                scn = scenario_from_dict(data)
    except ConfigError as err:
        label = f"{name} (seed {seed})" if is_family(name) else name
        raise ConfigError(set_key if sets else name_key, f"{label}: {err}") from None
    return Resolved(scn, data)


def scenario(name: str, seed: int = 0, overrides: Overrides | None = None) -> Scenario:
    """``resolve(name, seed, overrides).scenario``: for code and tests that need no key paths."""
    return resolve(name, seed, overrides).scenario


def max_sizes(name: str, overrides: Overrides | None = None) -> tuple[int, int]:
    """``(max_nodes, max_HA_guests)`` any instance of ``name`` can have (a family's maxima, a
    fixed scenario's own sizes): the padding of the environment's spaces."""
    if is_family(name):
        return families.family_max_sizes(name)
    scn = resolve(name, 0, overrides).scenario
    return len(scn.nodes), sum(g.ha for g in scn.guests)


def duration(name: str, overrides: Overrides | None = None) -> float:
    """The default episode length of ``name`` (simulated seconds)."""
    if is_family(name) and not overrides:
        return families.FAMILIES[name].duration
    return float(resolve(name, 0, overrides).scenario.duration)
