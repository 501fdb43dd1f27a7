"""Reader of pve-ha-manager's regression-test directories (``src/test/test-*/``).

A directory's files (``Sim/Hardware.pm`` L32–60 lists the layout; ``tests/data/upstream-tests/
README.md`` describes the formats) become the initial cluster file system of
:class:`~pvegym.harness.testhardware.TestHardware`, as upstream copies them into ``status/``.
Everything is checked before the replay runs; bad input raises
:class:`~pvegym.errors.ConfigError` naming the file and key (``cmdlist[1][0]``,
``service_config["vm:101"].node``). A file upstream's harness does not know is an error too.

Known files: ``README``, ``cmdlist`` (required), ``hardware_status``, ``manager_status``,
``service_config``, ``rules_config``, ``groups``, ``datacenter.cfg``, ``static_service_stats``,
``dynamic_service_stats``, ``service_status_<node>``, ``fence.cfg`` (copied like upstream does;
nothing in pve-ha-manager 5.2.0's HA stack reads it: fencing is the watchdog's), ``log.expect``, and
the ``status/`` directory upstream's harness writes its run into (it removes it before a run).

Commands (``Hardware.pm sim_hardware_cmd`` and ``TestHardware.pm run``)::

    power <node> on|off            network <node> on|off           reboot <node>
    shutdown <node>                restart-lrm <node>               delay <seconds>
    skip-round crm|lrm [<rounds>]  cfs <node> rw|update work|fail
    pve-manager-version <node> set <version>
    crm <node> stop|start|enable-node-maintenance|disable-node-maintenance|arm-ha
    crm <node> disarm-ha freeze|ignore
    service <sid> started|disabled|stopped|ignored|delete
    service <sid> migrate|relocate|manual-migrate <node>
    service <sid> stop <timeout>
    service <sid> lock|unlock [<lockname>]
    service <sid> add <node> [<state>] [<running>]
    service <sid> set-static-stats [maxcpu <cores>] [maxmem <MiB>]
    service <sid> set-dynamic-stats [cpu <cores>] [mem <MiB>]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvegym.config import read_input_file
from pvegym.errors import ConfigError, show
from pvegym.harness.hardware import LogEntry

FILES = frozenset(
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
        "fence.cfg",
        "log.expect",
    }
)
JSON_FILES = (
    "cmdlist",
    "hardware_status",
    "manager_status",
    "service_config",
    "datacenter.cfg",
    "static_service_stats",
    "dynamic_service_stats",
)
SID_RE = re.compile(r"^(vm|ct|fa):(\d+)$")
LOG_RE = re.compile(r"^(\S+)\s+(\d+)\s+(\S+): (.*)$")
SERVICE_STATES = ("started", "stopped", "disabled", "enabled", "ignored")
CRS_MODES = ("basic", "static", "dynamic")
SHUTDOWN_POLICIES = ("conditional", "freeze", "failover", "migrate")
DEFAULT_NODES = ("node1", "node2", "node3")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


@dataclass(slots=True)
class TestDir:
    """A checked test directory: its files as text and its command batches."""

    __test__ = False  # not a pytest test class

    path: Path
    files: dict[str, str]
    cmdlist: list[list[str]]
    nodes: tuple[str, ...]
    log_expect: str | None = None
    readme: str = ""
    datacenter: dict[str, Any] = field(default_factory=dict)


def _read_text(path: Path) -> str:
    """A test file's text (pvegym's one input reader: no FIFO, device or directory, bounded,
    UTF-8), errors at the file's name."""
    return read_input_file(path, path.name, "test")


def _confined(entry: Path, root: Path) -> None:
    """A test file is read only if it lies in its test directory: a symlink pointing out of it
    (``log.expect -> /etc/passwd``) is refused by name, so no byte of another file reaches a
    message (as for traces, :mod:`pvegym.sim.trace_source`)."""
    try:
        inside = entry.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError) as err:  # a symlink loop, an unreadable link
        raise ConfigError(entry.name, f"cannot be resolved ({err})") from None
    if not inside:
        raise ConfigError(entry.name, "is a symbolic link out of the test directory")


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(name, f"malformed JSON at line {err.lineno}: {err.msg}") from None
    except RecursionError:
        raise ConfigError(name, "malformed JSON: nested too deeply") from None


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(path, f"must be a JSON object, got {type(value).__name__}")
    return value


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(path, f"must be a non-negative number, got {value!r}")
    return float(value)


