"""An export as a pvegym scenario: nodes, guests, rules, workloads as traces, and what is missing.

:func:`build_import` maps a :class:`~pvegym.pve_export.cluster.ClusterExport` onto the scenario
schema (:mod:`pvegym.sim.scenario`) over one *window* of its RRD series:

* **window** — the finest series that covers it (:mod:`~pvegym.pve_export.window`); its
  resolution and span are recorded.
* **nodes** — cores and memory from ``status.json``; the host's own load (``base_cpu``,
  ``base_mem``) is the node series minus the guests on the node at that time (placement from the
  migration tasks, :mod:`~pvegym.pve_export.placement`), replayed as an ``rrd`` trace; a node in maintenance is offline (the HA
  manager's online-node list excludes it, ``NodeStatus::list_online_nodes``).
* **guests** — vCPUs and memory from ``cluster/resources.json``; CPU (cores) and host footprint
  (``memhost``; PVE 7 and 8 record only ``mem``) replayed as ``rrd`` traces; ``mem_ratio`` = Σ mem /
  Σ memhost over the window; HA state from ``cluster/ha/resources.json``; ``local_resources``
  when qemu-server or pve-container would refuse the HA manager's migration
  (:mod:`~pvegym.pve_export.blockers`).
* **rules** — HA rules (PVE 9) and groups converted as upstream converts them (PVE ≤ 8).
* **events** — migrations the operator made inside the window (non-HA guests, ``hamigrate``
  requests, evacuations of a node in maintenance) as manual ``migrate`` events; migrations the
  HA manager issued itself are what a balancer under test replaces, so they are only listed.

Everything the schema cannot represent is a :class:`~pvegym.pve_export.notes.Note` (``dropped``:
a fact of the export the scenario leaves out; ``assumed``: a value the export does not record;
``info``), written into the scenario file's header and ``import.json``
(:mod:`~pvegym.pve_export.write`) and printed by ``pvegym import`` — never a silent guess. The *validation* scenario (:attr:`Import.validation`) is the same cluster with every real
migration replayed and the host's own load *fitted* on the first part of the window only, so that
``pvegym whatif`` can compare the model with the held-out rest without circularity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.pve_export.blockers import ct_migratability, vm_migratability
from pvegym.pve_export.cluster import ClusterExport, GuestExport, NodeExport
from pvegym.pve_export.files import ExportError
from pvegym.pve_export.notes import Note, utc
from pvegym.pve_export.placement import (
    Migration,
    migrations,
    placement_matrix,
    start_placement,
)
from pvegym.pve_export.rrd import fill_gaps
from pvegym.pve_export.window import Window, choose_window, on_grid, rows_empty
from pvegym.units import GiB, MiB

FloatArray = NDArray[np.float64]
IMPORT_FORMAT = "pvegym-import/1"
DAY_S = 86400


@dataclass
class TraceData:
    """One ``rrd`` trace file: ``cpu``/``mem`` as fractions of the capacities, one per window row."""

    cpu: FloatArray
    mem: FloatArray
    cpu_capacity: float  # cores
    mem_capacity: float  # bytes


@dataclass
class Reality:
    """What the export measured on the window grid, for the model-vs-reality comparison:
    per node cores busy, memory in use (bytes) and, on PVE 9, PSI avg10 averages (percent)."""

    node_names: tuple[str, ...]
    cpu: FloatArray  # (rows, nodes) cores
    mem: FloatArray  # (rows, nodes) bytes
    cpu_some: FloatArray | None  # (rows, nodes) percent, None in the pve2 format (PVE ≤ 8)
    mem_some: FloatArray | None
    cpu_max: FloatArray  # the MAX series' cores busy where exported, else = cpu
    maxcpu: FloatArray
    maxmem: FloatArray


@dataclass(frozen=True)
class NodeExcess:
    """A node whose guests' measured load exceeds the node's own series in ``rows`` of ``of``
    window rows, by up to ``by`` (cores, or GiB of memory). In every row, on a real export, the
    guests are not where the export says (a placement the task log does not explain), so the
    replay starts from a wrong cluster."""

    node: str
    what: str  # cpu | memory
    rows: int
    of: int
    by: float
    unit: str  # cores | GiB

    @property
    def every_row(self) -> bool:
        return self.rows == self.of


@dataclass
class Import:
    name: str
    window: Window
    scenario: dict[str, Any]
    validation: dict[str, Any]
    traces: dict[str, TraceData]  # the scenario's
    validation_traces: dict[str, TraceData]  # the validation scenario's fitted host loads
    notes: list[Note]
    fit_rows: int  # rows of the window the validation's host load was fitted on
    fit_how: str  # how it was fitted (a time-of-day profile or the mean)
    migrations: list[Migration]
    failed: list[Migration]
    reality: Reality
    policy_params: dict[str, dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)
    excess: list[NodeExcess] = field(default_factory=list)  # nodes exceeded by their guests


# ------------------------------------------------------------------------------------------ build
def build_import(
    export: ClusterExport,
    window_spec: str = "week",
    name: str = "imported",
    fit_fraction: float = 2.0 / 3.0,
    dirty_rate: float = 0.0,
) -> Import:
    """Map the export onto a scenario over ``window_spec`` (see the module docstring)."""
    if not 0.0 < fit_fraction < 1.0:
        raise ConfigError("--fit-fraction", f"must be in (0, 1), not {fit_fraction!r}")
    notes: list[Note] = []
    for part in export.missing:
        notes.append(Note("info", "export", f"not in the export: {part}"))
    window = choose_window(export, window_spec)
    fit_rows = max(1, min(window.n - 1, round(window.n * fit_fraction)))
    moved, failed = migrations(export, window, notes)
    start_node = start_placement(export, window)
    placement = placement_matrix(export, window, start_node, moved)

    traces: dict[str, TraceData] = {}
    guests, guest_cpu, guest_mem = _guests(export, window, start_node, dirty_rate, traces, notes)
    reality = _reality(export, window, notes)
    excess: list[NodeExcess] = []
    nodes, base_cpu, base_mem = _nodes(
        export, window, reality, placement, (guest_cpu, guest_mem), traces, notes, excess
    )
    rules_na, rules_ra = _rules(export, notes)
    scenario: dict[str, Any] = {
        "name": name,
        "description": (
            f"Imported from a PVE {export.version} export ({export.rrd_format} RRD format): "
            f"{window.describe()}"
        ),
        "duration": float(window.duration),
        "round_s": 10.0,
        "crs_mode": _crs_mode(export, notes),
        "nodes": nodes,
        "guests": guests,
        "node_affinity": rules_na,
        "resource_affinity": rules_ra,
        "events": [
            {"t": m.t, "type": "migrate", "sid": m.sid, "target": m.target}
            for m in moved
            if m.origin == "operator" and m.sid in {g["sid"] for g in guests}
        ],
        "migration": _migration_settings(export, notes),
    }
    notes.append(
        Note(
            "assumed",
            "guests",
            f"dirty rate {dirty_rate / MiB:g} MiB/s for every VM: PVE records no dirty-page "
            "rate (set guests[i].dirty_rate / wws / throttle_sensitivity to study "
            "non-converging migrations)",
        )
    )
    fitted: dict[str, TraceData] = {}
    validation, fit_how = _validation(
        scenario, export, window, fit_rows, base_cpu, base_mem, moved, fitted
    )
    params = _policy_params(export, notes)
    imp = Import(
        name=name,
        window=window,
        scenario=scenario,
        validation=validation,
        traces=traces,
        validation_traces=fitted,
        notes=notes,
        fit_rows=fit_rows,
        fit_how=fit_how,
        migrations=moved,
        failed=failed,
        reality=reality,
        policy_params=params,
        excess=excess,
    )
    imp.meta = _meta(export, imp)
    return imp


def _guests(
    export: ClusterExport,
    window: Window,
    start_node: dict[int, str],
    dirty_rate: float,
    traces: dict[str, TraceData],
    notes: list[Note],
) -> tuple[list[dict[str, Any]], dict[int, FloatArray], dict[int, FloatArray]]:
    """Every guest but templates as scenario data, with its CPU (cores) and host memory (bytes)
    per window row, by vmid."""
    guests: list[dict[str, Any]] = []
    guest_cpu: dict[int, FloatArray] = {}
    guest_mem: dict[int, FloatArray] = {}
    for vmid in sorted(export.guests):
        g = export.guests[vmid]
        if g.template:
            notes.append(Note("info", g.sid, "a template: not a running guest, left out"))
            continue
        spec, cpu, memhost = _guest(export, g, window, start_node[vmid], dirty_rate, traces, notes)
        guests.append(spec)
        guest_cpu[vmid], guest_mem[vmid] = cpu, memhost
    return guests, guest_cpu, guest_mem


def _nodes(
    export: ClusterExport,
    window: Window,
    reality: Reality,
    placement: dict[int, NDArray[np.object_]],
    guest_load: tuple[dict[int, FloatArray], dict[int, FloatArray]],
    traces: dict[str, TraceData],
    notes: list[Note],
    excess: list[NodeExcess],
) -> tuple[list[dict[str, Any]], dict[str, FloatArray], dict[str, FloatArray]]:
    """Every node as scenario data, its base load the node's series minus the guests placed on
    it row by row; the base CPU (cores) and memory (bytes) per window row, by node name. Nodes
    their guests exceed go into ``excess``."""
    guest_cpu, guest_mem = guest_load
    nodes: list[dict[str, Any]] = []
    base_cpu: dict[str, FloatArray] = {}
    base_mem: dict[str, FloatArray] = {}
    for j, nname in enumerate(reality.node_names):
        node = export.nodes[nname]
        cpu_guests = np.zeros(window.n)
        mem_guests = np.zeros(window.n)
        for v in guest_cpu:
            here = placement[v] == nname
            cpu_guests += np.where(here, guest_cpu[v], 0.0)
            mem_guests += np.where(here, guest_mem[v], 0.0)
        spec, bc, bm = _node(
            node,
            window,
            reality.cpu[:, j],
            reality.mem[:, j],
            cpu_guests,
            mem_guests,
            traces,
            notes,
            excess,
        )
        nodes.append(spec)
        base_cpu[nname], base_mem[nname] = bc, bm
    return nodes, base_cpu, base_mem


def _trace_name(kind: str, ident: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{kind}-{ident}")


def _trace_component(trace: str, col: str, window: Window) -> dict[str, Any]:
    """An ``rrd`` trace component: rows are interval averages stamped at the interval's end, so
    each is replayed at its interval's middle (offset −step/2), held before the first and after
    the last row."""
    return {
        "type": "trace",
        "source": f"rrd/{trace}",
        "field": col,
        "loop": False,
        "offset": -window.step / 2.0,
        "trace_dir": TRACE_DIR_PLACEHOLDER,
    }


#: Replaced by the traces directory's name when the scenario is written.
TRACE_DIR_PLACEHOLDER = "<traces>"


def _guest(
    export: ClusterExport,
    g: GuestExport,
    window: Window,
    node: str,
    dirty_rate: float,
    traces: dict[str, TraceData],
    notes: list[Note],
) -> tuple[dict[str, Any], FloatArray, FloatArray]:
    """The guest's scenario entry and its CPU (cores) and host memory (bytes) on the grid."""
    sid = g.sid
    static = _static_cpu(export, g, notes)
    maxcpu = 0 if static == 0 else max(1, math.ceil(static - 1e-9))
    cap = maxcpu or export.nodes[g.node].maxcpu  # the vCPUs it can use (0: its node's CPUs)
    if g.kind == "qemu" and g.maxcpu != maxcpu:
        notes.append(
            Note(
                "dropped",
                sid,
                f"{g.maxcpu:g} vCPUs rounded up to {maxcpu} (the schema takes whole cores)",
            )
        )
    maxmem = g.maxmem if g.maxmem > 0 else GiB
    cpu, mem, memhost, running_rows = _guest_series(g, window, cap, notes)
    entry: dict[str, Any] = {
        "sid": sid,
        "node": node,
        "maxcpu": maxcpu,
        "maxmem": float(maxmem),
    }
    ha = g.ha
    if ha is None or ha.state == "ignored":
        entry["ha"] = False
        if ha is not None:
            notes.append(
                Note("info", sid, "HA state 'ignored': the HA manager leaves it alone (not HA)")
            )
    if not running_rows.any():
        entry["state"] = "stopped"
    if running_rows.any():
        name = _trace_name("guest", sid.replace(":", "-"))
        traces[name] = TraceData(cpu / cap, memhost / maxmem, float(cap), float(maxmem))
        entry["cpu"] = [_trace_component(name, "cpu", window)]
        entry["memhost"] = [_trace_component(name, "mem", window)]
        total_host = float(np.sum(memhost))
        ratio = float(np.sum(mem)) / total_host if total_host > 0 else 1.0
        if ratio > 1.0:
            if export.rrd_format == "pve9":
                notes.append(
                    Note(
                        "dropped",
                        sid,
                        f"balloon view mem exceeds memhost (×{ratio:.2f}): mem_ratio capped at 1",
                    )
                )
            ratio = 1.0
        entry["mem_ratio"] = round(max(ratio, 1e-3), 4)
    else:
        entry["cpu"] = 0.0
        entry["memhost"] = 0.0
    _guest_migration(export, g, entry, dirty_rate, notes)
    return entry, cpu, memhost


