"""Named scenarios: plain data built by a function of the seed-independent scenario name.

Each entry returns the dict of a :class:`~pvegym.sim.scenario.Scenario` (the same format a TOML
scenario file uses), so ``--set key=value`` overrides and validation work the same for all.
Randomness (workload noise, the LRM's timing) comes from the episode seed, not from here.

``MODEL.md`` §10 describes the field scenarios; the figures they are built from are the seeds'
(``../seeds/000_*``: a two-node PVE 9.2 cluster, an idle night with the imbalance metric near 49 %,
pressure appearing on one node; ``../seeds/004_*``: a 24 GiB guest at ~430 MiB/s).
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pvegym.config import parse_value, set_path
from pvegym.errors import ConfigError
from pvegym.sim.scenario import Scenario, scenario_from_dict

GiB = 2**30
MiB = 2**20

ScenarioData = dict[str, Any]
_REGISTRY: dict[str, Callable[[], ScenarioData]] = {}


def scenario(name: str) -> Callable[[Callable[[], ScenarioData]], Callable[[], ScenarioData]]:
    def deco(fn: Callable[[], ScenarioData]) -> Callable[[], ScenarioData]:
        _REGISTRY[name] = fn
        return fn

    return deco


def names() -> list[str]:
    return sorted(_REGISTRY)


def describe(name: str) -> str:
    return str(_REGISTRY[name]().get("description", ""))


def scenario_data(name: str) -> ScenarioData:
    """Plain data of a named scenario, or of a TOML scenario file when ``name`` is a path."""
    if name in _REGISTRY:
        return copy.deepcopy(_REGISTRY[name]())
    path = Path(name)
    if path.suffix == ".toml":
        if not path.is_file():
            raise ConfigError("--scenario", f"no such scenario file {name!r}")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(str(path), f"not valid TOML: {err}") from None
        data.setdefault("name", path.stem)
        return data
    raise ConfigError(
        "--scenario", f"unknown scenario {name!r} (allowed: {', '.join(names())}, or a .toml file)"
    )


def load_scenario(name: str, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """A validated scenario by name or file, with ``KEY=VALUE`` overrides applied first."""
    data = scenario_data(name)
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--set", f"{item!r} is not KEY=VALUE")
        key, value = item.split("=", 1)
        set_path(data, key.strip(), parse_value(value.strip()))
    return scenario_from_dict(data)


# --------------------------------------------------------------------------------------------
# helpers


def _noise(mean: float, sigma: float, tau: float = 120.0) -> dict[str, Any]:
    return {"type": "ou", "mean": mean, "sigma": sigma, "tau": tau}


def _node(
    name: str, cores: int, mem_gib: float, base_cpu: Any = 0.0, base_mem: Any = 0.0
) -> dict[str, Any]:
    return {
        "name": name,
        "maxcpu": cores,
        "maxmem": mem_gib * GiB,
        "base_cpu": base_cpu,
        "base_mem": base_mem,
    }


def _vm(
    sid: str, node: str, vcpus: int, mem_gib: float, cpu: Any, memhost: Any, **kw: Any
) -> dict[str, Any]:
    return {
        "sid": sid,
        "node": node,
        "maxcpu": vcpus,
        "maxmem": mem_gib * GiB,
        "cpu": cpu,
        "memhost": memhost,
        **kw,
    }


# --------------------------------------------------------------------------------------------
# named scenarios


@scenario("idle-night")
def idle_night() -> ScenarioData:
    """The seed's idle night: two nodes, an imbalance metric near 0.49 all night that no motion can
    remove (it comes from host load and ZFS ARC on one node), night-time noise, no pressure."""
    return {
        "name": "idle-night",
        "description": "2 nodes, 8 h night, imbalance ~0.49 mostly from host/ARC load, no pressure",
        "duration": "8h",
        "nodes": [
            # node1 carries a large ZFS ARC and host services: memory in use no VM accounts for
            _node(
                "node1",
                16,
                64,
                base_cpu=_noise(0.6, 0.08),
                base_mem=[{"type": "constant", "level": 26 * GiB}, _noise(0.0, 0.15 * GiB, 300.0)],
            ),
            _node(
                "node2",
                16,
                64,
                base_cpu=_noise(0.3, 0.05),
                base_mem=[{"type": "constant", "level": 3 * GiB}, _noise(0.0, 0.05 * GiB, 300.0)],
            ),
        ],
        "guests": [
            _vm("vm:101", "node1", 2, 8, _noise(0.15, 0.05), 6 * GiB, mem_ratio=0.7),
            _vm("vm:102", "node1", 2, 4, _noise(0.08, 0.03), 3 * GiB, mem_ratio=0.8),
            _vm("vm:103", "node2", 2, 8, _noise(0.10, 0.04), 5 * GiB, mem_ratio=0.7),
            _vm("vm:104", "node2", 1, 2, _noise(0.05, 0.02), 1.5 * GiB, mem_ratio=0.8),
        ],
    }


@scenario("contended-3node")
def contended_3node() -> ScenarioData:
    """Three nodes; node1 is overloaded by busy guests with diurnal load and bursts, node3 idle.
    A balancer that moves one or two guests off node1 removes most of the CPU pressure."""
    g: list[dict[str, Any]] = []
    for i in range(6):
        cpu = [
            {"type": "constant", "level": 2.2},
            {"type": "diurnal", "amplitude": 0.5, "period": 3600, "phase": 600 * i},
            _noise(0.0, 0.3, 60.0),
            {"type": "bursts", "rate_per_hour": 2, "height": 1.5, "duration": 120},
        ]
        g.append(
            _vm(f"vm:{101 + i}", "node1", 4, 8, cpu, 6 * GiB, dirty_rate=40 * MiB, wws=2 * GiB)
        )
    for i in range(3):
        g.append(
            _vm(
                f"vm:{201 + i}",
                "node2",
                4,
                8,
                [{"type": "constant", "level": 1.5}, _noise(0.0, 0.2)],
                5 * GiB,
                dirty_rate=20 * MiB,
                wws=1 * GiB,
            )
        )
    g.append(_vm("vm:301", "node3", 2, 4, _noise(0.3, 0.1), 2 * GiB))
    return {
        "name": "contended-3node",
        "description": "3 nodes of 16 cores; node1 runs ~14 cores of bursty demand, node3 is idle",
        "duration": "1h",
        "nodes": [
            _node("node1", 16, 96, base_cpu=_noise(0.8, 0.1), base_mem=8 * GiB),
            _node("node2", 16, 96, base_cpu=_noise(0.6, 0.1), base_mem=8 * GiB),
            _node("node3", 16, 96, base_cpu=_noise(0.4, 0.05), base_mem=6 * GiB),
        ],
        "guests": g,
    }
