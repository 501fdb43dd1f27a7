"""The differential check: the HA engine against the port (:mod:`pvegym.sim.ha`), round by round.

Both sides implement one interface, :class:`CRMSide`: the hardware inputs of a round
(:class:`RoundInput`: the time, each node's membership, LRM mode and agent lock, the LRM results,
the CRM commands and the service-config changes) in, a :class:`Snapshot` out (every service's
status and config, the node states, the manager's node requests and disarm state, the round's log
lines). :class:`PortCRM` runs the port's :class:`~pvegym.sim.ha.manager.Manager` on a minimal
:class:`~pvegym.sim.ha.env.HAEnv`; :class:`EngineCRM` runs :func:`pvegym.sim.engine.crm.manage`
and formats its events. Neither depends on :class:`~pvegym.sim.simulation.Simulation`.

:func:`random_cluster` draws a cluster (2–8 nodes, 4–64 guests, VMs and containers,
``max_relocate`` 0–2, ``failback`` on/off, ``ha-rebalance-on-start`` on/off; random rules and HA
groups, :func:`random_rules`, :func:`random_groups`; a CRS mode, basic, static or dynamic, with
the guests' and nodes' sizes and each round's measured usage; the nodes' versions and each
round's LRM states for the groups migration) and :class:`History` a random history
(power and network off/on, the agent lock freed some rounds after a node went down, LRM modes,
maintenance, disarm freeze/ignore and arm, migrate/relocate/stop commands as a policy or an admin
would queue them, LRM results with every exit code, requested-state changes). The inputs are drawn
before the round from the example's own generator, so both sides see the same history.

This module is the only one of :mod:`pvegym.sim.engine` that imports the port.
"""

from __future__ import annotations

import copy
import functools
import importlib
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol, TypeVar, cast

import numpy as np

from pvegym.sim.engine import codes as k
from pvegym.sim.engine import rules as er
from pvegym.sim.engine.events import EV_WIDTH, EVENT_NAMES, format_events, unpack_failed
from pvegym.sim.engine.lrm_events import LE_CLOCK, LRM_EVENT_NAMES, format_lrm_events
from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.groups import Groups
from pvegym.sim.ha.lrm import LRM
from pvegym.sim.ha.manager import Manager
from pvegym.sim.ha.resources import Job, ResourcePlugin
from pvegym.sim.ha.rules import Rules
from pvegym.sim.view import Balancer, ClusterView, Motion

ROUND_S = 10.0  # s between CRM rounds (upstream's CRM loop)
EXIT_CODES = (k.SUCCESS, k.ERROR, k.EWRONG_NODE, k.IGNORED, 7)  # 7: EUNKNOWN_SERVICE
_EXIT_WEIGHTS = np.array([0.62, 0.22, 0.06, 0.05, 0.05])
_MODE_NAMES = k.LRM_MODES
_Q_TEXT = {k.Q_MIGRATE: "migrate", k.Q_RELOCATE: "relocate"}


@dataclass
class Cluster:
    """A cluster's fixed description: names (sorted as upstream iterates them) and config."""

    nodes: list[str]
    sids: list[str]
    cfg_node: list[int]
    cfg_state: list[int]
    max_relocate: list[int]
    failback: list[int]
    rebalance_on_start: bool
    #: the LRM's config (:func:`random_lrm_cluster`): datacenter.cfg ``max_workers`` and each
    #: service's ``max_restart`` (empty: 1 each, the service config's default)
    max_workers: int = 4
    max_restart: list[int] = field(default_factory=list)
    #: datacenter.cfg ``ha: shutdown_policy`` (codes.POLICY_*)
    shutdown_policy: int = k.POLICY_CONDITIONAL
    #: rules and HA groups (:mod:`pvegym.sim.engine.rules`)
    rules: er.RulesConfig = field(default_factory=er.RulesConfig)
    #: the CRS mode (``k.CRS_*``) and the configured sizes its static usage reads: the guests'
    #: maxcpu (cores) and maxmem (bytes), the nodes' cpu count and memory
    crs_mode: int = k.CRS_BASIC
    svc_maxcpu: list[float] = field(default_factory=list)
    svc_maxmem: list[int] = field(default_factory=list)
    node_maxcpu: list[int] = field(default_factory=list)
    node_maxmem: list[int] = field(default_factory=list)
    #: each node's pve-manager version (index into ``codes.NODE_VERSIONS``, −1: none)
    node_versions: list[int] = field(default_factory=list)


@dataclass
class RoundInput:
    """The hardware inputs of one CRM round (see the module doc)."""

    now: float
    online: list[bool]
    modes: list[int]
    locks: list[bool]
    #: per service: None keeps its last LRM result, -2 drops it, else an exit code for its
    #: current request, reported by the LRM of its current node
    results: list[int | None]
    commands: list[tuple[int, int, int]]
    cfg_changes: list[tuple[int, int]] = field(default_factory=list)
    #: the balancer's answer: (service, target node, imbalance before and after in hundredths);
    #: ignored if the service is not in the service status when ``load_balance`` runs
    motion: tuple[int, int, int, int] | None = None
    #: dynamic CRS mode: each node's and each guest's measured (cpu cores, mem bytes)
    node_usage: list[tuple[float, int]] = field(default_factory=list)
    svc_usage: list[tuple[float, int]] = field(default_factory=list)
    #: each LRM's state in its status (``k.LRM_STATE_*``; the groups migration reads it)
    lrm_states: list[int] = field(default_factory=list)


@dataclass
class Snapshot:
    services: list[tuple[Any, ...]]
    nodes: list[str]
    node_request: list[int]
    disarm: tuple[str, str]
    log: list[tuple[str, str]]


def lrm_code(res: int, state: str | None, has_target: bool) -> int:
    """The exit code an LRM can report: a motion without a target cannot succeed (upstream's LRM
    fails it; the port would put the service on an undefined node)."""
    if res == k.SUCCESS and state in ("migrate", "relocate", "request_start_balance"):
        return res if has_target else k.ERROR
    return res


def _no_target_motion(state: str | None, has_target: bool) -> bool:
    """A motion whose target is gone (``disarm-ha ignore`` prunes it): the harness drops an LRM
    result kept for it. Upstream would put the service on an undefined node with a success kept
    from before the disarm (the port then fails an assertion in ``_handle_fencing``); an upstream
    edge case outside what the check compares."""
    return state in ("migrate", "relocate", "request_start_balance") and not has_target


class CRMSide(Protocol):
    def round(self, inp: RoundInput) -> Snapshot: ...


# ---------------------------------------------------------------------------- the port


class _NoLocks:
    """A resource type whose services hold no locks (the only plugin call the CRM makes)."""

    def remove_locks(self, haenv: Any, id: str, locks: list[str], service_node: str) -> str | None:
        return None


class _ScriptedBalancer:
    """Answers the round's scripted motion (:attr:`RoundInput.motion`)."""

    name = "scripted"

    def __init__(self, env: _CrmEnv) -> None:
        self.env = env

    def reset(self, seed: int | None = None) -> None:
        pass

    def decide(self, view: ClusterView) -> Motion | None:
        env = self.env
        if env.motion is None:
            return None
        s, target, before, after = env.motion
        sid = env.cl.sids[s]
        if sid not in env.manager_ss:  # a balancer picks a service of the status
            return None
        return Motion(sid, env.cl.nodes[target], before / 100, after / 100)


@functools.lru_cache(maxsize=64)
def _parsed(plugin: Any, filename: str, text: str) -> Any:
    """A config file parsed once (the Manager reads it every round and modifies what it gets:
    the callers copy it)."""
    return plugin.parse_config(filename, text)


def _copy(x: Any) -> Any:
    """A deep copy of parsed config data (dicts, lists and scalars)."""
    if isinstance(x, dict):
        return {key: _copy(v) for key, v in x.items()}
    if isinstance(x, list):
        return [_copy(v) for v in x]
    return x


