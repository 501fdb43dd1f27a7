"""Reader of pve-ha-manager's regression-test directories (``src/test/test-*/``).

Format: ``reference/pve-ha-manager.md`` §8.3 and the loader in ``src/PVE/HA/Sim/Hardware.pm``
(L32–60 layout, L489–606 loader). Every file is validated; bad input raises
:class:`~pvegym.errors.ConfigError` naming the file and key (``service_config["vm:101"].node``).

Unknown files are **reported, not fatal**: they land in :attr:`TestDir.warnings` (the CLI prints
them on stderr). Why warnings: upstream's own harness ignores extra files (it writes ``status/`` and
``log`` into the directory itself), so refusing them would reject valid upstream directories; but
nothing is silently ignored. Files that upstream reads but pvegym does not model (``fence.cfg``)
are warnings too; ``groups`` are converted to node-affinity rules as upstream 9.x migrates them.

Defaults when a file is missing follow ``Hardware.pm`` (L24–30): 3 nodes ``node1..3`` powered off;
node ``maxcpu`` 24, ``maxmem`` 131072 MiB; service ``maxcpu`` 4, ``maxmem`` 4096 MiB; dynamic
``cpu`` 2.0 cores, ``mem`` 2048 MiB — applied per service when it has no entry.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvegym.errors import ConfigError
from pvegym.sim.view import NodeAffinityRule, ResourceAffinityRule, Rules

MIB = 1 << 20
DEFAULT_NODE_MAXCPU = 24.0
DEFAULT_NODE_MAXMEM = float(131072 * MIB)
DEFAULT_SERVICE_MAXCPU = 4.0
DEFAULT_SERVICE_MAXMEM = float(4096 * MIB)
DEFAULT_SERVICE_CPU = 2.0
DEFAULT_SERVICE_MEM = float(2048 * MIB)

KNOWN_FILES = frozenset(
    {
        "README",
        "cmdlist",
        "hardware_status",
        "manager_status",
        "service_config",
        "rules_config",
        "groups",
        "datacenter.cfg",
        "static_service_stats",
        "dynamic_service_stats",
        "log.expect",
        "fence.cfg",
    }
)

SID_RE = re.compile(r"^(vm|ct):(\d+)$")
LOG_RE = re.compile(r"^(\w+)\s+(\d+)\s+(\S+): (.*)$")
AUTO_REBALANCE_RE = re.compile(
    r"^auto rebalance - (migrate|relocate) (\S+) to (\S+) "
    r"\(expected change for imbalance from (\S+) to (\S+)\)$"
)

#: Commands of upstream's simulator (``Hardware.pm`` L780–800) that the replay does not model.
UNSUPPORTED_COMMANDS = frozenset(
    {"network", "reboot", "shutdown", "restart-lrm", "cfs", "crm", "skip-round"}
)
UNSUPPORTED_SERVICE_ACTIONS = frozenset(
    {
        "started",
        "disabled",
        "stopped",
        "ignored",
        "stop",
        "lock",
        "unlock",
        "delete",
        "manual-migrate",
    }
)

CRS_MODES = ("basic", "static", "dynamic")
SERVICE_STATES = ("started", "stopped", "disabled", "enabled", "ignored")
CRM_STATES = (
    "started",
    "stopped",
    "request_start",
    "request_stop",
    "migrate",
    "relocate",
    "disabled",
    "freeze",
    "error",
    "fence",
    "recovery",
    "request_start_balance",
)


@dataclass(frozen=True, slots=True)
class NodeHardware:
    name: str
    power: bool
    network: bool
    maxcpu: float  # cores
    maxmem: float  # bytes


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    sid: str
    node: str
    state: str  # requested state: started, stopped, disabled, ignored


@dataclass(frozen=True, slots=True)
class ManagedService:
    """One ``service_status`` entry of ``manager_status`` (the CRM state to start from)."""

    sid: str
    node: str
    state: str
    target: str | None = None
    cmd: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class CrsConfig:
    """``datacenter.cfg`` ``crs`` (§2); values as fractions, like ha-manager 5.2.0 reads them."""

    ha: str = "basic"
    rebalance_on_start: bool = False
    auto_rebalance: bool = False
    threshold: float = 0.3
    method: str = "bruteforce"
    hold_duration: float = 3
    margin: float = 0.1


@dataclass(frozen=True, slots=True)
class Command:
    """One parsed ``cmdlist`` entry; ``path`` is where it is (``cmdlist[1][0]``)."""

    path: str
    text: str
    verb: str  # power, delay, service
    obj: str  # node or sid ("" for delay)
    action: str
    args: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LogLine:
    level: str
    t: int
    origin: str
    message: str

    def format(self) -> str:
        """Upstream's ``"%-5s %5d %12s: %s"`` (``TestHardware.pm`` ``log``)."""
        return f"{self.level:<5} {self.t:5d} {self.origin:>12}: {self.message}"


