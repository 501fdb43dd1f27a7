"""The simulation with the compiled HA engine's CRM round: scenario key ``ha_stack = "engine"``.

:class:`EngineStack` is :class:`~pvegym.sim.ha_stack.HAStack` — the same hardware
(:mod:`pvegym.sim.ha_model_env`: the cluster file system, membership, the one lock table, the
watchdogs, the guests), the same scenario events, metrics and service-table sync — with one part
swapped: the CRM master's round (``Manager::manage``) is the compiled engine's
(:func:`pvegym.sim.engine.crm.manage`), never the port's :class:`~pvegym.sim.ha.manager.Manager`.
The rest of each node's CRM daemon (``CRM.pm``: quorum, the manager lock and its watchdog, the
master's state changes) is still the port's :class:`~pvegym.sim.ha.crm.CRM`, which calls
:class:`EngineMaster` where it would call a ``Manager``. The LRMs are the stack's replaceable LRM
part (:class:`~pvegym.sim.ha_stack.LRMSide`): for now the port's (:class:`PortLRMs`), which read
the manager status this module writes and write the LRM status it reads, as upstream's daemons
share them through pmxcfs.

One engine state per episode (:class:`EngineState`, the arrays of :mod:`pvegym.sim.engine`,
services and nodes in upstream's sorted order), shared by every master the episode elects: the
arrays *are* the manager status; a new master starts what upstream's ``Manager->new`` starts
afresh (the nodes' last-online times, the balancer, the disarm flag) and keeps the rest.

A round of :meth:`EngineMaster.manage` at the master's time:

1. inputs from the hardware, as the port's Manager reads them through its ``HAEnv``: each node's
   membership, the LRM modes and results of the nodes in the node status (``read_lrm_status``:
   the first node in name order reporting a uid wins), whether the master can take each node's
   agent lock (:func:`~pvegym.sim.cluster_locks.lock_available` on the one lock table), the CRM
   command queue (read, and consumed only if the master was operational), the service config
   (reloaded when its version changed), the balancer's committed motion;
2. the kernel call;
3. the events as log lines in their order (a fence acknowledged takes the agent lock there, so
   that its ``got lock`` line comes where the port's does), the config changes the master made
   (a stop command's requested state, recovery's ``steal_service``), the committed motion marked
   taken when ``load_balance`` queued it, and the manager status written (a new serial whenever
   its content changed, which the LRMs' and the sync's memos key on).

What the engine does not have yet (:mod:`pvegym.sim.engine`, *Not yet*) behaves as the engine:
its placement scores are the ``basic`` scheduler's (a service count per node) whatever the
scenario's ``crs_mode``, and HA rules are not applied. Where a scenario needs either the engine
stack differs from the full stack (``scripts/engine_diff.py --scenarios``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pvegym.sim.cluster_locks import lock_available
from pvegym.sim.engine import codes as k
from pvegym.sim.engine.differential import Cluster, EngineCRM
from pvegym.sim.engine.events import E_AUTO_REBALANCE, E_FENCE_ACK, E_MASTER_OFFLINE, format_events
from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.tools import QUIET_SERIAL_KEY
from pvegym.sim.ha_control import SimulationPort
from pvegym.sim.ha_model_env import ModelCFS, ModelHAEnv
from pvegym.sim.ha_stack import HAStack

_MODES = {name: code for code, name in enumerate(k.LRM_MODES)}
_CONFIG = {name: code for code, name in enumerate(k.CONFIG_STATES)}
_DISARM = {name: code for code, name in enumerate(k.DISARM_MODES)}
#: the service-status columns (state … failed_nodes): what the manager status shows of a service
_SS_COLS = k.F_FAILED + 1


def _hundredths(x: float | None) -> int:
    """An imbalance as the engine logs it: the hundredths ``f"{x:.2f}"`` shows (the port's
    format), so the engine's line is the port's digit for digit."""
    return int(f"{float(x or 0.0):.2f}".replace(".", ""))


class EngineState:
    """The compiled engine's arrays for one episode's cluster (one cluster: the leading axis
    has length 1), the names in upstream's order, and what the last manager status showed."""

    def __init__(self, sim: SimulationPort, cfs: ModelCFS) -> None:
        conf = cfs.service_config
        self.sids = sorted(conf)
        self.nodes = sorted(sim.cluster.node_names)
        self.sid_index = {s: i for i, s in enumerate(self.sids)}
        self.node_index = {n: i for i, n in enumerate(self.nodes)}
        crs = cfs.datacenter.get("crs") or {}
        cl = Cluster(
            nodes=self.nodes,
            sids=self.sids,
            cfg_node=[self.node_index[conf[s]["node"]] for s in self.sids],
            cfg_state=[_CONFIG[conf[s]["state"]] for s in self.sids],
            max_relocate=[int(conf[s]["max_relocate"]) for s in self.sids],
            failback=[int(conf[s]["failback"]) for s in self.sids],
            rebalance_on_start=bool(crs.get("ha-rebalance-on-start")),
        )
        self.engine = EngineCRM(cl)
        #: the service-config version the arrays hold (``ModelCFS.config_version``)
        self.config_version = cfs.config_version
        #: the manager status last written, its content key and serial
        self.status: dict[str, Any] = {}
        self.status_key: bytes | None = None
        self.serial = 0

    def new_master(self, node: str) -> None:
        """A daemon on ``node`` became master: what upstream's ``Manager->new`` starts afresh
        (``NodeStatus->new``'s last-online times, ``all_lrms_disarmed``); the manager status
        (node and service status, node requests, disarm) carries over."""
        eng = self.engine
        eng.last_online[:] = math.nan
        eng.clu[0, k.K_ALL_DISARMED] = 0
        eng.clu[0, k.K_MASTER] = self.node_index[node]

    def command_row(self, cmd: str) -> tuple[int, int, int]:
        """A CRM command as the engine's row ``(kind, a, b)`` (:data:`codes.Q_MIGRATE` …); the
        commands the model queues (``HAStack``'s events and ``queue_command``) only."""
        words = cmd.split()
        try:
            verb = words[0]
            if verb in ("migrate", "relocate"):
                kind = k.Q_MIGRATE if verb == "migrate" else k.Q_RELOCATE
                return kind, self.sid_index[words[1]], self.node_index[words[2]]
            if verb == "stop":
                return k.Q_STOP, self.sid_index[words[1]], int(words[2])
            if verb in ("enable-node-maintenance", "disable-node-maintenance"):
                kind = k.Q_ENABLE_MAINTENANCE if verb[0] == "e" else k.Q_DISABLE_MAINTENANCE
                return kind, self.node_index[words[1]], k.NONE
            if verb == "disarm-ha":
                return k.Q_DISARM, _DISARM[words[1]], k.NONE
            if verb == "arm-ha" and len(words) == 1:
                return k.Q_ARM, k.NONE, k.NONE
        except (IndexError, KeyError, ValueError):
            pass
        raise ValueError(f"HA engine: CRM command {cmd!r} is not one the engine reads")


