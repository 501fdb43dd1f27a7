"""An export as a pvegym scenario: nodes, guests, rules, workloads as traces, and what is missing.

:func:`build_import` maps a :class:`~pvegym.pve_export.cluster.ClusterExport` onto the scenario
schema (:mod:`pvegym.sim.scenario`) over one *window* of its RRD series:

* **window** — the finest series that covers it: a timeframe name (``hour``, ``day``, ``week``:
  that series' whole span) or a duration (the finest timeframe whose series of every node and guest
  cover it; the window ends at the last row they all have). Its resolution and span are recorded.
* **nodes** — cores and memory from ``status.json``; the host's own load (``base_cpu``,
  ``base_mem``) is the node series minus the guests on the node at that time (placement from the
  migration tasks), replayed as an ``rrd`` trace; a node in maintenance is offline (the HA
  manager's online-node list excludes it, ``NodeStatus::list_online_nodes``).
* **guests** — vCPUs and memory from ``cluster/resources.json``; CPU (cores) and host footprint
  (``memhost``; PVE 8 records only ``mem``) replayed as ``rrd`` traces; ``mem_ratio`` = Σ mem /
  Σ memhost over the window; HA state from ``cluster/ha/resources.json``; ``local_resources``
  when qemu-server or pve-container would refuse the HA manager's migration
  (:mod:`~pvegym.pve_export.blockers`).
* **rules** — HA rules (PVE 9) and groups converted as upstream converts them (PVE 8).
* **events** — migrations the operator made inside the window (non-HA guests, ``hamigrate``
  requests, evacuations of a node in maintenance) as manual ``migrate`` events; migrations the
  HA manager issued itself are what a balancer under test replaces, so they are only listed.

Everything the schema cannot represent is a :class:`Note` (``dropped``: a fact of the export the
scenario leaves out; ``assumed``: a value the export does not record; ``info``), written into the
scenario file's header and ``import.json`` and printed by ``pvegym import`` — never a silent
guess. The *validation* scenario (:attr:`Import.validation`) is the same cluster with every real
migration replayed and the host's own load *fitted* on the first part of the window only, so that
``pvegym whatif`` can compare the model with the held-out rest without circularity.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.pve_export.blockers import ct_migratability, vm_migratability
from pvegym.pve_export.cluster import ClusterExport, GuestExport, NodeExport, Task
from pvegym.pve_export.files import ExportError
from pvegym.pve_export.rrd import RESOLUTION, TIMEFRAMES, Series, fill_gaps
from pvegym.sim.workload import RRD_TAG
from pvegym.units import GiB, MiB, parse_duration

FloatArray = NDArray[np.float64]
IMPORT_FORMAT = "pvegym-import/1"
DAY_S = 86400
#: A ``hamigrate`` request counts as the origin of a ``qmigrate`` starting this soon after (s).
HAMIGRATE_LAG_S = 120


@dataclass(frozen=True)
class Note:
    """``kind``: ``dropped`` (in the export, not in the scenario), ``assumed`` (not in the
    export, a default is used) or ``info``; ``subject``: the node, guest, rule or file."""

    kind: str
    subject: str
    text: str

    def line(self) -> str:
        return f"[{self.kind}] {self.subject}: {self.text}"


@dataclass(frozen=True)
class Window:
    """``(start, end]`` in unix seconds, rows every ``step`` s stamped at the interval's end."""

    timeframe: str
    cf: str
    step: int
    start: int
    end: int

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def n(self) -> int:
        return self.duration // self.step

    @property
    def times(self) -> NDArray[np.int64]:
        return self.start + self.step * np.arange(1, self.n + 1, dtype=np.int64)

    def describe(self) -> str:
        return (
            f"{_iso(self.start)} – {_iso(self.end)} ({self.duration / 3600:g} h), "
            f"the {self.timeframe} series at {self.step} s resolution ({self.cf})"
        )


@dataclass
class TraceData:
    """One ``rrd`` trace file: ``cpu``/``mem`` as fractions of the capacities, one per window row."""

    cpu: FloatArray
    mem: FloatArray
    cpu_capacity: float  # cores
    mem_capacity: float  # bytes