@dataclass(frozen=True, slots=True)
class ExpectedDecision:
    t: int
    task: str
    sid: str
    target: str
    imbalance_before: str  # as printed, 2 decimals
    imbalance_after: str


@dataclass(slots=True)
class TestDir:
    path: Path
    readme: str
    cmdlist: list[list[Command]]
    nodes: dict[str, NodeHardware]
    services: dict[str, ServiceConfig]
    manager_services: dict[str, ManagedService]
    master_node: str | None
    rules: Rules
    crs: CrsConfig
    static_stats: dict[str, tuple[float, float]]  # sid -> (maxcpu cores, maxmem bytes)
    dynamic_stats: dict[str, tuple[float, float]]  # sid -> (cpu cores, mem bytes)
    service_status: dict[str, dict[str, bool]]  # node -> sid -> running
    log_expect: list[LogLine] | None
    warnings: list[str] = field(default_factory=list)

    def expected_decisions(self) -> list[ExpectedDecision]:
        """The ``auto rebalance`` lines of ``log.expect`` (the ground truth for a replay)."""
        out = []
        for line in self.log_expect or []:
            m = AUTO_REBALANCE_RE.match(line.message)
            if m:
                out.append(ExpectedDecision(line.t, *m.groups()))
        return out


# ------------------------------------------------------------------------------------------


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(path.name, f"cannot read: {err}") from None


def _parse_stats(
    root: Path, name: str, keys: tuple[str, str], defaults: tuple[float, float]
) -> dict[str, tuple[float, float]]:
    """A ``static_service_stats`` / ``dynamic_service_stats`` file: sid -> the two ``keys``'
    values (``defaults`` when absent); ``{}`` without the file."""
    out: dict[str, tuple[float, float]] = {}
    if not (root / name).exists():
        return out
    data = _obj(_read_json(root / name), name)
    for sid in sorted(data):
        p = f'{name}["{sid}"]'
        _sid(sid, p)
        d = _obj(data[sid], p)
        for key in d:
            if key not in keys:
                raise ConfigError(f"{p}.{key}", f"unknown key (allowed: {', '.join(keys)})")
        out[sid] = (
            _number(d.get(keys[0], defaults[0]), f"{p}.{keys[0]}"),
            _number(d.get(keys[1], defaults[1]), f"{p}.{keys[1]}"),
        )
    return out


def _read_json(path: Path) -> Any:
    text = _read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(path.name, f"malformed JSON at line {err.lineno}: {err.msg}") from None


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a JSON object, got {type(value).__name__}")
    return value


def _number(value: Any, path: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, f"must be a number, got {value!r}")
    if value < minimum:
        raise ConfigError(path, f"must be >= {minimum:g}, got {value!r}")
    return float(value)


def _sid(value: str, path: str) -> str:
    if not SID_RE.match(value):
        raise ConfigError(
            path, f"not an HA resource id of a VM or CT (vm:<id>, ct:<id>): {value!r}"
        )
    return value


