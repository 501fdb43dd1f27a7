"""The model's own CRM round (``ha_stack = "model"``): a partial HA manager over the
simulation's service table, to be deleted when the compiled HA engine of issue 31 replaces it.

``Manager.pm`` in part: ``queue_resource_motion`` (the balancer's motion and a manual
``migrate``: the service and its positive-affinity partners, refused onto a negative-affinity
partner's node), ``next_state_migrate_relocate`` (a motion's result puts the service back to
``started`` on its target or its source) and ``next_state_started``/``next_state_stopped`` with a
command (the service enters ``migrate``/``relocate`` and its source's LRM gets the job at its next
tick; a stopped one moves offline at once). No failures, fencing, recovery or maintenance: those
need the port (``ha_stack = "full"``, :class:`~pvegym.sim.ha_stack.HAStack`).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.cluster import ClusterState
from pvegym.sim.ha_control import HAControl
from pvegym.sim.metrics import Metrics
from pvegym.sim.motions import MIGRATE, RELOCATE, Job, MotionPipeline
from pvegym.sim.move_ledger import MoveLedger, MoveRecordArgs
from pvegym.sim.scenario import EventSpec
from pvegym.sim.view import STARTED, STOPPED, Motion


class ModelCRMPort(Protocol):
    """What the model's CRM uses of the simulation beyond the tables it is given."""

    t: float

    @property
    def results(self) -> list[Job]: ...
    @property
    def killed(self) -> AbstractSet[int]: ...

    def clear_results(self) -> None: ...
    def states_changed(self) -> None: ...
    def log_line(self, t: float, line: str) -> None: ...
    def bound_for(self, g: int, target: int) -> bool: ...
    def bundle_partners(self, g: int, target: int) -> list[int]: ...