@dataclass
class Migration:
    """A migration task of the window: ``origin`` operator | ha-manager; ``target`` derived."""

    t: float  # seconds into the window: the task started
    t_end: float  # seconds into the window: the task ended (the guest runs on the target after)
    sid: str
    source: str
    target: str
    ok: bool
    origin: str


@dataclass
class Reality:
    """What the export measured on the window grid, for the model-vs-reality comparison:
    per node cores busy, memory in use (bytes) and, on PVE 9, PSI avg10 averages (percent)."""

    node_names: tuple[str, ...]
    cpu: FloatArray  # (rows, nodes) cores
    mem: FloatArray  # (rows, nodes) bytes
    cpu_some: FloatArray | None  # (rows, nodes) percent, None on PVE 8
    mem_some: FloatArray | None
    cpu_max: FloatArray  # the MAX series' cores busy where exported, else = cpu
    maxcpu: FloatArray
    maxmem: FloatArray


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


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


# ------------------------------------------------------------------------------------------ window
def _entities(export: ClusterExport) -> list[tuple[str, str, dict[tuple[str, str], Series]]]:
    """``(name, directory, series)`` of the nodes and the running-or-recorded guests whose series
    decide the window."""
    out = [
        (f"node {n.name}", f"nodes/{n.name}", n.series) for n in export.nodes.values() if n.series
    ]
    out += [
        (g.sid, f"nodes/{g.node}/{g.kind}/{g.vmid}", g.series)
        for g in export.guests.values()
        if not g.template and (g.series or g.status == "running")
    ]
    return out


def choose_window(export: ClusterExport, spec: str, cf: str = "AVERAGE") -> Window:
    """The window for ``spec``: a timeframe name or a duration (``36h``), see the module doc."""
    table = RESOLUTION[export.rrd_format]
    entities = _entities(export)
    if spec in TIMEFRAMES:
        candidates = [spec]
        want: float | None = None
    else:
        try:
            want = parse_duration(spec, "--window")
        except ConfigError:
            raise ConfigError(
                "--window", f"{spec!r} is not hour, day, week or a duration (e.g. 36h)"
            ) from None
        if want <= 0:
            raise ConfigError("--window", "must be positive")
        candidates = sorted(TIMEFRAMES, key=lambda tf: (table[tf][0], -table[tf][1]))
    spans: list[str] = []
    for tf in candidates:
        step = table[tf][0]
        start, end = -math.inf, math.inf
        lacking = [(name, where) for name, where, series in entities if (tf, cf) not in series]
        if lacking and want is None:  # the timeframe asked for: name the file that is missing
            name, where = lacking[0]
            raise ExportError(
                f"{where}/rrddata-{tf}-{cf}.json", "", f"is missing ({name} has no {tf} series)"
            )
        if lacking:
            spans.append(f"{tf}: no {cf} series of {', '.join(n for n, _ in lacking[:3])}")
            continue
        for _, _, series in entities:
            s0, s1 = series[(tf, cf)].span
            start, end = max(start, s0), min(end, s1)
        if end - start < 2 * step:
            spans.append(f"{tf}: the series do not overlap")
            continue
        if want is None:
            return Window(tf, cf, step, int(start), int(end))
        rows = math.ceil(want / step)
        if end - start >= rows * step:
            return Window(tf, cf, step, int(end) - rows * step, int(end))
        spans.append(f"{tf}: covers {(end - start) / 3600:g} h")
    raise ConfigError(
        "--window", f"no exported series covers {spec!r} ({'; '.join(spans) or 'no series'})"
    )


def _on_grid(s: Series, name: str, window: Window) -> FloatArray:
    """Field ``name`` at the window's row times (NaN where the series has no such row)."""
    out = np.full(window.n, np.nan)
    k = (s.times - window.start) // window.step - 1
    ok = (k >= 0) & (k < window.n) & ((s.times - window.start) % window.step == 0)
    out[k[ok]] = s.get(name)[ok]
    return out