def read_testdir(path: str | Path) -> TestDir:
    """Read and validate one upstream test directory."""
    root = Path(path)
    if not root.is_dir():
        raise ConfigError(str(path), "not a directory")
    warnings: list[str] = []
    for entry in sorted(root.iterdir()):
        name = entry.name
        if name in KNOWN_FILES or re.match(r"^service_status_\S+$", name):
            continue
        what = "directory" if entry.is_dir() else "file"
        warnings.append(f"{name}: unknown {what}, not used by the replay")
    if (root / "fence.cfg").exists():
        warnings.append("fence.cfg: fencing is not modelled by the replay; file not used")

    readme = _read_text(root / "README") if (root / "README").exists() else ""

    # hardware_status
    nodes: dict[str, NodeHardware] = {}
    if (root / "hardware_status").exists():
        hw = _obj(_read_json(root / "hardware_status"), "hardware_status")
        for name in sorted(hw):
            p = f'hardware_status["{name}"]'
            d = _obj(hw[name], p)
            for key in d:
                if key not in ("power", "network", "maxcpu", "maxmem", "cpu", "mem"):
                    raise ConfigError(
                        f"{p}.{key}", "unknown key (allowed: power, network, maxcpu, maxmem)"
                    )
            for key in ("power", "network"):
                if d.get(key, "off") not in ("on", "off"):
                    raise ConfigError(f"{p}.{key}", f"must be 'on' or 'off', got {d.get(key)!r}")
            maxcpu = _number(d.get("maxcpu", DEFAULT_NODE_MAXCPU), f"{p}.maxcpu", 1)
            maxmem = _number(d.get("maxmem", DEFAULT_NODE_MAXMEM), f"{p}.maxmem", 1)
            nodes[name] = NodeHardware(
                name, d.get("power") == "on", d.get("network") == "on", maxcpu, maxmem
            )
    else:
        for name in ("node1", "node2", "node3"):
            nodes[name] = NodeHardware(name, False, False, DEFAULT_NODE_MAXCPU, DEFAULT_NODE_MAXMEM)
    if not nodes:
        raise ConfigError("hardware_status", "no nodes")

    # service_config
    if not (root / "service_config").exists():
        raise ConfigError(
            "service_config", "missing (upstream's default service set uses HA groups)"
        )
    services: dict[str, ServiceConfig] = {}
    group_of: dict[str, str] = {}
    sc = _obj(_read_json(root / "service_config"), "service_config")
    for sid in sorted(sc):
        p = f'service_config["{sid}"]'
        _sid(sid, p)
        d = _obj(sc[sid], p)
        node = d.get("node")
        if not isinstance(node, str) or not node:
            raise ConfigError(f"{p}.node", "missing (every service needs a node)")
        if node not in nodes:
            raise ConfigError(f"{p}.node", f"unknown node {node!r} (nodes: {', '.join(nodes)})")
        state = d.get("state", "disabled")
        if state not in SERVICE_STATES:
            raise ConfigError(
                f"{p}.state", f"unknown state {state!r} (allowed: {', '.join(SERVICE_STATES)})"
            )
        if state == "enabled":  # backward compatibility (Hardware.pm read_service_config)
            state = "started"
        for key in d:
            if key not in (
                "node",
                "state",
                "group",
                "failback",
                "max_restart",
                "max_relocate",
                "comment",
            ):
                raise ConfigError(f"{p}.{key}", "unknown key")
        if "group" in d:
            group_of[sid] = str(d["group"])
        services[sid] = ServiceConfig(sid, node, state)

    # rules_config (+ legacy groups)
    node_rules: list[NodeAffinityRule] = []
    res_rules: list[ResourceAffinityRule] = []
    if (root / "rules_config").exists():
        node_rules, res_rules = parse_rules(_read_text(root / "rules_config"), "rules_config")
    if group_of:
        if not (root / "groups").exists():
            raise ConfigError(f'service_config["{next(iter(group_of))}"].group', "no groups file")
        node_rules += parse_groups(_read_text(root / "groups"), group_of)
    elif (root / "groups").exists():
        warnings.append("groups: no service uses a group; file not used")

    # datacenter.cfg
    crs = CrsConfig()
    if (root / "datacenter.cfg").exists():
        crs = parse_datacenter(_read_json(root / "datacenter.cfg"), warnings)

    # stats
    static_stats = _parse_stats(
        root, "static_service_stats", ("maxcpu", "maxmem"),
        (DEFAULT_SERVICE_MAXCPU, DEFAULT_SERVICE_MAXMEM),
    )  # fmt: skip
    dynamic_stats = _parse_stats(
        root, "dynamic_service_stats", ("cpu", "mem"), (DEFAULT_SERVICE_CPU, DEFAULT_SERVICE_MEM)
    )

    # service_status_<node> (initial LRM view: which services run)
    service_status: dict[str, dict[str, bool]] = {n: {} for n in nodes}
    for entry in sorted(root.glob("service_status_*")):
        node = entry.name[len("service_status_") :]
        if node not in nodes:
            raise ConfigError(entry.name, f"unknown node {node!r}")
        d = _obj(_read_json(entry), entry.name)
        for sid, running in d.items():
            _sid(sid, f'{entry.name}["{sid}"]')
            service_status[node][sid] = bool(running)

    # manager_status
    manager_services: dict[str, ManagedService] = {}
    master: str | None = None
    if (root / "manager_status").exists():
        ms = _obj(_read_json(root / "manager_status"), "manager_status")
        for key in ms:
            if key not in (
                "master_node",
                "node_status",
                "service_status",
                "timestamp",
                "relocate_trial",
            ):
                raise ConfigError(f"manager_status.{key}", "unknown key")
        if "master_node" in ms:
            master = ms["master_node"]
            if master not in nodes:
                raise ConfigError("manager_status.master_node", f"unknown node {master!r}")
        ss = _obj(ms.get("service_status", {}), "manager_status.service_status")
        for sid in sorted(ss):
            p = f'manager_status.service_status["{sid}"]'
            _sid(sid, p)
            d = _obj(ss[sid], p)
            node = d.get("node")
            if node not in nodes:
                raise ConfigError(f"{p}.node", f"unknown node {node!r} (nodes: {', '.join(nodes)})")
            state = d.get("state")
            if state not in CRM_STATES:
                raise ConfigError(f"{p}.state", f"unknown HA state {state!r}")
            target = d.get("target")
            if target is not None and target not in nodes:
                raise ConfigError(f"{p}.target", f"unknown node {target!r}")
            if state in ("migrate", "relocate") and target is None:
                raise ConfigError(f"{p}.target", f"state {state!r} needs a target node")
            cmd = None
            if "cmd" in d:
                c = d["cmd"]
                if not (
                    isinstance(c, list)
                    and len(c) == 2
                    and c[0] in ("migrate", "relocate")
                    and c[1] in nodes
                ):
                    raise ConfigError(f"{p}.cmd", f"expected [migrate|relocate, node], got {c!r}")
                cmd = (str(c[0]), str(c[1]))
            manager_services[sid] = ManagedService(sid, node, state, target, cmd)

    # cmdlist
    if not (root / "cmdlist").exists():
        raise ConfigError("cmdlist", "missing (upstream's harness requires it)")
    cmdlist = parse_cmdlist(_read_json(root / "cmdlist"), set(nodes))

    log_expect = None
    if (root / "log.expect").exists():
        log_expect = parse_log(_read_text(root / "log.expect"), "log.expect")

    return TestDir(
        path=root,
        readme=readme,
        cmdlist=cmdlist,
        nodes=nodes,
        services=services,
        manager_services=manager_services,
        master_node=master,
        rules=Rules(tuple(node_rules), tuple(res_rules)),
        crs=crs,
        static_stats=static_stats,
        dynamic_stats=dynamic_stats,
        service_status=service_status,
        log_expect=log_expect,
        warnings=warnings,
    )


