"""Whether the HA manager would queue a balancer's motion now, for every HA stack.

``Manager.pm``: the balancer is asked only while no motion is queued or running
(``any_resource_motion_queued_or_running``); ``queue_resource_motion`` queues the service with
its positive-affinity partners (those not on the target nor on their way there) and refuses a
target that holds a negative-affinity partner or that node affinity does not allow. The checks
read the simulation's service table (``svc_state``, ``svc_node``/``svc_target``, by cluster
guest), the HA manager's usable nodes (:class:`~pvegym.sim.hardware.NodeHardware`), the motion
pipeline's jobs and the motion results the CRM takes in this round (:attr:`MotionCommit.results`),
whatever the HA stack: the model's CRM, the port or the engine (which also say ``ha_busy``: a
motion is pending in their manager status).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.cluster import ClusterState
from pvegym.sim.hardware import NodeHardware
from pvegym.sim.motions import Job, MotionPipeline
from pvegym.sim.move_ledger import MoveLedger, MoveRecordArgs
from pvegym.sim.scenario import Scenario
from pvegym.sim.view import STARTED, Motion


@dataclass(frozen=True, slots=True)
class AffinityPartners:
    """Each guest's resource-affinity partners (cluster guest indices): ``positive`` and
    ``negative`` by guest (only guests with partners), and the negative ones in CSR form
    (``neg_idx[neg_ptr[g]:neg_ptr[g + 1]]``) for the environment's compiled mask."""

    positive: dict[int, list[int]]
    negative: dict[int, list[int]]
    neg_ptr: NDArray[np.int64]
    neg_idx: NDArray[np.int64]


def affinity_partners(scenario: Scenario, cluster: ClusterState) -> AffinityPartners:
    """The scenario's resource-affinity rules as partner tables (a guest in several rules has
    the union of their members, in rule order, without repeats)."""
    positive: dict[int, list[int]] = {}
    negative: dict[int, list[int]] = {}
    for rule in scenario.resource_affinity:
        members = [cluster.guest_index[s] for s in rule.resources]
        table = positive if rule.affinity == "positive" else negative
        for m in members:
            table.setdefault(m, []).extend(
                x for x in members if x != m and x not in table.get(m, [])
            )
    counts = [len(negative.get(i, ())) for i in range(cluster.n_guests)]
    neg_ptr = np.cumsum([0, *counts]).astype(np.int64)
    neg_idx = np.array(
        [p for i in range(cluster.n_guests) for p in negative.get(i, ())], dtype=np.int64
    )
    return AffinityPartners(positive, negative, neg_ptr, neg_idx)


class Parts(Protocol):
    """The simulation's parts the checks read (``Simulation``; bound once, when built): the
    service table by cluster guest (changed in place), the motions, the move records."""

    cluster: ClusterState
    partners: AffinityPartners
    svc_state: list[str]
    svc_node: NDArray[np.int64]
    svc_target: NDArray[np.int64]
    pipeline: MotionPipeline
    moves: MoveLedger