def _static_cpu(export: ClusterExport, g: GuestExport, notes: list[Note]) -> float:
    """The guest's size in vCPUs. A VM: ``cluster/resources.json``'s ``maxcpu``. A container:
    what PVE's static usage counts, ``cpulimit || cores`` (pve-container
    ``PVE::LXC::Config::get_derived_property('max-cpu')``, read by pve-ha-manager's
    ``PVECT::get_static_stats_from_config``) — not ``maxcpu``, which pve-container's ``vmstatus``
    gives as ``cores || cpulimit || the host's CPU count``. Without either, static usage counts
    ``max-cpu`` 0, charged as the whole node (proxmox-resource-scheduling
    ``add_started_resource``), and dynamic usage its measured cores out of the node's CPUs
    (pve-ha-manager ``PVE2::get_dynamic_service_stats``: the RRD's ``maxcpu``, the node's CPU
    count); then 0, the scenario's "no CPU limit", which the model counts the same way (noted)."""
    if g.kind == "qemu":
        return g.maxcpu
    cfg = g.config
    for key in ("cpulimit", "cores"):
        text = cfg.get(key)
        if text not in (None, "", "0"):
            try:
                value = float(text)
            except ValueError:
                raise ExportError(
                    f"nodes/{g.node}/lxc/{g.vmid}/config.json", key, f"not a number: {text!r}"
                ) from None
            if value != g.maxcpu:
                notes.append(
                    Note(
                        "info",
                        g.sid,
                        f"{key}={text}: sized {value:g} vCPUs as PVE's static usage counts it "
                        f"(cpulimit || cores), not the API's maxcpu {g.maxcpu:g}",
                    )
                )
            return value
    notes.append(
        Note(
            "info",
            g.sid,
            "no cores or cpulimit: maxcpu 0 (no CPU limit), as PVE's static usage reads it — "
            "the whole node while it runs there, nothing freed when it moves; its dynamic usage "
            f"the measured cores of the node's {export.nodes[g.node].maxcpu:g} CPUs",
        )
    )
    return 0.0