class _CrmEnv(HAEnv):
    """The CRM master's environment on node ``master``: a file system of dicts."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.now = 0.0
        self.ms: dict[str, Any] = {}
        self.online = [False] * len(cl.nodes)
        self.modes = [k.MODE_ACTIVE] * len(cl.nodes)
        self.locks = [False] * len(cl.nodes)
        self.lrm_results: dict[str, dict[str, Any]] = {n: {} for n in cl.nodes}
        self.commands: list[str] = []
        self.conf: dict[str, dict[str, Any]] = {}
        groups = dict(cl.rules.service_groups)
        for i, sid in enumerate(cl.sids):
            typ, _, name = sid.partition(":")
            self.conf[sid] = {
                "node": cl.nodes[cl.cfg_node[i]],
                "state": k.CONFIG_STATES[cl.cfg_state[i]],
                "type": typ,
                "name": name,
                "failback": cl.failback[i],
                "max_restart": cl.max_restart[i] if cl.max_restart else 1,
                "max_relocate": cl.max_relocate[i],
            }
            if sid in groups:
                self.conf[sid]["group"] = groups[sid]
        self.rules_text = rules_config_text(cl.rules)
        self.groups_text = groups_config_text(cl.rules)
        self.usage = RoundInput(0.0, [], [], [], [], [])
        self.logs: list[tuple[str, str]] = []
        self.motion: tuple[int, int, int, int] | None = None
        self.manager_ss: dict[str, Any] = {}

    def nodename(self) -> str:
        return self.cl.nodes[0]

    def get_time(self) -> float:
        return self.now

    def sleep(self, delay: float) -> None:
        pass

    def sleep_until(self, end_time: float) -> None:
        pass

    def write_log(self, level: str, msg: str) -> None:
        self.logs.append((level, msg.rstrip("\n")))

    def read_manager_status(self) -> dict[str, Any]:
        return self.ms

    def write_manager_status(self, status: dict[str, Any]) -> None:
        self.ms = status

    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        assert node is not None
        i = self.cl.nodes.index(node)
        status = {"mode": _MODE_NAMES[self.modes[i]], "results": self.lrm_results[node]}
        if self.usage.lrm_states and self.usage.lrm_states[i] != k.LRM_STATE_NONE:
            status["state"] = k.RN_LRM_STATES[self.usage.lrm_states[i]]
        return status

    def write_lrm_status(self, status: dict[str, Any]) -> None:
        raise NotImplementedError

    def is_node_shutdown(self) -> tuple[bool, bool]:
        return False, False

    def queue_crm_commands(self, cmd: str) -> None:
        self.commands.append(cmd)

    def any_pending_crm_command(self) -> bool:
        return bool(self.commands)

    def read_crm_commands(self) -> str:
        text = "\n".join(self.commands)
        self.commands = []
        return text

    def read_service_config(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        return {sid: dict(d) for sid, d in self.conf.items()}, None

    def update_service_config(self, changes: dict[str, dict[str, Any]]) -> None:
        for sid, change in changes.items():
            self.conf[sid].update(change.get("param") or {})
            if change.get("delete"):
                self.conf[sid].pop(change["delete"], None)

    def write_service_config(self, conf: dict[str, dict[str, Any]]) -> None:
        self.conf = conf

    def read_rules_config(self) -> Any:
        return _copy(_parsed(Rules, "rules.cfg", self.rules_text))

    def write_rules_config(self, rules: Any) -> None:
        self.rules_text = Rules.write_config("rules.cfg", rules)

    def read_group_config(self) -> Any:
        return _copy(_parsed(Groups, "groups.cfg", self.groups_text))

    def delete_group_config(self) -> None:
        self.groups_text = ""

    def get_datacenter_settings(self) -> dict[str, Any]:
        crs: dict[str, Any] = {"ha-auto-rebalance": 1}
        if self.cl.crs_mode != k.CRS_BASIC:
            crs["ha"] = k.CRS_MODES[self.cl.crs_mode]
        if self.cl.rebalance_on_start:
            crs["ha-rebalance-on-start"] = 1
        return {"ha": {}, "crs": crs}

    def new_balancer(self) -> Balancer | None:
        return _ScriptedBalancer(self)

    def balancer_view(self, manager: Any) -> ClusterView | None:
        self.manager_ss = manager.ss
        return cast(ClusterView, object())  # the scripted balancer reads no view

    def get_node_info(self) -> tuple[dict[str, dict[str, Any]], bool]:
        return {n: {"online": self.online[i]} for i, n in enumerate(self.cl.nodes)}, True

    def quorate(self) -> bool:
        return self.online[0]

    def cluster_state_update(self) -> bool:
        return True

    def get_ha_manager_lock(self) -> bool:
        return True

    def release_ha_manager_lock(self) -> bool:
        return True

    def get_ha_agent_lock(self, node: str | None = None) -> bool:
        assert node is not None
        return self.locks[self.cl.nodes.index(node)]

    def release_ha_agent_lock(self) -> bool:
        return True

    def watchdog_open(self) -> str:
        return "wd"

    def watchdog_update(self, wfh: str) -> None:
        pass

    def watchdog_close(self, wfh: str) -> None:
        pass

    def get_basic_service_stats(self) -> dict[str, dict[str, Any]]:
        return {}

    def get_static_service_stats(self) -> dict[str, dict[str, Any]]:
        cl = self.cl
        return {
            sid: {"usage": {"maxcpu": cl.svc_maxcpu[i], "maxmem": cl.svc_maxmem[i]}}
            for i, sid in enumerate(cl.sids)
        }

    def get_dynamic_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = self.get_static_service_stats()
        for i, sid in enumerate(self.cl.sids):
            cpu, mem = self.usage.svc_usage[i]
            stats[sid]["usage"].update(cpu=cpu, mem=mem)
        return stats

    def get_static_node_stats(self) -> dict[str, dict[str, Any]]:
        cl = self.cl
        return {
            n: {"maxcpu": cl.node_maxcpu[i], "maxmem": cl.node_maxmem[i]}
            for i, n in enumerate(cl.nodes)
        }

    def get_dynamic_node_stats(self) -> dict[str, dict[str, Any]]:
        stats = self.get_static_node_stats()
        for i, n in enumerate(self.cl.nodes):
            cpu, mem = self.usage.node_usage[i]
            stats[n].update(cpu=cpu, mem=mem)
        return stats

    def get_node_version(self, node: str) -> str | None:
        v = self.cl.node_versions[self.cl.nodes.index(node)] if self.cl.node_versions else 0
        return k.NODE_VERSIONS[v] if v >= 0 else None

    def resource_plugin(self, service_type: str) -> ResourcePlugin | None:
        return cast(ResourcePlugin, _NoLocks())

    def steal_service(self, sid: str, current_node: str, new_node: str) -> None:
        self.conf[sid]["node"] = new_node


class PortCRM:
    """The port's Manager as a :class:`CRMSide`."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.env = _CrmEnv(cl)
        self.manager: Manager | None = None
        self.result_at: dict[int, tuple[str, str]] = {}  # service → (node, uid)

    def step(self, inp: RoundInput) -> None:
        """The round, without the snapshot."""
        env, cl = self.env, self.cl
        env.now = inp.now
        env.online, env.modes, env.locks = list(inp.online), list(inp.modes), list(inp.locks)
        for s, state in inp.cfg_changes:
            env.conf[cl.sids[s]]["state"] = k.CONFIG_STATES[state]
        ss = self.manager.ss if self.manager else {}
        for s, res in enumerate(inp.results):
            sd = ss.get(cl.sids[s])
            if (
                res is None
                and sd
                and _no_target_motion(sd.get("state"), sd.get("target") is not None)
            ):
                res = -2
            if res is None:
                continue
            old = self.result_at.pop(s, None)
            if old is not None:
                env.lrm_results[old[0]].pop(old[1], None)
            if res == -2 or not sd or not sd.get("node") or not sd.get("uid"):
                continue
            code = lrm_code(res, sd.get("state"), sd.get("target") is not None)
            env.lrm_results[sd["node"]][sd["uid"]] = {"exit_code": code}
            self.result_at[s] = (sd["node"], sd["uid"])
        for kind, a, b in inp.commands:
            env.queue_crm_commands(_command_text(cl, kind, a, b))
        env.motion = inp.motion
        env.usage = inp
        env.logs = []
        if self.manager is None:
            self.manager = Manager(env)
        self.manager.manage()

    def round(self, inp: RoundInput) -> Snapshot:
        self.step(inp)
        return self.snapshot()

    def snapshot(self) -> Snapshot:
        env, cl = self.env, self.cl
        ss = (self.manager.ss if self.manager else {}) or {}
        ns = self.manager.ns.status if self.manager else {}
        services: list[tuple[Any, ...]] = []
        for sid in cl.sids:
            sd = ss.get(sid)
            conf = env.conf[sid]
            if sd is None:
                services.append((None, conf["state"], conf["node"]))
                continue
            cmd = sd.get("cmd")
            services.append(
                (
                    sd.get("state"),
                    sd.get("node"),
                    sd.get("target"),
                    tuple(str(x) for x in cmd) if cmd else None,
                    bool(sd.get("running")),
                    tuple(sd["failed_nodes"]) if sd.get("failed_nodes") is not None else None,
                    sd.get("maintenance_node"),
                    None if sd.get("timeout") is None else str(sd["timeout"]),
                    conf["state"],
                    conf["node"],
                )
            )
        ms = self.manager.ms if self.manager else {}
        req = ms.get("node_request") or {}
        disarm = ms.get("disarm") or {}
        return Snapshot(
            services=services,
            nodes=[ns.get(n, "-") for n in cl.nodes],
            node_request=[1 if (req.get(n) or {}).get("maintenance") else 0 for n in cl.nodes],
            disarm=(str(disarm.get("mode", "")), str(disarm.get("state", ""))),
            log=list(env.logs),
        )


