"""One simulated cluster under the HA manager: set-up, the round's order and its physics.

The parts it runs: the motion pipeline (:class:`~pvegym.sim.motions.MotionPipeline`), the HA
stack's CRM round through :class:`~pvegym.sim.ha_control.HAControl` (the model's own,
:mod:`pvegym.sim.model_crm`, the port, :mod:`pvegym.sim.ha_stack`, or the engine,
:mod:`pvegym.sim.engine_stack`), the hardware those stacks drive and the HA manager's node
states (:mod:`pvegym.sim.hardware`), whether the HA manager would queue a motion
(:mod:`pvegym.sim.motion_commit`), the balancer's move records (:mod:`pvegym.sim.move_ledger`)
and the telemetry view (:mod:`pvegym.sim.telemetry_view`). ``Simulation`` keeps the public
names of each (``motion_possible``, ``set_node_states``, ``node_usable`` …) as the environment,
the policies' tools and the HA stacks (:class:`~pvegym.sim.ha_control.SimulationPort`) use them.

Time advances in CRM rounds of ``round_s`` (10 s). One round, in order (``docs/model.md``, *Time*;
``Manager.pm`` ``manage``):

1. ``advance()`` — physics of the interval ``(t, t + round_s]``: the LRM runs queued motions
   (:mod:`pvegym.sim.motions`), then :class:`~pvegym.sim.cluster.ClusterState` computes demand,
   supply, memory and pressure, and the metrics integrate them.
2. ``observe()`` — at the new round time: scenario events that queue manual motions
   (``update_crm_commands`` runs before the balancer), the LRM exits the CRM now sees, and the
   telemetry snapshot (:class:`~pvegym.sim.view.ClusterView`) with service states as they were
   *before* this round's state machine — so a motion whose result arrives now still blocks the
   balancer in this round.
3. ``commit(motion)`` — the balancer's answer is queued (``queue_resource_motion``: the leader and
   its positive-affinity partners; refused onto a negative-affinity partner's node), then the
   service state machine: results move services to ``started`` on the target (success) or back on
   the source (failure, no memory of it); queued commands turn ``started`` services into
   ``migrate``/``relocate`` and hand a job to the LRM.

``reset()`` runs step 1 and 2 for the first round; ``step(motion)`` runs 3, 1, 2. ``run(policy)`` is
the whole loop. The model never imports Gymnasium or the policies.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from pvegym.sim import layout as L
from pvegym.sim.cluster import ClusterState
from pvegym.sim.engine_stack import EngineStack
from pvegym.sim.ha_control import HAControl
from pvegym.sim.ha_stack import HAStack
from pvegym.sim.hardware import NodeHardware
from pvegym.sim.memory import GuestMemory
from pvegym.sim.metrics import Metrics
from pvegym.sim.model_crm import ModelCRM
from pvegym.sim.motion_commit import MotionCommit, affinity_partners
from pvegym.sim.motions import Job, MotionPipeline, log_lines, migration_template
from pvegym.sim.move_ledger import MoveLedger, MoveRecordArgs
from pvegym.sim.scenario import Scenario
from pvegym.sim.telemetry import Telemetry
from pvegym.sim.telemetry_view import TelemetryView, scenario_rules
from pvegym.sim.view import STARTED, STOPPED, Balancer, ClusterView, Motion


class Simulation:
    """A scenario, a seed and the HA manager: ``reset()`` then ``step(motion)`` once per round."""

    def __init__(self, scenario: Scenario, seed: int = 0) -> None:
        self.scenario = scenario
        self.round_s = scenario.round_s
        self.seed = seed
        self._migration_template = migration_template(scenario.migration)
        self.rules = scenario_rules(scenario)
        self._build(seed)

    # ------------------------------------------------------------------ set-up
    def _build(self, seed: int) -> None:
        self.seed = seed
        root = np.random.SeedSequence(seed)
        phys_seed, lrm_seed, telemetry_seed = root.spawn(3)  # the first two as spawn(2) gives
        self.cluster = cl = ClusterState(self.scenario, np.random.default_rng(phys_seed))
        self.telemetry = Telemetry(
            cl, self.scenario.telemetry, self.round_s, np.random.default_rng(telemetry_seed)
        )
        self.memory = GuestMemory(cl, self.scenario.memory)
        self._memory_moves = self.memory.ballooning or self.memory.merging
        self._lrm_rng = np.random.default_rng(lrm_seed)
        self.ha_idx = np.array([i for i, g in enumerate(cl.guests) if g.ha], dtype=np.int64)
        self._other_idx = np.array([i for i, g in enumerate(cl.guests) if not g.ha], dtype=np.int64)
        self.ha_sids = tuple(cl.sids[i] for i in self.ha_idx)
        self._is_ha = np.zeros(cl.n_guests, dtype=bool)
        self._is_ha[self.ha_idx] = True
        #: resource-affinity partners (:func:`~pvegym.sim.motion_commit.affinity_partners`)
        self.partners = aff = affinity_partners(self.scenario, cl)
        self.positive, self.negative = aff.positive, aff.negative
        self.neg_ptr, self.neg_idx = aff.neg_ptr, aff.neg_idx  # CSR, for compiled mask code
        # constant per-guest/per-node facts as Python lists: the per-motion code reads them one
        # element at a time, which costs a NumPy array several times a list's
        self._is_ha_list: list[bool] = self._is_ha.tolist()
        self._ha_list: list[int] = self.ha_idx.tolist()
        #: the balancer's views (:mod:`pvegym.sim.telemetry_view`)
        self.views = TelemetryView(
            self.scenario, cl, self.telemetry, self.ha_idx, self._other_idx, self.rules
        )
        self._reset_state()

    def _reset_state(self) -> None:
        cl = self.cluster
        cl.reset()
        self.memory.reset()
        self.telemetry.reset()
        self.t = 0.0
        self.svc_state = [STARTED if g.state == "started" else STOPPED for g in cl.guests]
        self.svc_started = np.array([st == STARTED for st in self.svc_state], dtype=np.bool_)
        # where each service is and where it is going (-1: nowhere), rows of one array so that
        # compiled code takes them as one argument
        self.svc_place = np.empty((L.SVC_ROWS, cl.n_guests), dtype=np.int64)
        self.svc_node = self.svc_place[L.SVC_NODE]
        self.svc_target = self.svc_place[L.SVC_TARGET]
        self.svc_node[:] = cl.home
        self.svc_target[:] = -1
        # the events the round runs (pressure onsets are markers for the metrics), in time order
        self._events = sorted(
            (e for e in self.scenario.events if e.type != "pressure-onset"), key=lambda e: e.t
        )
        self._event_pos = 0
        self.metrics = Metrics(in_flight=self.transfer_in_flight)
        self.metrics.onsets = [
            (e.t, e.node) for e in self.scenario.events if e.type == "pressure-onset"
        ]
        self._log: list[tuple[float, str | Job]] = []
        #: the LRM workers' motions (:mod:`pvegym.sim.motions`)
        self.pipeline = MotionPipeline(
            self.scenario,
            self._migration_template,
            cl,
            self.memory,
            self.telemetry,
            self.metrics,
            self._log,
            self._move_ended,
        )
        self._view: ClusterView | None = None
        #: the balancer's motions in the metrics (:mod:`pvegym.sim.move_ledger`)
        self.moves = MoveLedger(self.metrics, cl, self.svc_node, self.pipeline.jobs)
        self._motion_rows_set = True  # reserved_mem / motion_cpu need clearing
        #: the hardware the HA stacks drive and the HA manager's node states
        #: (:mod:`pvegym.sim.hardware`); with the model's CRM the configured online nodes
        #: throughout
        hw = self.hardware = NodeHardware(self, self._log)
        self.node_usable, self.node_flags = hw.node_usable, hw.node_flags
        self.node_allowed, self._killed = hw.node_allowed, hw.killed
        #: the model's own CRM round (``ha_stack = "model"``; with the full stack it holds no
        #: command): :mod:`pvegym.sim.model_crm`
        crm = self._crm = ModelCRM(
            self,
            cl,
            self.metrics,
            self.pipeline,
            self.svc_state,
            self.svc_started,
            self.svc_node,
            self.svc_target,
            hw.online_list,
            self.moves,
            self.negative,
            self._is_ha_list,
            self._lrm_rng,
            self.scenario.migration.lrm_delay_max_s,
        )
        #: whether the HA manager would queue a motion (:mod:`pvegym.sim.motion_commit`); with
        #: an HA stack it is busy until a master wrote the services' status (``HAStack.sync``)
        busy = self.scenario.ha_stack != "model"
        self.gate = MotionCommit(self, hw, self._is_ha_list, crm.cmds, self._log, ha_busy=busy)
        #: the HA stack on the model's hardware: the port's (``ha_stack = "full"``), the compiled
        #: engine's CRM round with the port's LRMs (``"engine"``, :mod:`pvegym.sim.engine_stack`),
        #: else None
        stack = self.scenario.ha_stack
        self._stack = (
            HAStack(self) if stack == "full" else EngineStack(self) if stack == "engine" else None
        )
        self.pipeline.links = self.moves.stack = self._stack  # (None: every link up, fast path)
        #: the HA stack the round drives: the port or the model's CRM
        self._ha: HAControl = crm if self._stack is None else self._stack

    def reset(self, seed: int | None = None) -> ClusterView:
        """Start an episode (re-seeded when ``seed`` is given) and return the first round's view."""
        self._build(self.seed if seed is None else seed)
        self.advance()
        return self.observe()

    # ------------------------------------------------------------------ the round
    def step(self, motion: Motion | None) -> ClusterView:
        """Commit this round's decision, simulate to the next round and return its view."""
        self.commit(motion)
        self.advance()
        return self.observe()

    @property
    def view(self) -> ClusterView:
        """This round's telemetry view, built on first use (an agent reading the flat observation
        through the environment never pays for it)."""
        if self._view is None:
            gate, states = self.gate, self.views.states(self.svc_state)
            self._view = self.views.build(
                self.t, self.svc_place, states, gate.results, gate.active(), self._killed
            )
        return self._view

    def run(
        self,
        policy: Balancer | Callable[[ClusterView], Motion | None],
        duration: float | None = None,
    ) -> dict[str, Any]:
        """Run a whole episode of ``duration`` seconds (default: the scenario's) and return the
        ``simulate --json`` result."""
        decide = policy.decide if isinstance(policy, Balancer) else policy
        if isinstance(policy, Balancer):
            policy.reset(self.seed)
        duration = self.scenario.duration if duration is None else duration
        rounds = round(duration / self.round_s)
        view = self.reset()
        for _ in range(rounds - 1):
            view = self.step(decide(view))
        self.commit(decide(view))
        return self.result()

    # ------------------------------------------------------------------ physics
    def advance(self) -> None:
        """Physics of one round: the LRM's motions, then contention and pressure, then metrics."""
        cl = self.cluster
        t0, dt = self.t, self.round_s
        t1 = t0 + dt
        cl.run_fraction.fill(1.0)
        if self._killed:  # killed by the OOM killer: down (their work is shortfall)
            for g in self._killed:
                cl.run_fraction[g] = 0.0
        if self._motion_rows_set:  # the node inputs the motions wrote last round
            cl.reserved_mem.fill(0.0)
            cl.motion_cpu.fill(0.0)
            self._motion_rows_set = False
        pipe = self.pipeline
        if pipe.pausing:
            pipe.carry_pauses(dt)
        if pipe.jobs:
            self._motion_rows_set = True
            pipe.run(t0, t1)
        self._ha.lrm_ticks(t0, t1)  # between the motions' physics and the cluster's
        if self._memory_moves:
            self.memory.round(t0, dt, pipe.migrating())
        tel = self.telemetry
        if tel.arrivals:  # moved guests whose samples are held back or report cpu 0
            tel.before_round(t1)
        cl.advance(t1, dt)  # clips run_fraction at 0: the pipeline may take more than a round
        if tel.rrd:  # the kernel took pvestatd's samples: the RRD's minute averages
            tel.after_round(t1)
        tot = cl.totals.tolist()  # one conversion: numpy scalar indexing costs ~100 ns a read
        if tot[L.T_OOM]:  # a node's memory in use went past MemTotal + swap
            self.hardware.oom_kill(t1)
        down = self._ha.down_count()  # HA services requested started that do not run
        if down:
            self.metrics.services_down_s += dt * down
        self.metrics.add_round(
            dt,
            tot[L.T_STALL_CPU],
            tot[L.T_STALL_MEM],
            tot[L.T_GUEST_STALL],
            tot[L.T_SHORTFALL],
            tot[L.T_IMBALANCE],
        )
        self.t = t1

    def run_new_motion(self, t0: float, t1: float) -> None:
        """The motions' physics of the round ``(t0, t1]`` for a job a full-stack LRM worker
        queued during it: alone in the pipeline it runs over the rest of the round now, so that
        the worker's polls see when it ends; beside jobs that ran through the round already it
        joins them (:meth:`MotionPipeline.join`)."""
        self._motion_rows_set = True
        pipe = self.pipeline
        if len(pipe.jobs) == 1:
            pipe.run(t0, t1)
        else:
            pipe.join(pipe.jobs[-1], t0, t1)

    @property
    def jobs(self) -> list[Job]:
        """The motions queued or running (:attr:`MotionPipeline.jobs`, in queueing order)."""
        return self.pipeline.jobs

    @property
    def finished(self) -> list[Job]:
        """The motions that ended, not yet seen by the CRM (:attr:`MotionPipeline.finished`)."""
        return self.pipeline.finished

    def _move_ended(self, job: Job, ok: bool, aborted: bool, reason: str, pause_s: float) -> None:
        """The pipeline ended the job of a balancer's motion (:meth:`MoveLedger.ended`)."""
        self.moves.ended(job, ok, aborted, reason, pause_s)

    @property
    def log(self) -> list[tuple[float, str]]:
        """The HA manager's and the LRM's log of the episode, ``(t, line)``."""
        return log_lines(self._log, self.cluster.node_names)

    # ------------------------------------------------------------------ CRM
    def observe(self) -> ClusterView:
        """Manual commands due now, the LRM exits the CRM sees, and the telemetry snapshot."""
        self.receive()
        return self.view

    def receive(self) -> None:
        """The start of the CRM round without building the view: manual commands due now are
        queued and the LRM exits that ended by now are taken for this round's state machine."""
        while self._event_pos < len(self._events) and self._events[self._event_pos].t <= self.t:
            ev = self._events[self._event_pos]
            self._event_pos += 1
            if ev.type == "migrate":
                cl = self.cluster
                self._ha.queue_command(cl.guest_index[ev.sid], cl.node_index[ev.target])
            else:  # validation admits the other events with the full stack only
                self._ha.event(ev)
        if self.pipeline.finished:  # jobs end in (t − round, t]: every finished one is due now
            self.gate.results = self.pipeline.take_finished()
        self._view = None

    def result_flags(self) -> tuple[bool, bool]:
        """Whether an HA motion result arrived this round that succeeded / failed (the motions
        :meth:`ended_motions` lists)."""
        return self.gate.result_flags()

    def ended_motions(self) -> list[tuple[int, int, int, bool, float, float]]:
        """The HA motions whose result the CRM sees this round (what ``view.results`` shows):
        ``(guest, source, target, ok, t_issued, t_end)`` with cluster guest and node indices and
        times in s. An environment's motion memory reads them without building the view.

        With the full stack: the motions the physics ended in the last round, whose result the
        port's CRM reads from the LRM's status this round or the next (when the LRM tick that
        collects it falls after the round of the end; ``pvegym.sim.ha_stack``)."""
        return self.gate.ended_motions()

    def commit(self, motion: Motion | None) -> bool:
        """Queue the balancer's motion (if valid) and run the service state machine.

        Returns whether the motion was queued (an invalid one is logged and dropped, as the HA
        manager ignores a command for an offline or current node).
        """
        queued = False
        if motion is not None:
            possible = self.gate.balancer_motion(motion, self.t)
            if possible is not None:
                self._issue(*possible)
                self._ha.describe(motion)
                queued = True
        self._ha.round()
        return queued

    def commit_index(self, g: int, target: int) -> bool:
        """:meth:`commit` of the motion of guest ``g`` (cluster index) to node index ``target``,
        the environment's discrete action, without resolving names or building a
        :class:`Motion`.

        A motion :meth:`motion_possible` rejects is dropped without a log line (the environment
        counts it as an invalid action and never hands it to the HA manager); returns whether it
        was queued.
        """
        queued = self.gate.possible(g, target)
        if queued and self._stack is None and g not in self.positive:
            # the model's CRM, a lone guest: motion_possible() implies an idle pipeline (no
            # command, job or result), so queueing it and the state machine reduce to starting
            # its one job
            self._crm.start_lone(g, target)
            return True
        if queued:
            self._issue(g, target)
        self._ha.round()
        return queued

    def motion_possible(self, g: int, target: int) -> bool:
        """Whether the HA manager would queue a balancer motion of guest ``g`` to ``target`` now
        (:meth:`MotionCommit.possible`)."""
        return self.gate.possible(g, target)

    def motion_active(self) -> bool:
        """``any_resource_motion_queued_or_running`` (:meth:`MotionCommit.active`)."""
        return self.gate.active()

    def _issue(self, g: int, target: int) -> None:
        """Record the balancer's (possible) motion of guest ``g`` to ``target`` and queue it
        (with the full stack: this round's answer of the Manager's ``load_balance``, recorded
        once the master took it)."""
        self._ha.answer(g, target, self.moves.record(self.t, g, target))

    def bundle_partners(self, g: int, target: int) -> list[int]:
        """:meth:`MotionCommit.bundle_partners` (the model CRM's)."""
        return self.gate.bundle_partners(g, target)

    def bound_for(self, g: int, target: int) -> bool:
        """:meth:`MotionCommit.bound_for` (the model CRM's)."""
        return self.gate.bound_for(g, target)

    # ------------------------------------------------------------------ the hardware (HA stacks)
    def set_running(self, g: int, on: bool) -> None:
        """:meth:`NodeHardware.set_running`: guest ``g`` starts or stops."""
        self.hardware.set_running(g, on)

    def power_off_node(self, n: int, t: float) -> None:
        """:meth:`NodeHardware.power_off_node`: node ``n`` lost its power at ``t`` (s)."""
        self.hardware.power_off_node(n, t)

    def place_stopped_guest(self, g: int, node: str, t: float) -> None:
        """:meth:`NodeHardware.place_stopped_guest`: the HA manager recovered ``g`` to ``node``."""
        self.hardware.place_stopped_guest(g, node, t)

    def set_node_states(self, states: tuple[str, ...]) -> None:
        """:meth:`NodeHardware.set_node_states`: the HA manager's node states, by node index."""
        self.hardware.set_node_states(states)

    @property
    def node_state_version(self) -> int:
        """Counts the changes of the HA manager's node states (:class:`NodeHardware`)."""
        return self.hardware.node_state_version

    # ------------------------------------------------------------------ what the HA stack reads
    @property
    def ha_stack(self) -> HAStack | None:
        """The HA stack running the CRM round (``ha_stack = "full"`` or ``"engine"``), else
        None."""
        return self._stack

    @property
    def ha_busy(self) -> bool:
        """An HA stack's manager status has a motion queued or running, or no master wrote the
        services' status yet (set by the stack after each CRM round; :class:`MotionCommit`)."""
        return self.gate.ha_busy

    @ha_busy.setter
    def ha_busy(self, busy: bool) -> None:
        self.gate.ha_busy = busy

    @property
    def cmds(self) -> dict[int, tuple[str, int]]:
        """The model CRM's queued commands: guest → (``migrate``/``relocate``, target node)."""
        return self._crm.cmds

    @property
    def results(self) -> list[Job]:
        """The motions whose result the CRM takes in this round (ended in the last one)."""
        return self.gate.results

    @property
    def ha_guests(self) -> list[int]:
        """The HA guests' cluster indices, in view order (read-only: do not change it)."""
        return self._ha_list

    @property
    def killed(self) -> AbstractSet[int]:
        """The guests the OOM killer killed (down until their LRM starts them again)."""
        return self._killed

    @property
    def built_view(self) -> ClusterView | None:
        """This round's view if it was built already (:attr:`view`), else None."""
        return self._view

    def log_line(self, t: float, line: str) -> None:
        """Append a line at ``t`` (s) to the episode's :attr:`log`."""
        self._log.append((t, line))

    def states_changed(self) -> None:
        """The service states changed (the full stack's sync): the next view reads them anew."""
        self.views.states_changed()

    def clear_results(self) -> None:
        """The CRM has taken this round's motion results (the full stack's round)."""
        self.gate.results = []

    def move_taken(self, g: int, move: MoveRecordArgs) -> None:
        """A master's ``load_balance`` took the balancer's motion of guest ``g``
        (:meth:`MotionCommit.taken`)."""
        self.gate.taken(g, move)

    # ------------------------------------------------------------------ results
    def transfer_in_flight(self) -> tuple[float, float]:
        """Bytes sent and seconds spent so far by the live migrations that have not ended yet."""
        return self.pipeline.in_flight(self.t)

    def result(self) -> dict[str, Any]:
        """Metrics (``docs/metrics.md``) and the balancer's moves, including a migration still running at the end."""
        return {
            "metrics": self.metrics.result(),
            "moves": [r.as_dict() for r in self.metrics.moves],
        }