def _guest_series(
    g: GuestExport, window: Window, maxcpu: int, notes: list[Note]
) -> tuple[FloatArray, FloatArray, FloatArray, NDArray[np.bool_]]:
    """The guest's CPU (cores), balloon view and host memory (bytes) on the grid, gaps filled,
    0 where it was not running; and the rows in which it ran."""
    sid = g.sid
    s = g.series.get((window.timeframe, window.cf))
    if s is None:
        if g.status == "running":
            raise ExportError(
                f"nodes/{g.node}/{g.kind}/{g.vmid}/rrddata-{window.timeframe}-{window.cf}.json",
                "",
                f"is missing for running {sid}",
            )
        cpu_frac = np.full(window.n, np.nan)
        mem, memhost = cpu_frac.copy(), cpu_frac.copy()
        empty = np.ones(window.n, dtype=bool)
        row_maxcpu = np.full(window.n, float(maxcpu))
    else:
        cpu_frac = on_grid(s, "cpu", window)
        mem = on_grid(s, "mem", window)
        memhost = on_grid(s, "memhost", window) if s.has("memhost") else mem.copy()
        empty = rows_empty(s, window)
        row_maxcpu = on_grid(s, "maxcpu", window)
    # rows with values but no cpu: the guest was not running (pvestatd writes undef); rows
    # before its first value: its RRD had nothing yet (it did not exist, or never ran since)
    stopped = ~empty & ~np.isfinite(cpu_frac)
    running_rows = np.isfinite(cpu_frac)
    first = int(np.argmax(~empty)) if (~empty).any() else window.n
    before = np.arange(window.n) < first
    row_maxcpu = np.where(np.isfinite(row_maxcpu), row_maxcpu, g.maxcpu)
    cpu = cpu_frac * row_maxcpu
    for arr in (cpu, mem, memhost):
        arr[stopped | before] = 0.0
    gaps = int((empty & ~before).sum()) if running_rows.any() else 0
    cpu, _ = fill_gaps(cpu)
    mem, _ = fill_gaps(mem)
    memhost, _ = fill_gaps(memhost)
    if not running_rows.any():
        cpu = np.zeros(window.n)
        mem, memhost = cpu.copy(), cpu.copy()
    if gaps:
        notes.append(Note("info", sid, f"{gaps} of {window.n} rows empty (no data): interpolated"))
    if running_rows.any() and first > 0:
        notes.append(
            Note(
                "info",
                sid,
                f"no RRD data in the first {first} of {window.n} rows (before "
                f"{utc(window.start + first * window.step)}): it did not exist or was not running "
                "then — no load, not back-filled",
            )
        )
    if stopped.any() and running_rows.any():
        notes.append(
            Note(
                "info",
                sid,
                f"not running for {int(stopped.sum())} of {window.n} rows: no load then",
            )
        )
    return cpu, mem, memhost, running_rows