def _nodes_text(nodes: tuple[tuple[str, int], ...]) -> str:
    return ",".join(f"{n}:{p}" if p else n for n, p in nodes)


def rules_config_text(cfg: er.RulesConfig) -> str:
    """``rules.cfg`` of the rules (section config, as upstream's test directories)."""
    out = []
    for r in cfg.rules:
        lines = [f"{'node' if isinstance(r, er.NodeAffinityRule) else 'resource'}-affinity: {r.id}"]
        lines.append(f"\tresources {','.join(r.resources)}")
        if isinstance(r, er.NodeAffinityRule):
            lines.append(f"\tnodes {_nodes_text(r.nodes)}")
            if r.strict:
                lines.append("\tstrict 1")
        else:
            lines.append(f"\taffinity {'positive' if r.positive else 'negative'}")
        if r.disabled:
            lines.append("\tdisable 1")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def groups_config_text(cfg: er.RulesConfig) -> str:
    """``groups.cfg`` of the HA groups."""
    out = []
    for g in cfg.groups:
        lines = [f"group: {g.id}", f"\tnodes {_nodes_text(g.nodes)}"]
        if g.restricted:
            lines.append("\trestricted 1")
        if g.nofailback:
            lines.append("\tnofailback 1")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)


def _command_text(cl: Cluster, kind: int, a: int, b: int) -> str:
    if kind in (k.Q_MIGRATE, k.Q_RELOCATE):
        return f"{_Q_TEXT[kind]} {cl.sids[a]} {cl.nodes[b]}"
    if kind == k.Q_STOP:
        return f"stop {cl.sids[a]} {b}"
    if kind == k.Q_ENABLE_MAINTENANCE:
        return f"enable-node-maintenance {cl.nodes[a]}"
    if kind == k.Q_DISABLE_MAINTENANCE:
        return f"disable-node-maintenance {cl.nodes[a]}"
    if kind == k.Q_DISARM:
        return f"disarm-ha {k.DISARM_MODES[a]}"
    return "arm-ha"


# ---------------------------------------------------------------------------- the engine


class EngineCRM:
    """The engine as a :class:`CRMSide` (one cluster: the leading axis has length 1).

    ``crm``: the module whose ``manage`` runs (default :mod:`pvegym.sim.engine.crm`; the tests pass
    a mutated copy)."""

    MAX_EVENTS = 4096
    COMMANDS0 = 64  # initial capacity of the command queue (grown as needed)

    def __init__(self, cl: Cluster, crm: ModuleType | None = None) -> None:
        self.cl = cl
        self.crm = crm or importlib.import_module("pvegym.sim.engine.crm")
        ns, nn = len(cl.sids), len(cl.nodes)
        svc = np.full((1, ns, k.N_SVC_FIELDS), k.NONE, dtype=np.int64)
        svc[0, :, k.F_STATE] = k.SS_ABSENT
        svc[0, :, k.F_UID] = 0
        svc[0, :, k.F_CMD] = k.CMD_NONE
        svc[0, :, k.F_RUNNING] = 0
        svc[0, :, k.F_N_FAILED] = 0
        svc[0, :, k.F_FAILED] = 0
        svc[0, :, k.F_RES_CODE] = k.NO_RESULT
        for i, sid in enumerate(cl.sids):
            svc[0, i, k.F_CFG_NODE] = cl.cfg_node[i]
            svc[0, i, k.F_CFG_STATE] = cl.cfg_state[i]
            svc[0, i, k.F_TYPE] = k.TYPE_VM if sid.startswith("vm:") else k.TYPE_CT
            svc[0, i, k.F_MAX_RELOCATE] = cl.max_relocate[i]
        svc[0, :, k.F_FAILBACK] = er.group_failback(cl.rules, cl.sids, cl.failback)
        self.svc = svc
        self.nodes = np.zeros((1, nn, k.N_NODE_FIELDS), dtype=np.int64)
        self.last_online = np.full((1, nn + 1), np.nan)
        self.clu = np.zeros((1, k.N_CLU_FIELDS), dtype=np.int64)
        self.clu[0, k.K_REBALANCE_ON_START] = 1 if cl.rebalance_on_start else 0
        self.clu[0, k.K_MASTER] = 0
        self.evbuf = np.zeros((1, self.MAX_EVENTS, EV_WIDTH), dtype=np.int64)
        self.cmds = np.zeros((1, self.COMMANDS0, 3), dtype=np.int64)
        self.ncmd = np.zeros(1, dtype=np.int64)
        self.now = np.zeros(1)
        self.deferred = np.zeros((1, ns), dtype=np.bool_)
        self.events: np.ndarray = self.evbuf[0, :0]
        self.rx = er.rx_arrays(1, ns, nn)
        self.rules = er.RulesHost(cl.rules, tuple(cl.sids), tuple(cl.nodes), tuple(cl.failback))
        self.rx["rk"][0, k.RK_CRS_MODE] = cl.crs_mode
        self.rules.init_arrays(self.rx, 0)
        self.rx["rnode"][0, :, k.RN_VERSION] = cl.node_versions or 0
        if cl.crs_mode != k.CRS_BASIC:
            fsvc, fnode = self.rx["fsvc"][0], self.rx["fnode"][0]
            fsvc[:, k.FS_MAXCPU] = cl.svc_maxcpu
            fsvc[:, k.FS_MAXMEM] = cl.svc_maxmem
            fnode[:, k.FN_MAXCPU] = cl.node_maxcpu
            fnode[:, k.FN_MAXMEM] = cl.node_maxmem

    def step(self, inp: RoundInput) -> None:
        """The round (:meth:`load`, :meth:`call`), without the snapshot."""
        self.load(inp)
        self.call()

    def load(self, inp: RoundInput) -> None:
        """The round's inputs into the arrays."""
        svc, nodes = self.svc[0], self.nodes[0]
        self.now[0] = inp.now
        nodes[:, k.N_ONLINE] = inp.online
        nodes[:, k.N_MODE] = inp.modes
        nodes[:, k.N_LOCK] = inp.locks
        for s, state in inp.cfg_changes:
            svc[s, k.F_CFG_STATE] = state
        for s, res in enumerate(inp.results):
            name = k.SERVICE_STATES[svc[s, k.F_STATE]]
            if res is None and _no_target_motion(name, svc[s, k.F_TARGET] >= 0):
                res = -2
            if res is None:
                continue
            svc[s, k.F_RES_CODE] = k.NO_RESULT
            if res == -2 or svc[s, k.F_STATE] == k.SS_ABSENT or svc[s, k.F_NODE] < 0:
                continue
            svc[s, k.F_RES_CODE] = lrm_code(res, name, svc[s, k.F_TARGET] >= 0)
            svc[s, k.F_RES_UID] = svc[s, k.F_UID]
            svc[s, k.F_RES_NODE] = svc[s, k.F_NODE]
        q0 = int(self.ncmd[0])  # commands still queued (the master was offline)
        need = q0 + len(inp.commands)
        if need > self.cmds.shape[1]:  # the queue grows while the master is offline
            grown = np.zeros((1, max(need, 2 * self.cmds.shape[1]), 3), dtype=np.int64)
            grown[:, :q0] = self.cmds[:, :q0]
            self.cmds = grown
        for q, row in enumerate(inp.commands):
            self.cmds[0, q0 + q] = row
        self.ncmd[0] = q0 + len(inp.commands)
        motion = inp.motion or (k.NONE, k.NONE, 0, 0)
        self.clu[0, k.K_MOTION_SID : k.K_MOTION_AFTER + 1] = motion
        self.rules.before_round(self.rx, 0, nodes[:, k.N_STATE], inp.online)
        self.rx["rk"][0, k.RK_QUORATE] = 1 if inp.online[0] else 0
        self.rx["rnode"][0, :, k.RN_LRM_STATE] = inp.lrm_states or k.LRM_STATE_NONE
        if self.cl.crs_mode == k.CRS_DYNAMIC:
            fsvc, fnode = self.rx["fsvc"][0], self.rx["fnode"][0]
            for i, (cpu, mem) in enumerate(inp.svc_usage):
                fsvc[i, k.FS_CPU], fsvc[i, k.FS_MEM] = cpu, mem
            for i, (cpu, mem) in enumerate(inp.node_usage):
                fnode[i, k.FN_CPU], fnode[i, k.FN_MEM] = cpu, mem

    def call(self) -> None:
        """The kernel call over the loaded inputs."""
        self.crm.manage(
            self.svc,
            self.nodes,
            self.last_online,
            self.clu,
            self.evbuf,
            self.cmds,
            self.ncmd,
            self.now,
            self.deferred,
            *(self.rx[name] for name in k.RX_ARRAYS),
        )
        self.rules.after_round(self.rx, 0)
        err = int(self.clu[0, k.K_ERROR])
        if err:
            raise RuntimeError(f"HA engine: {k.ENGINE_ERRORS[err]}")
        self.events = self.evbuf[0, : int(self.clu[0, k.K_N_EVENTS])].copy()

    def round(self, inp: RoundInput) -> Snapshot:
        self.step(inp)
        return self.snapshot()

    def snapshot(self) -> Snapshot:
        cl, svc, nodes = self.cl, self.svc[0], self.nodes[0]

        def nd(i: int) -> str | None:
            return None if i < 0 else cl.nodes[i]

        services: list[tuple[Any, ...]] = []
        for s in range(len(cl.sids)):
            row = [int(x) for x in svc[s]]
            cfg = k.CONFIG_STATES[row[k.F_CFG_STATE]]
            if row[k.F_STATE] == k.SS_ABSENT:
                services.append((None, cfg, cl.nodes[row[k.F_CFG_NODE]]))
                continue
            cmd = row[k.F_CMD]
            cmdt = None
            if cmd != k.CMD_NONE:
                arg = row[k.F_CMD_ARG]
                cmdt = (k.SERVICE_COMMANDS[cmd], str(arg) if cmd == k.CMD_STOP else cl.nodes[arg])
            failed = None
            if row[k.F_N_FAILED]:
                failed = tuple(
                    cl.nodes[i] for i in unpack_failed(row[k.F_N_FAILED], row[k.F_FAILED])
                )
            services.append(
                (
                    k.SERVICE_STATES[row[k.F_STATE]],
                    nd(row[k.F_NODE]),
                    nd(row[k.F_TARGET]),
                    cmdt,
                    bool(row[k.F_RUNNING]),
                    failed,
                    nd(row[k.F_MAINT_NODE]),
                    None if row[k.F_TIMEOUT] < 0 else str(row[k.F_TIMEOUT]),
                    cfg,
                    cl.nodes[row[k.F_CFG_NODE]],
                )
            )
        dm = int(self.clu[0, k.K_DISARM_MODE])
        return Snapshot(
            services=services,
            nodes=[
                "-" if nodes[n, k.N_STATE] == k.NS_ABSENT else k.NODE_STATES[nodes[n, k.N_STATE]]
                for n in range(len(cl.nodes))
            ],
            node_request=[int(x) for x in nodes[:, k.N_MAINT_REQ]],
            disarm=(k.DISARM_MODES[dm], k.DISARM_STATES[int(self.clu[0, k.K_DISARM_STATE])])
            if dm
            else ("", ""),
            log=format_events(self.events, cl.sids, cl.nodes, self.rules.messages),
        )


