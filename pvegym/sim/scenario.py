"""The typed, validated definition of a scenario: a cluster, its workload and its events.

A scenario is plain data (a TOML file or a dict built by a named-scenario function in
:mod:`pvegym.sim.scenarios`) loaded into these frozen dataclasses by :func:`pvegym.config.load`,
which names the key path of any bad value. Units: cpu in cores, memory in bytes (``"8GiB"``
accepted), rates in bytes/s (``"430MiB/s"``), times in seconds (``"20m"`` accepted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pvegym.config import field, load
from pvegym.errors import ConfigError
from pvegym.limits import (
    MAX_CORES,
    MAX_DURATION_S,
    MAX_EVENTS,
    MAX_GUESTS,
    MAX_MEMORY_BYTES,
    MAX_NODES,
    MAX_RATE,
)
from pvegym.sim.workload import Component, parse_signal

_SID = re.compile(r"^(vm|ct):\d+$")


def _cpu_signal(value: Any, path: str) -> tuple[Component, ...]:
    return parse_signal(value, path)


def _mem_signal(value: Any, path: str) -> tuple[Component, ...]:
    return parse_signal(value, path, unit="size")


@dataclass(frozen=True)
class NodeSpec:
    """A cluster node. ``base_cpu``/``base_mem`` are load not attributable to HA guests (host
    overhead, non-HA guests, ZFS ARC), as workload signals in cores / bytes."""

    name: str
    maxcpu: int = field(ge=1, le=MAX_CORES)
    maxmem: float = field(gt=0, le=MAX_MEMORY_BYTES, unit="size")
    base_cpu: tuple[Component, ...] = field((), parse=_cpu_signal)
    base_mem: tuple[Component, ...] = field((), parse=_mem_signal)
    online: bool = True


@dataclass(frozen=True)
class GuestSpec:
    """A guest (``vm:101`` live-migrates; ``ct:200`` relocates: stop, move, start).

    ``cpu`` is its CPU demand signal (cores, clipped to ``[0, maxcpu]``); ``memhost`` its host-side
    memory footprint (bytes; demand above ``maxmem`` becomes guest memory pressure, never memory);
    ``mem_ratio`` is the balloon-reported guest view ``mem`` as a fraction of ``memhost`` (1 = no
    balloon stats, ``mem = memhost``). ``dirty_rate`` (bytes/s, raw guest writes), ``wws`` (bytes,
    default all memory) and ``throttle_sensitivity`` (0–1) drive live migration.
    ``local_resources`` (e.g. a local CD-ROM) makes every migration fail after the precheck.
    """

    sid: str
    node: str
    maxcpu: int = field(ge=1, le=MAX_CORES)
    maxmem: float = field(gt=0, le=MAX_MEMORY_BYTES, unit="size")
    cpu: tuple[Component, ...] = field((), parse=_cpu_signal)
    memhost: tuple[Component, ...] = field((), parse=_mem_signal)
    mem_ratio: float = field(1.0, gt=0.0, le=1.0)
    dirty_rate: float = field(0.0, ge=0.0, le=MAX_RATE, unit="rate")
    wws: float | None = field(None, gt=0.0, le=MAX_MEMORY_BYTES, unit="size")
    throttle_sensitivity: float = field(1.0, ge=0.0, le=1.0)
    ha: bool = True
    local_resources: bool = False
    state: Literal["started", "stopped"] = "started"

    def validate(self, path: str) -> None:
        if not _SID.match(self.sid):
            raise ConfigError(
                f"{path}.sid", f"{self.sid!r} is not a guest id (allowed: vm:<n> or ct:<n>)"
            )
        if self.wws is not None and self.wws > self.maxmem:
            raise ConfigError(f"{path}.wws", "the writable working set cannot exceed maxmem")

    @property
    def kind(self) -> str:
        return self.sid.split(":", 1)[0]


@dataclass(frozen=True)
class NodeAffinitySpec:
    name: str
    resources: tuple[str, ...]
    nodes: dict[str, int]  # node -> priority (higher is preferred)
    strict: bool = False


@dataclass(frozen=True)
class ResourceAffinitySpec:
    name: str
    resources: tuple[str, ...]
    affinity: Literal["positive", "negative"]


@dataclass(frozen=True)
class EventSpec:
    """A timed event: a manual ``migrate`` of ``sid`` to ``target`` (queued like ``qm migrate``
    through the HA stack), or a ``pressure-onset`` marker on ``node`` for ``evacuation_latency_s``."""

    t: float = field(ge=0.0, le=MAX_DURATION_S, unit="duration")
    type: Literal["migrate", "pressure-onset"] = "migrate"
    sid: str = ""
    target: str = ""
    node: str = ""


@dataclass(frozen=True)
class PsiModel:
    """Contention → pressure parameters (``reference/migration-psi.md`` §D.3/§D.4)."""

    cpu_blend: float = field(0.2, ge=0.0, le=1.0)  # weight of the per-runqueue ρ² term vs M/M/c
    cpu_hog_share: float = field(
        0.0, ge=0.0, le=1.0
    )  # share of demand from always-runnable threads
    mem_watermark: float = field(0.02, ge=0.0, lt=1.0)  # fraction of MemTotal kept free by reclaim
    mem_gain: float = field(
        10.0, gt=0.0, le=1e6
    )  # some-pressure per unit of overcommitted fraction
    mem_full_ratio: float = field(0.5, ge=0.0, le=1.0)  # full = some × this (all tasks stalled)


@dataclass(frozen=True)
class MigrationSettings:
    """How motions run. ``bandwidth`` is the single migration stream's throughput (bytes/s)."""

    bandwidth: float = field(430 * 2**20, gt=0.0, le=MAX_RATE, unit="rate")
    # qemu-server: migrate_downtime default 0.1 s; at most a day
    downtime_limit_ms: float = field(100.0, gt=0.0, le=86_400_000.0)
    qemu_server: Literal["unpatched", "patched"] = "unpatched"
    boost_factor: float = field(1.5, gt=0.0, le=1000.0)  # passes over guest memory
    abort_factor: float = field(4.0, gt=0.0, le=1000.0)
    sync_timer: bool = True  # QEMU ≥ 9.2: dirty sync every 5 s after pass 1 with auto-converge
    precheck_s: float = field(
        3.0, ge=0.0, le=MAX_DURATION_S, unit="duration"
    )  # a local resource fails
    lrm_delay_max_s: float = field(10.0, ge=0.0, le=3600.0, unit="duration")  # LRM start offset
    ct_shutdown_s: float = field(10.0, ge=0.0, le=MAX_DURATION_S, unit="duration")
    ct_start_s: float = field(5.0, ge=0.0, le=MAX_DURATION_S, unit="duration")

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        if self.qemu_server == "patched" and self.abort_factor <= self.boost_factor:
            raise ConfigError(
                f"{pre}abort_factor",
                f"must be larger than boost_factor ({self.boost_factor:g}) with the patched "
                "qemu-server",
            )


