"""The balancer's motions in the metrics: one :class:`~pvegym.sim.metrics.MoveRecord` per motion
the HA manager queued, from the CRM round that took it to the end of its (last) job.

Both HA stacks record through it: the model's CRM (:mod:`pvegym.sim.model_crm`) when it queues
the motion, the port (:class:`~pvegym.sim.ha_stack.HAStack`) when a master's ``load_balance``
took it; the LRM's job carries the move index (``Job.move_id``), and the motion pipeline ends the
record with the job (:meth:`MoveLedger.ended`). A bundle's motion (``queue_resource_motion``
moves the positive-affinity partners too) ends with its last member's job, with the leader's
result.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pvegym.sim import layout as L
from pvegym.sim.cluster import ClusterState
from pvegym.sim.metrics import Metrics, MoveRecord
from pvegym.sim.motions import Job

CHURN_PRESSURE_PCT = 10.0  # docs/metrics.md: churn_moves
#: a balancer's motion as the metrics record it: the record, whether it is churn, whether the
#: HA manager's maintenance moves are pending (:meth:`MoveLedger.record`)
MoveRecordArgs = tuple[MoveRecord, bool, bool]


class Maintenance(Protocol):
    """An HA stack that knows whether its maintenance moves are pending
    (:meth:`pvegym.sim.ha_control.HAControl.maintenance_pending`)."""

    def maintenance_pending(self) -> bool: ...


class MoveLedger:
    """The move records of one episode: the move index each guest's next job takes
    (:attr:`pending`), the bundles' move indices (:attr:`bundles`)."""

    def __init__(
        self,
        metrics: Metrics,
        cluster: ClusterState,
        svc_node: NDArray[np.int64],
        jobs: list[Job],
    ) -> None:
        """``svc_node``: each service's node (the record's source); ``jobs``: the pipeline's
        queued and running jobs (a bundle's record waits for its last one)."""
        self.metrics, self.cluster, self._svc_node, self._jobs = metrics, cluster, svc_node, jobs
        #: the HA stack whose maintenance moves a record notes (None: the model's, which has none)
        self.stack: Maintenance | None = None
        self.pending: dict[int, int] = {}  # guest -> index of its MoveRecord until queued
        # a bundle's motion (model stack): its record ends with the last member's job; until
        # then the leader's result (ok, aborted, reason, pause s) waits here, by move index
        self.bundles: set[int] = set()
        self._leader_result: dict[int, tuple[bool, bool, str, float]] = {}

    def record(self, t: float, g: int, target: int) -> MoveRecordArgs:
        """The balancer's motion of guest ``g`` to ``target`` at ``t`` (s) as the metrics record
        it: the record, whether it is churn, whether the HA manager's maintenance moves are
        pending."""
        cl = self.cluster
        rec = MoveRecord(t, cl.sids[g], cl.node_names[self._svc_node[g]], cl.node_names[target])
        maintenance = self.stack is not None and self.stack.maintenance_pending()
        return rec, self._no_true_pressure(), maintenance

    def register(self, rec: MoveRecord, churn: bool, maintenance: bool) -> int:
        """A :meth:`record` in the metrics; its move index."""
        self.metrics.move_issued(rec, churn=churn)
        if maintenance:
            self.metrics.maintenance_moves += 1
        return len(self.metrics.moves) - 1

    def record_move(self, t: float, g: int, target: int) -> int:
        """The balancer's motion of guest ``g`` to ``target`` in the metrics; its move index."""
        return self.register(*self.record(t, g, target))

    def _no_true_pressure(self) -> bool:
        """No online node's true cpu or memory some avg10 reaches the churn threshold (NaN
        counts as pressure): the round kernel keeps the peak (NaN if any is NaN)."""
        return bool(self.cluster.totals[L.T_PEAK_SOME] < CHURN_PRESSURE_PCT)

    def bundle(self, move_id: int, members: list[int]) -> None:
        """The balancer's move ``move_id`` queued these guests (the leader and its positive
        partners not at the target yet): a bundle's record ends with its last member's job."""
        if len(members) > 1:
            self.bundles.add(move_id)
            for m in members:
                self.pending[m] = move_id

    def take_pending(self, g: int) -> int | None:
        """The move index a balancer's motion of guest ``g`` waits with for its job, now taken
        by that job (None: not a balancer's motion)."""
        return self.pending.pop(g, None)

    def drop_partner(self, g: int) -> None:
        """A bundle partner's command that starts no job: it takes no part in the record."""
        mid = self.pending.get(g)
        if mid is None or mid not in self.bundles:
            return
        if self.metrics.moves[mid].guest != self.cluster.sids[g]:
            del self.pending[g]

    def ended(self, job: Job, ok: bool, aborted: bool, reason: str, pause_s: float) -> None:
        """The pipeline ended the job of a balancer's motion: its record ends (a bundle's with
        its last member)."""
        assert job.move_id is not None and job.t_end is not None
        rec = self.metrics.moves[job.move_id]
        if job.move_id in self.bundles:
            self._bundle_job_ended(job, rec, (ok, aborted, reason, pause_s))
        else:
            self.metrics.move_ended(rec, ok, aborted, reason, job.t_end, pause_s)

    def _bundle_job_ended(
        self, job: Job, rec: MoveRecord, result: tuple[bool, bool, str, float]
    ) -> None:
        """A member of a bundle's motion ended (``result``: ok, aborted, reason, pause s): the
        motion's record ends with its last member, with the leader's result."""
        mid = job.move_id
        assert mid is not None and job.t_end is not None
        if rec.t_end is not None:  # a partner that started after the bundle's record ended
            return
        if rec.guest == job.sid:
            self._leader_result[mid] = result
        leader = self._leader_result.get(mid)
        if leader is None or any(j.move_id == mid for j in self._jobs):
            return
        del self._leader_result[mid]
        ok, aborted, reason, pause_s = leader
        self.metrics.move_ended(rec, ok, aborted, reason, job.t_end, pause_s)