def _sid(value: str, path: str) -> str:
    if not SID_RE.match(value):
        raise ConfigError(path, f"not an HA resource id (vm:<id>, ct:<id>, fa:<id>): {value!r}")
    return value


def read_testdir(path: str | Path) -> TestDir:
    """Read and check one upstream test directory."""
    root = Path(path)
    try:
        entries = sorted(root.iterdir()) if root.is_dir() else None
    except OSError as err:  # e.g. ENAMETOOLONG, which Path.is_dir raises on Python 3.11
        raise ConfigError(show(str(path), 80), f"cannot be read ({err.strerror})") from None
    if entries is None:
        raise ConfigError(str(path), "not a directory")
    files: dict[str, str] = {}
    for entry in entries:
        name = entry.name
        if name == "status" and entry.is_dir():
            continue  # upstream's harness writes its run there (and removes it first)
        if entry.is_dir():
            raise ConfigError(name, "unknown directory in a test directory")
        if name not in FILES and not re.fullmatch(r"service_status_\S+", name):
            raise ConfigError(
                name, "unknown file (upstream's harness reads: " + ", ".join(sorted(FILES)) + ")"
            )
        _confined(entry, root)
        files[name] = _read_text(entry)
    if "cmdlist" not in files:
        raise ConfigError("cmdlist", "missing (upstream's harness requires it)")
    parsed = {name: _json(name, files[name]) for name in JSON_FILES if name in files}

    nodes = _check_hardware(parsed.get("hardware_status"))
    _check_services(parsed.get("service_config"), nodes)
    datacenter = _check_datacenter(parsed.get("datacenter.cfg", {}))
    _check_stats(parsed, "static_service_stats", ("maxcpu", "maxmem"))
    _check_stats(parsed, "dynamic_service_stats", ("cpu", "mem"))
    if "manager_status" in parsed:
        _obj(parsed["manager_status"], "manager_status")
    for name in files:
        if name.startswith("service_status_"):
            node = name[len("service_status_") :]
            if node not in nodes:
                raise ConfigError(name, f"unknown node {node!r} (nodes: {', '.join(nodes)})")
            for sid in _obj(_json(name, files[name]), name):
                _sid(sid, f'{name}["{sid}"]')
    cmdlist = parse_cmdlist(parsed["cmdlist"], set(nodes))
    log_expect = files.get("log.expect")
    if log_expect is not None:
        parse_log(log_expect)
    return TestDir(
        path=root,
        files={k: v for k, v in files.items() if k not in ("README", "log.expect")},
        cmdlist=cmdlist,
        nodes=nodes,
        log_expect=log_expect,
        readme=files.get("README", ""),
        datacenter=datacenter,
    )


def _check_hardware(hw: Any) -> tuple[str, ...]:
    if hw is None:
        return DEFAULT_NODES
    hw = _obj(hw, "hardware_status")
    if not hw:
        raise ConfigError("hardware_status", "no nodes")
    for name in sorted(hw):
        p = f'hardware_status["{name}"]'
        d = _obj(hw[name], p)
        for key in d:
            if key not in ("power", "network", "maxcpu", "maxmem", "pve-manager-version"):
                raise ConfigError(
                    f"{p}.{key}",
                    "unknown key (allowed: power, network, maxcpu, maxmem, pve-manager-version)",
                )
        for key in ("power", "network"):
            if d.get(key) not in ("on", "off"):
                raise ConfigError(f"{p}.{key}", f"must be 'on' or 'off', got {d.get(key)!r}")
        for key in ("maxcpu", "maxmem"):
            if key in d:
                _number(d[key], f"{p}.{key}")
    return tuple(sorted(hw))


def _check_services(sc: Any, nodes: tuple[str, ...]) -> None:
    if sc is None:
        return
    sc = _obj(sc, "service_config")
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
        for key in d:
            if key not in (
                "node",
                "state",
                "group",
                "failback",
                "max_restart",
                "max_relocate",
                "comment",
                "lock",
            ):
                raise ConfigError(f"{p}.{key}", "unknown key")


