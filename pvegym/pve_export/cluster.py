"""One export, read and cross-checked: nodes, guests, HA configuration, CRS settings and series.

The layout is what ``scripts/pve-export.sh`` writes (``tests/data/pve-exports/README.md``)::

    export.json                              the script's record: when, where, what failed
    version.json                             GET /version
    cluster/resources.json                   GET /cluster/resources
    cluster/options.json                     GET /cluster/options (crs, migration, bwlimit)
    cluster/ha/resources.json                GET /cluster/ha/resources
    cluster/ha/rules.json                    GET /cluster/ha/rules        (PVE ≥ 9)
    cluster/ha/groups.json                   GET /cluster/ha/groups       (PVE ≤ 8)
    cluster/ha/manager_status.json           GET /cluster/ha/status/manager_status
    cluster/mapping/pci.json                 GET /cluster/mapping/pci     (optional)
    nodes/<node>/status.json                 GET /nodes/<node>/status
    nodes/<node>/tasks.json                  GET /nodes/<node>/tasks (migrations only)
    nodes/<node>/versions.json               GET /nodes/<node>/apt/versions (a few packages)
    nodes/<node>/rrddata-<tf>-<cf>.json.gz   GET /nodes/<node>/rrddata
    nodes/<node>/{qemu,lxc}/<vmid>/config.json
    nodes/<node>/{qemu,lxc}/<vmid>/rrddata-<tf>-<cf>.json.gz

:func:`read_export` reads what is there and raises an
:class:`~pvegym.pve_export.files.ExportError` (file and field) for what is wrong or missing
where it cannot be done without; optional parts that are absent become entries of
:attr:`ClusterExport.missing`, never silent defaults.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from pvegym.errors import ConfigError
from pvegym.pve_export.files import ExportError, ExportFiles, Value
from pvegym.pve_export.rrd import CFS, RESOLUTION, TIMEFRAMES, Series, parse_series

EXPORT_FORMAT = "pvegym-pve-export/1"

#: HA resource states (``PVE::HA::Config``, ``ha-manager`` docs): enabled = started.
HA_STATES = ("started", "enabled", "stopped", "disabled", "ignored")


@dataclass(frozen=True)
class Task:
    """A migration task from a node's task list: ``kind`` qmigrate | vzmigrate | hamigrate."""

    kind: str
    vmid: int
    node: str  # the node the task ran on (the source of a migration)
    start: int  # unix s
    end: int | None
    ok: bool


@dataclass
class NodeExport:
    name: str
    maxcpu: int
    maxmem: float  # bytes (MemTotal)
    status: str  # online | offline | unknown (cluster/resources.json)
    ha_state: str  # the CRM's node status (online, maintenance, unknown, fence, gone) or ""
    lrm_mode: str  # the LRM's mode (active, maintenance, restart, shutdown) or ""
    ksm_shared: float  # bytes (status.json ksm.shared)
    packages: dict[str, str] = field(default_factory=dict)  # installed versions (versions.json)
    series: dict[tuple[str, str], Series] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)

    @property
    def maintenance(self) -> bool:
        return self.ha_state == "maintenance" or self.lrm_mode == "maintenance"


@dataclass(frozen=True)
class HaResource:
    sid: str
    state: str  # one of HA_STATES
    group: str
    failback: bool | None
    auto_rebalance: bool | None  # the per-resource flag, default on (None: not set)


@dataclass
class GuestExport:
    vmid: int
    kind: str  # qemu | lxc
    node: str
    name: str
    status: str  # running | stopped | …
    maxcpu: float  # vCPUs (cluster/resources.json)
    maxmem: float  # bytes
    template: bool
    config: dict[str, str]
    ha: HaResource | None = None
    series: dict[tuple[str, str], Series] = field(default_factory=dict)

    @property
    def sid(self) -> str:
        return f"{'vm' if self.kind == 'qemu' else 'ct'}:{self.vmid}"


@dataclass(frozen=True)
class Rule:
    """An HA rule (``node-affinity`` or ``resource-affinity``), or a group converted to one the way
    ``PVE::HA::Groups::migrate_groups_to_rules`` converts it (``ha-group-<name>``)."""

    name: str
    type: str
    resources: tuple[str, ...]
    nodes: dict[str, int]  # node -> priority (node-affinity)
    strict: bool
    affinity: str  # positive | negative (resource-affinity)
    disabled: bool
    errors: tuple[str, ...]  # upstream's feasibility errors (the rule is not applied)
    source: str  # the file it came from