def parse_datacenter(data: Any, warnings: list[str]) -> CrsConfig:
    """``datacenter.cfg`` as JSON (the harness's format, §8.3), ``crs`` keys of §2."""
    d = _obj(data, "datacenter.cfg")
    for key in d:
        if key not in ("crs", "ha"):
            warnings.append(f"datacenter.cfg.{key}: not modelled by the replay; ignored")
    crs = _obj(d.get("crs", {}), "datacenter.cfg.crs")
    p = "datacenter.cfg.crs"
    allowed = {
        "ha",
        "ha-rebalance-on-start",
        "ha-auto-rebalance",
        "ha-auto-rebalance-threshold",
        "ha-auto-rebalance-method",
        "ha-auto-rebalance-hold-duration",
        "ha-auto-rebalance-margin",
    }
    for key in crs:
        if key not in allowed:
            raise ConfigError(f"{p}.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})")

    def flag(key: str) -> bool:
        v = crs.get(key, 0)
        if v not in (0, 1, True, False, "0", "1"):
            raise ConfigError(f"{p}.{key}", f"must be 0 or 1, got {v!r}")
        return v in (1, True, "1")

    ha = crs.get("ha", "basic")
    if ha not in CRS_MODES:
        raise ConfigError(
            f"{p}.ha", f"unknown scheduler mode {ha!r} (allowed: basic, static, dynamic)"
        )
    method = crs.get("ha-auto-rebalance-method", "bruteforce")
    if method not in ("bruteforce", "topsis"):
        raise ConfigError(
            f"{p}.ha-auto-rebalance-method",
            f"unknown method {method!r} (allowed: bruteforce, topsis)",
        )
    ros = flag("ha-rebalance-on-start")
    if ros:
        raise ConfigError(
            f"{p}.ha-rebalance-on-start", "rebalance on start is not modelled by the replay"
        )
    return CrsConfig(
        ha=ha,
        rebalance_on_start=ros,
        auto_rebalance=flag("ha-auto-rebalance"),
        threshold=_number(
            crs.get("ha-auto-rebalance-threshold", 0.3), f"{p}.ha-auto-rebalance-threshold"
        ),
        method=method,
        hold_duration=_number(
            crs.get("ha-auto-rebalance-hold-duration", 3), f"{p}.ha-auto-rebalance-hold-duration"
        ),
        margin=_number(crs.get("ha-auto-rebalance-margin", 0.1), f"{p}.ha-auto-rebalance-margin"),
    )


