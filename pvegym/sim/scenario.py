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
from pvegym.errors import ConfigError, show
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
from pvegym.units import GiB, MiB, format_quantity

_SID = re.compile(r"^(vm|ct):\d+$")


def _level_not_negative(
    comps: tuple[Component, ...], path: str, what: str
) -> tuple[Component, ...]:
    """A CPU demand (cores) or memory footprint (bytes) cannot be negative: the signal's level —
    its constants plus its OU means, what it holds with the noise, day cycle, bursts and steps at
    zero — must be ≥ 0. Those varying parts may dip below it (a step down, a negative burst);
    where the sum does fall below 0 the model reads 0 (docs/scenarios.md, *Workloads*)."""
    level = sum(c.level for c in comps if c.type == "constant")
    level += sum(c.mean for c in comps if c.type == "ou")
    if level < 0:
        shown = format_quantity("size", level) if what == "bytes" else f"{level:g} cores"
        raise ConfigError(
            path,
            f"a {'memory footprint' if what == 'bytes' else 'CPU demand'} cannot be negative: "
            f"its level (constants + OU means) must be ≥ 0 {what}, not {shown}",
        )
    return comps


def _cpu_signal(value: Any, path: str) -> tuple[Component, ...]:
    return _level_not_negative(parse_signal(value, path), path, "cores")


def _mem_signal(value: Any, path: str) -> tuple[Component, ...]:
    return _level_not_negative(parse_signal(value, path, unit="size"), path, "bytes")


@dataclass(frozen=True)
class NodeSpec:
    """A cluster node. ``base_cpu``/``base_mem`` are load not attributable to HA guests (host
    overhead, non-HA guests, ZFS ARC), as workload signals in cores / bytes. Memory in use beyond
    ``maxmem`` is reclaim and swap (pressure); beyond ``maxmem + swap`` the kernel's OOM killer
    kills a guest."""

    name: str
    maxcpu: int = field(ge=1, le=MAX_CORES)
    maxmem: float = field(gt=0, le=MAX_MEMORY_BYTES, unit="size")
    base_cpu: tuple[Component, ...] = field((), parse=_cpu_signal)
    base_mem: tuple[Component, ...] = field((), parse=_mem_signal)
    online: bool = True
    swap: float | None = field(None, ge=0.0, le=MAX_MEMORY_BYTES, unit="size")
    # the node's migration link (bytes/s; default: the scenario's ``migration.link_bandwidth``)
    link_bandwidth: float | None = field(None, gt=0.0, le=MAX_RATE, unit="rate")

    @property
    def swap_bytes(self) -> float:
        """Swap space (bytes); default the PVE installer's for an LVM root (``swapsize``: the
        installed memory, at least 4 GB and at most 8 GB — admin guide, advanced LVM options);
        a ZFS root has none (``swap = 0``)."""
        if self.swap is not None:
            return self.swap
        return min(max(self.maxmem, 4 * GiB), 8 * GiB)