@dataclass(frozen=True)
class CrsSettings:
    """``datacenter.cfg``'s ``crs`` (as ``GET /cluster/options`` returns it) and migration."""

    mode: str  # basic | static | dynamic
    rebalance_on_start: bool
    auto_rebalance: bool
    threshold: float | None  # as configured (percent or fraction, see ``percent_units``)
    method: str | None
    hold_duration: float | None
    margin: float | None
    percent_units: bool  # threshold/margin in percent (pve-cluster ≥ 9.1.5, :func:`crs_units`)
    units_why: str  # what decided ``percent_units`` (the version or value that proves it)
    bwlimit_migration_kib: float | None  # datacenter bwlimit 'migration' (KiB/s)
    migration_type: str


@dataclass
class ClusterExport:
    path: Path
    meta: dict[str, object]
    created: float  # unix s, when the export ran (export.json)
    version: str  # pve-manager version, e.g. "9.2.5"
    rrd_format: str  # pve2 | pve9
    nodes: dict[str, NodeExport]
    guests: dict[int, GuestExport]
    storages: dict[str, bool]  # storage id -> shared
    rules: list[Rule]
    crs: CrsSettings
    pci_live_capable: dict[str, bool] | None
    missing: list[str] = field(default_factory=list)  # optional parts the export lacks

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])

    @property
    def version_numbers(self) -> tuple[int, ...]:
        """pve-manager's version as numbers, ``"9.2.5"`` → ``(9, 2, 5)``."""
        return _version_tuple(self.version)


def read_export(path: Path, crs_units: str | None = None) -> ClusterExport:
    """Read and cross-check an export directory or tarball (errors name the file and field);
    ``crs_units`` (``percent`` | ``fraction``, the ``--crs-units`` flag) states the units of the
    auto-rebalance threshold and margin where the export cannot prove them (:func:`crs_units`)."""
    if crs_units not in (None, "percent", "fraction"):
        raise ConfigError("--crs-units", f"{crs_units!r} is not percent or fraction")
    files = ExportFiles(path)
    try:
        return _read(files, path, crs_units)
    finally:
        files.close()


def _version_tuple(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split("-", 1)[0].split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)


def _read(files: ExportFiles, path: Path, units_flag: str | None) -> ClusterExport:
    missing: list[str] = []
    meta, created, version, vt = _read_meta(files)
    rrd_format = "pve9" if vt[0] >= 9 else "pve2"
    nodes, guests, storages = _read_resources(files)
    for name, node in nodes.items():
        _read_node_status(files, name, node, missing)

    # the small configuration files first, the series (the bulk of an export) last
    for vmid, g in guests.items():
        if g.template:
            continue
        cfg = files.json(f"nodes/{g.node}/{g.kind}/{vmid}/config.json")
        assert cfg is not None
        g.config = {k: v.text() for k, v in cfg.members() if not isinstance(v.raw, dict | list)}
    crs = _read_options(files, missing)
    ha_resources = _read_ha_resources(files, guests)
    rules = _read_rules(files, ha_resources, nodes, missing)
    master = _read_manager_status(files, nodes, missing)
    pci = _read_pci(files, missing)
    _read_series(files, nodes, guests, rrd_format)
    for nd in nodes.values():  # a node without status (offline) still needs a size
        if nd.maxcpu == 0:
            nd.maxcpu = max(1, int(_last(nd.series, "maxcpu") or 1))
            nd.maxmem = _last(nd.series, "memtotal") or 1.0
    units = crs_units(crs, version, nodes, master, units_flag)
    crs = dataclasses.replace(crs, percent_units=units[0], units_why=units[1])
    return ClusterExport(
        path=path,
        meta=meta,
        created=created,
        version=version,
        rrd_format=rrd_format,
        nodes=nodes,
        guests=guests,
        storages=storages,
        rules=rules,
        crs=crs,
        pci_live_capable=pci,
        missing=missing,
    )