def _guest_migration(
    export: ClusterExport,
    g: GuestExport,
    entry: dict[str, Any],
    dirty_rate: float,
    notes: list[Note],
) -> None:
    """What decides the guest's motions, into ``entry``: its dirty rate (VMs), whether
    qemu-server's or pve-container's checks would block a migration, and notes on what the
    schema drops (config, ``failback``); ``auto-rebalance = 0`` is kept (whatever version the
    export reports: the flag is there, so the cluster's HA manager reads it)."""
    sid = g.sid
    ha = g.ha
    if g.kind == "qemu":
        entry["dirty_rate"] = float(dirty_rate)
        mig = vm_migratability(g.config, export.storages, export.pci_live_capable)
    else:
        mig = ct_migratability(g.config, export.storages)
    if mig.blockers:
        entry["local_resources"] = True
        why = "; ".join(f"{k}: {r}" for k, r in mig.blockers)
        notes.append(Note("info", sid, f"migration blocked ({why}): local_resources = true"))
    for text in mig.notes:
        notes.append(Note("dropped", sid, text))
    _guest_config_notes(g, notes)
    if ha is not None:
        if ha.auto_rebalance is False and entry.get("ha", True):
            entry["auto_rebalance"] = False
            notes.append(
                Note(
                    "info",
                    sid,
                    "auto-rebalance = 0: no balancer of the replay moves it (auto_rebalance = false)",
                )
            )
        if ha.failback is False:
            notes.append(Note("dropped", sid, "failback = 0: failback is not modelled"))