# ---------------------------------------------------------------------------- random examples


def random_cluster(rng: np.random.Generator) -> Cluster:
    nn = int(rng.integers(2, 9))
    ns = int(rng.integers(4, 65))
    ids = rng.choice(np.arange(100, 1000), size=ns, replace=False)
    sids = sorted(f"{'vm' if rng.random() < 0.7 else 'ct'}:{i}" for i in ids)
    nodes = [f"node{i + 1}" for i in range(nn)]
    cfg_state = [int(rng.choice(4, p=[0.8, 0.08, 0.08, 0.04])) for _ in range(ns)]
    cl = Cluster(
        nodes=nodes,
        sids=sids,
        cfg_node=[int(rng.integers(nn)) for _ in range(ns)],
        cfg_state=cfg_state,
        max_relocate=[int(rng.integers(0, 3)) for _ in range(ns)],
        failback=[int(rng.random() < 0.7) for _ in range(ns)],
        rebalance_on_start=bool(rng.random() < 0.4),
    )
    cl.rules = random_rules(rng, sids, nodes)
    cl.crs_mode = int(rng.integers(0, 3))
    cl.svc_maxcpu = [float(rng.choice([0, 0.5, 1, 2, 4, 8])) for _ in range(ns)]
    cl.svc_maxmem = [int(rng.integers(1, 33)) * 2**29 for _ in range(ns)]
    cl.node_maxcpu = [int(rng.choice([8, 16, 32, 64])) for _ in range(nn)]
    cl.node_maxmem = [int(rng.choice([32, 64, 128])) * 2**30 for _ in range(nn)]
    cl.node_versions = [int(rng.choice([0, 0, 0, 0, 1, 2, 3, 4, -1])) for _ in range(nn)]
    if rng.random() < 0.8:  # all on a version with rules: the groups migration can succeed
        cl.node_versions = [0] * nn
    cl.rules = random_groups(rng, cl.rules, sids, nodes)
    return cl


def random_groups(
    rng: np.random.Generator, rules: er.RulesConfig, sids: list[str], nodes: list[str]
) -> er.RulesConfig:
    """Up to three HA groups (restricted, nofailback, one or several priorities, now and then a
    node the cluster does not have or no member), each service in one with some probability."""
    if rng.random() < 0.5:
        return rules
    npool = [*nodes, "node99"]
    groups = []
    for i in range(int(rng.integers(1, 4))):
        nds = _pick(rng, npool, int(rng.integers(1, len(npool) + 1)))
        multi = rng.random() < 0.6
        groups.append(
            er.Group(
                id=f"group{i}",
                nodes=tuple((n, int(rng.integers(0, 4)) if multi else 0) for n in nds),
                restricted=bool(rng.random() < 0.5),
                nofailback=bool(rng.random() < 0.4),
            )
        )
    share = float(rng.uniform(0.1, 0.6))
    members = tuple(
        (sid, groups[int(rng.integers(len(groups)))].id) for sid in sids if rng.random() < share
    )
    return er.RulesConfig(rules=rules.rules, groups=tuple(groups), service_groups=members)


def _pick(rng: np.random.Generator, pool: list[str], size: int) -> tuple[str, ...]:
    return tuple(str(x) for x in rng.choice(pool, size=min(size, len(pool)), replace=False))


def random_rules(rng: np.random.Generator, sids: list[str], nodes: list[str]) -> er.RulesConfig:
    """Node-affinity rules (strict or not, one or several priorities, now and then a node or a
    resource the cluster does not have), positive and negative resource-affinity rules, some
    disabled; overlapping at random, so that the checks drop some (as the port's
    ``Rules::transform``)."""
    if rng.random() < 0.15:
        return er.RulesConfig()
    pool = [*sids, "vm:9999"]
    npool = [*nodes, "node99"]
    rules: list[er.Rule] = []
    for i in range(int(rng.poisson(1.6))):
        nds = _pick(rng, npool, int(rng.integers(1, len(npool) + 1)))
        multi = rng.random() < 0.5
        rules.append(
            er.NodeAffinityRule(
                id=f"na{i}",
                resources=_pick(rng, pool, 1 + int(rng.poisson(3))),
                nodes=tuple((n, int(rng.integers(0, 4)) if multi else 0) for n in nds),
                strict=bool(rng.random() < 0.5),
                disabled=bool(rng.random() < 0.08),
            )
        )
    for i in range(int(rng.poisson(1.8))):
        rules.append(
            er.ResourceAffinityRule(
                id=f"ra{i}",
                resources=_pick(rng, pool, 1 + int(rng.poisson(1.5))),
                positive=bool(rng.random() < 0.5),
                disabled=bool(rng.random() < 0.08),
            )
        )
    order = rng.permutation(len(rules))
    return er.RulesConfig(rules=tuple(rules[i] for i in order))