@dataclass(frozen=True)
class TelemetrySettings:
    """pvestatd-like broadcast. ``disabled`` lists view fields that read NaN (fail-open tests),
    e.g. ``["node_cpu_some", "node_mem_some", "node_mem_full"]``."""

    disabled: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[NodeSpec, ...] = field(max_items=MAX_NODES)
    guests: tuple[GuestSpec, ...] = field((), max_items=MAX_GUESTS)
    description: str = ""
    duration: float = field(3600.0, gt=0.0, le=MAX_DURATION_S, unit="duration")
    round_s: float = field(10.0, ge=2.0, le=3600.0, unit="duration")
    node_affinity: tuple[NodeAffinitySpec, ...] = ()
    resource_affinity: tuple[ResourceAffinitySpec, ...] = ()
    events: tuple[EventSpec, ...] = field((), max_items=MAX_EVENTS)
    psi: PsiModel = PsiModel()
    migration: MigrationSettings = MigrationSettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    crs_mode: Literal["dynamic", "static"] = "dynamic"

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        if len(self.nodes) < 1:
            raise ConfigError(f"{pre}nodes", "needs at least one node")
        names = [n.name for n in self.nodes]
        for i, n in enumerate(names):
            if names.index(n) != i:
                raise ConfigError(f"{pre}nodes[{i}].name", f"duplicate node name {n!r}")
        sids = [g.sid for g in self.guests]
        for i, g in enumerate(self.guests):
            if sids.index(g.sid) != i:
                raise ConfigError(f"{pre}guests[{i}].sid", f"duplicate guest id {g.sid!r}")
            if g.node not in names:
                raise ConfigError(
                    f"{pre}guests[{i}].node",
                    f"unknown node {g.node!r} (allowed: {', '.join(names)})",
                )
        if abs(self.round_s / 2.0 - round(self.round_s / 2.0)) > 1e-9:
            raise ConfigError(
                f"{pre}round_s", "must be a whole number of 2 s PSI periods (e.g. 10)"
            )
        members = [("node_affinity", i, r.resources) for i, r in enumerate(self.node_affinity)]
        members += [
            ("resource_affinity", i, r.resources) for i, r in enumerate(self.resource_affinity)
        ]
        for kind, i, resources in members:
            for j, sid in enumerate(resources):
                if sid not in sids:
                    raise ConfigError(f"{pre}{kind}[{i}].resources[{j}]", f"unknown guest {sid!r}")
        for i, na in enumerate(self.node_affinity):
            for node in na.nodes:
                if node not in names:
                    raise ConfigError(
                        f"{pre}node_affinity[{i}].nodes.{node}", f"unknown node {node!r}"
                    )
        for i, ev in enumerate(self.events):
            if ev.type == "migrate":
                if ev.sid not in sids:
                    raise ConfigError(f"{pre}events[{i}].sid", f"unknown guest {ev.sid!r}")
                if ev.target not in names:
                    raise ConfigError(f"{pre}events[{i}].target", f"unknown node {ev.target!r}")
            elif ev.node not in names:
                raise ConfigError(f"{pre}events[{i}].node", f"unknown node {ev.node!r}")
        for i, name in enumerate(self.telemetry.disabled):
            if name not in TELEMETRY_FIELDS:
                raise ConfigError(
                    f"{pre}telemetry.disabled[{i}]",
                    f"unknown field {name!r} (allowed: {', '.join(TELEMETRY_FIELDS)})",
                )


TELEMETRY_FIELDS = (
    "node_cpu",
    "node_mem",
    "node_cpu_some",
    "node_mem_some",
    "node_mem_full",
    "guest_cpu",
    "guest_mem",
    "guest_memhost",
    "guest_cpu_some",
    "guest_cpu_full",
    "guest_mem_some",
    "guest_mem_full",
)


def scenario_from_dict(data: dict[str, Any], path: str = "") -> Scenario:
    """Validate plain data into a :class:`Scenario` (errors name the key path)."""
    return load(Scenario, data, path)