def _rows_empty(s: Series, window: Window) -> NDArray[np.bool_]:
    empty = np.ones(window.n, dtype=bool)
    k = (s.times - window.start) // window.step - 1
    ok = (k >= 0) & (k < window.n) & ((s.times - window.start) % window.step == 0)
    empty[k[ok]] = s.empty_rows()[ok]
    return empty


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
    migrations, failed = _migrations(export, window, notes)
    start_node = _start_placement(export, window)
    placement = _placement_matrix(export, window, start_node, migrations)

    traces: dict[str, TraceData] = {}
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

    nodes: list[dict[str, Any]] = []
    base_cpu: dict[str, FloatArray] = {}
    base_mem: dict[str, FloatArray] = {}
    reality = _reality(export, window, notes)
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
        )
        nodes.append(spec)
        base_cpu[nname], base_mem[nname] = bc, bm

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
            for m in migrations
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
        scenario, export, window, fit_rows, base_cpu, base_mem, migrations, fitted
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
        migrations=migrations,
        failed=failed,
        reality=reality,
        policy_params=params,
    )
    imp.meta = _meta(export, imp)
    return imp


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
    maxcpu = max(1, math.ceil(g.maxcpu - 1e-9))
    if g.maxcpu != maxcpu:
        notes.append(
            Note(
                "dropped",
                sid,
                f"{g.maxcpu:g} vCPUs rounded up to {maxcpu} (the schema takes whole cores)",
            )
        )
    maxmem = g.maxmem if g.maxmem > 0 else GiB
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
        cpu_frac = _on_grid(s, "cpu", window)
        mem = _on_grid(s, "mem", window)
        memhost = _on_grid(s, "memhost", window) if s.has("memhost") else mem.copy()
        empty = _rows_empty(s, window)
        row_maxcpu = _on_grid(s, "maxcpu", window)
    # rows with values but no cpu: the guest was not running (pvestatd writes undef)
    stopped = ~empty & ~np.isfinite(cpu_frac)
    running_rows = np.isfinite(cpu_frac)
    row_maxcpu = np.where(np.isfinite(row_maxcpu), row_maxcpu, g.maxcpu)
    cpu = cpu_frac * row_maxcpu
    for arr in (cpu, mem, memhost):
        arr[stopped] = 0.0
    gaps = int(empty.sum()) if running_rows.any() else 0
    cpu, _ = fill_gaps(cpu)
    mem, _ = fill_gaps(mem)
    memhost, _ = fill_gaps(memhost)
    if not running_rows.any():
        cpu = np.zeros(window.n)
        mem, memhost = cpu.copy(), cpu.copy()
    if gaps:
        notes.append(Note("info", sid, f"{gaps} of {window.n} rows empty (no data): interpolated"))
    if stopped.any() and running_rows.any():
        notes.append(
            Note(
                "info",
                sid,
                f"not running for {int(stopped.sum())} of {window.n} rows: no load then",
            )
        )
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
        traces[name] = TraceData(cpu / maxcpu, memhost / maxmem, float(maxcpu), float(maxmem))
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
        if ha.auto_rebalance is False:
            notes.append(
                Note(
                    "dropped",
                    sid,
                    "auto-rebalance = 0 (PVE ≥ 9.1.13 keeps the balancer off it): the schema has "
                    "no such flag, the replay's balancers may move it",
                )
            )
        if ha.failback is False:
            notes.append(Note("dropped", sid, "failback = 0: failback is not modelled"))
    return entry, cpu, memhost


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
        frac = _on_grid(s, "cpu", window)
        maxcpu = _on_grid(s, "maxcpu", window)
        maxcpu = np.where(np.isfinite(maxcpu), maxcpu, node.maxcpu)
        c, filled = fill_gaps(frac * maxcpu)
        if filled:
            notes.append(Note("info", name, f"{filled} of {n} rows without data: interpolated"))
        if not np.isfinite(c).any():
            raise ExportError(s.file, "cpu", "has no value in the window")
        m, _ = fill_gaps(_on_grid(s, "memused", window))
        if not np.isfinite(m).any():
            raise ExportError(s.file, "memused", "has no value in the window")
        cpu[:, j], mem[:, j] = c, m
        smax = node.series.get((window.timeframe, "MAX"))
        if smax is not None:
            cm, _ = fill_gaps(_on_grid(smax, "cpu", window) * maxcpu)
            cpu_max[:, j] = np.where(np.isfinite(cm), cm, c)
        else:
            cpu_max[:, j] = c
        if s.has("pressurecpusome"):
            some[:, j] = fill_gaps(_on_grid(s, "pressurecpusome", window))[0]
        if s.has("pressurememorysome"):
            msome[:, j] = fill_gaps(_on_grid(s, "pressurememorysome", window))[0]
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
                "PVE 8's RRD has no memhost: the host footprint is taken as mem (the balloon view when the guest reports balloon stats), mem_ratio 1",
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