def _guest_config_notes(g: GuestExport, notes: list[Note]) -> None:
    cfg = g.config
    if cfg.get("hugepages"):
        notes.append(
            Note(
                "dropped",
                g.sid,
                f"hugepages={cfg['hugepages']}: hugepage backing is not modelled (its footprint is in the memhost series)",
            )
        )
    balloon = cfg.get("balloon")
    if g.kind == "qemu" and balloon not in (None, "0") and cfg.get("memory"):
        notes.append(
            Note(
                "dropped",
                g.sid,
                f"auto-ballooning (balloon min {balloon} MiB of {cfg['memory']} MiB): no balloon target is modelled; its past effect is in the measured series",
            )
        )
    if cfg.get("cpulimit") not in (None, "0"):
        notes.append(
            Note(
                "dropped",
                g.sid,
                f"cpulimit={cfg['cpulimit']}: the model caps CPU at the vCPUs only",
            )
        )
    if cfg.get("affinity"):
        notes.append(
            Note("dropped", g.sid, f"CPU affinity {cfg['affinity']}: pinning is not modelled")
        )


def _node(
    node: NodeExport,
    window: Window,
    cpu: FloatArray,
    mem: FloatArray,
    cpu_guests: FloatArray,
    mem_guests: FloatArray,
    traces: dict[str, TraceData],
    notes: list[Note],
    excess: list[NodeExcess],
) -> tuple[dict[str, Any], FloatArray, FloatArray]:
    """The node's scenario entry; its own load is the node series minus its guests."""
    base_cpu = cpu - cpu_guests
    base_mem = mem - mem_guests
    for what, arr, unit, scale in (
        ("cpu", base_cpu, "cores", 1.0),
        ("memory", base_mem, "GiB", 2**-30),
    ):
        neg = arr < 0
        if neg.any():
            excess.append(
                NodeExcess(
                    node.name, what, int(neg.sum()), window.n, float(-arr.min()) * scale, unit
                )
            )
            notes.append(
                Note(
                    "info",
                    node.name,
                    f"its guests' {what} exceeds the node's in {int(neg.sum())} of {window.n} rows "
                    f"(by up to {float(-arr.min()) * scale:.2f} {unit}): host {what} clipped at 0 there",
                )
            )
    base_cpu = np.maximum(base_cpu, 0.0)
    base_mem = np.maximum(base_mem, 0.0)
    name = _trace_name("node", node.name)
    traces[name] = TraceData(
        base_cpu / node.maxcpu, base_mem / node.maxmem, float(node.maxcpu), float(node.maxmem)
    )
    entry: dict[str, Any] = {
        "name": node.name,
        "maxcpu": node.maxcpu,
        "maxmem": float(node.maxmem),
        "base_cpu": [_trace_component(name, "cpu", window)],
        "base_mem": [_trace_component(name, "mem", window)],
    }
    if node.maintenance or node.status != "online":
        entry["online"] = False
        why = "in maintenance" if node.maintenance else f"status {node.status!r}"
        notes.append(
            Note(
                "dropped",
                node.name,
                f"{why}: the schema has no maintenance state; modelled offline for the whole "
                "window (not a target, not in the imbalance — the HA manager's online-node "
                "list excludes it), its guests keep running",
            )
        )
    if node.ksm_shared > 0:
        notes.append(
            Note(
                "dropped",
                node.name,
                f"KSM shares {node.ksm_shared / GiB:.1f} GiB: KSM is not modelled (its effect is in the measured series)",
            )
        )
    return entry, base_cpu, base_mem