@dataclass(frozen=True)
class GuestSpec:
    """A guest (``vm:101`` live-migrates; ``ct:200`` relocates: stop, move, start).

    ``maxcpu`` is its vCPUs; 0, only for a container, is PVE's "no CPU limit" (neither ``cores``
    nor ``cpulimit``): it may use every CPU of the node it runs on, PVE's static usage charges it
    as that whole node (proxmox-resource-scheduling ``add_started_resource``) and its dynamic
    usage is its measured cores.
    ``cpu`` is its CPU demand signal (cores, clipped to ``[0, maxcpu]``); ``memhost`` its host-side
    memory footprint (bytes; demand above ``maxmem`` becomes guest memory pressure, never memory);
    ``mem_ratio`` is the balloon-reported guest view ``mem`` as a fraction of ``memhost`` (1 = no
    balloon stats, ``mem = memhost``). ``dirty_rate`` (bytes/s, raw guest writes), ``wws`` (bytes,
    default all memory) and ``throttle_sensitivity`` (0–1) drive live migration; ``xbzrle_delta``
    (0–1] is the share of a page that changed when it is sent again (XBZRLE's encoded size; 1 =
    pages rewritten whole, no gain). ``balloon_min`` (bytes; PVE's ``balloon`` option) lets
    auto-ballooning shrink the VM down to it, weighted by ``shares``; ``ksm_shareable`` (0–1) is the
    share of its footprint KSM can merge with pages on its node (see :mod:`pvegym.sim.memory`).
    ``local_resources`` (e.g. a local CD-ROM) makes every migration fail after the precheck;
    ``hugepages`` backs its memory with huge pages, which its target must have free to start it.
    ``auto_rebalance`` is the HA resource's ``auto-rebalance`` flag (after pve-ha-manager 5.2.0; on):
    off, no balancer ever picks the guest, nor a positive-affinity bundle it is in.
    """

    sid: str
    node: str
    maxcpu: int = field(ge=0, le=MAX_CORES)
    maxmem: float = field(gt=0, le=MAX_MEMORY_BYTES, unit="size")
    cpu: tuple[Component, ...] = field((), parse=_cpu_signal)
    memhost: tuple[Component, ...] = field((), parse=_mem_signal)
    mem_ratio: float = field(1.0, gt=0.0, le=1.0)
    dirty_rate: float = field(0.0, ge=0.0, le=MAX_RATE, unit="rate")
    wws: float | None = field(None, gt=0.0, le=MAX_MEMORY_BYTES, unit="size")
    throttle_sensitivity: float = field(1.0, ge=0.0, le=1.0)
    xbzrle_delta: float = field(1.0, gt=0.0, le=1.0)
    balloon_min: float | None = field(None, gt=0.0, le=MAX_MEMORY_BYTES, unit="size")
    shares: int = field(1000, ge=0, le=50_000)  # qemu-server: shares 0–50000, default 1000
    ksm_shareable: float = field(0.0, ge=0.0, lt=1.0)
    ha: bool = True
    auto_rebalance: bool = True
    local_resources: bool = False
    hugepages: bool = False
    state: Literal["started", "stopped"] = "started"

    def validate(self, path: str) -> None:
        if not _SID.match(self.sid):
            raise ConfigError(
                f"{path}.sid", f"{show(self.sid)} is not a guest id (allowed: vm:<n> or ct:<n>)"
            )
        if self.maxcpu == 0 and not self.sid.startswith("ct:"):
            raise ConfigError(
                f"{path}.maxcpu",
                "0 (no CPU limit) is only for a container (ct:<n>); a VM has 1 or more vCPUs",
            )
        if self.wws is not None and self.wws > self.maxmem:
            raise ConfigError(f"{path}.wws", "the writable working set cannot exceed maxmem")
        if self.balloon_min is not None and self.balloon_min > self.maxmem:
            raise ConfigError(f"{path}.balloon_min", "the balloon minimum cannot exceed maxmem")
        if not self.auto_rebalance and not self.ha:
            raise ConfigError(
                f"{path}.auto_rebalance",
                "is a flag of an HA resource: false needs ha = true (a non-HA guest never moves)",
            )

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


#: event types on a node (``node``): power and network (the hardware), node maintenance
#: (``ha-manager crm-command node-maintenance enable|disable``)
NODE_EVENTS = (
    "power-off",
    "power-on",
    "network-off",
    "network-on",
    "maintenance-enable",
    "maintenance-disable",
)
#: event types on an HA service (``sid``): ``ha-manager migrate|relocate SID NODE``,
#: ``ha-manager crm-command stop SID TIMEOUT``, ``ha-manager set SID --state STATE``
SERVICE_EVENTS = ("migrate", "relocate", "stop", "set-state")
#: event types on the whole cluster: ``ha-manager crm-command disarm-ha MODE`` / ``arm-ha``
CLUSTER_EVENTS = ("disarm", "arm")
#: the event types the model's own CRM round (``ha_stack = "model"``) runs; every other one needs
#: the port of pve-ha-manager's daemons (``ha_stack = "full"`` or ``"engine"``)
MODEL_STACK_EVENTS = ("migrate", "pressure-onset")

EventType = Literal[
    "migrate",
    "pressure-onset",
    "relocate",
    "stop",
    "set-state",
    "power-off",
    "power-on",
    "network-off",
    "network-on",
    "maintenance-enable",
    "maintenance-disable",
    "disarm",
    "arm",
]


@dataclass(frozen=True)
class EventSpec:
    """A timed event (``docs/scenarios.md``, *events*), in pvegym's words for what an operator or
    the hardware does to the cluster:

    * ``migrate`` / ``relocate`` of ``sid`` to ``target`` (``ha-manager migrate|relocate``, a CRM
      command; ``migrate`` of a container relocates, as the model stack always did);
    * ``stop`` of ``sid`` with ``timeout`` s (``ha-manager crm-command stop``);
    * ``set-state`` of ``sid`` to ``state`` (``ha-manager set --state``: ``started``,
      ``stopped``, ``disabled``, ``ignored``);
    * ``power-off`` / ``power-on``, ``network-off`` / ``network-on`` of ``node`` (the hardware:
      membership, quorum, the watchdog and fencing follow), ``maintenance-enable`` /
      ``maintenance-disable`` of ``node`` (``ha-manager crm-command node-maintenance``);
    * ``disarm`` with ``mode`` (``freeze`` or ``ignore``) and ``arm``
      (``ha-manager crm-command disarm-ha|arm-ha``);
    * ``pressure-onset`` on ``node``: a marker for ``evacuation_latency_s``.

    Every type but ``migrate`` and ``pressure-onset`` needs ``ha_stack = "full"`` (or
    ``"engine"``).
    """

    t: float = field(ge=0.0, le=MAX_DURATION_S, unit="duration")
    type: EventType = "migrate"
    sid: str = ""
    target: str = ""
    node: str = ""
    state: Literal["", "started", "stopped", "disabled", "ignored"] = ""
    mode: Literal["", "freeze", "ignore"] = ""
    timeout: int = field(0, ge=0, le=86_400)  # s, for stop (0: hard stop)

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        if self.type == "set-state" and not self.state:
            raise ConfigError(
                f"{pre}state",
                "set-state needs a state (allowed: started, stopped, disabled, ignored)",
            )
        if self.type == "disarm" and not self.mode:
            raise ConfigError(f"{pre}mode", "disarm needs a mode (allowed: freeze, ignore)")