# ------------------------------------------------------------------------------------------ placement
def _migrations(
    export: ClusterExport, window: Window, notes: list[Note]
) -> tuple[list[Migration], list[Migration]]:
    """Successful and failed migrations in the window, with their origin and derived target."""
    tasks = sorted((t for n in export.nodes.values() for t in n.tasks), key=lambda t: t.start)
    by_vmid: dict[int, list[Task]] = {}
    requests: dict[int, list[int]] = {}
    for t in tasks:
        if t.kind == "hamigrate":
            requests.setdefault(t.vmid, []).append(t.start)
        elif t.vmid in export.guests:
            by_vmid.setdefault(t.vmid, []).append(t)
    ok_moves: list[Migration] = []
    failed: list[Migration] = []
    for vmid, ts in sorted(by_vmid.items()):
        g = export.guests[vmid]
        done = [t for t in ts if t.ok and t.end is not None]
        for i, t in enumerate(done):
            target = done[i + 1].node if i + 1 < len(done) else g.node
            if target == t.node:
                notes.append(
                    Note(
                        "info",
                        g.sid,
                        f"migration at {_iso(t.start)} from {t.node} ends where it started: the task list is incomplete; ignored",
                    )
                )
                continue
            if not (window.start < (t.end or t.start) <= window.end):
                continue
            ok_moves.append(
                Migration(
                    t.start - window.start,
                    (t.end or t.start) - window.start,
                    g.sid,
                    t.node,
                    target,
                    True,
                    _origin(export, g, t, requests),
                )
            )
        for t in ts:
            if not t.ok and window.start < t.start <= window.end:
                failed.append(
                    Migration(
                        t.start - window.start,
                        (t.end or t.start) - window.start,
                        g.sid,
                        t.node,
                        "",
                        False,
                        _origin(export, g, t, requests),
                    )
                )
    if ok_moves:
        by_origin = {o: sum(m.origin == o for m in ok_moves) for o in ("operator", "ha-manager")}
        notes.append(
            Note(
                "info",
                "migrations",
                f"{len(ok_moves)} in the window ({by_origin['operator']} by the operator: replayed "
                f"as events; {by_origin['ha-manager']} issued by the HA manager: replaced by the "
                "balancer under test, replayed only in the validation run)",
            )
        )
    if failed:
        notes.append(
            Note(
                "info",
                "migrations",
                f"{len(failed)} failed migration tasks in the window (listed in the what-if report)",
            )
        )
    return sorted(ok_moves, key=lambda m: m.t), sorted(failed, key=lambda m: m.t)


def _origin(export: ClusterExport, g: GuestExport, t: Task, requests: dict[int, list[int]]) -> str:
    if g.ha is None or g.ha.state == "ignored":
        return "operator"
    if any(0 <= t.start - r <= HAMIGRATE_LAG_S for r in requests.get(t.vmid, [])):
        return "operator"
    if export.nodes[t.node].maintenance:
        return "operator"  # evacuating a node in maintenance: any balancer would
    return "ha-manager"


def _start_placement(export: ClusterExport, window: Window) -> dict[int, str]:
    """Each guest's node at the window's start: the source of its first successful migration that
    ended after the start, else its node at export time."""
    out: dict[int, str] = {}
    for vmid, g in export.guests.items():
        node = g.node
        done = sorted(
            (
                t
                for n in export.nodes.values()
                for t in n.tasks
                if t.vmid == vmid and t.kind != "hamigrate" and t.ok and t.end is not None
            ),
            key=lambda t: t.start,
        )
        for t in done:
            if (t.end or 0) > window.start:
                node = t.node
                break
        out[vmid] = node
    return out