def _reality(export: ClusterExport, window: Window, notes: list[Note]) -> Reality:
    names = tuple(sorted(export.nodes))
    n = window.n
    cpu = np.zeros((n, len(names)))
    mem = np.zeros((n, len(names)))
    cpu_max = np.zeros((n, len(names)))
    some = np.full((n, len(names)), np.nan)
    msome = np.full((n, len(names)), np.nan)
    for j, name in enumerate(names):
        node = export.nodes[name]
        s = node.series.get((window.timeframe, window.cf))
        if s is None:
            raise ExportError(
                f"nodes/{name}/rrddata-{window.timeframe}-{window.cf}.json",
                "",
                f"is missing for node {name}",
            )
        frac = on_grid(s, "cpu", window)
        maxcpu = on_grid(s, "maxcpu", window)
        maxcpu = np.where(np.isfinite(maxcpu), maxcpu, node.maxcpu)
        c, filled = fill_gaps(frac * maxcpu)
        if filled:
            notes.append(Note("info", name, f"{filled} of {n} rows without data: interpolated"))
        if not np.isfinite(c).any():
            raise ExportError(s.file, "cpu", "has no value in the window")
        m, _ = fill_gaps(on_grid(s, "memused", window))
        if not np.isfinite(m).any():
            raise ExportError(s.file, "memused", "has no value in the window")
        cpu[:, j], mem[:, j] = c, m
        smax = node.series.get((window.timeframe, "MAX"))
        if smax is not None:
            cm, _ = fill_gaps(on_grid(smax, "cpu", window) * maxcpu)
            cpu_max[:, j] = np.where(np.isfinite(cm), cm, c)
        else:
            cpu_max[:, j] = c
        if s.has("pressurecpusome"):
            some[:, j] = fill_gaps(on_grid(s, "pressurecpusome", window))[0]
        if s.has("pressurememorysome"):
            msome[:, j] = fill_gaps(on_grid(s, "pressurememorysome", window))[0]
    has_psi = bool(np.isfinite(some).any())
    if not has_psi:
        notes.append(
            Note(
                "info",
                "nodes",
                f"no PSI in the {export.rrd_format} RRD series: the model's pressure cannot be compared with reality",
            )
        )
    if export.rrd_format == "pve2":
        notes.append(
            Note(
                "assumed",
                "guests",
                f"PVE {export.version}'s pve2 RRD format has no memhost: the host footprint is "
                "taken as mem (the balloon view when the guest reports balloon stats), mem_ratio 1",
            )
        )
    return Reality(
        node_names=names,
        cpu=cpu,
        mem=mem,
        cpu_some=some if has_psi else None,
        mem_some=msome if has_psi else None,
        cpu_max=cpu_max,
        maxcpu=np.array([export.nodes[x].maxcpu for x in names], dtype=float),
        maxmem=np.array([export.nodes[x].maxmem for x in names], dtype=float),
    )