@dataclass(frozen=True)
class PsiModel:
    """Contention → pressure parameters (``docs/model.md``, *Contention and PSI*)."""

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
    """How motions run. ``bandwidth`` is the single migration stream's throughput (bytes/s), a
    cap below the link: one stream is one QEMU migration thread through one CPU-bound hop.
    ``link_bandwidth`` is each node's migration link (bytes/s, full duplex; a node's
    ``link_bandwidth`` overrides it), which concurrent streams share max-min fair
    (:mod:`pvegym.sim.network`). Default a 10 GbE link, 1.25 × 10⁹ bytes/s (10 Gbit/s: the
    usual dedicated migration/cluster network of a PVE node; it carries two 430 MiB/s streams
    at their cap and three at ≈ 397 MiB/s each)."""

    bandwidth: float = field(430 * 2**20, gt=0.0, le=MAX_RATE, unit="rate")
    link_bandwidth: float = field(1.25e9, gt=0.0, le=MAX_RATE, unit="rate")
    # qemu-server: migrate_downtime default 0.1 s; at most a day
    downtime_limit_ms: float = field(100.0, gt=0.0, le=86_400_000.0)
    qemu_server: Literal["unpatched", "patched"] = "unpatched"
    boost_factor: float = field(1.5, gt=0.0, le=1000.0)  # passes over guest memory
    abort_factor: float = field(4.0, gt=0.0, le=1000.0)
    sync_timer: bool = True  # QEMU ≥ 9.2: dirty sync every 5 s after pass 1 with auto-converge
    precheck_s: float = field(3.0, ge=0.0, le=MAX_DURATION_S, unit="duration")  # local resource
    # LRM loop: uniform start offset
    lrm_delay_max_s: float = field(10.0, ge=0.0, le=3600.0, unit="duration")
    ct_shutdown_s: float = field(10.0, ge=0.0, le=MAX_DURATION_S, unit="duration")
    ct_start_s: float = field(5.0, ge=0.0, le=MAX_DURATION_S, unit="duration")
    xbzrle: bool = True  # qemu-server set_migration_caps: xbzrle on (cache 10 % of memory)
    # vCPU time of one dirty-tracking write fault (µs; estimate: a KVM fast-path fault, ~1 µs);
    # at most a second per fault
    dirty_fault_us: float = field(1.0, ge=0.0, le=1e6)
    # cores busy on the source/target while the stream sends at its bandwidth: QEMU's migration
    # thread and, for the datacenter default ``secure`` type, the ssh tunnel's cipher — one
    # CPU-bound hop is what caps a single stream at a few hundred MiB/s (an estimate)
    cpu_source_cores: float = field(1.0, ge=0.0, le=MAX_CORES)
    cpu_target_cores: float = field(1.0, ge=0.0, le=MAX_CORES)

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        if self.qemu_server == "patched" and self.abort_factor <= self.boost_factor:
            raise ConfigError(
                f"{pre}abort_factor",
                f"must be larger than boost_factor ({self.boost_factor:g}) with the patched "
                "qemu-server",
            )


#: the kernel's ``pages_to_scan`` is an unsigned int (mm/ksm.c, sysfs store: kstrtouint)
_KSM_PAGES = 2**32 - 1


