"""The simulation with the whole HA stack: ``Simulation`` running the port of pve-ha-manager
(:mod:`pvegym.sim.ha`) — one CRM and one LRM per online node — on the cluster model's hardware
(:mod:`pvegym.sim.ha_model_env`). Selected by the scenario key ``ha_stack = "full"``: the
simulation then hands its round to an :class:`HAStack` (``commit``, the balancer's checks, the
scenario's manual commands) and keeps its physics.

A round at time ``t``: ``commit`` runs every CRM at ``t`` (the master's
:meth:`~pvegym.sim.ha.manager.Manager.manage`: LRM results, CRM commands, ``load_balance`` — which
the committed motion answers —, the service state machine, the manager status) and reads the
simulation's service table back from the manager status. ``advance`` runs the round's physics
``(t, t + 10]``: first the motions' part (the jobs queued earlier run on, and those that end in
the round end), then every node's LRM at ``t + phase[n]`` (:meth:`HAStack.lrm_ticks`: it collects
the workers whose motion ended by its poll and forks those of new commands — up to
``max_workers``, which run at once, sharing the migration links; a motion a worker queues runs
over the rest of the round at once, so the same tick's polls see it end),
then the cluster's part. ``receive`` applies the scenario's events due (:meth:`HAStack.event`):
the hardware's (power, network) at once, an operator's as CRM commands or service-config changes
the master reads in its next round. A watchdog that expired resets its node at the start of the
next round (:meth:`HAStack.round`).

Against the model stack (``ha_stack = "model"``, :mod:`pvegym.sim.motions`): a job starts at its
node's LRM tick after the CRM round that requested it (the model: a seeded offset after the round,
drawn per source and round); the CRM sees its end at the first round after the tick that
collected it — the tick in the round of the end if the end falls within that tick's 8 s of polls
(and the round), else the next tick — where the model's CRM sees it at the first round after the
end. A motion therefore holds the balancer up to one round longer, and the HA stack starts its
services in the episode's first round (the CRM takes the manager lock and adds them, the LRMs
take their agent locks): until a manager status shows the services, no motion is possible
(:meth:`HAStack.sync`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from pvegym.sim.ha.crm import CRM, MasterRound
from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.lrm import LRM
from pvegym.sim.ha.manager import Manager
from pvegym.sim.ha.tools import QUIET_SERIAL_KEY
from pvegym.sim.ha_control import HAControl, SimulationPort
from pvegym.sim.ha_model_env import CommittedMotion, ModelCFS, ModelHAEnv, Stack
from pvegym.sim.move_ledger import MoveRecordArgs
from pvegym.sim.scenario import EventSpec
from pvegym.sim.view import STARTED, ClusterView, Motion

_MOVING = ("migrate", "relocate")
#: service states with nothing to move off a node in maintenance
_AT_REST = ("stopped", "disabled", "ignored", "error")


class LRMSide(Protocol):
    """The LRMs of the powered nodes: the replaceable LRM part of an HA stack (the port's,
    :class:`PortLRMs`; the compiled engine's to come). They read the manager status and write
    their LRM status (mode, results) through the cluster file system (:class:`ModelCFS`), as
    upstream's daemons do, and act on the model's hardware (:class:`ModelHAEnv`)."""

    def boot(self, node: str) -> None:
        """``node`` powered on: a fresh LRM."""

    def power_off(self, node: str) -> None:
        """``node`` lost its power: its LRM is gone."""

    def ticks(self, t0: float, after: Callable[[float], None]) -> None:
        """Every LRM's tick at ``t0 + phase`` (s) in tick order (phase, then name); ``after(t)``
        after each."""


class PortLRMs(LRMSide):
    """The port's LRMs (:class:`~pvegym.sim.ha.lrm.LRM`), one per powered node, on the model's
    hardware; ``phase``: node → its LRM's phase in the round (s)."""

    def __init__(self, sim: SimulationPort, stack: Stack, phase: dict[str, float]) -> None:
        self.sim, self.stack, self.phase = sim, stack, phase
        self.daemons: dict[str, tuple[ModelHAEnv, LRM]] = {}
        #: ``(phase s, env, LRM)`` in tick order
        self.order: list[tuple[float, ModelHAEnv, LRM]] = []

    def boot(self, node: str) -> None:
        env = ModelHAEnv(self.sim, self.stack, node, "lrm")
        self.daemons[node] = (env, LRM(env))
        self._order()

    def power_off(self, node: str) -> None:
        self.daemons.pop(node, None)
        self._order()

    def _order(self) -> None:
        ticks = sorted((self.phase[n], n) for n in self.daemons)
        self.order = [(p, *self.daemons[n]) for p, n in ticks]

    def ticks(self, t0: float, after: Callable[[float], None]) -> None:
        for phase, env, lrm in self.order:
            env.start_at(t0 + phase)
            lrm.do_one_iteration()
            after(t0 + phase)


class HAStack(HAControl):
    """The daemons of one episode: a CRM and an LRM per online node, their shared file system,
    and the balancer that answers with the committed motion.

    ``sim`` is the simulation (its :class:`~pvegym.sim.ha_control.SimulationPort`); the stack
    reads its cluster and service table and writes the table back (``svc_state``,
    ``svc_place``, ``svc_started``, ``ha_busy``) after every CRM round. ``new_manager`` makes a
    new master's round (the port's :class:`~pvegym.sim.ha.manager.Manager`; the engine stack's,
    :mod:`pvegym.sim.engine_stack`, the compiled engine's); the LRMs are :class:`PortLRMs`.
    """

    def __init__(
        self, sim: SimulationPort, new_manager: Callable[[HAEnv], MasterRound] = Manager
    ) -> None:
        self.sim = sim
        self.new_manager = new_manager
        cl = sim.cluster
        self.committed = CommittedMotion()
        #: the view ``load_balance`` passes when none was built this round (see
        #: :meth:`ModelHAEnv.balancer_view`)
        self.stub_view: ClusterView | None = None
        #: the manager status's serial last synced (``None``: none yet, or it had no serial)
        self._synced_serial: object = None
        #: this round's answer until a master takes it: guest, then the move the simulation
        #: records when it is taken (:meth:`MoveLedger.record`)
        self._offered: tuple[int, MoveRecordArgs] | None = None
        #: the round whose LRM ticks run now, ``(t0, t1)`` s
        self.ticking: tuple[float, float] | None = None
        self.cfs = ModelCFS(sim)
        rng = np.random.default_rng(np.random.SeedSequence(sim.seed).spawn(4)[3])
        phases = rng.uniform(0.0, sim.scenario.migration.lrm_delay_max_s, cl.n_nodes).tolist()
        #: node → its LRM's phase in the round (s), fixed per episode
        self.phase: dict[str, float] = dict(zip(cl.node_names, phases, strict=True))
        #: node → (CRM env, CRM) of a powered node
        self.daemons: dict[str, tuple[ModelHAEnv, CRM]] = {}
        self.crms: list[tuple[ModelHAEnv, CRM]] = []
        #: the LRMs (the stack's replaceable LRM part)
        self.lrm_side: LRMSide = PortLRMs(sim, self, self.phase)
        for i, node in enumerate(cl.node_names):
            if cl.node_online[i]:
                self._start_daemons(node)
            else:  # a node that is off runs no daemon and no guest: the HA manager fences it
                sim.power_off_node(i, 0.0)
        self._order_daemons()
        #: the node states of the manager status last synced (:meth:`_sync_nodes`)
        self._node_states: tuple[str, ...] = ()
        #: failures being recovered: (index into ``metrics.failures``, guests of the node)
        self._open_failures: list[tuple[int, list[int]]] = []

    # ------------------------------------------------------------------ daemons
    def _start_daemons(self, node: str) -> None:
        """A powered node's CRM and LRM (fresh daemons: what a boot starts)."""
        crm_env = ModelHAEnv(self.sim, self, node, "crm")
        crm_env.balancer = self.committed
        self.daemons[node] = (crm_env, CRM(crm_env, self.new_manager))
        self.lrm_side.boot(node)

    def _order_daemons(self) -> None:
        """The CRMs in node order."""
        names = self.sim.cluster.node_names
        self.crms = [d for n in names if (d := self.daemons.get(n)) is not None]

    def power(self, node: str, on: bool, why: str = "") -> None:
        """``power NODE on|off`` (``Sim/Hardware.pm``): off kills the node's daemons (its
        watchdogs with them) and every guest on it; its network goes with the power; motions
        from it end, a live migration to it stalls until TCP gives up
        (:meth:`Simulation.power_off_node`). On starts fresh daemons; the node's guests stay
        stopped until the HA manager starts them."""
        cfs, sim = self.cfs, self.sim
        if cfs.power[node] == on:
            return
        t = sim.t
        sim.log_line(t, f"hardware: power {node} {'on' if on else 'off'}{why}")
        cfs.power[node] = cfs.network[node] = on
        cfs.membership()
        n = sim.cluster.node_index[node]
        sim.cluster.node_online[n] = on
        if on:
            self._start_daemons(node)
        else:
            self.daemons.pop(node, None)
            self.lrm_side.power_off(node)
            cfs.drop_watchdogs(node)
            sim.power_off_node(n, t)
        self._order_daemons()

    def network(self, node: str, on: bool) -> None:
        """``network NODE on|off``: the node leaves or rejoins the membership (its daemons keep
        running, without quorum while it is cut off); a live migration from or to it stalls
        while it is cut off (:meth:`link_up`, :mod:`pvegym.sim.link`)."""
        cfs = self.cfs
        self.sim.log_line(self.sim.t, f"hardware: network {node} {'on' if on else 'off'}")
        cfs.network[node] = on
        cfs.membership()

    def link_up(self, a: int, b: int) -> bool:
        """Whether nodes ``a`` and ``b`` (indices) reach each other: both powered with their
        network on (the migration network is the cluster's, ``PVE/SSHInfo.pm``
        ``get_ssh_info`` without a ``migration_network``); a migration's stream between them
        flows only then (:mod:`pvegym.sim.link`)."""
        names = self.sim.cluster.node_names
        return self.cfs.is_member(names[a]) and self.cfs.is_member(names[b])

    def event(self, ev: EventSpec) -> None:
        """A scenario event (:class:`~pvegym.sim.scenario.EventSpec`) at the round time: the
        hardware's (power, network) now; an operator's command (``ha-manager``) through the CRM
        command queue or the service config, which the master reads in its next round."""
        typ, sim = ev.type, self.sim
        if typ in ("power-off", "network-off"):
            self.failure_starts(ev.node)
        if typ in ("power-off", "power-on"):
            self.power(ev.node, typ == "power-on")
        elif typ in ("network-off", "network-on"):
            self.network(ev.node, typ == "network-on")
        elif typ == "set-state":  # ha-manager set SID --state STATE: the config, directly
            self.cfs.service_config[ev.sid]["state"] = ev.state
            self.cfs.bump()
        else:
            self._queue(_crm_command(ev))
        sim.ha_busy = sim.ha_busy or typ in ("migrate", "relocate")

    def _queue(self, cmd: str) -> None:
        self.cfs.crm_commands.append(cmd)
        self.cfs.bump()

    def answer(self, g: int, target: int, move: MoveRecordArgs) -> None:
        """The answer of this round's ``load_balance``: guest ``g`` to node ``target``; ``move``
        (:meth:`MoveLedger.record`) counts in the metrics once a master took it
        (:meth:`round`)."""
        cl = self.sim.cluster
        self.committed.pending = Motion(cl.sids[g], cl.node_names[target])
        self._offered = (g, move)

    def describe(self, motion: Motion) -> None:
        """The answer is the policy's ``motion`` itself (it carries the imbalances for the
        log)."""
        self.committed.pending = motion

    def queue_command(self, g: int, target: int) -> None:
        """A scenario's ``migrate`` event: the CRM command ``qm migrate``/``pct migrate`` of an
        HA guest queues (``ha-manager crm-command``), read by the master's next round; the
        balancer waits."""
        cl = self.sim.cluster
        sid = cl.sids[g]
        task = "migrate" if sid.startswith("vm:") else "relocate"
        self._queue(f"{task} {sid} {cl.node_names[target]}")
        self.sim.ha_busy = True

    def round(self) -> None:
        """Every CRM at the simulation's time, the answer settled (:meth:`_settle`: counted if
        the master took it, else retracted), then the service table read back."""
        sim = self.sim
        t = sim.t
        for node in self.cfs.expired_nodes(t):  # the hardware watchdog reset the node
            self.power(node, False, " (watchdog expired)")
        for env, crm in self.crms:
            env.start_at(t)
            crm.do_one_iteration()
        committed = self.committed
        if self._offered is not None:
            self._settle(*self._offered, taken=committed.taken is not None)
        self._offered = committed.pending = committed.taken = None
        self.sync()
        sim.clear_results()

    def _settle(self, g: int, move: MoveRecordArgs, taken: bool) -> None:
        """The answer for guest ``g`` after every CRM ran: taken by the master's
        ``load_balance``, its move counts (the LRM's worker takes its index); else it is
        retracted — no master asked (a Manager created this round resets its balancer), so the
        HA manager never queues it — and only logged."""
        sim = self.sim
        if taken:
            sim.move_taken(g, move)
            return
        rec = move[0]
        sim.log_line(sim.t, f"retracted motion {rec.guest} -> {rec.target}: no master took it")

    def lrm_ticks(self, t0: float, t1: float) -> None:
        """Every LRM at its tick ``t0 + phase`` of the round ``(t0, t1]`` (s), in tick order
        (``Simulation.advance`` calls it once the round's motions have run)."""
        self.ticking = (t0, t1)
        self.lrm_side.ticks(t0, self._after_tick)
        self.ticking = None

    def _after_tick(self, t: float) -> None:
        if self._open_failures:  # a failed node's services start at their new node's tick
            self.failure_check(t)

    def motion_queued(self) -> None:
        """A worker queued a motion (:class:`~pvegym.sim.motions.Job`): it runs over the rest of
        the round now, so that the worker's polls see when it ends — alone in the pipeline, or
        beside the motions already running, on the link capacity they leave
        (``Simulation.run_new_motion``)."""
        if self.ticking is not None:
            self.sim.run_new_motion(*self.ticking)

    # ------------------------------------------------------------------ what the metrics read
    def guest_up(self, g: int) -> bool:
        """HA guest ``g`` runs on a member of the quorate partition (a guest on a node cut off
        from it may run, but serves no one and is about to be reset)."""
        cl = self.sim.cluster
        if not cl.running[g] or g in self.sim.killed:
            return False
        return bool(self.cfs.node_info[cl.node_names[int(cl.node[g])]]["online"])

    def down_count(self) -> int:
        """HA services the config requests ``started`` that are not up (:meth:`guest_up`)."""
        conf, sids = self.cfs.service_config, self.sim.cluster.sids
        return sum(
            conf[sids[g]]["state"] == "started" and not self.guest_up(g) for g in self.sim.ha_guests
        )

    def failure_starts(self, node: str) -> None:
        """A node fails (power or network off): its HA services that are requested started and
        up now are what must run again (``Metrics.failures``)."""
        sim = self.sim
        cl, conf = sim.cluster, self.cfs.service_config
        n = cl.node_index[node]
        guests = [
            g
            for g in sim.ha_guests
            if int(cl.node[g]) == n and conf[cl.sids[g]]["state"] == "started" and self.guest_up(g)
        ]
        sim.metrics.failures.append([sim.t, None])
        self._open_failures.append((len(sim.metrics.failures) - 1, guests))

    def failure_check(self, t: float) -> None:
        """Close every failure whose services are all up again at ``t`` (s)."""
        still: list[tuple[int, list[int]]] = []
        for i, guests in self._open_failures:
            if all(self.guest_up(g) for g in guests):
                self.sim.metrics.failures[i][1] = t
            else:
                still.append((i, guests))
        self._open_failures = still

    def maintenance_pending(self) -> bool:
        """A node is asked into maintenance (the manager status's ``node_request``) or is in it,
        and an HA service that is not stopped is still on it: the HA manager's maintenance moves
        are pending."""
        ms = self.cfs.manager_status
        requests = ms.get("node_request") or {}
        states = ms.get("node_status") or {}
        nodes = {n for n, r in requests.items() if (r or {}).get("maintenance")}
        nodes |= {n for n, st in states.items() if st == "maintenance"}
        if not nodes:
            return False
        return any(
            sd.get("node") in nodes and sd.get("state") not in _AT_REST
            for sd in (ms.get("service_status") or {}).values()
        )

    def sync(self) -> None:
        """The simulation's service table (states, nodes, targets) from the manager status,
        when the Manager wrote a new serial (a round that may have changed a state) or the status
        has none. Until a status shows the services (``service_status``: the first master wrote
        it), the pipeline counts as busy: no motion is possible."""
        ms = self.cfs.manager_status
        self._sync_nodes(ms)
        serial = ms.get(QUIET_SERIAL_KEY)
        if serial is not None and serial == self._synced_serial:
            return
        self._synced_serial = serial
        sim = self.sim
        ss = ms.get("service_status") or {}
        sids, node_index = sim.cluster.sids, sim.cluster.node_index
        svc_state, started = sim.svc_state, sim.svc_started
        svc_node, svc_target = sim.svc_node, sim.svc_target
        active = False
        for g in sim.ha_guests:
            sd = ss.get(sids[g])
            if sd is None:  # not (yet) managed; an ignored one is dropped from the status
                if self.cfs.service_config[sids[g]]["state"] == "ignored":
                    svc_state[g], started[g], svc_target[g] = "ignored", False, -1
                continue
            state = sd.get("state") or ""
            svc_state[g] = state
            started[g] = state == STARTED
            node = sd.get("node")
            if node in node_index:
                svc_node[g] = node_index[node]
            target = sd.get("target")
            moving = state in _MOVING
            svc_target[g] = node_index[target] if moving and target in node_index else -1
            cmd = sd.get("cmd")
            if moving or (cmd and cmd[0] in _MOVING):
                active = True
        sim.states_changed()
        # while HA is disarmed the Manager runs no load_balance: no motion is possible
        sim.ha_busy = (
            active
            or bool(self.cfs.crm_commands)
            or bool(ms.get("disarm"))
            or "service_status" not in ms
        )

    def _sync_nodes(self, ms: dict[str, Any]) -> None:
        """The simulation's node states (:meth:`Simulation.set_node_states`) from the manager
        status's ``node_status``, when it changed."""
        ns = ms.get("node_status")
        if not ns:
            return
        states = tuple(str(ns.get(n, "unknown")) for n in self.sim.cluster.node_names)
        if states != self._node_states:
            self._node_states = states
            self.sim.set_node_states(states)


def _crm_command(ev: EventSpec) -> str:
    """An operator's event as the CRM command ``ha-manager`` queues (``PVE/CLI/ha_manager.pm``,
    ``crm-command``): ``migrate``/``relocate SID NODE``, ``stop SID TIMEOUT``,
    ``enable-node-maintenance``/``disable-node-maintenance NODE``, ``disarm-ha MODE``,
    ``arm-ha``."""
    typ = ev.type
    if typ in ("migrate", "relocate"):
        return f"{typ} {ev.sid} {ev.target}"
    if typ == "stop":
        return f"stop {ev.sid} {ev.timeout}"
    if typ in ("maintenance-enable", "maintenance-disable"):
        return f"{typ.partition('-')[2]}-node-maintenance {ev.node}"
    if typ == "disarm":
        return f"disarm-ha {ev.mode}"
    if typ == "arm":
        return "arm-ha"
    raise ValueError(f"event type {typ!r} is not a CRM command")
