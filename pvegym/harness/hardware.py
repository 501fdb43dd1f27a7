"""Upstream's simulated hardware: ``PVE::HA::Sim::Hardware`` and ``PVE::HA::Sim::TestHardware``.

A port of pve-ha-manager 5.2.0's ``src/PVE/HA/Sim/Hardware.pm`` (the simulated cluster: node
power and network, the cluster file system, locks, watchdogs, the simulator commands of a
``cmdlist``) and ``src/PVE/HA/Sim/TestHardware.pm`` (the discrete-event loop of the regression
tests). It runs the model layer's CRM and LRM (:mod:`pvegym.sim.ha`) on every node — the same
code :mod:`pvegym.sim.simulation` runs — and adds nothing but this hardware.

The cluster file system (upstream: files under ``<testdir>/status/``) is a dict of file name →
JSON text: every read decodes a fresh copy and every write encodes, so no daemon shares an object
with another, as upstream's processes do not.

Timing (``run``): one loop is ``max(20, 2 · nodes)`` s. In each loop every node, in name order, runs
its CRM then its LRM; each iteration starts at the hardware time and ends 1 s later, so node *k*'s
daemons log at ``t + 2k`` and ``t + 2k + 1``. After each node, every node's watchdog is checked
(60 s). A batch of the ``cmdlist`` is applied at the end of every 5th loop (``delay N`` postpones
the rest, ``skip-round crm|lrm [n]`` skips daemon rounds); the run ends at the first batch slot
more than 500 s after the last command.

Where upstream iterates a Perl hash without sorting and the order could show (warnings about
overcommitted services, float sums of node stats), this port iterates in sorted order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pvegym.sim.ha.crm import CRM
from pvegym.sim.ha.groups import Groups
from pvegym.sim.ha.lrm import LRM, LRMProcess
from pvegym.sim.ha.perl import PerlDie, numify, truthy
from pvegym.sim.ha.rules import Rules
from pvegym.sim.ha.rules_formats import pve_verify_ha_resource_id
from pvegym.sim.ha.section_config import split_list

#: where upstream's harness keeps the cluster file system (named in parser warnings)
STATUSDIR = "status"

WATCHDOG_TIMEOUT = 60  # s (Hardware.pm ``$watchdog_timeout``)
MAX_SIM_TIME = 10000  # s (TestHardware.pm ``$max_sim_time``)

DEFAULT_SERVICE_CPU = 2.0
DEFAULT_SERVICE_MAXCPU = 4.0
DEFAULT_SERVICE_MEM = 2048 * 1024**2
DEFAULT_SERVICE_MAXMEM = 4096 * 1024**2
DEFAULT_NODE_MAXCPU = 24.0
DEFAULT_NODE_MAXMEM = 131072 * 1024**2

#: the service set of a directory without ``service_config`` (Hardware.pm ``new``)
DEFAULT_SERVICE_CONFIG = {
    "vm:101": {"node": "node1"},
    "vm:102": {"node": "node2"},
    "vm:103": {"node": "node3"},
    "vm:104": {"node": "node1"},
    "vm:105": {"node": "node2"},
    "vm:106": {"node": "node3"},
}

#: ``pve-manager-version`` of a node without one (Hardware.pm ``get_node_version``)
DEFAULT_NODE_VERSION = "9.0.0~2"


class SimulationError(PerlDie):
    """A ``die`` that ends upstream's simulation (``exit simulation - <message>``)."""