def _sections(text: str, fname: str) -> list[tuple[str, str, dict[str, tuple[int, str]]]]:
    """PVE section config: ``type: id`` then indented ``key value`` lines, blank line between."""
    out: list[tuple[str, str, dict[str, tuple[int, str]]]] = []
    current: dict[str, tuple[int, str]] | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            current = None
            continue
        if raw.lstrip().startswith("#"):
            continue
        if not raw[0].isspace():
            m = re.match(r"^(\S+):\s*(\S+)\s*$", raw)
            if not m:
                raise ConfigError(f"{fname}:{lineno}", f"expected '<type>: <id>', got {raw!r}")
            current = {}
            out.append((m.group(1), m.group(2), current))
            continue
        if current is None:
            raise ConfigError(f"{fname}:{lineno}", "property line outside a section")
        parts = raw.strip().split(None, 1)
        key = parts[0]
        value = parts[1].strip() if len(parts) > 1 else ""
        if key in current:
            raise ConfigError(f"{fname}[{out[-1][1]}].{key}", "duplicate key")
        current[key] = (lineno, value)
    return out


def _bool(value: str, path: str) -> bool:
    if value not in ("0", "1"):
        raise ConfigError(path, f"must be 0 or 1, got {value!r}")
    return value == "1"


def _resources(value: str, path: str) -> tuple[str, ...]:
    items = tuple(s.strip() for s in value.split(",") if s.strip())
    if not items:
        raise ConfigError(path, "no resources")
    for s in items:
        _sid(s, path)
    return items