class History:
    """Draws each round's :class:`RoundInput` (state of the hardware: kept between rounds)."""

    def __init__(self, cl: Cluster, rng: np.random.Generator) -> None:
        self.cl, self.rng = cl, rng
        nn = len(cl.nodes)
        self.online = [True] * nn
        self.down_for = [0] * nn
        self.lock_after = [0] * nn
        self.maint = [False] * nn
        self.restart_for = [0] * nn
        self.disarmed = False
        self.round_no = 0

    def next(self) -> RoundInput:
        rng, cl = self.rng, self.cl
        nn, ns = len(cl.nodes), len(cl.sids)
        cmds: list[tuple[int, int, int]] = []
        for n in range(nn):
            if self.online[n]:
                p_fail = 0.06 if n else 0.015  # the master's node fails less often
                if rng.random() < p_fail:
                    self.online[n] = False
                    self.down_for[n] = 0
                    self.lock_after[n] = int(rng.integers(0, 16))  # watchdog expiry, in rounds
            else:
                self.down_for[n] += 1
                if rng.random() < 0.08:
                    self.online[n] = True
            if self.restart_for[n] > 0:
                self.restart_for[n] -= 1
            elif rng.random() < 0.01:
                self.restart_for[n] = int(rng.integers(1, 4))
            if rng.random() < 0.03:
                self.maint[n] = not self.maint[n]
                kind = k.Q_ENABLE_MAINTENANCE if self.maint[n] else k.Q_DISABLE_MAINTENANCE
                cmds.append((kind, n, -1))
        if rng.random() < 0.03:
            if self.disarmed:
                cmds.append((k.Q_ARM, -1, -1))
            else:
                cmds.append((k.Q_DISARM, int(rng.integers(1, 3)), -1))
            self.disarmed = not self.disarmed
        elif rng.random() < 0.01:  # a repeated or stray (dis)arm request
            cmds.append((k.Q_ARM, -1, -1) if rng.random() < 0.5 else (k.Q_DISARM, 1, -1))
        modes = []
        for n in range(nn):
            if self.disarmed and rng.random() < 0.8:
                modes.append(k.MODE_DISARM)
            elif self.maint[n] and rng.random() < 0.85:
                modes.append(k.MODE_MAINTENANCE)
            elif self.restart_for[n]:
                modes.append(k.MODE_RESTART)
            else:
                modes.append(k.MODE_ACTIVE)
        locks = [(not self.online[n]) and self.down_for[n] >= self.lock_after[n] for n in range(nn)]
        motion = None
        if rng.random() < 0.3:  # the balancer's answer
            before = int(rng.integers(0, 100))
            motion = (
                int(rng.integers(ns)),
                int(rng.integers(nn)),
                before,
                int(rng.integers(0, before + 1)),
            )
        for _ in range(int(rng.poisson(0.5))):  # an admin's motions
            s = int(rng.integers(ns))
            kind = k.Q_MIGRATE if cl.sids[s].startswith("vm:") else k.Q_RELOCATE
            if rng.random() < 0.1:
                kind = k.Q_RELOCATE if kind == k.Q_MIGRATE else k.Q_MIGRATE
            cmds.append((kind, s, int(rng.integers(nn))))
        if rng.random() < 0.05:
            cmds.append((k.Q_STOP, int(rng.integers(ns)), int(rng.choice([0, 30]))))
        results: list[int | None] = []
        us = rng.random(ns).tolist()
        codes = rng.choice(5, size=ns, p=_EXIT_WEIGHTS).tolist()  # drawn at once: it is the
        for u, code in zip(us, codes, strict=True):  # hot loop of the check's input
            if u < 0.45:
                results.append(None)
            elif u < 0.55:
                results.append(-2)
            else:
                results.append(EXIT_CODES[code])
        changes = []
        for _ in range(int(rng.poisson(0.3))):
            changes.append((int(rng.integers(ns)), int(rng.choice(4, p=[0.55, 0.15, 0.2, 0.1]))))
        ul = rng.random(nn).tolist()
        lrm_states = [
            (k.LRM_STATE_ACTIVE if u < 0.85 else k.LRM_STATE_WAIT if u < 0.95 else k.LRM_STATE_NONE)
            if self.online[n]
            else (k.LRM_STATE_LOST if u < 0.5 else k.LRM_STATE_ACTIVE)
            for n, u in enumerate(ul)
        ]
        node_usage: list[tuple[float, int]] = []
        svc_usage: list[tuple[float, int]] = []
        if cl.crs_mode == k.CRS_DYNAMIC:
            ncpu = rng.uniform(0.0, cl.node_maxcpu).tolist()
            nmem = (rng.random(nn) * np.array(cl.node_maxmem)).astype(np.int64).tolist()
            node_usage = list(zip(ncpu, nmem, strict=True))
            scpu = rng.uniform(0.0, np.maximum(cl.svc_maxcpu, 1.0)).tolist()
            smem = (rng.random(ns) * np.array(cl.svc_maxmem)).astype(np.int64).tolist()
            svc_usage = list(zip(scpu, smem, strict=True))
        self.round_no += 1
        return RoundInput(
            now=self.round_no * ROUND_S,
            online=list(self.online),
            modes=modes,
            locks=locks,
            results=results,
            commands=cmds,
            cfg_changes=changes,
            motion=motion,
            node_usage=node_usage,
            svc_usage=svc_usage,
            lrm_states=lrm_states,
        )


@dataclass
class Outcome:
    identical: bool
    difference: str = ""
    rounds: int = 0
    features: Counter[str] = field(default_factory=Counter)


def _first_difference(a: Snapshot, b: Snapshot, cl: Cluster) -> str:
    for i, (x, y) in enumerate(zip(a.services, b.services, strict=True)):
        if x != y:
            return f"service {cl.sids[i]}: port {x} engine {y}"
    if a.nodes != b.nodes:
        return f"node states: port {a.nodes} engine {b.nodes}"
    if a.node_request != b.node_request:
        return f"maintenance requests: port {a.node_request} engine {b.node_request}"
    if a.disarm != b.disarm:
        return f"disarm: port {a.disarm} engine {b.disarm}"
    for i, (x, y) in enumerate(zip(a.log, b.log, strict=False)):
        if x != y:
            return f"log line {i}: port {x} engine {y}"
    if len(a.log) != len(b.log):
        return f"log: port {len(a.log)} lines, engine {len(b.log)}"
    return ""


def plain_module(name: str, source: str, **names: object) -> ModuleType:
    """An engine module (``crm``, ``lrm``, ``rules``, …) built from ``source`` as plain Python
    (``njit`` an identity), some of its globals (the modules it calls) replaced by ``names``: the
    form in which a mutated engine runs through this check without compiling."""
    source = source.replace("from numba import njit", "njit = lambda *a, **kw: (lambda f: f)")
    module = ModuleType(f"pvegym_engine_{name}_mutant")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{name}_mutant.py", "exec"), module.__dict__)
    module.__dict__.update(names)
    return module


_S = TypeVar("_S")


def _both(
    out: Outcome,
    seed: int,
    r: int,
    port: Callable[[], _S],
    engine: Callable[[], _S],
    differ: Callable[[_S, _S], str],
) -> _S | None:
    """Round ``r + 1`` on the port, then on the engine, compared by ``differ``: the engine's
    snapshot, or None with the raise or the first difference recorded in ``out``."""
    out.rounds = r + 1
    where = f"seed {seed} round {r + 1}"
    try:
        a = port()
    except Exception as err:
        out.identical, out.difference = False, f"{where}: the port raised {err!r}"
        return None
    try:
        b = engine()
    except Exception as err:
        out.identical, out.difference = False, f"{where}: the engine raised {err!r}"
        return None
    diff = differ(a, b)
    if diff:
        out.identical, out.difference = False, f"{where}: {diff}"
        return None
    return b