def _placement_matrix(
    export: ClusterExport, window: Window, start: dict[int, str], moves: list[Migration]
) -> dict[int, NDArray[np.object_]]:
    """Each guest's node per window row: where it spent most of the row's interval (it runs on
    the target once the migration task has ended)."""
    rel = window.times - window.start - window.step / 2
    out: dict[int, NDArray[np.object_]] = {}
    for vmid, g in export.guests.items():
        where = np.full(window.n, start[vmid], dtype=object)
        for m in moves:
            if m.sid == g.sid:
                where[rel > m.t_end] = m.target
        out[vmid] = where
    return out


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
                f"configured auto-rebalance constants (read as {units}) given to upstream: {up}",
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
            "start_utc": _iso(w.start),
            "end_utc": _iso(w.end),
            "rows": w.n,
            "fit_rows": imp.fit_rows,
        },
        "policy_params": imp.policy_params,
        "migrations": [m.__dict__ for m in imp.migrations],
        "failed_migrations": [m.__dict__ for m in imp.failed],
        "notes": [n.__dict__ for n in imp.notes],
    }


# ------------------------------------------------------------------------------------------ writing
def traces_dir_name(scenario_path: Path) -> str:
    return f"{scenario_path.stem}-traces"


def write_trace(path: Path, data: TraceData, window: Window) -> None:
    lines = [
        f"# {RRD_TAG} interval_s={window.step} cpu_capacity={data.cpu_capacity:g} "
        f"mem_capacity={data.mem_capacity:.0f} timeframe={window.timeframe} cf={window.cf}",
        "time,cpu,mem",
    ]
    for t, c, m in zip(window.times.tolist(), data.cpu.tolist(), data.mem.tolist(), strict=True):
        lines.append(f"{t},{max(c, 0.0):.6g},{max(m, 0.0):.6g}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def _with_trace_dir(data: Any, trace_dir: str) -> Any:
    if isinstance(data, dict):
        return {
            k: (trace_dir if v == TRACE_DIR_PLACEHOLDER else _with_trace_dir(v, trace_dir))
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [_with_trace_dir(v, trace_dir) for v in data]
    return data


def scenario_text(data: dict[str, Any], imp: Import, trace_dir: str) -> str:
    """The scenario as TOML, with a header that states the window and every note."""
    import tomli_w

    head = [
        f"# pvegym scenario imported by `pvegym import` from {imp.meta['export']}",
        f"# PVE {imp.meta['pve_version']} ({imp.meta['rrd_format']} RRD format)",
        f"# window: {imp.window.describe()}",
        f"# traces: {trace_dir}/rrd/*.csv (read from beside this file)",
        "# What the scenario cannot represent or had to assume:",
    ]
    head += [f"#   {n.line()}" for n in imp.notes if n.kind != "info"]
    head += ["# Other facts of the import:"] + [
        f"#   {n.line()}" for n in imp.notes if n.kind == "info"
    ]
    body = tomli_w.dumps(_with_trace_dir(data, trace_dir))
    return "\n".join(head) + "\n\n" + body


def write_import(imp: Import, out: Path, validation_out: Path | None = None) -> list[Path]:
    """Write the scenario (``out``), its traces (``<stem>-traces/rrd/``), ``<stem>.import.json``
    and, if asked, the validation scenario; returns the files written."""
    import json

    trace_dir = traces_dir_name(out)
    written: list[Path] = []
    traces = dict(imp.traces)
    if validation_out is not None:
        traces.update(imp.validation_traces)
    for name, trace in sorted(traces.items()):
        p = out.parent / trace_dir / "rrd" / f"{name}.csv"
        write_trace(p, trace, imp.window)
        written.append(p)
    docs = [(out, imp.scenario)]
    if validation_out is not None:
        docs.append((validation_out, imp.validation))
    for path, data in docs:
        rel = trace_dir if path.parent == out.parent else str((out.parent / trace_dir).resolve())
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(scenario_text(data, imp, rel))
        tmp.replace(path)
        written.append(path)
    meta = out.with_name(f"{out.stem}.import.json")
    tmp = meta.with_name(f".{meta.name}.tmp")
    tmp.write_text(json.dumps(imp.meta, indent=1, sort_keys=True, default=str) + "\n")
    tmp.replace(meta)
    written.append(meta)
    return written