def _read_meta(files: ExportFiles) -> tuple[dict[str, object], float, str, tuple[int, ...]]:
    """``export.json`` and ``version.json``: the export's metadata, its creation time (unix s),
    pve-manager's version and that version as numbers."""
    meta_v = files.json("export.json")
    assert meta_v is not None
    meta = meta_v.obj()
    fmt = meta_v.get("format").text()
    if fmt != EXPORT_FORMAT:
        raise meta_v.get("format").error(f"{fmt!r} is not a known export format ({EXPORT_FORMAT})")
    created = meta_v.get("created").num()
    ver_v = files.json("version.json")
    assert ver_v is not None
    version = ver_v.get("version").text()
    vt = _version_tuple(version)
    if not vt:
        raise ver_v.get("version").error(f"{version!r} is not a pve-manager version")
    return meta, created, version, vt


def _read_resources(
    files: ExportFiles,
) -> tuple[dict[str, NodeExport], dict[int, GuestExport], dict[str, bool]]:
    """``cluster/resources.json``: the nodes, the guests (each on a listed node) and whether each
    storage is shared."""
    res_v = files.json("cluster/resources.json")
    assert res_v is not None
    nodes: dict[str, NodeExport] = {}
    guests: dict[int, GuestExport] = {}
    storages: dict[str, bool] = {}
    for item in res_v.items():
        kind = item.get("type").text()
        if kind == "node":
            name = item.get("node").text()
            nodes[name] = NodeExport(
                name=name,
                maxcpu=0,
                maxmem=0.0,
                status=item.get("status").text(),
                ha_state="",
                lrm_mode="",
                ksm_shared=0.0,
            )
        elif kind in ("qemu", "lxc"):
            vmid = item.get("vmid").int(minimum=1)
            if vmid in guests:
                raise item.get("vmid").error(f"guest {vmid} listed twice")
            label = item.opt("name")
            guests[vmid] = GuestExport(
                vmid=vmid,
                kind=kind,
                node=item.get("node").text(),
                name=label.text() if label else "",
                status=item.get("status").text(),
                maxcpu=item.get("maxcpu").num(),
                maxmem=item.get("maxmem").num(),
                template=bool(item.opt("template") and item.get("template").flag()),
                config={},
            )
        elif kind == "storage":
            shared = item.opt("shared")
            sid = item.get("storage").text()
            storages[sid] = storages.get(sid, False) or bool(shared and shared.flag())
    if not nodes:
        raise res_v.error("lists no node (no entry with type 'node')")
    for g in guests.values():
        if g.node not in nodes:
            raise ExportError(
                "cluster/resources.json", f"{g.kind}/{g.vmid}.node", f"unknown node {g.node!r}"
            )
    return nodes, guests, storages


def _read_node_status(files: ExportFiles, name: str, node: NodeExport, missing: list[str]) -> None:
    """A node's size, KSM sharing and task log from ``nodes/<name>/status.json`` (required for
    an online node; an offline node's absence is noted in ``missing``)."""
    st = files.json(f"nodes/{name}/status.json", required=node.status == "online")
    if st is None:
        missing.append(f"nodes/{name}/status.json (node {node.status})")
        return
    node.maxcpu = st.get("cpuinfo").get("cpus").int(minimum=1)
    node.maxmem = st.get("memory").get("total").num(minimum=1.0)
    ksm = st.opt("ksm")
    node.ksm_shared = ksm.get("shared").num() if ksm is not None and ksm.has("shared") else 0.0
    node.tasks = _read_tasks(files, name, missing)
    node.packages = _read_packages(files, name, missing)


#: the packages whose versions the import reads from ``versions.json``
PACKAGES = ("pve-manager", "pve-cluster", "libpve-cluster-perl", "pve-ha-manager")


def _read_packages(files: ExportFiles, name: str, missing: list[str]) -> dict[str, str]:
    """Installed versions from ``GET /nodes/<name>/apt/versions`` (pve-manager ``API2/APT.pm``
    ``versions``: ``OldVersion`` is the installed one, ``Version`` the upgrade candidate; a
    package not installed has no ``OldVersion``)."""
    vv = files.json(f"nodes/{name}/versions.json", required=False)
    if vv is None:
        missing.append(f"nodes/{name}/versions.json (package versions of {name} unknown)")
        return {}
    out = {}
    for item in vv.items():
        pkg = item.get("Package").text()
        state = item.opt("CurrentState")
        installed = item.opt("OldVersion")
        if (
            pkg in PACKAGES
            and installed is not None
            and (state is None or state.text() == "Installed")
        ):
            out[pkg] = installed.text()
    return out


def _last(series: dict[tuple[str, str], Series], name: str) -> float | None:
    for s in series.values():
        vals = s.get(name)
        finite = vals[[math.isfinite(v) for v in vals]]
        if finite.size:
            return float(finite[-1])
    return None