def _check_datacenter(data: Any) -> dict[str, Any]:
    d = _obj(data, "datacenter.cfg")
    for key in d:
        if key not in ("crs", "ha"):
            raise ConfigError(f"datacenter.cfg.{key}", "unknown key (allowed: crs, ha)")
    ha = _obj(d.get("ha", {}), "datacenter.cfg.ha")
    for key in ha:
        if key != "shutdown_policy":
            raise ConfigError(f"datacenter.cfg.ha.{key}", "unknown key (allowed: shutdown_policy)")
    # an unknown policy is understood: the LRM logs it and falls back to conditional
    if "shutdown_policy" in ha and not isinstance(ha["shutdown_policy"], str):
        raise ConfigError(
            "datacenter.cfg.ha.shutdown_policy",
            f"must be a string ({', '.join(SHUTDOWN_POLICIES)}), got {ha['shutdown_policy']!r}",
        )
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
    # an unknown mode is understood: the Manager logs it and schedules as 'basic'
    if not isinstance(crs.get("ha", "basic"), str):
        raise ConfigError(
            f"{p}.ha", f"must be a string ({', '.join(CRS_MODES)}), got {crs['ha']!r}"
        )
    for key in ("ha-rebalance-on-start", "ha-auto-rebalance"):
        if crs.get(key, 0) not in (0, 1, True, False, "0", "1"):
            raise ConfigError(f"{p}.{key}", f"must be 0 or 1, got {crs[key]!r}")
    if crs.get("ha-auto-rebalance-method", "bruteforce") not in ("bruteforce", "topsis"):
        raise ConfigError(
            f"{p}.ha-auto-rebalance-method",
            f"unknown method {crs['ha-auto-rebalance-method']!r} (allowed: bruteforce, topsis)",
        )
    for key in (
        "ha-auto-rebalance-threshold",
        "ha-auto-rebalance-hold-duration",
        "ha-auto-rebalance-margin",
    ):
        if key in crs:
            _number(crs[key], f"{p}.{key}")
    return d


def _check_stats(parsed: dict[str, Any], name: str, keys: tuple[str, str]) -> None:
    if name not in parsed:
        return
    data = _obj(parsed[name], name)
    for sid in sorted(data):
        p = f'{name}["{sid}"]'
        _sid(sid, p)
        d = _obj(data[sid], p)
        for key, value in d.items():
            if key not in ("cpu", "mem", "maxcpu", "maxmem"):
                raise ConfigError(f"{p}.{key}", f"unknown key (allowed: {', '.join(keys)})")
            _number(value, f"{p}.{key}")


def parse_cmdlist(data: Any, nodes: set[str]) -> list[list[str]]:
    """``cmdlist``: a JSON array of batches of command strings, every command checked."""
    if not isinstance(data, list):
        raise ConfigError("cmdlist", "must be a JSON array of command batches")
    out: list[list[str]] = []
    for b, batch in enumerate(data):
        if not isinstance(batch, list):
            raise ConfigError(f"cmdlist[{b}]", "must be an array of command strings")
        cmds = []
        for i, text in enumerate(batch):
            p = f"cmdlist[{b}][{i}]"
            if not isinstance(text, str):
                raise ConfigError(p, f"must be a string, got {text!r}")
            check_command(text, p, nodes)
            cmds.append(text)
        out.append(cmds)
    return out


def _node(word: str, path: str, nodes: set[str]) -> None:
    if word not in nodes:
        raise ConfigError(path, f"unknown node {word!r} (nodes: {', '.join(sorted(nodes))})")