class ModelCRM(HAControl):
    """The model's CRM of one episode: the queued commands (:attr:`cmds`, guest → (kind, target
    node)) and the state machine over the simulation's service table (``svc_state``,
    ``svc_started``, ``svc_node``/``svc_target``: by cluster guest, changed in place). An
    :class:`~pvegym.sim.ha_control.HAControl` without LRM daemons (the motion pipeline's jobs are
    its LRMs), failures or maintenance."""

    def __init__(
        self,
        sim: ModelCRMPort,
        cluster: ClusterState,
        metrics: Metrics,
        pipeline: MotionPipeline,
        svc_state: list[str],
        svc_started: NDArray[np.bool_],
        svc_node: NDArray[np.int64],
        svc_target: NDArray[np.int64],
        usable: list[bool],
        moves: MoveLedger,
        negative: dict[int, list[int]],
        is_ha: list[bool],
        lrm_rng: np.random.Generator,
        lrm_delay_max_s: float,
    ) -> None:
        """``usable``: the nodes a motion may target (by node index); ``moves``: the balancer's
        move records; ``negative``: each guest's negative-affinity partners; ``is_ha``: by
        cluster guest; ``lrm_rng``/``lrm_delay_max_s``: the LRM ticks' offsets after the round
        (s)."""
        self.sim = sim
        self.cluster, self.metrics, self.pipeline = cluster, metrics, pipeline
        self.svc_state, self.svc_started = svc_state, svc_started
        self.svc_node, self.svc_target = svc_node, svc_target
        self._online_list = usable
        self.moves = moves
        self.negative, self._is_ha_list = negative, is_ha
        self._lrm_rng, self._lrm_delay_max_s = lrm_rng, lrm_delay_max_s
        self._motion_kind = [MIGRATE if sid.startswith("vm:") else RELOCATE for sid in cluster.sids]
        self.cmds: dict[int, tuple[str, int]] = {}

    # ------------------------------------------------------------------ HAControl
    def round(self) -> None:
        """The CRM round: the service state machine (:meth:`next_states`)."""
        self.next_states()

    def lrm_ticks(self, t0: float, t1: float) -> None:
        """No LRM daemons: the pipeline runs the jobs from the tick offsets drawn here."""

    def event(self, ev: EventSpec) -> None:
        """Scenario validation admits only ``migrate`` (:meth:`queue_command`) for this stack."""
        raise ValueError(f"event type {ev.type!r} needs ha_stack = 'full'")

    def queue_command(self, g: int, target: int) -> None:
        """A manual ``migrate`` of guest ``g``: :meth:`queue`."""
        self.queue(g, target)

    def answer(self, g: int, target: int, move: MoveRecordArgs) -> None:
        """The balancer's motion: recorded (``move``) and queued with its partners at once."""
        moves = self.moves
        move_id = moves.pending[g] = moves.register(*move)
        moves.bundle(move_id, self.queue(g, target))

    def describe(self, motion: Motion) -> None:
        """Nothing: this CRM logs no balancer decisions."""

    def down_count(self) -> int:
        """The HA guests the OOM killer killed (nothing restarts them in this model)."""
        killed = self.sim.killed
        return sum(self._is_ha_list[g] for g in killed) if killed else 0

    def maintenance_pending(self) -> bool:
        """No maintenance in this model."""
        return False

    def link_up(self, a: int, b: int) -> bool:
        """Every link is up (no power or network events in this model)."""
        return True

    # ------------------------------------------------------------------ the round
    def queue(self, g: int, target: int) -> list[int]:
        """``queue_resource_motion``: the service and its positive partners (not already there);
        the guests queued (none when a negative-affinity partner is on or bound for ``target``)."""
        cl = self.cluster
        for p in self.negative.get(g, ()):
            if self.sim.bound_for(p, target):
                self.sim.log_line(
                    self.sim.t,
                    f"err: cannot move {cl.sids[g]} to {cl.node_names[target]}: "
                    f"negative affinity with {cl.sids[p]}",
                )
                return []
        members = [g, *self.sim.bundle_partners(g, target)]
        for m in members:
            self.cmds[m] = (self._motion_kind[m], target)
        return members

    def start_lone(self, g: int, target: int) -> None:
        """A possible motion of a guest without positive partners, with an idle pipeline (no
        command, job or result): queueing it and the state machine reduce to starting its job."""
        move_id = self.moves.record_move(self.sim.t, g, target)
        self._start_job(g, self._motion_kind[g], target, int(self.svc_node[g]), move_id)

    def next_states(self) -> None:
        """The service state machine of the CRM round: motion results, then queued commands."""
        cl = self.cluster
        results = self.sim.results
        if results:
            for job in results:  # next_state_migrate_relocate
                g = job.guest
                self.svc_state[g] = STARTED
                self.sim.states_changed()
                self.svc_started[g] = True
                self.svc_target[g] = -1
                self.svc_node[g] = job.target if job.ok else job.source
            self.sim.clear_results()
        if not self.cmds:  # most rounds: nothing queued
            return
        offsets: dict[int, float] = {}  # source node -> its LRM's tick in this round
        for g, (kind, target) in sorted(self.cmds.items()):  # next_state_started with a cmd
            if self.svc_state[g] == STOPPED:  # next_state_stopped: a stopped guest moves offline
                del self.cmds[g]
                self.moves.drop_partner(g)
                if self._online_list[target]:
                    self.svc_node[g] = target
                    cl.node[g] = target
                continue
            if self.svc_state[g] != STARTED:
                continue  # still in a motion: the command waits for its result
            del self.cmds[g]
            if target == self.svc_node[g] or not self._online_list[target]:
                self.moves.drop_partner(g)
                continue
            move_id = self.moves.take_pending(g)
            self._start_job(g, kind, target, int(self.svc_node[g]), move_id, offsets)

    def _start_job(
        self,
        g: int,
        kind: str,
        target: int,
        source: int,
        move_id: int | None,
        offsets: dict[int, float] | None = None,
    ) -> None:
        """``next_state_started`` with a command: the service enters migrate/relocate and the
        LRM gets its job. It starts at the source's LRM tick, a seeded offset within the LRM's
        10 s loop, drawn once per source in a CRM round (``offsets``: source node → offset s):
        the LRM forks the workers of every command it finds in one iteration (``LRM.pm``
        ``run_workers``)."""
        self.svc_state[g] = kind
        self.sim.states_changed()
        self.svc_started[g] = False
        self.svc_target[g] = target
        offset = None if offsets is None else offsets.get(source)
        if offset is None:
            # = uniform(0, max): NumPy computes low + (high − low)·random(), the same double
            # from the same draw, at a quarter of uniform()'s argument handling
            offset = 0.0 + self._lrm_delay_max_s * self._lrm_rng.random()
            if offsets is not None:
                offsets[source] = offset
        t = self.sim.t
        job = Job(g, self.cluster.sids[g], source, target, kind, t, t + offset)
        job.move_id = move_id
        self.pipeline.jobs.append(job)