def run_example(seed: int, rounds: int = 60, crm: ModuleType | None = None) -> Outcome:
    """One random example: both sides for ``rounds`` CRM rounds; stops at the first difference."""
    rng = np.random.default_rng(seed)
    cl = random_cluster(rng)
    hist = History(cl, rng)
    port, engine = PortCRM(cl), EngineCRM(cl, crm)
    out = Outcome(identical=True)
    for r in range(rounds):
        inp = hist.next()
        b = _both(
            out,
            seed,
            r,
            functools.partial(port.round, inp),
            functools.partial(engine.round, inp),
            functools.partial(_first_difference, cl=cl),
        )
        if b is None:
            return out
        _count(out.features, engine.events, b)
    rk = engine.rx["rk"][0]
    mode = k.CRS_MODES[cl.crs_mode]
    for name, field_ in (
        (f"{mode} score decided a placement", k.RK_N_SCORED),
        (f"{mode} score not basic's choice", k.RK_N_NOT_BASIC),
        ("strict rule restricted a placement", k.RK_N_STRICT),
        ("non-strict fallback", k.RK_N_FALLBACK),
        ("failback", k.RK_N_FAILBACK),
    ):
        out.features[name] += int(rk[field_])
    return out


def _count(features: Counter[str], events: np.ndarray, snap: Snapshot) -> None:
    from pvegym.sim.engine import events as ev

    for row in events:
        kind = int(row[0])
        features[EVENT_NAMES[kind]] += 1
        if kind == ev.E_STATE_CHANGE:
            features[f"state {k.SERVICE_STATES[int(row[3])]}"] += 1
        elif kind == ev.E_NODE_STATE:
            features[f"node {k.NODE_STATES[int(row[4])]}"] += 1
        elif kind == ev.E_GROUP_MIGRATION:
            step = int(row[2])
            if step == ev.GM_SUCCESS:
                features["groups migrated"] += 1
            elif step >= ev.GM_ABORT:
                features["groups migration aborted"] += 1


# ---------------------------------------------------------------------------- CRM + LRM
# The CRM and every node's LRM, the LRM results an output of the LRMs (their LRM status files)
# instead of an input. A round: the CRM master's round, then one iteration of every running LRM
# in node order. The hardware's inputs per round (:class:`LrmInput`): which LRM daemons run
# (a node powered off, or reset by its watchdog, runs none; a node cut from the network runs its
# LRM without quorum), whether each can take its agent lock, and which forked jobs end with which
# exit code (``waitpid``'s answer; what a job does is the hardware's, so it is not run).

#: exit codes a job ends with (-1 and signals are not covered) and their weights
JOB_CODES = (k.SUCCESS, k.ERROR, k.ETRY_AGAIN, k.EWRONG_NODE, k.IGNORED, k.EUNKNOWN_SERVICE)
_JOB_WEIGHTS = np.array([0.6, 0.2, 0.05, 0.05, 0.05, 0.05])


@dataclass
class LrmInput:
    """One round's inputs: the CRM's (:class:`RoundInput`; its ``modes`` and ``results`` are not
    used, the LRMs write them) and the LRMs' hardware."""

    crm: RoundInput
    runs: list[bool]
    quorate: list[bool]
    lrm_locks: list[bool]
    #: done[n][s]: the exit code node n's job for service s ends with this round, else NO_RESULT
    done: np.ndarray
    #: per node: a shutdown request (codes.SD_*) this round; empty: none
    shutdown: list[int] = field(default_factory=list)
    #: done_at[n][s]: s after the iteration's start from which a poll sees that end; empty: 0
    done_at: np.ndarray | None = None


@dataclass
class HASnapshot:
    crm: Snapshot
    #: per node: None (no daemon runs), else (state, mode, watchdog open, idle rounds, workers in
    #: table order, results, restart tries, written mode, written results, shutting down, failed
    #: stop jobs, exited this round)
    lrms: list[tuple[Any, ...] | None]
    #: (node, level, message, the daemon's clock s)
    lrm_log: list[tuple[str, str, str, float]]


def random_lrm_cluster(rng: np.random.Generator) -> Cluster:
    cl = random_cluster(rng)
    cl.max_workers = int(rng.integers(1, 5))
    cl.max_restart = [int(rng.integers(0, 3)) for _ in cl.sids]
    cl.shutdown_policy = int(rng.integers(len(k.SHUTDOWN_POLICIES)))
    return cl


class LrmHistory(History):
    """:class:`History` and the LRMs' hardware: a node that goes down is cut from the network
    (its LRM runs without quorum) or powered off, either half the time; a cut node whose agent
    lock the master could take was reset by its watchdog (off until it comes back); an LRM
    sometimes fails to renew its lock for a few rounds; a forked job ends in a round with
    probability 0.45, seen by a poll from the iteration's start on or from a second 1–8 after it
    (half each: within the polls, which go on while a job runs). A running daemon of an online node is sometimes asked to shut down (an LRM
    restart, a node reboot or shutdown); when it exits, a restarted LRM runs again at once and a
    node that shuts down goes off (its agent lock released: the master may take it at once)."""

    def __init__(self, cl: Cluster, rng: np.random.Generator, p_shutdown: float = 0.008) -> None:
        super().__init__(cl, rng)
        nn = len(cl.nodes)
        self.p_shutdown = p_shutdown  # per running daemon and round
        #: the jobs' end times within the polls, from a stream of their own (the rest of the
        #: history is drawn as before they were added)
        self.at_rng = rng.spawn(1)[0]
        self.cut = [False] * nn
        self.lock_loss = [0] * nn
        self.stopping = [k.SD_NONE] * nn  # a shutdown requested, not yet exited
        self.alive = [False] * nn  # a daemon ran last round and did not exit

    def next_lrm(self, exited: list[bool] | None = None) -> LrmInput:
        """The next round's inputs; ``exited``: which daemons exited last round."""
        rng, cl = self.rng, self.cl
        nn, ns = len(cl.nodes), len(cl.sids)
        for n in range(nn):
            if exited and exited[n]:
                self.alive[n] = False
                if self.stopping[n] in (k.SD_REBOOT, k.SD_POWEROFF):
                    self.online[n] = False
                    self.down_for[n] = self.lock_after[n] = 0
                    self.cut[n] = False
                self.stopping[n] = k.SD_NONE
        was_online = list(self.online)
        crm = self.next()
        crm.results = [None] * ns
        runs, locks = [], []
        for n in range(nn):
            if was_online[n] and not self.online[n]:
                self.cut[n] = bool(rng.random() < 0.5)
            runs.append(self.online[n] or (self.cut[n] and not crm.locks[n]))
            if self.lock_loss[n] > 0:
                self.lock_loss[n] -= 1
            elif rng.random() < 0.02:
                self.lock_loss[n] = int(rng.integers(1, 4))
            locks.append(self.online[n] and self.lock_loss[n] == 0)
        codes = np.array(JOB_CODES)[rng.choice(len(JOB_CODES), size=(nn, ns), p=_JOB_WEIGHTS)]
        done = np.where(rng.random((nn, ns)) < 0.45, codes, k.NO_RESULT)
        at_rng = self.at_rng
        done_at = np.where(at_rng.random((nn, ns)) < 0.5, 0, at_rng.integers(1, 9, size=(nn, ns)))
        shutdown = [k.SD_NONE] * nn
        for n in range(nn):
            if not runs[n]:  # the daemon is gone (node off)
                self.alive[n] = False
                self.stopping[n] = k.SD_NONE
            elif (
                self.alive[n]
                and self.online[n]
                and self.stopping[n] == k.SD_NONE
                and rng.random() < self.p_shutdown
            ):
                shutdown[n] = self.stopping[n] = int(rng.integers(1, 4))
            self.alive[n] = runs[n]
        return LrmInput(crm, runs, list(self.online), locks, done, shutdown, done_at)


def _job_code(code: int, state: str | None, has_target: bool) -> int:
    """A job's exit code as the hardware answers: a move without a target fails (:func:`lrm_code`)."""
    return lrm_code(code, state, has_target) if code != k.NO_RESULT else code


class _HaCrmEnv(_CrmEnv):
    """The master's environment whose LRM status files the LRMs write."""

    def __init__(self, cl: Cluster) -> None:
        super().__init__(cl)
        self.lrm_status: dict[str, dict[str, Any]] = {}
        self.lrm_logs: list[tuple[str, str, str, float]] = []

    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        assert node is not None
        return self.lrm_status.get(node, {})


class _Handle:
    """A forked job (its sid is found in the LRM's worker table) and when it was forked (s)."""

    def __init__(self, t: float) -> None:
        self.t = t