@dataclass(frozen=True)
class MemorySettings:
    """Memory that moves (:mod:`pvegym.sim.memory`): PVE's auto-ballooning and KSM, each a switch.
    Defaults are PVE's: pvestatd's ``ballooning-target`` (node config, 80 %) and ksmtuned's
    (``ksm-control-daemon``: ``KSM_*`` in ``/etc/ksmtuned.conf``)."""

    autoballoon: bool = True
    ballooning_target_pct: float = field(80.0, gt=0.0, le=100.0)
    ksm: bool = True
    ksm_monitor_interval_s: float = field(
        60.0, gt=0.0, le=MAX_DURATION_S, unit="duration"
    )  # KSM_MONITOR_INTERVAL
    ksm_sleep_ms: float = field(
        10.0, gt=0.0, le=86_400_000.0
    )  # KSM_SLEEP_MSEC (for a 16 GiB host, scaled)
    ksm_npages_boost: int = field(300, ge=0, le=_KSM_PAGES)  # KSM_NPAGES_BOOST
    ksm_npages_decay: int = field(50, ge=0, le=_KSM_PAGES)  # -KSM_NPAGES_DECAY
    ksm_npages_min: int = field(64, ge=0, le=_KSM_PAGES)  # KSM_NPAGES_MIN
    ksm_npages_max: int = field(1250, ge=0, le=_KSM_PAGES)  # KSM_NPAGES_MAX
    ksm_thres_coef_pct: float = field(20.0, ge=0.0, le=100.0)  # KSM_THRES_COEF
    ksm_thres_const: float = field(
        2048 * MiB, ge=0.0, le=MAX_MEMORY_BYTES, unit="size"
    )  # KSM_THRES_CONST (MiB)

    def validate(self, path: str) -> None:
        pre = f"{path}." if path else ""
        if self.ksm_npages_min > self.ksm_npages_max:
            raise ConfigError(
                f"{pre}ksm_npages_min", f"must not exceed ksm_npages_max ({self.ksm_npages_max})"
            )


@dataclass(frozen=True)
class TelemetrySettings:
    """pvestatd-like broadcast. ``disabled`` lists view fields that read NaN (fail-open tests),
    e.g. ``["node_cpu_some", "node_mem_some", "node_mem_full"]``; ``timing``,
    ``first_sample_zero`` and ``mode`` select how samples are taken (:mod:`pvegym.sim.telemetry`;
    the defaults are PVE 9's)."""

    disabled: tuple[str, ...] = ()
    # pvestatd's timing (pvegym.sim.telemetry): each node samples at its own phase (PVE) or
    # every node exactly at the round time
    timing: Literal["phased", "aligned"] = "phased"
    # qemu-server vmstatus: a guest's first sample on a new node reports cpu 0
    first_sample_zero: bool = True
    # the latest sample (rrd_dump, what the HA manager reads) or the RRD's per-minute average
    mode: Literal["point", "rrd"] = "point"


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
    memory: MemorySettings = MemorySettings()
    telemetry: TelemetrySettings = TelemetrySettings()
    crs_mode: Literal["dynamic", "static"] = "dynamic"
    # the HA manager: the model's own CRM round (pvegym.sim.simulation), the port of
    # pve-ha-manager's CRM and LRM on the model's hardware (pvegym.sim.ha_stack), or the compiled
    # engine's CRM round with the port's LRMs on it (pvegym.sim.engine_stack)
    ha_stack: Literal["model", "full", "engine"] = "model"

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
            self._validate_event(f"{pre}events[{i}]", ev, names)
        for i, name in enumerate(self.telemetry.disabled):
            if name not in TELEMETRY_FIELDS:
                raise ConfigError(
                    f"{pre}telemetry.disabled[{i}]",
                    f"unknown field {name!r} (allowed: {', '.join(TELEMETRY_FIELDS)})",
                )

    def _validate_event(self, path: str, ev: EventSpec, names: list[str]) -> None:
        """An event's time, stack and targets: before the end, on the stack that runs it, and
        naming a node, an HA guest and a target node of this scenario."""
        if ev.t >= self.duration:
            raise ConfigError(
                f"{path}.t",
                f"{ev.t:g} s is not before the end of the scenario ({self.duration:g} s)",
            )
        if ev.type not in MODEL_STACK_EVENTS and self.ha_stack == "model":
            raise ConfigError(
                f"{path}.type",
                f'{ev.type!r} needs the full HA stack: set ha_stack = "full" or "engine" '
                f"(the model stack runs only {', '.join(MODEL_STACK_EVENTS)})",
            )
        if ev.type in SERVICE_EVENTS:
            guests = {g.sid: g for g in self.guests}
            if ev.sid not in guests:
                raise ConfigError(f"{path}.sid", f"unknown guest {ev.sid!r}")
            if ev.type != "migrate" and not guests[ev.sid].ha:
                raise ConfigError(f"{path}.sid", f"{ev.sid!r} is not an HA guest (ha = false)")
            if ev.type in ("migrate", "relocate") and ev.target not in names:
                raise ConfigError(
                    f"{path}.target",
                    f"unknown node {ev.target!r} (allowed: {', '.join(names)})",
                )
        elif ev.type not in CLUSTER_EVENTS and ev.node not in names:
            raise ConfigError(
                f"{path}.node", f"unknown node {ev.node!r} (allowed: {', '.join(names)})"
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