class EngineMaster:
    """The master's round (:class:`~pvegym.sim.ha.crm.MasterRound`) over the shared
    :class:`EngineState`: what the port's CRM daemon calls instead of a ``Manager``."""

    def __init__(self, haenv: HAEnv, state: EngineState) -> None:
        if not isinstance(haenv, ModelHAEnv):
            raise TypeError("the engine stack runs on the model's hardware (ModelHAEnv)")
        self.env = haenv
        self.state = state
        state.new_master(haenv.nodename())
        balancer = haenv.new_balancer()  # Manager->new resets its balancer
        if balancer is not None:
            balancer.reset()

    def cleanup(self) -> None:
        pass

    def is_fully_disarmed(self) -> bool:
        return bool(self.state.engine.clu[0, k.K_ALL_DISARMED])

    def manage(self) -> None:
        """One CRM round (``Manager::manage``) by the compiled engine (see the module doc)."""
        env, st = self.env, self.state
        cfs, eng = env.cfs, st.engine
        svc, clu = eng.svc[0], eng.clu[0]
        names = st.nodes
        now = env.get_time()
        master = env.nodename()
        eng.now[0] = now
        # --- the hardware's inputs
        self._read_lrms(now, master)
        conf = cfs.service_config
        if cfs.config_version != st.config_version:
            for s, sid in enumerate(st.sids):
                cd = conf[sid]
                svc[s, k.F_CFG_STATE] = _CONFIG[cd["state"]]
                svc[s, k.F_CFG_NODE] = st.node_index[cd["node"]]
        cfg_before = svc[:, k.F_CFG_STATE : k.F_CFG_NODE + 1].copy()
        commands = list(cfs.crm_commands)
        if len(commands) > eng.cmds.shape[1]:
            eng.cmds = np.zeros((1, 2 * len(commands), 3), dtype=np.int64)
        for q, cmd in enumerate(commands):
            eng.cmds[0, q] = st.command_row(cmd)
        eng.ncmd[0] = len(commands)
        committed = env.balancer
        motion = committed.pending if committed is not None else None
        if motion is not None and motion.sid in st.sid_index and motion.target in st.node_index:
            clu[k.K_MOTION_SID] = st.sid_index[motion.sid]
            clu[k.K_MOTION_TARGET] = st.node_index[motion.target]
            clu[k.K_MOTION_BEFORE] = _hundredths(motion.imbalance_before)
            clu[k.K_MOTION_AFTER] = _hundredths(motion.imbalance_after)
        else:
            clu[k.K_MOTION_SID] = k.NONE
        # --- the round
        eng.call()
        # --- its outputs
        rows = eng.events
        offline = False
        for row, (level, msg) in zip(rows, format_events(rows, st.sids, names), strict=True):
            kind = int(row[0])
            if kind == E_FENCE_ACK:  # NodeStatus::fence_node took the node's agent lock
                env.get_ha_agent_lock(names[int(row[2])])
            elif kind == E_AUTO_REBALANCE and committed is not None:
                committed.take()
            elif kind == E_MASTER_OFFLINE:
                offline = True
            env.log(level, msg)
        if commands and not offline:  # the master read (and so removed) the queue
            env.read_crm_commands()
        changed = np.flatnonzero((svc[:, k.F_CFG_STATE : k.F_CFG_NODE + 1] != cfg_before).any(1))
        for s in changed.tolist():
            sid = st.sids[s]
            state = k.CONFIG_STATES[int(svc[s, k.F_CFG_STATE])]
            if state != conf[sid]["state"]:  # a stop command: update_service_config
                env.update_service_config({sid: {"param": {"state": state}}})
            node = names[int(svc[s, k.F_CFG_NODE])]
            if node != conf[sid]["node"]:  # recovery: steal_service
                env.steal_service(sid, conf[sid]["node"], node)
        st.config_version = cfs.config_version
        self._write_status(now, master, offline)

    def _read_lrms(self, now: float, master: str) -> None:
        """The round's inputs from the nodes: membership, each LRM's mode and whether its agent
        lock can be taken, and the results the LRMs wrote (the first of a uid, in node order)."""
        env, st = self.env, self.state
        cfs, eng = env.cfs, st.engine
        svc, nodes = eng.svc[0], eng.nodes[0]
        names = st.nodes
        node_info, _ = env.get_node_info()
        quorate = env.quorate()
        merged: dict[Any, tuple[int, Any]] = {}
        for i, n in enumerate(names):
            lrm = env.read_lrm_status(n)
            mode = lrm.get("mode") or "active"
            if mode not in _MODES:
                raise ValueError(f"HA engine: LRM mode {mode!r} of {n} is not one it reads")
            nodes[i, k.N_ONLINE] = 1 if node_info[n]["online"] else 0
            nodes[i, k.N_MODE] = _MODES[mode]
            nodes[i, k.N_LOCK] = quorate and lock_available(
                cfs.locks, f"ha_agent_{n}_lock", master, now
            )
            if nodes[i, k.N_STATE] != k.NS_ABSENT:  # read_lrm_status: the node status's nodes
                for uid, res in (lrm.get("results") or {}).items():
                    if uid not in merged:
                        merged[uid] = (i, res)
        if merged:
            for s in range(len(st.sids)):
                hit = merged.get(str(int(svc[s, k.F_UID])))
                if hit is None:
                    svc[s, k.F_RES_CODE] = k.NO_RESULT
                    continue
                svc[s, k.F_RES_UID] = svc[s, k.F_UID]
                svc[s, k.F_RES_CODE] = int(hit[1]["exit_code"])
                svc[s, k.F_RES_NODE] = hit[0]
        else:
            svc[:, k.F_RES_CODE] = k.NO_RESULT

    def _write_status(self, now: float, master: str, offline: bool) -> None:
        """The manager status as the port's Manager writes it (``flush_master_status``); a
        master that found itself offline writes none, but its node status is the one object
        the last status holds (upstream's ``$ns`` is shared), so readers see its update."""
        env, st = self.env, self.state
        eng = st.engine
        svc, nodes, clu = eng.svc[0], eng.nodes[0], eng.clu[0]
        names = st.nodes
        node_status = {
            names[i]: k.NODE_STATES[s]
            for i, s in enumerate(nodes[:, k.N_STATE].tolist())
            if s != k.NS_ABSENT
        }
        if offline:
            last = env.cfs.manager_status.get("node_status")
            if last is not None and last != node_status:
                last.clear()
                last.update(node_status)
                st.status_key = None
                st.serial += 1  # the port's new serial lands in the shared status as well
                st.status[QUIET_SERIAL_KEY] = ("engine", st.serial)
            return
        key = b"".join(
            (
                svc[:, :_SS_COLS].tobytes(),
                nodes[:, [k.N_STATE, k.N_MAINT_REQ]].tobytes(),
                clu[[k.K_DISARM_MODE, k.K_DISARM_STATE, k.K_MASTER]].tobytes(),
            )
        )
        if key != st.status_key:
            st.status_key = key
            st.serial += 1
            ms: dict[str, Any] = {
                "master_node": master,
                "node_status": node_status,
                "service_status": self._service_status(),
            }
            requests = {
                names[i]: {"maintenance": 1}
                for i, r in enumerate(nodes[:, k.N_MAINT_REQ].tolist())
                if r
            }
            if requests:
                ms["node_request"] = requests
            mode = int(clu[k.K_DISARM_MODE])
            if mode:
                ms["disarm"] = {
                    "mode": k.DISARM_MODES[mode],
                    "state": k.DISARM_STATES[int(clu[k.K_DISARM_STATE])],
                }
            ms[QUIET_SERIAL_KEY] = ("engine", st.serial)
            st.status = ms
        st.status["timestamp"] = now
        env.write_manager_status(st.status)

    def _service_status(self) -> dict[str, dict[str, Any]]:
        """Each service's ``$ss->{sid}`` from its row (the keys upstream sets, only when set)."""
        st = self.state
        names = st.nodes

        def nd(i: int) -> str | None:
            return None if i < 0 else names[i]

        out: dict[str, dict[str, Any]] = {}
        for s, row in enumerate(st.engine.svc[0, :, :_SS_COLS].tolist()):
            state = row[k.F_STATE]
            if state == k.SS_ABSENT:
                continue
            sd: dict[str, Any] = {
                "state": k.SERVICE_STATES[state],
                "node": nd(row[k.F_NODE]),
                "uid": str(row[k.F_UID]),
            }
            target = row[k.F_TARGET]
            if target >= 0 or target == k.NONE_SET:
                sd["target"] = nd(target)
            cmd = row[k.F_CMD]
            if cmd != k.CMD_NONE:
                arg = row[k.F_CMD_ARG]
                sd["cmd"] = [k.SERVICE_COMMANDS[cmd], arg if cmd == k.CMD_STOP else names[arg]]
            if row[k.F_RUNNING]:
                sd["running"] = 1
            if row[k.F_MAINT_NODE] >= 0:
                sd["maintenance_node"] = names[row[k.F_MAINT_NODE]]
            if row[k.F_TIMEOUT] >= 0:
                sd["timeout"] = row[k.F_TIMEOUT]
            if row[k.F_N_FAILED]:
                packed = row[k.F_FAILED]
                sd["failed_nodes"] = [
                    names[((packed >> (4 * j)) & 15) - 1] for j in range(row[k.F_N_FAILED])
                ]
            out[st.sids[s]] = sd
        return out


class EngineStack(HAStack):
    """:class:`~pvegym.sim.ha_stack.HAStack` whose masters run the compiled engine's round
    (:class:`EngineMaster`) over one :class:`EngineState`."""

    def __init__(self, sim: SimulationPort) -> None:
        super().__init__(sim, new_manager=self._new_master)
        #: the engine's arrays (made once the stack's file system holds the service config; no
        #: daemon is master before the first round)
        self.engine = EngineState(sim, self.cfs)

    def _new_master(self, haenv: HAEnv) -> EngineMaster:
        return EngineMaster(haenv, self.engine)