def _encode(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


@dataclass(slots=True)
class LogEntry:
    """One line of upstream's log: ``"%-5s %5d %12s: %s"`` of level, time, source, message."""

    level: str
    t: float
    source: str
    message: str

    def format(self) -> str:
        return f"{self.level:<5} {int(self.t):5d} {self.source:>12}: {self.message}"


@dataclass(slots=True)
class NodeDaemons:
    """``$self->{nodes}->{$node}``: the node's environments and (while powered) daemons."""

    crm_env: Any
    lrm_env: Any
    crm: CRM | None = None
    lrm: LRM | None = None
    crm_stop: bool = False
    lrm_restart: bool = False


@dataclass(slots=True)
class Hardware:
    """The simulated cluster of one test directory (``Sim/Hardware.pm``)."""

    files: dict[str, str]
    log_entries: list[LogEntry] = field(default_factory=list)
    nodes: dict[str, NodeDaemons] = field(default_factory=dict)
    service_config: dict[str, Any] = field(default_factory=dict)
    cur_time: float = 0
    watchdog_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    wdcounter: int = 0
    lrm_process: LRMProcess = field(default_factory=LRMProcess)
    #: VirtFail's try counters (``Sim/Resources/VirtFail.pm`` ``$tries``), shared by all nodes
    fail_tries: dict[str, dict[str, int]] = field(
        default_factory=lambda: {"start": {}, "migrate": {}}
    )
    env_factory: Callable[[str, Hardware, str], Any] | None = None

    # ------------------------------------------------------------------ files

    def exists(self, name: str) -> bool:
        return name in self.files

    def read_json(self, name: str, default: Any = None) -> Any:
        """``read_json_from_file``: the default only when the file is missing."""
        if default is not None and name not in self.files:
            return default
        raw = self.files.get(name)
        if raw is None:
            raise PerlDie(f"unable to open file '{name}' - No such file or directory")
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            raise PerlDie(f"malformed JSON string in '{name}': {err.msg}") from None

    def write_json(self, name: str, data: Any) -> None:
        self.files[name] = _encode(data)

    def read_lrm_status(self, node: str) -> dict[str, Any]:
        return self.read_json(f"lrm_status_{node}", {})

    def write_lrm_status(self, node: str, status: dict[str, Any]) -> None:
        self.write_json(f"lrm_status_{node}", status)

    def read_hardware_status_nolock(self) -> dict[str, Any]:
        return self.read_json("hardware_status")

    def write_hardware_status_nolock(self, cstatus: dict[str, Any]) -> None:
        self.write_json("hardware_status", cstatus)

    def read_service_config(self) -> dict[str, dict[str, Any]]:
        """The service config with upstream's defaults: type and name from the sid, state
        ``disabled`` (``enabled`` → ``started``), failback 1, max_restart 1, max_relocate 1."""
        conf: dict[str, dict[str, Any]] = self.read_json("service_config")
        for sid, d in conf.items():
            if not truthy(d.get("node")):
                raise SimulationError(f"service '{sid}' without assigned node!")
            typ, sep, name = sid.partition(":")
            if not sep or typ not in ("vm", "ct", "fa") or not name.isdigit() or not name.isascii():
                raise SimulationError("implement me")
            d["type"] = typ
            d["name"] = name
            if not truthy(d.get("state")):
                d["state"] = "disabled"
            if d["state"] == "enabled":  # backward compatibility
                d["state"] = "started"
            for key in ("failback", "max_restart", "max_relocate"):
                if d.get(key) is None:
                    d[key] = 1
        return conf

    def update_service_config(self, changes: dict[str, dict[str, Any]]) -> None:
        conf = self.read_service_config()
        for sid in sorted(changes):
            param = changes[sid].get("param") or {}
            delete = changes[sid].get("delete")
            sconf = conf.get(sid)
            if sconf is None:
                raise PerlDie(f"no such resource '{sid}'")
            # sic: upstream iterates ``%$param`` as a list, keys *and* values: every value also
            # becomes a key (set to its value in ``$param``, usually undef)
            for k in [x for kv in param.items() for x in kv]:
                sconf[str(k)] = param.get(k) if isinstance(k, str) else None
            if delete:
                for k in split_list(str(delete)):
                    sconf.pop(k, None)
        self.write_service_config(conf)

    def write_service_config(self, conf: dict[str, dict[str, Any]]) -> None:
        self.service_config = json.loads(_encode(conf))
        self.write_json("service_config", conf)

    def set_service_state(self, sid: str, state: str) -> None:
        conf = self.read_service_config()
        if sid not in conf:
            raise SimulationError(f"no such service '{sid}'")
        conf[sid]["state"] = state
        self.write_service_config(conf)

    def _set_service_stats(self, which: str, sid: str, new: dict[str, float]) -> None:
        conf = self.read_service_config()
        if sid not in conf:
            raise SimulationError(f"no such service '{sid}'")
        stats = self._read_stats(which) or {}
        entry = stats.setdefault(sid, {})
        for key, value in new.items():
            entry[key] = value
        self._write_stats(which, stats)

    def add_service(self, sid: str, opts: dict[str, Any], running: Any) -> None:
        conf = self.read_service_config()
        if sid in conf:
            raise SimulationError(f"resource ID '{sid}' already defined")
        typ, _, name = sid.partition(":")
        conf[sid] = {**opts, "type": typ, "name": name}
        self.write_service_config(conf)
        ss = self.read_service_status(opts["node"])
        ss[sid] = running
        self.write_service_status(opts["node"], ss)

    def delete_service(self, sid: str) -> None:
        conf = self.read_service_config()
        if sid not in conf:
            raise SimulationError(f"no such service '{sid}'")
        del conf[sid]
        self.write_service_config(conf)
        stats = self._read_stats("static") or {}
        stats.pop(sid, None)
        self._write_stats("static", stats)

    def change_service_location(self, sid: str, current_node: str, new_node: str) -> None:
        conf = self.read_service_config()
        if sid not in conf:
            raise PerlDie(f"no such service '{sid}'")
        if current_node != conf[sid]["node"]:
            raise PerlDie(
                f"current_node for '{sid}' does not match ({current_node} != {conf[sid]['node']})"
            )
        conf[sid]["node"] = new_node
        self.write_service_config(conf)

    def service_has_lock(self, sid: str) -> str | None:
        conf = self.read_service_config()
        if sid not in conf:
            raise PerlDie(f"no such service '{sid}'")
        lock = conf[sid].get("lock")
        return lock if truthy(lock) else None

    def lock_service(self, sid: str, lock: str | None) -> None:
        conf = self.read_service_config()
        if sid not in conf:
            raise SimulationError(f"no such service '{sid}'")
        conf[sid]["lock"] = lock if truthy(lock) else "backup"
        self.write_service_config(conf)

    def unlock_service(self, sid: str, lock: str | None = None) -> str | None:
        conf = self.read_service_config()
        if sid not in conf:
            raise PerlDie(f"no such service '{sid}'")
        current = conf[sid].get("lock")
        if current is None:
            return None
        if lock is not None and current != lock:
            return None  # upstream warns on stderr: "found lock '…' trying to remove '…' lock"
        removed = conf[sid].pop("lock")
        self.write_service_config(conf)
        return removed

    def queue_crm_commands_nolock(self, cmd: str) -> None:
        self.files["crm_commands"] = self.files.get("crm_commands", "") + cmd.rstrip("\n") + "\n"

    def any_pending_crm_command(self) -> bool:
        return bool(self.files.get("crm_commands"))

    def read_crm_commands(self) -> str:
        data = self.files.get("crm_commands", "")
        self.files["crm_commands"] = ""
        return data

    def read_rules_config(self) -> Any:
        """``Rules->parse_config`` of the rules file (``''`` if missing), rule defaults set."""
        rules = Rules.parse_config(f"{STATUSDIR}/rules_config", self.files.get("rules_config", ""))
        for rule in rules["ids"].values():
            Rules.set_rule_defaults(rule)
        return rules

    def write_rules_config(self, rules: Any) -> None:
        self.files["rules_config"] = Rules.write_config(f"{STATUSDIR}/rules_config", rules)

    def read_group_config(self) -> Any:
        return Groups.parse_config(f"{STATUSDIR}/groups", self.files.get("groups", ""))

    def delete_group_config(self) -> None:
        if "groups" not in self.files:
            raise PerlDie("failed to remove group config: No such file or directory")
        del self.files["groups"]

    def read_service_status(self, node: str) -> dict[str, Any]:
        return self.read_json(f"service_status_{node}")

    def write_service_status(self, node: str, data: dict[str, Any]) -> None:
        self.write_json(f"service_status_{node}", data)

    def _read_stats(self, which: str) -> dict[str, Any] | None:
        try:
            return self.read_json(f"{which}_service_stats")
        except PerlDie as err:
            self.log("error", f"loading {which} service stats failed - {err}")
            return None

    def _write_stats(self, which: str, stats: dict[str, Any]) -> None:
        self.write_json(f"{which}_service_stats", stats)

    def read_datacenter_conf(self) -> dict[str, Any]:
        return self.read_json("datacenter.cfg", {})

    # ------------------------------------------------------------------ set-up

    @classmethod
    def from_files(cls, testdir_files: dict[str, str]) -> Hardware:
        """``Hardware::new``: the status directory from a test directory's files."""
        hw = cls(files={})
        for name in ("manager_status", "rules_config", "groups", "fence.cfg", "datacenter.cfg"):
            if name in testdir_files:
                hw.files[name] = testdir_files[name]
        if "service_config" in testdir_files:
            hw.files["service_config"] = testdir_files["service_config"]
        else:
            hw.write_service_config(json.loads(_encode(DEFAULT_SERVICE_CONFIG)))
        if "hardware_status" in testdir_files:
            hw.files["hardware_status"] = testdir_files["hardware_status"]
        else:
            hw.write_hardware_status_nolock(
                {
                    n: {
                        "power": "off",
                        "network": "off",
                        "maxcpu": DEFAULT_NODE_MAXCPU,
                        "maxmem": DEFAULT_NODE_MAXMEM,
                    }
                    for n in ("node1", "node2", "node3")
                }
            )
        if "static_service_stats" in testdir_files:
            hw.files["static_service_stats"] = testdir_files["static_service_stats"]
        else:
            services = hw.read_service_config()
            hw._write_stats(
                "static",
                {
                    s: {"maxcpu": DEFAULT_SERVICE_MAXCPU, "maxmem": DEFAULT_SERVICE_MAXMEM}
                    for s in services
                },
            )
        if "dynamic_service_stats" in testdir_files:
            hw.files["dynamic_service_stats"] = testdir_files["dynamic_service_stats"]
        else:
            services = hw._read_stats("static") or {}
            hw._write_stats(
                "dynamic",
                {s: {"cpu": DEFAULT_SERVICE_CPU, "mem": DEFAULT_SERVICE_MEM} for s in services},
            )
        for node in sorted(hw.read_hardware_status_nolock()):
            name = f"service_status_{node}"
            if name in testdir_files:
                hw.files[name] = testdir_files[name]
            else:
                hw.write_service_status(node, {})
        hw.service_config = hw.read_service_config()
        return hw

    # ------------------------------------------------------------------ time and log

    def get_time(self) -> float:
        return self.cur_time

    def log(self, level: str, msg: str, source: str | None = None) -> None:
        """``TestHardware::log``: the level as is, the source ``hardware`` by default."""
        self.log_entries.append(LogEntry(level, self.get_time(), source or "hardware", chomp(msg)))

    # ------------------------------------------------------------------ membership

    def get_node_info(self) -> tuple[dict[str, dict[str, Any]], bool]:
        """``$compute_node_info``: online = power and network on; quorate if more than half are
        online, else no node is online."""
        cstatus = self.read_hardware_status_nolock()
        node_info: dict[str, dict[str, Any]] = {}
        online_count = 0
        for node, d in cstatus.items():
            online = d.get("power") == "on" and d.get("network") == "on"
            node_info[node] = {"online": online}
            online_count += online
        quorate = online_count > len(cstatus) // 2
        if not quorate:
            for node in cstatus:
                node_info[node]["online"] = False
        return node_info, quorate

    def get_cfs_state(self, node: str, state: str) -> bool:
        """A node's cluster file system works for ``rw`` / ``update`` unless a ``cfs`` command
        said ``fail``."""
        cstatus = self.read_hardware_status_nolock()
        res = ((cstatus.get(node) or {}).get("cfs") or {}).get(state)
        return res is None or truthy(res)

    # ------------------------------------------------------------------ daemons

    def crm_control(self, action: str, d: NodeDaemons) -> CRM | None:
        if action == "start":
            return CRM(d.crm_env)
        if action == "stop":
            return None  # sim_hardware_cmd sets it to undef, that's enough
        if action == "shutdown":
            assert d.crm is not None
            d.crm.request_shutdown()
            return None
        raise SimulationError(f"unknown CRM control action: '{action}'")

    def lrm_control(self, action: str, d: NodeDaemons) -> LRM | None:
        if action == "start":
            return LRM(d.lrm_env, self.lrm_process)
        if action == "stop":
            return None
        if action == "shutdown":
            assert d.lrm is not None
            d.lrm.request_shutdown()
            return None
        raise SimulationError(f"unknown LRM control action: '{action}'")

    # ------------------------------------------------------------------ commands

    def sim_hardware_cmd(self, cmdstr: str, logid: str) -> None:
        """Apply one simulator command (``sim_hardware_cmd``); see :mod:`pvegym.harness.testdir`
        for the list."""
        cstatus = self.read_hardware_status_nolock()
        words = cmdstr.split()
        cmd = words[0] if words else ""
        objid = words[1] if len(words) > 1 else ""
        action = words[2] if len(words) > 2 else ""
        params = words[3:]
        param = params[0] if params else None
        if not objid:
            raise SimulationError("sim_hardware_cmd: no node or service for command specified")

        d: NodeDaemons | None = None
        node = sid = ""
        if cmd == "service":
            sid = str(pve_verify_ha_resource_id(objid))
        else:
            node = objid
            d = self.nodes.get(node)
            if d is None:
                raise SimulationError(f"sim_hardware_cmd: no such node '{node}'")

        self.log("info", f"execute {cmdstr}", logid)

        if cmd == "power":
            assert d is not None
            self._power_cmd(cstatus, node, d, action)
        elif cmd == "network":
            if action not in ("on", "off"):
                raise SimulationError(f"sim_hardware_cmd: unknown network action '{action}'")
            cstatus[node]["network"] = action
            self.write_hardware_status_nolock(cstatus)
        elif cmd == "pve-manager-version":
            if action != "set":
                raise SimulationError(f"sim_hardware_cmd: unknown version action '{action}'")
            cstatus[node]["pve-manager-version"] = param
            self.write_hardware_status_nolock(cstatus)
        elif cmd == "cfs":
            if action not in ("rw", "update"):
                raise SimulationError(
                    f"sim_hardware_cmd: unknown cfs action '{action}' for node '{node}'"
                )
            if param not in ("work", "fail"):
                raise SimulationError(
                    f"sim_hardware_cmd: unknown cfs command '{param}' for '{action}' on node '{node}'"
                )
            cstatus[node].setdefault("cfs", {})[action] = 1 if param == "work" else 0
            self.write_hardware_status_nolock(cstatus)
        elif cmd in ("reboot", "shutdown"):
            assert d is not None
            cstatus[node]["shutdown"] = cmd
            self.write_hardware_status_nolock(cstatus)
            if d.lrm is not None:
                self.lrm_control("shutdown", d)
        elif cmd == "restart-lrm":
            assert d is not None
            if d.lrm is not None:
                d.lrm_restart = True
                self.lrm_control("shutdown", d)
        elif cmd == "crm":
            assert d is not None
            self._crm_cmd(node, d, action, param)
        elif cmd == "service":
            self._service_cmd(sid, action, params)
        else:
            raise SimulationError(f"sim_hardware_cmd: unknown command '{cmdstr}'")

    def _power_cmd(self, cstatus: dict[str, Any], node: str, d: NodeDaemons, action: str) -> None:
        """``power <node> on|off``: start the node's CRM and LRM, or kill them (watchdog reset,
        service status cleared)."""
        if action not in ("on", "off"):
            raise SimulationError(f"sim_hardware_cmd: unknown action '{action}'")
        ns = cstatus[node]
        if ns.get("power") != action:
            if action == "on":
                if d.crm is None:
                    d.crm = self.crm_control("start", d)
                if d.lrm is None:
                    d.lrm = self.lrm_control("start", d)
                d.lrm_restart = False
                ns["cfs"] = {}
            else:
                if d.crm is not None:
                    d.crm_env.log("info", "killed by poweroff")
                    self.crm_control("stop", d)
                    d.crm = None
                if d.lrm is not None:
                    d.lrm_env.log("info", "killed by poweroff")
                    self.lrm_control("stop", d)
                    d.lrm = None
                    d.lrm_restart = False
                self.watchdog_reset_nolock(node)
                self.write_service_status(node, {})
        ns["power"] = action
        ns["network"] = action
        ns["shutdown"] = None
        self.write_hardware_status_nolock(cstatus)

    def _crm_cmd(self, node: str, d: NodeDaemons, action: str, param: str | None) -> None:
        """``crm <node> stop|start|enable-node-maintenance|disable-node-maintenance|disarm-ha
        <mode>|arm-ha``."""
        if action == "stop":
            if d.crm is not None:
                d.crm_stop = True
                self.crm_control("shutdown", d)
        elif action == "start":
            if d.crm is None:
                d.crm = self.crm_control("start", d)
        elif action in ("enable-node-maintenance", "disable-node-maintenance"):
            self.queue_crm_commands_nolock(f"{action} {node}")
        elif action == "disarm-ha":
            mode = param or ""
            if mode not in ("freeze", "ignore"):
                raise SimulationError(f"sim_hardware_cmd: unknown resource mode '{mode}'")
            self.queue_crm_commands_nolock(f"{action} {mode}")
        elif action == "arm-ha":
            self.queue_crm_commands_nolock(action)
        else:
            raise SimulationError(f"sim_hardware_cmd: unknown action '{action}'")

    def _service_cmd(self, sid: str, action: str, params: list[str]) -> None:
        param = params[0] if params else None
        if action in ("started", "disabled", "stopped", "ignored"):
            self.set_service_state(sid, action)
        elif action in ("migrate", "relocate"):
            if not truthy(param):
                raise SimulationError(
                    f"sim_hardware_cmd: missing target node for '{action}' command"
                )
            self.queue_crm_commands_nolock(f"{action} {sid} {param}")
        elif action == "stop":
            if param is None:
                raise SimulationError(f"sim_hardware_cmd: missing timeout for '{action}' command")
            self.queue_crm_commands_nolock(f"{action} {sid} {param}")
        elif action == "add":
            state = params[1] if len(params) > 1 and truthy(params[1]) else "started"
            running: Any = params[2] if len(params) > 2 and truthy(params[2]) else 0
            self.add_service(sid, {"state": state, "node": param}, running)
        elif action in ("set-static-stats", "set-dynamic-stats"):
            if not params:
                raise SimulationError(
                    f"sim_hardware_cmd: missing target stat for '{action}' command"
                )
            keys = ("maxcpu", "maxmem") if action == "set-static-stats" else ("cpu", "mem")
            new: dict[str, float] = {}
            for i in range(0, len(params), 2):
                target = params[i]
                if i + 1 >= len(params):
                    raise SimulationError(
                        f"sim_hardware_cmd: missing value for '{action} {target}' command"
                    )
                if target not in keys:
                    raise SimulationError(
                        f"sim_hardware_cmd: unknown target stat '{target}' for '{action}' command"
                    )
                value = numify(params[i + 1])
                new[target] = value * 1024**2 if target in ("maxmem", "mem") else float(value)
            which = "static" if action == "set-static-stats" else "dynamic"
            self._set_service_stats(which, sid, new)
        elif action == "manual-migrate":
            if not truthy(param):
                raise SimulationError(
                    f"sim_hardware_cmd: missing target node for '{action}' command"
                )
            conf = self.read_service_config()
            if sid not in conf:
                raise SimulationError(f"sim_hardware_cmd: service '{sid}' not configured")
            current = conf[sid].get("node")
            if not current:
                raise SimulationError(f"sim_hardware_cmd: service '{sid}' has no node")
            svc_ignored = conf[sid].get("state") == "ignored"
            ms = self.read_json("manager_status", {})
            disarm = ms.get("disarm")
            disarm_ignored = bool(disarm) and disarm.get("mode") == "ignore"
            if not svc_ignored and not disarm_ignored:
                raise SimulationError(
                    "sim_hardware_cmd: manual-migrate requires service in"
                    " 'ignored' state or disarm-ha ignore mode"
                )
            assert param is not None
            self.change_service_location(sid, current, param)
        elif action == "delete":
            self.delete_service(sid)
        elif action == "lock":
            self.lock_service(sid, param)
        elif action == "unlock":
            self.unlock_service(sid, param)
        else:
            raise SimulationError(
                f"sim_hardware_cmd: unknown service action '{action}' - not implemented"
            )

    # ------------------------------------------------------------------ watchdog

    def watchdog_reset_nolock(self, node: str) -> None:
        for wfh in [w for w, wd in self.watchdog_status.items() if wd["node"] == node]:
            del self.watchdog_status[wfh]

    def watchdog_check(self, node: str) -> bool:
        """False (and the watchdog gone) when one of ``node``'s watchdogs expired."""
        res = True
        ctime = self.get_time()
        for wfh in list(self.watchdog_status):
            wd = self.watchdog_status[wfh]
            if wd["node"] != node:
                continue
            if ctime - wd["update_time"] > WATCHDOG_TIMEOUT:  # expired
                res = False
                del self.watchdog_status[wfh]
        return res

    def watchdog_open(self, node: str) -> str:
        self.wdcounter += 1
        wfh = f"WD:{node}:{self.wdcounter}"
        if wfh in self.watchdog_status:
            raise PerlDie("internal error")
        self.watchdog_status[wfh] = {"node": node, "update_time": self.get_time()}
        return wfh

    def _watchdog(self, wfh: str) -> dict[str, Any]:
        wd = self.watchdog_status.get(wfh)
        if wd is None:
            raise PerlDie(f"no such watchdog handle '{wfh}'")
        if self.get_time() - wd["update_time"] > WATCHDOG_TIMEOUT:
            raise PerlDie("watchdog expired")
        return wd

    def watchdog_close(self, wfh: str) -> None:
        self._watchdog(wfh)
        del self.watchdog_status[wfh]

    def watchdog_update(self, wfh: str) -> None:
        self._watchdog(wfh)["update_time"] = self.get_time()

    # ------------------------------------------------------------------ scheduler inputs

    def _cluster_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = {}
        for sid, cfg in self.service_config.items():
            stats[sid] = {
                "node": cfg.get("node"),
                "state": cfg.get("state"),
                "running": cfg.get("state") == "started",
                "usage": {},
            }
        return stats

    def get_basic_service_stats(self) -> dict[str, dict[str, Any]]:
        return self._cluster_service_stats()

    def get_static_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = self._cluster_service_stats()
        try:
            usage_stats = self.read_json("static_service_stats")
        except PerlDie as err:
            self.log("warning", f"unable to update static service stats cache - {err}")
            usage_stats = {}
        for sid in stats:
            if (usage_stats or {}).get(sid) is not None:
                stats[sid]["usage"] = usage_stats[sid]
        return stats

    def get_dynamic_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = self._cluster_service_stats()
        static = self._read_stats("static") or {}
        dynamic = self._read_stats("dynamic") or {}
        for sid in sorted(stats):
            if static.get(sid) is None or dynamic.get(sid) is None:
                # upstream dereferences the missing entry and dies
                raise PerlDie("Can't use an undefined value as a HASH reference")
            usage = {**static[sid], **dynamic[sid]}
            stats[sid]["usage"] = usage
            if numify(usage.get("cpu")) > numify(usage.get("maxcpu")):
                self.log("warning", f"overcommitted cpu on '{sid}'")
            if numify(usage.get("mem")) > numify(usage.get("maxmem")):
                self.log("warning", f"overcommitted mem on '{sid}'")
        return stats

    def get_static_node_stats(self) -> dict[str, dict[str, Any]]:
        cstatus = self.read_hardware_status_nolock()
        return {
            n: {"maxcpu": d.get("maxcpu"), "maxmem": d.get("maxmem")} for n, d in cstatus.items()
        }

    def get_dynamic_node_stats(self) -> dict[str, dict[str, Any]]:
        """Node capacity from the hardware status; usage = Σ dynamic stats of the services the
        node's service status lists as running on their configured node."""
        stats = self.get_static_node_stats()
        for st in stats.values():
            if st.get("maxcpu") is None:
                st["maxcpu"] = DEFAULT_NODE_MAXCPU
            st["cpu"] = 0.0
            if st.get("maxmem") is None:
                st["maxmem"] = DEFAULT_NODE_MAXMEM
            st["mem"] = 0
        service_conf = self.read_service_config()
        service_stats = self.get_dynamic_service_stats()
        cstatus = self.read_hardware_status_nolock()
        node_service_status = {n: self.read_service_status(n) for n in cstatus}
        for sid in sorted(service_conf):
            node = service_conf[sid]["node"]
            if not truthy((node_service_status.get(node) or {}).get(sid)):
                continue
            usage = service_stats[sid]["usage"]
            cpu, mem = usage.get("cpu"), usage.get("mem")
            if cpu is None:
                raise PerlDie(f"unknown cpu load for '{sid}'")
            stats[node]["cpu"] += cpu
            if stats[node]["cpu"] > stats[node]["maxcpu"]:
                self.log("warning", f"overcommitted cpu on '{node}'")
            if mem is None:
                raise PerlDie(f"unknown memory usage for '{sid}'")
            stats[node]["mem"] += mem
            if stats[node]["mem"] > stats[node]["maxmem"]:
                self.log("warning", f"overcommitted mem on '{node}'")
        return stats

    def get_node_version(self, node: str) -> str:
        cstatus = self.read_hardware_status_nolock()
        version = (cstatus.get(node) or {}).get("pve-manager-version")
        return DEFAULT_NODE_VERSION if version is None else str(version)


def chomp(msg: str) -> str:
    """Perl's ``chomp``: one trailing newline removed."""
    return msg[:-1] if msg.endswith("\n") else msg