class _LrmEnv(_CrmEnv):
    """Node ``n``'s LRM environment over the master's file system ``fs``."""

    def __init__(self, fs: _HaCrmEnv, n: int) -> None:
        super().__init__(fs.cl)
        self.fs, self.n, self.node = fs, n, fs.cl.nodes[n]
        self.t = 0.0
        self.delay = 0.0
        self.is_quorate = False
        self.lock = False
        #: sid → (exit code, the time from which a poll sees it)
        self.done: dict[str, tuple[int, float]] = {}
        self.sd_kind = k.SD_NONE
        self.lrm: LRM | None = None

    def nodename(self) -> str:
        return self.node

    def get_time(self) -> float:
        return self.t + self.delay

    def sleep(self, delay: float) -> None:
        self.delay += delay

    def sleep_until(self, end_time: float) -> None:
        self.delay = max(self.delay, end_time - self.t)

    def start_at(self, t: float) -> None:
        self.t, self.delay = t, 0.0

    def write_log(self, level: str, msg: str) -> None:
        self.fs.lrm_logs.append((self.node, level, msg.rstrip("\n"), self.get_time()))

    def read_manager_status(self) -> dict[str, Any]:
        return self.fs.ms

    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        return self.fs.lrm_status.get(node or self.node, {})

    def write_lrm_status(self, status: dict[str, Any]) -> None:
        self.fs.lrm_status[self.node] = copy.deepcopy(status)  # a file: a snapshot

    def read_service_config(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        return self.fs.conf, None  # read only

    def quorate(self) -> bool:
        return self.is_quorate

    def is_node_shutdown(self) -> tuple[bool, bool]:
        return self.sd_kind != k.SD_RESTART, self.sd_kind == k.SD_REBOOT

    def get_datacenter_settings(self) -> dict[str, Any]:
        dc = super().get_datacenter_settings()
        dc["ha"] = {"shutdown_policy": k.SHUTDOWN_POLICIES[self.cl.shutdown_policy]}
        return dc

    def get_ha_agent_lock(self, node: str | None = None) -> bool:
        return self.lock

    def get_max_workers(self) -> int:
        return self.cl.max_workers

    def fork_worker(self, job: Job[int]) -> Any:
        job.close()  # the job is the hardware's: its end is an input (waitpid)
        return _Handle(self.get_time())

    def waitpid(self, handle: Any) -> int | None:
        assert self.lrm is not None
        sid = next(s for s, w in self.lrm.workers.items() if w.get("pid") is handle)
        end = self.done.get(sid)
        if end is None or self.get_time() < end[1]:
            return None
        del self.done[sid]
        return end[0] << 8


def _drop_targetless_results(ss: dict[str, Any], statuses: dict[str, dict[str, Any]]) -> None:
    """The written results of a move whose target ``disarm-ha ignore`` pruned are not read (the
    upstream edge case :func:`_no_target_motion` keeps the check out of)."""
    for sd in ss.values():
        if _no_target_motion(sd.get("state"), sd.get("target") is not None):
            for st in statuses.values():
                (st.get("results") or {}).pop(sd.get("uid"), None)


class PortHA:
    """The port's Manager and LRMs."""

    def __init__(self, cl: Cluster) -> None:
        self.cl = cl
        self.crm = PortCRM(cl)
        self.fs = _HaCrmEnv(cl)
        self.crm.env = self.fs
        self.envs: list[_LrmEnv | None] = [None] * len(cl.nodes)
        self.lrms: list[LRM | None] = [None] * len(cl.nodes)
        self.exited = [False] * len(cl.nodes)

    def round(self, inp: LrmInput) -> HASnapshot:
        cl, fs = self.cl, self.fs
        ss = self.crm.manager.ss if self.crm.manager else {}
        _drop_targetless_results(ss, fs.lrm_status)
        fs.lrm_logs = []
        self.crm.step(inp.crm)
        ss = self.crm.manager.ss if self.crm.manager else {}
        for n in range(len(cl.nodes)):
            if not inp.runs[n]:
                self.envs[n] = self.lrms[n] = None
                self.exited[n] = False
                continue
            env = self.envs[n]
            if env is None or self.lrms[n] is None or self.exited[n]:
                env = self.envs[n] = _LrmEnv(fs, n)
                env.start_at(inp.crm.now + 1 + n)
                env.lrm = self.lrms[n] = LRM(env)
            lrm = self.lrms[n]
            assert lrm is not None
            env.is_quorate, env.lock = inp.quorate[n], inp.lrm_locks[n]
            env.done = {}
            for s in np.flatnonzero(inp.done[n] != k.NO_RESULT):
                sid = cl.sids[s]
                sd = ss.get(sid) or {}
                code = int(inp.done[n, s])
                at = inp.crm.now + 1 + n + (0 if inp.done_at is None else int(inp.done_at[n, s]))
                env.done[sid] = (_job_code(code, sd.get("state"), sd.get("target") is not None), at)
            env.start_at(inp.crm.now + 1 + n)
            if inp.shutdown and inp.shutdown[n]:
                env.sd_kind = inp.shutdown[n]
                lrm.request_shutdown()
            self.exited[n] = not lrm.do_one_iteration()
        return HASnapshot(self.crm.snapshot(), self._lrm_snapshot(ss), list(fs.lrm_logs))

    def _lrm_snapshot(self, ss: dict[str, Any]) -> list[tuple[Any, ...] | None]:
        def cur(sid: str, uid: Any) -> bool:
            sd = ss.get(sid)
            return sd is not None and sd.get("uid") == uid

        out: list[tuple[Any, ...] | None] = []
        for n, lrm in enumerate(self.lrms):
            if lrm is None:
                out.append(None)
                continue
            written = self.fs.lrm_status.get(self.cl.nodes[n], {})
            out.append(
                (
                    lrm.status["state"],
                    lrm.mode,
                    lrm.ha_agent_wd is not None,
                    lrm.active_idle_rounds,
                    tuple(
                        (
                            sid,
                            w["state"],
                            bool(w.get("pid")),
                            w["start_tries"],
                            cur(sid, w["uid"]),
                            w["pid"].t if w.get("pid") else None,
                        )
                        for sid, w in lrm.workers.items()
                    ),
                    tuple(
                        sorted(
                            (r["sid"], r["state"], r["exit_code"], cur(r["sid"], uid))
                            for uid, r in lrm.results.items()
                        )
                    ),
                    tuple(sorted((sid, t) for sid, t in lrm.restart_tries.items() if t)),
                    written.get("mode"),
                    tuple(
                        sorted(
                            (r["sid"], r["exit_code"], cur(r["sid"], uid))
                            for uid, r in (written.get("results") or {}).items()
                        )
                    ),
                    bool(lrm.shutdown_request),
                    lrm.shutdown_errors,
                    self.exited[n],
                )
            )
        return out


class EngineHA:
    """The engine's CRM (:class:`EngineCRM`) and LRMs (:mod:`pvegym.sim.engine.lrm`; ``lrm``: the
    module that runs, the tests pass a mutated copy)."""

    def __init__(
        self, cl: Cluster, crm: ModuleType | None = None, lrm: ModuleType | None = None
    ) -> None:
        self.cl = cl
        self.crm = EngineCRM(cl, crm)
        self.lrm = lrm or importlib.import_module("pvegym.sim.engine.lrm")
        nn, ns = len(cl.nodes), len(cl.sids)
        new_state = importlib.import_module("pvegym.sim.engine.lrm").new_state
        self.lnodes, self.lwork, self.lres, self.lcfg, self.lclu, self.levbuf = new_state(1, nn, ns)
        self.lnodes[0, :, k.L_MAX_WORKERS] = cl.max_workers
        self.lclu[0, k.LK_POLICY] = cl.shutdown_policy
        if cl.max_restart:
            self.lcfg[0, :, k.C_MAX_RESTART] = cl.max_restart
        self.ran = [True] * nn  # new_state starts every daemon
        self.lrm_events: np.ndarray = self.levbuf[0, :0]

    def round(self, inp: LrmInput) -> HASnapshot:
        e, cl = self.crm, self.cl
        svc, ln, lr = e.svc[0], self.lnodes[0], self.lres[0]
        e.load(inp.crm)
        # the groups migration reads the LRM status files: the compiled LRMs' written states
        ws = self.lnodes[0, :, k.L_W_STATE]
        e.rx["rnode"][0, :, k.RN_LRM_STATE] = np.where(
            ws < 0, k.LRM_STATE_NONE, np.array(k.LS_TO_RN_LRM_STATE)[np.maximum(ws, 0)]
        )
        tl = self._targetless()  # _drop_targetless_results
        hit = tl[None, :] & (lr[:, :, k.R_W_UID] == svc[None, :, k.F_UID])
        lr[:, :, k.R_W_CODE][hit] = k.NO_RESULT
        self.lrm.publish(e.svc, e.nodes, self.lnodes, self.lres)
        e.call()
        reset_node = importlib.import_module("pvegym.sim.engine.lrm").reset_node
        for n in range(len(cl.nodes)):
            if inp.runs[n] and (not self.ran[n] or ln[n, k.L_EXITED]):
                reset_node(self.lnodes, self.lwork, self.lres, 0, n)
            self.ran[n] = inp.runs[n]
            ln[n, k.L_RUNS] = inp.runs[n]
            ln[n, k.L_CLOCK] = int(inp.crm.now) + 1 + n
            ln[n, k.L_SHUTDOWN_REQ] = inp.shutdown[n] if inp.shutdown else k.SD_NONE
            ln[n, k.L_QUORATE] = inp.quorate[n]
            ln[n, k.L_LOCK] = inp.lrm_locks[n]
        done = inp.done.copy()  # _job_code: a move without a target fails
        done[(done == k.SUCCESS) & self._targetless()[None, :]] = k.ERROR
        self.lwork[0, :, :, k.W_DONE] = done
        at = ln[:, k.L_CLOCK][:, None] + (0 if inp.done_at is None else inp.done_at)
        self.lwork[0, :, :, k.W_DONE_AT] = at
        self.lrm.lrm_round(
            e.svc,
            e.nodes,
            e.clu,
            self.lnodes,
            self.lwork,
            self.lres,
            self.lcfg,
            self.lclu,
            self.levbuf,
        )
        if self.lclu[0, k.LK_ERROR]:
            raise RuntimeError("HA engine: LRM event buffer full")
        self.lrm_events = self.levbuf[0, : int(self.lclu[0, k.LK_N_EVENTS])].copy()
        return HASnapshot(
            e.snapshot(),
            self._lrm_snapshot(),
            [
                (*line, float(t))
                for line, t in zip(
                    format_lrm_events(self.lrm_events, cl.sids, cl.nodes),
                    self.lrm_events[:, LE_CLOCK].tolist(),
                    strict=True,
                )
            ],
        )

    def _targetless(self) -> np.ndarray:
        """Per service: a move whose target is gone (:func:`_no_target_motion`)."""
        svc = self.crm.svc[0]
        st = svc[:, k.F_STATE]
        moving = (st == k.SS_MIGRATE) | (st == k.SS_RELOCATE) | (st == k.SS_REQUEST_START_BALANCE)
        return np.asarray(moving & (svc[:, k.F_TARGET] < 0))

    def _lrm_snapshot(self) -> list[tuple[Any, ...] | None]:
        cl, svc = self.cl, self.crm.svc[0]

        def cur(s: int, uid: int) -> bool:
            return bool(svc[s, k.F_STATE] != k.SS_ABSENT and svc[s, k.F_UID] == uid)

        out: list[tuple[Any, ...] | None] = []
        for n in range(len(cl.nodes)):
            ln, lw, lr = self.lnodes[0, n], self.lwork[0, n], self.lres[0, n]
            if not ln[k.L_RUNS]:
                out.append(None)
                continue
            order = sorted(
                (int(lw[s, k.W_SEQ]), s) for s in range(len(cl.sids)) if lw[s, k.W_STATE]
            )
            wm = int(ln[k.L_W_MODE])
            out.append(
                (
                    k.LRM_STATES[ln[k.L_STATE]],
                    k.LRM_MODE_NAMES[ln[k.L_MODE]],
                    bool(ln[k.L_WD]),
                    int(ln[k.L_IDLE]),
                    tuple(
                        (
                            cl.sids[s],
                            k.SERVICE_STATES[lw[s, k.W_CMD]],
                            bool(lw[s, k.W_STATE] == k.W_FORKED),
                            int(lw[s, k.W_TRIES]),
                            cur(s, int(lw[s, k.W_UID])),
                            float(lw[s, k.W_FORKED_AT]) if lw[s, k.W_STATE] == k.W_FORKED else None,
                        )
                        for _, s in order
                    ),
                    tuple(
                        (
                            cl.sids[s],
                            k.SERVICE_STATES[lr[s, k.R_CMD]],
                            int(lr[s, k.R_CODE]),
                            cur(s, int(lr[s, k.R_UID])),
                        )
                        for s in range(len(cl.sids))
                        if lr[s, k.R_CODE] != k.NO_RESULT
                    ),
                    tuple(
                        (cl.sids[s], int(lr[s, k.R_TRIES]))
                        for s in range(len(cl.sids))
                        if lr[s, k.R_TRIES]
                    ),
                    None if wm == k.MODE_UNKNOWN else k.LRM_MODE_NAMES[wm],
                    tuple(
                        (cl.sids[s], int(lr[s, k.R_W_CODE]), cur(s, int(lr[s, k.R_W_UID])))
                        for s in range(len(cl.sids))
                        if lr[s, k.R_W_CODE] != k.NO_RESULT
                    ),
                    bool(ln[k.L_SHUTDOWN]),
                    int(ln[k.L_ERRORS]),
                    bool(ln[k.L_EXITED]),
                )
            )
        return out


def first_ha_difference(a: HASnapshot, b: HASnapshot, cl: Cluster) -> str:
    diff = _first_difference(a.crm, b.crm, cl)
    if diff:
        return diff
    for n, (x, y) in enumerate(zip(a.lrms, b.lrms, strict=True)):
        if x != y:
            return f"LRM {cl.nodes[n]}: port {x} engine {y}"
    for i, (p, q) in enumerate(zip(a.lrm_log, b.lrm_log, strict=False)):
        if p != q:
            return f"LRM log line {i}: port {p} engine {q}"
    if len(a.lrm_log) != len(b.lrm_log):
        return f"LRM log: port {len(a.lrm_log)} lines, engine {len(b.lrm_log)}"
    return ""


def run_lrm_example(
    seed: int,
    rounds: int = 60,
    crm: ModuleType | None = None,
    lrm: ModuleType | None = None,
    p_shutdown: float = 0.008,
    shutdown_policy: int | None = None,
) -> Outcome:
    """One random example of the CRM with the LRMs: both sides for ``rounds`` rounds; stops at
    the first difference. ``p_shutdown``: :class:`LrmHistory`'s; ``shutdown_policy``: instead of
    the drawn one."""
    rng = np.random.default_rng(seed)
    cl = random_lrm_cluster(rng)
    if shutdown_policy is not None:
        cl.shutdown_policy = shutdown_policy
    hist = LrmHistory(cl, rng, p_shutdown)
    port, engine = PortHA(cl), EngineHA(cl, crm, lrm)
    out = Outcome(identical=True)
    exited: list[bool] | None = None
    for r in range(rounds):
        inp = hist.next_lrm(exited)
        b = _both(
            out,
            seed,
            r,
            functools.partial(port.round, inp),
            functools.partial(engine.round, inp),
            functools.partial(first_ha_difference, cl=cl),
        )
        if b is None:
            return out
        _count(out.features, engine.crm.events, b.crm)
        _count_lrm(out.features, engine.lrm_events, b, cl)
        exited = [x is not None and x[11] for x in b.lrms]
    return out


def _count_lrm(features: Counter[str], events: np.ndarray, snap: HASnapshot, cl: Cluster) -> None:
    from pvegym.sim.engine import lrm_events as lev

    for row in events:
        kind = int(row[0])
        features[LRM_EVENT_NAMES[kind]] += 1
        if kind == lev.LE_STATUS_CHANGE:
            features[f"lrm -> {k.LRM_STATES[int(row[4])]}"] += 1
        elif kind == lev.LE_SHUTDOWN_REQUEST:
            features[f"lrm shutdown policy {k.SHUTDOWN_POLICIES[int(row[3])]}"] += 1
    for lrm in snap.lrms:
        if lrm is None:
            continue
        workers = lrm[4]
        forked = sum(1 for w in workers if w[2])
        if forked >= cl.max_workers and len(workers) > forked:
            features["lrm worker slots full"] += 1
        if lrm[1] == "maintenance":
            features["lrm mode maintenance"] += 1
        if lrm[11]:
            features["lrm exited"] += 1