def check_command(text: str, path: str, nodes: set[str]) -> None:
    """A command upstream's simulator understands, with known nodes (else ``ConfigError``)."""

    def bad(expected: str) -> ConfigError:
        return ConfigError(path, f"expected '{expected}', got {text!r}")

    if re.fullmatch(r"delay\s+\d+\s*", text):
        return
    if re.fullmatch(r"skip-round\s+(lrm|crm)(?:\s+\d+)?\s*", text):
        return
    words = text.split()
    if not words:
        raise ConfigError(path, "empty command")
    verb, args = words[0], words[1:]
    if verb in ("delay", "skip-round"):
        raise bad("delay <seconds>" if verb == "delay" else "skip-round crm|lrm [<rounds>]")
    if verb in ("power", "network"):
        if len(args) != 2 or args[1] not in ("on", "off"):
            raise bad(f"{verb} <node> on|off")
        _node(args[0], path, nodes)
    elif verb in ("reboot", "shutdown", "restart-lrm"):
        if len(args) != 1:
            raise bad(f"{verb} <node>")
        _node(args[0], path, nodes)
    elif verb == "cfs":
        if len(args) != 3 or args[1] not in ("rw", "update") or args[2] not in ("work", "fail"):
            raise bad("cfs <node> rw|update work|fail")
        _node(args[0], path, nodes)
    elif verb == "pve-manager-version":
        if len(args) != 3 or args[1] != "set":
            raise bad("pve-manager-version <node> set <version>")
        _node(args[0], path, nodes)
    elif verb == "crm":
        simple = ("stop", "start", "enable-node-maintenance", "disable-node-maintenance", "arm-ha")
        ok = (len(args) == 2 and args[1] in simple) or (
            len(args) == 3 and args[1] == "disarm-ha" and args[2] in ("freeze", "ignore")
        )
        if not ok:
            raise bad(
                "crm <node> stop|start|enable-node-maintenance|disable-node-maintenance|arm-ha"
                "|disarm-ha freeze|ignore"
            )
        _node(args[0], path, nodes)
    elif verb == "service":
        _check_service_command(text, path, args, nodes)
    else:
        raise ConfigError(path, f"unknown command {text!r}")


def _check_service_command(text: str, path: str, args: list[str], nodes: set[str]) -> None:
    if len(args) < 2:
        raise ConfigError(path, f"expected 'service <sid> <action> ...', got {text!r}")
    sid, action, rest = args[0], args[1], args[2:]
    _sid(sid, path)
    if action in ("started", "disabled", "stopped", "ignored", "delete"):
        if rest:
            raise ConfigError(path, f"expected 'service <sid> {action}', got {text!r}")
    elif action in ("migrate", "relocate", "manual-migrate"):
        if len(rest) != 1:
            raise ConfigError(path, f"expected 'service <sid> {action} <node>', got {text!r}")
        _node(rest[0], path, nodes)
    elif action == "stop":
        if len(rest) != 1 or not rest[0].isdigit():
            raise ConfigError(path, f"expected 'service <sid> stop <timeout>', got {text!r}")
    elif action in ("lock", "unlock"):
        if len(rest) > 1:
            raise ConfigError(path, f"expected 'service <sid> {action} [<lockname>]', got {text!r}")
    elif action == "add":
        if not 1 <= len(rest) <= 3:
            raise ConfigError(
                path, f"expected 'service <sid> add <node> [<state>] [<running>]', got {text!r}"
            )
        _node(rest[0], path, nodes)
        if len(rest) >= 2 and rest[1] not in SERVICE_STATES:
            raise ConfigError(
                path, f"unknown state {rest[1]!r} (allowed: {', '.join(SERVICE_STATES)})"
            )
        if len(rest) == 3 and rest[2] not in ("0", "1"):
            raise ConfigError(path, f"running must be 0 or 1, got {rest[2]!r}")
    elif action in ("set-static-stats", "set-dynamic-stats"):
        keys = ("maxcpu", "maxmem") if action == "set-static-stats" else ("cpu", "mem")
        if not rest or len(rest) % 2:
            raise ConfigError(
                path, f"expected 'service <sid> {action} [{keys[0]} <n>] [{keys[1]} <MiB>]'"
            )
        for k, v in zip(rest[::2], rest[1::2], strict=True):
            if k not in keys:
                raise ConfigError(path, f"unknown stat {k!r} (allowed: {', '.join(keys)})")
            if not _NUMBER.match(v) or float(v) < 0:
                raise ConfigError(path, f"{k} must be a non-negative number, got {v!r}")
    else:
        raise ConfigError(path, f"unknown service action {action!r} in {text!r}")


def parse_log(text: str, fname: str = "log.expect") -> list[LogEntry]:
    """The lines of a ``log.expect`` (a line that is not ``<level> <time> <source>: <msg>``
    continues the previous message, as upstream's multi-line messages do)."""
    out: list[LogEntry] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        m = LOG_RE.match(raw)
        if m:
            out.append(LogEntry(m.group(1), int(m.group(2)), m.group(3), m.group(4)))
        elif not out:
            raise ConfigError(
                f"{fname}:{lineno}", f"expected '<level> <time> <source>: <message>', got {raw!r}"
            )
    return out