def _read_tasks(files: ExportFiles, name: str, missing: list[str]) -> list[Task]:
    tv = files.json(f"nodes/{name}/tasks.json", required=False)
    if tv is None:
        missing.append(f"nodes/{name}/tasks.json (migrations in the window unknown)")
        return []
    tasks = []
    for item in tv.items():
        kind = item.get("type").text()
        if kind not in ("qmigrate", "vzmigrate", "hamigrate"):
            continue
        ident = item.get("id").text()
        if ident.startswith(("vm:", "ct:")):  # an HA sid: accepted for hamigrate
            ident = ident.split(":", 1)[1]
        if not ident.isdigit():
            raise item.get("id").error(f"{ident!r} is not a guest id")
        end = item.opt("endtime")
        status = item.opt("status")
        tasks.append(
            Task(
                kind=kind,
                vmid=int(ident),
                node=name,
                start=item.get("starttime").int(),
                end=end.int() if end is not None else None,
                ok=status is not None and status.text() == "OK",
            )
        )
    return sorted(tasks, key=lambda t: t.start)


def _rrd_name(tf: str, cf: str) -> str:
    return f"rrddata-{tf}-{cf}.json"


def _read_series(
    files: ExportFiles,
    nodes: dict[str, NodeExport],
    guests: dict[int, GuestExport],
    rrd_format: str,
) -> None:
    """Every ``rrddata`` file: node files for nodes, guest files for guests listed in
    ``cluster/resources.json`` (anything else is an error: a series of an unknown entity)."""
    table = RESOLUTION[rrd_format]
    by_dir: dict[str, tuple[dict[tuple[str, str], Series], str]] = {}
    for name, node in nodes.items():
        by_dir[f"nodes/{name}"] = (node.series, f"node {name}")
    for vmid, g in guests.items():
        by_dir[f"nodes/{g.node}/{g.kind}/{vmid}"] = (g.series, f"{g.kind} {vmid}")
    for rel in files.names("nodes"):
        base, _, leaf = rel.rpartition("/")
        if not leaf.startswith("rrddata-"):
            continue
        parts = leaf.removesuffix(".json").split("-")
        if len(parts) != 3 or parts[1] not in TIMEFRAMES or parts[2] not in CFS:
            continue  # month/year/decade or other files: not used
        if base not in by_dir:
            segs = base.split("/")
            what = f"node {segs[1]!r}" if len(segs) == 2 else f"guest {segs[-1]!r} on {segs[1]!r}"
            raise ExportError(
                rel, "", f"a series of {what}, which is not in cluster/resources.json"
            )
        target, _ = by_dir[base]
        value = files.json(rel)
        assert value is not None
        tf, cf = parts[1], parts[2]
        target[(tf, cf)] = parse_series(value, tf, cf, table[tf][0])
    for base, (series, what) in by_dir.items():
        if not any(cf == "AVERAGE" for _, cf in series) and what.startswith("node"):
            raise ExportError(f"{base}/{_rrd_name('hour', 'AVERAGE')}", "", f"no series of {what}")


def _property(value: Value) -> dict[str, str]:
    """A property string (``a=1,b=x``) or an already parsed object, as strings."""
    if isinstance(value.raw, dict):
        return {k: v.text() for k, v in value.members()}
    out = {}
    for item in value.text().split(","):
        k, sep, v = item.partition("=")
        if sep:
            out[k.strip()] = v.strip()
    return out