class MotionCommit:
    """The checks of one episode. ``hardware``: the nodes a balancer may target and each
    guest's node-affinity targets among them (changed in place as the HA manager's node states
    change); ``is_ha``: by cluster guest; ``cmds``: the model CRM's queued commands (empty with
    the other stacks); ``log``: the episode's log (an ignored motion is logged)."""

    def __init__(
        self,
        parts: Parts,
        hardware: NodeHardware,
        is_ha: list[bool],
        cmds: dict[int, tuple[str, int]],
        log: list[tuple[float, str | Job]],
        ha_busy: bool,
    ) -> None:
        self.cluster, self.pipeline, self.moves = parts.cluster, parts.pipeline, parts.moves
        self.positive, self.negative = parts.partners.positive, parts.partners.negative
        self.svc_state, self.svc_node, self.svc_target = (
            parts.svc_state,
            parts.svc_node,
            parts.svc_target,
        )
        self.usable, self.allowed = hardware.online_list, hardware.node_allowed
        self.is_ha, self.cmds, self.log = is_ha, cmds, log
        #: the motions whose result the CRM takes in this round (ended in the last one)
        self.results: list[Job] = []
        #: an HA stack's manager status has a motion queued or running, or no master wrote the
        #: services' status yet (the stack sets it after each CRM round)
        self.ha_busy = ha_busy

    def possible(self, g: int, target: int) -> bool:
        """Whether the HA manager would queue a balancer motion of guest ``g`` to ``target`` now."""
        # active(), inlined
        pipe = self.pipeline
        if self.cmds or pipe.jobs or pipe.finished or self.results or self.ha_busy:
            return False
        return self.placement_possible(g, target)

    def placement_possible(self, g: int, target: int) -> bool:
        """:meth:`possible` with an idle pipeline: ``g`` is a started HA service, and ``target``
        an online node other than its own that its rules allow."""
        if not self.is_ha[g] or self.svc_state[g] != STARTED:
            return False
        if target == self.svc_node[g] or not self.usable[target]:
            return False
        if not self.allowed[g, target]:
            return False
        negative = self.negative.get(g)
        if negative:  # a loop, not any() over a generator: this runs for every action taken
            svc_node, svc_target = self.svc_node, self.svc_target
            for p in negative:
                if svc_node[p] == target or svc_target[p] == target:
                    return False
        return True

    def active(self) -> bool:
        """``any_resource_motion_queued_or_running``: a service in migrate/relocate or a queued cmd."""
        # a service is in migrate/relocate from its job's creation until the CRM has processed
        # the job's result, so the job lists answer this in O(1); with an HA stack (its manager
        # status says) ha_busy
        pipe = self.pipeline
        return bool(self.cmds or pipe.jobs or pipe.finished or self.results or self.ha_busy)

    def balancer_motion(self, motion: Motion, t: float) -> tuple[int, int] | None:
        """The balancer's motion at ``t`` (s) as ``(guest, target node)`` if the HA manager
        would queue it, else None (logged: not a started HA service, or not possible now)."""
        cl = self.cluster
        g = cl.guest_index.get(motion.sid)
        target = cl.node_index.get(motion.target)
        if g is None or target is None or not self.is_ha[g] or self.svc_state[g] != STARTED:
            self.log.append(
                (t, f"ignored motion {motion.sid} -> {motion.target}: not a started HA service")
            )
            return None
        if not self.possible(g, target):
            self.log.append(
                (t, f"ignored motion {motion.sid} -> {motion.target}: not possible now")
            )
            return None
        return g, target

    def bundle_partners(self, g: int, target: int) -> list[int]:
        """The positive-affinity partners of ``g`` that its motion to node ``target`` moves too
        (``queue_resource_motion``): those not on ``target`` nor on their way there."""
        return [p for p in self.positive.get(g, ()) if not self.bound_for(p, target)]

    def bound_for(self, g: int, target: int) -> bool:
        """Guest ``g`` is on node ``target`` or on its way there."""
        return bool(self.svc_node[g] == target or self.svc_target[g] == target)

    def taken(self, g: int, move: MoveRecordArgs) -> None:
        """A master's ``load_balance`` took the balancer's motion of guest ``g`` (``move``:
        :meth:`MoveLedger.record`): it counts; the LRM's worker takes its index
        (:meth:`MoveLedger.take_pending`), and ``queue_resource_motion`` moves the positive
        partners too, so the record is the bundle's."""
        moves = self.moves
        move_id = moves.pending[g] = moves.register(*move)
        target = self.cluster.node_index[move[0].target]
        moves.bundle(move_id, [g, *self.bundle_partners(g, target)])

    def result_flags(self) -> tuple[bool, bool]:
        """Whether an HA motion result arrived this round that succeeded / failed (the motions
        :meth:`ended_motions` lists)."""
        if not self.results:  # most rounds: read once per environment step
            return False, False
        is_ha = self.is_ha
        ok = failed = False
        for j in self.results:  # one pass, no generators: a result arrives every few rounds
            if is_ha[j.guest]:
                if j.ok:
                    ok = True
                else:
                    failed = True
        return ok, failed

    def ended_motions(self) -> list[tuple[int, int, int, bool, float, float]]:
        """The HA motions whose result the CRM sees this round: ``(guest, source, target, ok,
        t_issued, t_end)`` (cluster guest and node indices, times in s)."""
        if not self.results:
            return []
        is_ha = self.is_ha
        return [
            (j.guest, j.source, j.target, j.ok, j.t_issued, float(j.t_end or 0.0))
            for j in self.results
            if is_ha[j.guest]
        ]