def _node_list(value: str, path: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, prio = item.partition(":")
        if prio and not prio.isdigit():
            raise ConfigError(
                path, f"priority of {name!r} must be a non-negative integer, got {prio!r}"
            )
        out.append((name, int(prio) if prio else 0))
    if not out:
        raise ConfigError(path, "no nodes")
    return tuple(out)


def parse_rules(
    text: str, fname: str = "rules_config"
) -> tuple[list[NodeAffinityRule], list[ResourceAffinityRule]]:
    """``node-affinity`` / ``resource-affinity`` sections (``Rules/NodeAffinity.pm``,
    ``Rules/ResourceAffinity.pm``); ``disable 1`` rules are dropped."""
    node_rules: list[NodeAffinityRule] = []
    res_rules: list[ResourceAffinityRule] = []
    for kind, rid, props in _sections(text, fname):
        p = f"{fname}[{rid}]"
        allowed = {
            "node-affinity": {"nodes", "resources", "strict", "disable", "comment"},
            "resource-affinity": {"resources", "affinity", "disable", "comment"},
        }.get(kind)
        if allowed is None:
            raise ConfigError(
                p, f"unknown rule type {kind!r} (allowed: node-affinity, resource-affinity)"
            )
        for key in props:
            if key not in allowed:
                raise ConfigError(
                    f"{p}.{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})"
                )
        if "resources" not in props:
            raise ConfigError(f"{p}.resources", "missing")
        resources = _resources(props["resources"][1], f"{p}.resources")
        disabled = _bool(props["disable"][1], f"{p}.disable") if "disable" in props else False
        if kind == "node-affinity":
            if "nodes" not in props:
                raise ConfigError(f"{p}.nodes", "missing")
            nodes = _node_list(props["nodes"][1], f"{p}.nodes")
            strict = _bool(props["strict"][1], f"{p}.strict") if "strict" in props else False
            if not disabled:
                node_rules.append(NodeAffinityRule(rid, resources, nodes, strict))
        else:
            if "affinity" not in props:
                raise ConfigError(f"{p}.affinity", "missing (positive or negative)")
            aff = props["affinity"][1]
            if aff not in ("positive", "negative"):
                raise ConfigError(f"{p}.affinity", f"must be positive or negative, got {aff!r}")
            if not disabled:
                res_rules.append(ResourceAffinityRule(rid, resources, aff == "positive"))
    return node_rules, res_rules


def parse_groups(text: str, group_of: dict[str, str]) -> list[NodeAffinityRule]:
    """Legacy HA groups → node-affinity rules (``restricted`` → strict), as PVE 9 migrates them."""
    groups: dict[str, tuple[tuple[tuple[str, int], ...], bool]] = {}
    for kind, gid, props in _sections(text, "groups"):
        p = f"groups[{gid}]"
        if kind != "group":
            raise ConfigError(p, f"unknown section type {kind!r} (allowed: group)")
        for key in props:
            if key not in ("nodes", "restricted", "nofailback", "comment"):
                raise ConfigError(
                    f"{p}.{key}", "unknown key (allowed: nodes, restricted, nofailback)"
                )
        if "nodes" not in props:
            raise ConfigError(f"{p}.nodes", "missing")
        nodes = _node_list(props["nodes"][1], f"{p}.nodes")
        strict = (
            _bool(props["restricted"][1], f"{p}.restricted") if "restricted" in props else False
        )
        groups[gid] = (nodes, strict)
    rules = []
    for gid in sorted(set(group_of.values())):
        members = tuple(sorted(s for s, g in group_of.items() if g == gid))
        if gid not in groups:
            raise ConfigError(f'service_config["{members[0]}"].group', f"unknown group {gid!r}")
        nodes, strict = groups[gid]
        rules.append(NodeAffinityRule(f"ha-group-{gid}", members, nodes, strict))
    return rules


def parse_cmdlist(data: Any, nodes: set[str]) -> list[list[Command]]:
    """``cmdlist``: JSON array of batches of command strings (``Hardware.pm`` ``sim_hardware_cmd``).

    Syntax is checked up front so that a typo fails before the replay runs; commands upstream knows
    but the replay does not model are an error ("unsupported"), never silently skipped.
    """
    if not isinstance(data, list):
        raise ConfigError("cmdlist", "must be a JSON array of command batches")
    out: list[list[Command]] = []
    for b, batch in enumerate(data):
        if not isinstance(batch, list):
            raise ConfigError(f"cmdlist[{b}]", "must be an array of command strings")
        cmds = []
        for i, text in enumerate(batch):
            p = f"cmdlist[{b}][{i}]"
            if not isinstance(text, str):
                raise ConfigError(p, f"must be a string, got {text!r}")
            cmds.append(parse_command(text, p, nodes))
        out.append(cmds)
    return out


def parse_command(text: str, path: str, nodes: set[str]) -> Command:
    words = text.split()
    if not words:
        raise ConfigError(path, "empty command")
    verb = words[0]
    if verb == "delay":
        if len(words) != 2 or not words[1].isdigit():
            raise ConfigError(path, f"expected 'delay <seconds>', got {text!r}")
        return Command(path, text, "delay", "", "", (words[1],))
    if verb in UNSUPPORTED_COMMANDS:
        raise ConfigError(path, f"command {verb!r} is not supported by the replay: {text!r}")
    if verb == "power":
        if len(words) != 3 or words[2] not in ("on", "off"):
            raise ConfigError(path, f"expected 'power <node> on|off', got {text!r}")
        if words[1] not in nodes:
            raise ConfigError(path, f"unknown node {words[1]!r}")
        return Command(path, text, "power", words[1], words[2], ())
    if verb != "service":
        raise ConfigError(path, f"unknown command {text!r}")
    if len(words) < 3:
        raise ConfigError(path, f"expected 'service <sid> <action> ...', got {text!r}")
    sid, action, args = words[1], words[2], tuple(words[3:])
    _sid(sid, path)
    if action in UNSUPPORTED_SERVICE_ACTIONS:
        raise ConfigError(
            path, f"service action {action!r} is not supported by the replay: {text!r}"
        )
    if action in ("migrate", "relocate"):
        if len(args) != 1 or args[0] not in nodes:
            raise ConfigError(
                path, f"expected 'service <sid> {action} <node>' with a known node, got {text!r}"
            )
    elif action == "add":
        if not 1 <= len(args) <= 3 or args[0] not in nodes:
            raise ConfigError(
                path, f"expected 'service <sid> add <node> [state] [running]', got {text!r}"
            )
        if len(args) >= 2 and args[1] not in SERVICE_STATES:
            raise ConfigError(path, f"unknown state {args[1]!r}")
        if len(args) == 3 and args[2] not in ("0", "1"):
            raise ConfigError(path, f"running must be 0 or 1, got {args[2]!r}")
    elif action in ("set-static-stats", "set-dynamic-stats"):
        keys = ("maxcpu", "maxmem") if action == "set-static-stats" else ("cpu", "mem")
        if not args or len(args) % 2:
            raise ConfigError(
                path, f"expected 'service <sid> {action} [{keys[0]} <n>] [{keys[1]} <MiB>]'"
            )
        for k, v in zip(args[::2], args[1::2], strict=True):
            if k not in keys:
                raise ConfigError(path, f"unknown stat {k!r} (allowed: {', '.join(keys)})")
            try:
                if float(v) < 0:
                    raise ValueError
            except ValueError:
                raise ConfigError(path, f"{k} must be a non-negative number, got {v!r}") from None
    else:
        raise ConfigError(path, f"unknown service action {action!r} in {text!r}")
    return Command(path, text, "service", sid, action, args)


def parse_log(text: str, fname: str = "log.expect") -> list[LogLine]:
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        m = LOG_RE.match(raw)
        if not m:
            raise ConfigError(
                f"{fname}:{lineno}", f"expected '<level> <time> <origin>: <message>', got {raw!r}"
            )
        out.append(LogLine(m.group(1), int(m.group(2)), m.group(3), m.group(4)))
    return out