def _number(field: str, text: str) -> float:
    """A finite number ≥ 0 from a property string of ``cluster/options.json``."""
    try:
        v = float(text)
    except ValueError:
        raise ExportError("cluster/options.json", field, f"not a number: {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ExportError("cluster/options.json", field, f"must be ≥ 0, not {text!r}")
    return v


def _read_options(files: ExportFiles, missing: list[str]) -> CrsSettings:
    ov = files.json("cluster/options.json")
    assert ov is not None
    ov.obj()
    crs = _property(ov.get("crs")) if ov.has("crs") else {}
    if not crs:
        missing.append("cluster/options.json crs (no CRS settings: PVE's default ha=basic)")
    mode = crs.get("ha", "basic")
    if mode not in ("basic", "static", "dynamic"):
        raise ExportError(
            "cluster/options.json", "crs.ha", f"{mode!r} is not basic, static or dynamic"
        )

    def num(key: str) -> float | None:
        return _number(f"crs.{key}", crs[key]) if key in crs else None

    def flag(key: str) -> bool:
        if key not in crs:
            return False
        if crs[key] not in ("0", "1"):
            raise ExportError(
                "cluster/options.json", f"crs.{key}", f"must be 0 or 1, not {crs[key]!r}"
            )
        return crs[key] == "1"

    bw = _property(ov.get("bwlimit")) if ov.has("bwlimit") else {}
    bw_kib = None
    for key in ("migration", "default"):
        if key in bw:
            bw_kib = _number(f"bwlimit.{key}", bw[key])
            break
    migration = _property(ov.get("migration")) if ov.has("migration") else {}
    threshold, margin = num("ha-auto-rebalance-threshold"), num("ha-auto-rebalance-margin")
    return CrsSettings(
        mode=mode,
        rebalance_on_start=flag("ha-rebalance-on-start"),
        auto_rebalance=flag("ha-auto-rebalance"),
        threshold=threshold,
        method=crs.get("ha-auto-rebalance-method"),
        hold_duration=num("ha-auto-rebalance-hold-duration"),
        margin=margin,
        percent_units=False,  # decided by crs_units once the nodes' versions are read
        units_why="",
        bwlimit_migration_kib=bw_kib,
        migration_type=migration.get("type", "secure"),
    )


def _read_ha_resources(files: ExportFiles, guests: dict[int, GuestExport]) -> dict[str, HaResource]:
    hv = files.json("cluster/ha/resources.json")
    assert hv is not None
    by_sid = {g.sid: g for g in guests.values()}
    out: dict[str, HaResource] = {}
    for item in hv.items():
        sid = item.get("sid").text()
        if sid not in by_sid:
            raise item.get("sid").error(
                f"HA resource {sid!r} is not a guest in cluster/resources.json"
            )
        state = item.opt("state")
        st = state.text() if state is not None else "started"  # the schema's default
        if st not in HA_STATES:
            raise item.get("state").error(f"{st!r} is not an HA state ({', '.join(HA_STATES)})")
        group = item.opt("group")
        failback = item.opt("failback")
        auto = item.opt("auto-rebalance")
        res = HaResource(
            sid=sid,
            state=st,
            group=group.text() if group is not None else "",
            failback=failback.flag() if failback is not None else None,
            auto_rebalance=auto.flag() if auto is not None else None,
        )
        out[sid] = res
        by_sid[sid].ha = res
    return out


def _node_priorities(value: Value) -> dict[str, int]:
    """``"node1:2,node2"`` (``pve-ha-node-list``) → ``{"node1": 2, "node2": 0}``."""
    out = {}
    for item in value.text().split(","):
        node, _, prio = item.strip().partition(":")
        if not node:
            continue
        if prio and not prio.isdigit():
            raise value.error(f"{item!r} is not node[:priority]")
        out[node] = int(prio or 0)
    return out


def _read_rules(
    files: ExportFiles,
    ha: dict[str, HaResource],
    nodes: dict[str, NodeExport],
    missing: list[str],
) -> list[Rule]:
    rules: list[Rule] = []
    rv = files.json("cluster/ha/rules.json", required=False)
    gv = files.json("cluster/ha/groups.json", required=False)
    if rv is None and gv is None:
        if ha:
            missing.append(
                "cluster/ha/rules.json and cluster/ha/groups.json (no HA placement rules read)"
            )
        return rules
    if rv is not None:
        rules += [_rule(item, rv.file, ha, nodes) for item in rv.items()]
    if gv is not None:
        rules += _group_rules(gv, ha, nodes, {r.name for r in rules})
    group_names = {item.get("group").text() for item in gv.items()} if gv is not None else set()
    for sid, r in sorted(ha.items()):
        if not r.group:
            continue
        if gv is None:
            missing.append(f"cluster/ha/groups.json (group {r.group!r} of {sid} not read)")
        elif r.group not in group_names:
            raise ExportError(
                "cluster/ha/resources.json", f"{sid}.group", f"unknown group {r.group!r}"
            )
    return rules


def _rule(
    item: Value, source: str, ha: dict[str, HaResource], nodes: dict[str, NodeExport]
) -> Rule:
    """One entry of ``cluster/ha/rules.json`` (PVE 9), its resources and nodes checked."""
    kind = item.get("type").text()
    if kind not in ("node-affinity", "resource-affinity"):
        raise item.get("type").error(f"{kind!r} is not node-affinity or resource-affinity")
    resources = tuple(s.strip() for s in item.get("resources").text().split(",") if s.strip())
    for s in resources:
        if s not in ha:
            raise item.get("resources").error(f"{s!r} is not an HA resource")
    errors = item.opt("errors")
    disable = item.opt("disable")
    strict = item.opt("strict")
    node_prio = _node_priorities(item.get("nodes")) if kind == "node-affinity" else {}
    for n in node_prio:
        if n not in nodes:
            raise item.get("nodes").error(f"unknown node {n!r}")
    affinity = item.get("affinity").text() if kind == "resource-affinity" else ""
    if kind == "resource-affinity" and affinity not in ("positive", "negative"):
        raise item.get("affinity").error(f"{affinity!r} is not positive or negative")
    return Rule(
        name=item.get("rule").text(),
        type=kind,
        resources=resources,
        nodes=node_prio,
        strict=bool(strict and strict.flag()),
        affinity=affinity,
        disabled=bool(disable and disable.flag()),
        errors=tuple(_flatten(errors.raw)) if errors is not None else (),
        source=source,
    )


def _group_rules(
    gv: Value, ha: dict[str, HaResource], nodes: dict[str, NodeExport], names: set[str]
) -> list[Rule]:
    """``cluster/ha/groups.json`` (PVE 8) as ``migrate_groups_to_rules`` (``PVE::HA::Groups``)
    turns it into rules: one node-affinity rule per used group, unless ``names`` has it."""
    rules: list[Rule] = []
    groups = {item.get("group").text(): item for item in gv.items()}
    for gname in sorted(groups):
        item = groups[gname]
        members = tuple(sorted(s for s, r in ha.items() if r.group == gname))
        if not members or f"ha-group-{gname}" in names:
            continue
        node_prio = _node_priorities(item.get("nodes"))
        for n in node_prio:
            if n not in nodes:
                raise item.get("nodes").error(f"unknown node {n!r}")
        restricted = item.opt("restricted")
        rules.append(
            Rule(
                name=f"ha-group-{gname}",
                type="node-affinity",
                resources=members,
                nodes=node_prio,
                strict=bool(restricted and restricted.flag()),
                affinity="",
                disabled=False,
                errors=(),
                source=gv.file,
            )
        )
    return rules


def _flatten(raw: object) -> list[str]:
    if isinstance(raw, dict):
        return [f"{k}: {m}" for k, v in raw.items() for m in _flatten(v)]
    if isinstance(raw, list):
        return [m for v in raw for m in _flatten(v)]
    return [str(raw)]


def _read_manager_status(
    files: ExportFiles, nodes: dict[str, NodeExport], missing: list[str]
) -> str:
    """Each node's CRM and LRM state into ``nodes``; returns the CRM master's name (or "")."""
    mv = files.json("cluster/ha/manager_status.json", required=False)
    if mv is None:
        missing.append("cluster/ha/manager_status.json (maintenance state of nodes unknown)")
        return ""
    ms = mv.opt("manager_status")
    master = ms.opt("master_node") if ms is not None else None
    if ms is not None and ms.has("node_status"):
        for name, state in ms.get("node_status").members():
            if name in nodes:
                nodes[name].ha_state = state.text()
    lrm = mv.opt("lrm_status")
    if lrm is not None:
        for name, status in lrm.members():
            if name in nodes and status.has("mode"):
                nodes[name].lrm_mode = status.get("mode").text()
    return master.text() if master is not None else ""


def _read_pci(files: ExportFiles, missing: list[str]) -> dict[str, bool] | None:
    pv = files.json("cluster/mapping/pci.json", required=False)
    if pv is None:
        missing.append("cluster/mapping/pci.json (mapped PCI devices assumed not live-migratable)")
        return None
    out = {}
    for item in pv.items():
        cap = item.opt("live-migration-capable")
        out[item.get("id").text()] = bool(cap and cap.flag())
    return out


# ------------------------------------------------------------------------------------------ units
#: libpve-cluster-perl 9.1.5 (pve-cluster commit d8b4d02, "datacenter config: switch HA
#: auto-rebalance thresholds to percent", and its changelog): ``ha-auto-rebalance-threshold``
#: and ``-margin`` went from a 0.0–1.0 fraction (minimum 0, no maximum) to 0–100 percent
#: (maximum 100). ``PVE::DataCenterConfig`` ships in libpve-cluster-perl, built from pve-cluster.
PERCENT_SINCE_CLUSTER = (9, 1, 5)
#: pve-manager 9.1.14 depends on libpve-cluster-perl (>= 9.1.5) and pve-ha-manager (>= 5.2.3)
#: (pve-manager commit 68d6031f, "d/control: bump versioned dependencies for the new CRS percent
#: units"), so an installed pve-manager ≥ 9.1.14 proves the percent schema. An older pve-manager
#: proves nothing: libpve-cluster-perl may have been upgraded alone.
PERCENT_SINCE_MANAGER = (9, 1, 14)
#: the largest value the percent schema accepts (d8b4d02: ``maximum => 100``)
PERCENT_MAX = 100.0


def _units_proof(
    manager_version: str, nodes: dict[str, NodeExport], master: str
) -> tuple[bool | None, str]:
    """What the recorded package versions prove about the units: ``(percent, why)``, ``percent``
    None where they prove nothing. The CRM master reads ``datacenter.cfg`` for the balancer, so
    its versions decide; without a known master, every node that recorded them must agree."""
    order = [master] if master in nodes and nodes[master].packages else sorted(nodes)
    verdicts: dict[bool, str] = {}
    for name in order:
        pk = nodes[name].packages
        for pkg in ("libpve-cluster-perl", "pve-cluster"):
            if pkg in pk and _version_tuple(pk[pkg]):
                percent = _version_tuple(pk[pkg]) >= PERCENT_SINCE_CLUSTER
                verdicts.setdefault(percent, f"{pkg} {pk[pkg]} on {name}")
                break
        else:
            mv = pk.get("pve-manager")
            if mv and _version_tuple(mv) >= PERCENT_SINCE_MANAGER:
                verdicts.setdefault(
                    True, f"pve-manager {mv} on {name} (needs libpve-cluster-perl ≥ 9.1.5)"
                )
    if len(verdicts) == 1:
        percent, why = next(iter(verdicts.items()))
        return percent, why
    if len(verdicts) > 1:
        return None, f"the nodes disagree ({verdicts[True]}, {verdicts[False]})"
    if _version_tuple(manager_version) >= PERCENT_SINCE_MANAGER:
        return True, f"pve-manager {manager_version} (needs libpve-cluster-perl ≥ 9.1.5)"
    return None, f"pve-manager {manager_version} and no recorded libpve-cluster-perl version"


def crs_units(
    crs: CrsSettings,
    manager_version: str,
    nodes: dict[str, NodeExport],
    master: str,
    flag: str | None,
) -> tuple[bool, str]:
    """Whether the configured threshold and margin are percent, and what proves it: the nodes'
    libpve-cluster-perl (or pve-cluster) version, a pve-manager that depends on ≥ 9.1.5, or a
    value above 100 (only the fraction schema allows it); else ``flag`` (``--crs-units``). Neither:
    a :class:`~pvegym.pve_export.files.ExportError` naming the value and the flag — or, with no
    value configured (nothing to misread), fraction with a ``why`` saying the units are unproven
    (what-if's recommendation shows it beside the values it recommends)."""
    values = [
        (key, v)
        for key, v in (
            ("ha-auto-rebalance-threshold", crs.threshold),
            ("ha-auto-rebalance-margin", crs.margin),
        )
        if v is not None
    ]
    percent, why = _units_proof(manager_version, nodes, master)
    if percent is None:
        big = [(k, v) for k, v in values if v > PERCENT_MAX]
        if big:
            percent, why = (
                False,
                f"{big[0][0]}={big[0][1]:g} exceeds the percent schema's maximum 100",
            )
    if percent is not None:
        want = "percent" if percent else "fraction"
        if flag is not None and flag != want:
            raise ConfigError(
                "--crs-units", f"the export proves {want} ({why}); {flag} contradicts it"
            )
        return percent, why
    if flag is not None:
        return flag == "percent", "--crs-units " + flag
    if not values:
        # nothing configured to misread; the units still matter for a value recommended to set
        return False, (
            f"no threshold or margin configured, and the units of a value to set are not proven "
            f"({why}): state them with --crs-units percent|fraction"
        )
    key, v = values[0]
    raise ExportError(
        "cluster/options.json",
        f"crs.{key}",
        f"{v:g} may be percent (libpve-cluster-perl ≥ 9.1.5) or a fraction: {why}; "
        "state it with --crs-units percent|fraction",
    )