# ------------------------------------------------------------------------------------------ rules etc.
def _rules(
    export: ClusterExport, notes: list[Note]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    na: list[dict[str, Any]] = []
    ra: list[dict[str, Any]] = []
    for r in export.rules:
        if r.disabled:
            notes.append(Note("dropped", f"rule {r.name}", "disabled: not applied"))
            continue
        if r.errors:
            notes.append(
                Note(
                    "dropped",
                    f"rule {r.name}",
                    f"infeasible per upstream ({'; '.join(r.errors)}): not applied",
                )
            )
            continue
        if r.type == "node-affinity":
            na.append(
                {
                    "name": r.name,
                    "resources": list(r.resources),
                    "nodes": dict(r.nodes),
                    "strict": r.strict,
                }
            )
        else:
            ra.append({"name": r.name, "resources": list(r.resources), "affinity": r.affinity})
    return na, ra


def _crs_mode(export: ClusterExport, notes: list[Note]) -> str:
    crs = export.crs
    if crs.mode in ("static", "dynamic"):
        return crs.mode
    notes.append(
        Note(
            "assumed",
            "crs",
            "ha=basic: the balancer needs static or dynamic; the what-if assumes dynamic",
        )
    )
    return "dynamic"


def _migration_settings(export: ClusterExport, notes: list[Note]) -> dict[str, Any]:
    bw = export.crs.bwlimit_migration_kib
    if bw:
        return {"bandwidth": bw * 1024.0}
    notes.append(
        Note(
            "assumed",
            "migration",
            "no migration bandwidth limit configured: the model's single-stream 430 MiB/s (the field report's measurement) is used",
        )
    )
    return {}


def _policy_params(export: ClusterExport, notes: list[Note]) -> dict[str, dict[str, Any]]:
    """``upstream`` runs with the cluster's configured CRS constants (as fractions)."""
    crs = export.crs
    up: dict[str, Any] = {}
    scale = 0.01 if crs.percent_units else 1.0
    if crs.threshold is not None:
        up["threshold"] = crs.threshold * scale
    if crs.margin is not None:
        up["margin"] = crs.margin * scale
    if crs.hold_duration is not None:
        up["hold_duration"] = crs.hold_duration
    if crs.method is not None:
        up["method"] = crs.method
    if up:
        units = "percent" if crs.percent_units else "fractions"
        notes.append(
            Note(
                "info",
                "crs",
                f"configured auto-rebalance constants (read as {units}: {crs.units_why}) "
                f"given to upstream: {up}",
            )
        )
        small = [v for v in (crs.threshold, crs.margin) if v is not None and 0 < v <= 1]
        if crs.percent_units and small:
            notes.append(
                Note(
                    "info",
                    "crs",
                    f"{small[0]:g} read as {small[0]:g} %, as the HA manager reads it: a fraction "
                    "left from before libpve-cluster-perl 9.1.5 now means percent (its postinst "
                    "warns; multiply by 100 to keep the old behaviour)",
                )
            )
    if not crs.auto_rebalance:
        notes.append(
            Note(
                "info",
                "crs",
                "ha-auto-rebalance is off on this cluster: every balancer in the what-if is hypothetical",
            )
        )
    return {"upstream": up} if up else {}


# ------------------------------------------------------------------------------------------ validation
def _fitted(values: FloatArray, window: Window, fit_rows: int) -> tuple[FloatArray, str]:
    """The host load fitted on the first ``fit_rows`` rows and extended over the window: a
    time-of-day profile (30-min bins, UTC) when the fit part spans two days or more, else the
    mean."""
    fit = values[:fit_rows]
    if fit_rows * window.step >= 2 * DAY_S:
        bin_s = max(window.step, 1800)
        tod = ((window.times - window.step / 2) % DAY_S) // bin_s
        prof = np.full(DAY_S // bin_s, np.nan)
        for b in range(prof.size):
            sel = tod[:fit_rows] == b
            if sel.any():
                prof[b] = float(np.mean(fit[sel]))
        prof = np.where(np.isfinite(prof), prof, float(np.mean(fit)))
        return prof[
            tod.astype(int)
        ], f"time-of-day profile ({bin_s // 60}-min bins) of the first {fit_rows} rows"
    return np.full(values.size, float(np.mean(fit))), f"mean of the first {fit_rows} rows"


def _validation(
    scenario: dict[str, Any],
    export: ClusterExport,
    window: Window,
    fit_rows: int,
    base_cpu: dict[str, FloatArray],
    base_mem: dict[str, FloatArray],
    migrations: list[Migration],
    traces: dict[str, TraceData],
) -> tuple[dict[str, Any], str]:
    """The validation scenario (every real migration replayed, host load fitted on the first
    ``fit_rows`` rows) and how the host load was fitted; its traces go into ``traces``."""
    import copy

    val = copy.deepcopy(scenario)
    val["name"] = f"{scenario['name']}-validation"
    how = ""
    for entry in val["nodes"]:
        node = export.nodes[entry["name"]]
        cpu, how = _fitted(base_cpu[node.name], window, fit_rows)
        mem, _ = _fitted(base_mem[node.name], window, fit_rows)
        name = _trace_name("fit", node.name)
        traces[name] = TraceData(
            cpu / node.maxcpu, mem / node.maxmem, float(node.maxcpu), float(node.maxmem)
        )
        entry["base_cpu"] = [_trace_component(name, "cpu", window)]
        entry["base_mem"] = [_trace_component(name, "mem", window)]
    sids = {g["sid"] for g in val["guests"]}
    val["events"] = [
        {"t": m.t, "type": "migrate", "sid": m.sid, "target": m.target}
        for m in migrations
        if m.sid in sids
    ]
    val["description"] = (
        f"{scenario['description']}; validation: every real migration replayed, host load = {how}"
    )
    return val, how


def _meta(export: ClusterExport, imp: Import) -> dict[str, Any]:
    w = imp.window
    return {
        "format": IMPORT_FORMAT,
        "export": str(export.path),
        "export_meta": export.meta,
        "pve_version": export.version,
        "rrd_format": export.rrd_format,
        "window": {
            "timeframe": w.timeframe,
            "cf": w.cf,
            "resolution_s": w.step,
            "start": w.start,
            "end": w.end,
            "start_utc": utc(w.start),
            "end_utc": utc(w.end),
            "rows": w.n,
            "fit_rows": imp.fit_rows,
        },
        "policy_params": imp.policy_params,
        "migrations": [m.__dict__ for m in imp.migrations],
        "failed_migrations": [m.__dict__ for m in imp.failed],
        "notes": [n.__dict__ for n in imp.notes],
    }
