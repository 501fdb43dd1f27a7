"""The model's hardware as the HA stacks drive it, and the HA manager's node states it holds.

What :class:`~pvegym.sim.simulation.Simulation` offers an HA stack of its cluster
(:class:`~pvegym.sim.ha_control.SimulationPort`): a guest starts or stops (the LRM's resource
agent, a node's power), a node loses its power, the HA manager recovers a stopped guest to
another node, and the kernel's OOM killer kills the largest guest of a node out of memory. It
also holds the HA manager's node states as the model sees them (``NodeStatus.pm``): the nodes a
balancer may target (:attr:`NodeHardware.node_usable`, the node-affinity targets among them) and
the observation's other node-state rows (:attr:`NodeHardware.node_flags`). One object per
episode; the arrays and lists it holds are changed in place, never rebound (the environment's
kernels bind them once).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from pvegym.sim.affinity import allowed_targets
from pvegym.sim.cluster import ClusterState
from pvegym.sim.memory import GuestMemory
from pvegym.sim.metrics import Metrics
from pvegym.sim.motions import Job, MotionPipeline
from pvegym.sim.telemetry import Telemetry
from pvegym.sim.telemetry_view import TelemetryView
from pvegym.sim.view import Rules

#: rows of :attr:`NodeHardware.node_flags`: in maintenance; fenced or being fenced (``fence``, or
#: ``unknown``/``gone``: outside the quorate partition, fenced before its services are recovered)
NODE_MAINTENANCE, NODE_FENCED = 0, 1


class Parts(Protocol):
    """The simulation's parts the hardware changes (``Simulation``; read once, when the
    hardware is built)."""

    cluster: ClusterState
    memory: GuestMemory
    telemetry: Telemetry
    views: TelemetryView
    pipeline: MotionPipeline
    metrics: Metrics
    rules: Rules


class NodeHardware:
    """The guests' and nodes' hardware of one episode, and the HA manager's node states.

    ``log`` is the episode's log (``(t, line or ended Job)``, appended to). With the model's
    own CRM the node states stay the configured online nodes throughout; an HA stack sets them
    after each CRM round (:meth:`set_node_states`)."""

    def __init__(self, parts: Parts, log: list[tuple[float, str | Job]]) -> None:
        self.cluster, self.memory, self.telemetry = parts.cluster, parts.memory, parts.telemetry
        self.views, self.pipeline, self.metrics = parts.views, parts.pipeline, parts.metrics
        self.rules, self.log = parts.rules, log
        cl, views = self.cluster, self.views
        #: the guests the OOM killer killed (down until their LRM starts them again)
        self.killed: set[int] = set()
        #: the nodes a balancer may target (``online`` HA node states), as an array (the view's
        #: and the observation's ``online``) and a list (the per-motion checks read elements)
        self.node_usable = cl.node_online.copy()
        self.online_list: list[bool] = cl.node_online.tolist()
        #: node affinity: the targets each guest's rules allow among the usable nodes
        self.node_allowed = allowed_targets(self.rules, cl.sids, cl.node_names, cl.node_online)
        #: rows :data:`NODE_MAINTENANCE`, :data:`NODE_FENCED` by node (0.0/1.0)
        self.node_flags = np.zeros((2, cl.n_nodes))
        #: counts the changes of the node states (an environment re-reads them when it moves)
        self.node_state_version = 0
        views.set_nodes(cl.node_online)
        views.running_changed()

    def set_running(self, g: int, on: bool) -> None:
        """Guest ``g`` starts or stops (the LRM's resource agent, a node's power): the physics
        and the views from now on see it."""
        self.cluster.running[g] = on
        self.views.running_changed()

    def power_off_node(self, n: int, t: float) -> None:
        """Node ``n`` lost its power at ``t`` (s): every guest on it stops (an OOM kill there is
        moot); a motion from it ends (its worker died with the node; the guest is down with it),
        as does a container's relocation to it. A live migration to it stalls
        (``MotionPipeline._stalled``: its target rebooted, the connection cannot come back); one
        not yet transferring fails at its precheck (``MotionPipeline._start_transfer``)."""
        cl = self.cluster
        for g in np.flatnonzero(cl.node == n).tolist():
            self.killed.discard(g)
            if cl.running[g]:
                self.set_running(g, False)
        for job in [j for j in self.pipeline.jobs if n in (j.source, j.target)]:
            if job.source != n and job.phase != "down":
                job.peer_reset = job.peer_reset or job.phase == "transfer"
                continue
            job.migration = None
            self.pipeline.finish(job, t, ok=False, reason="node powered off")

    def place_stopped_guest(self, g: int, node: str, t: float) -> None:
        """The HA manager recovered stopped guest ``g`` to ``node`` at ``t`` (s)
        (``steal_service``): the model's guest is there from now on (its start is the LRM's)."""
        cl = self.cluster
        n, source = cl.node_index[node], int(cl.node[g])
        if n == source:
            return
        cl.node[g] = n
        self.memory.arrived(g)
        self.telemetry.arrived(g, t, source)

    def set_node_states(self, states: tuple[str, ...]) -> None:
        """The HA manager's node states (``NodeStatus.pm``: ``online``, ``maintenance``,
        ``unknown``, ``fence``, ``gone``), by node index: a balancer may target an ``online``
        node only (``next_state_started`` ignores a motion to any other, ``Manager.pm``)."""
        usable = [st == "online" for st in states]
        self.online_list[:] = usable
        self.node_usable[:] = usable
        # node affinity's highest-priority group among the online nodes (``get_node_affinity``)
        cl = self.cluster
        self.node_allowed[:] = allowed_targets(self.rules, cl.sids, cl.node_names, self.node_usable)
        self.node_flags[NODE_MAINTENANCE] = [st == "maintenance" for st in states]
        self.node_flags[NODE_FENCED] = [st in ("fence", "unknown", "gone") for st in states]
        maintenance, fenced = self.node_flags.astype(np.bool_)  # copies: a view is a snapshot
        self.views.set_nodes(np.array(usable, dtype=np.bool_), maintenance, fenced)
        self.node_state_version += 1

    def oom_kill(self, t: float) -> None:
        """The kernel's OOM killer on each node whose memory in use exceeds MemTotal + swap
        (``mm/oom_kill.c``): it kills the task with the highest ``oom_badness`` — resident and
        swapped memory, qemu-server sets no ``oom_score_adj`` — i.e. the QEMU (``kvm``) process of
        the guest with the largest footprint, until the rest fits. The guest is down from the next
        round (its memory freed, its work shortfall); restarting an HA guest is the LRM's."""
        cl, killed = self.cluster, self.killed
        for n in np.flatnonzero(cl.mem_wanted > cl.oom_limit).tolist():
            if not cl.node_online[n]:
                continue
            over = float(cl.mem_wanted[n] - cl.oom_limit[n])
            while over > 0.0:
                alive = [
                    g
                    for g in np.flatnonzero((cl.node == n) & cl.running).tolist()
                    if g not in killed and cl.memhost[g] > 0.0
                ]
                if not alive:
                    break
                g = max(alive, key=lambda i: (float(cl.memhost[i]), -i))
                rss = float(cl.memhost[g])
                killed.add(g)
                cl.balloon[g] = 0.0  # the process is gone: no memory, no work
                over -= rss
                self.metrics.oom_kills += 1
                self.log.append(
                    (
                        t,
                        f"{cl.node_names[n]}: Out of memory: Killed process (kvm) of {cl.sids[g]}"
                        f" anon-rss:{rss / 1024:.0f}kB oom_score_adj:0",
                    )
                )
