"""The telemetry view: the :class:`~pvegym.sim.view.ClusterView` a balancer sees each round.

A view is a snapshot of what an HA manager reads at the round time: pvestatd's samples
(:mod:`pvegym.sim.telemetry`, copied in one compiled call), the service table, the node states
the HA manager holds, the rules and the results of the motions that ended in the last round. A
view is never changed afterwards: every array it holds is its own copy or a read-only array
shared by the views of an episode. :class:`TelemetryView` builds them for one episode
(``Simulation.view``); a field a scenario disables (``telemetry.disabled``) reads NaN.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.sim import layout as L
from pvegym.sim.cluster import ClusterState
from pvegym.sim.kernel import entry_point, view_snapshot
from pvegym.sim.motions import Job
from pvegym.sim.scenario import Scenario
from pvegym.sim.telemetry import Telemetry
from pvegym.sim.view import (
    ClusterView,
    MotionResult,
    NodeAffinityRule,
    ResourceAffinityRule,
    Rules,
)

#: ClusterView's slot of the field, which _SimView's property reads and writes
_RUNNING_SLOT: Any = ClusterView.__dict__["guest_running"]
#: a ``guest_running`` to be computed when read (:class:`_SimView`)
_LATER: Any = None
#: :class:`ClusterView`'s fields in declaration order, the order :meth:`TelemetryView.build`
#: passes them in (positionally: it builds a view every round); checked here at import, so
#: that a field added or moved in ClusterView cannot silently shift the arguments
_VIEW_FIELDS = (
    "t", "node_names", "node_online", "node_maxcpu", "node_maxmem", "node_cpu", "node_mem",
    "node_cpu_some", "node_mem_some", "node_mem_full", "sids", "guest_node", "guest_target",
    "guest_state", "guest_running", "guest_maxcpu", "guest_maxmem", "guest_cpu", "guest_mem",
    "guest_memhost", "guest_cpu_some", "guest_cpu_full", "guest_mem_some", "guest_mem_full",
    "guest_migratable", "rules", "results", "motion_active", "mode", "other_node",
    "other_maxcpu", "other_maxmem", "node_maintenance", "node_fenced", "guest_auto_rebalance",
)  # fmt: skip
if tuple(f.name for f in dataclasses.fields(ClusterView)) != _VIEW_FIELDS:
    raise ImportError("ClusterView's fields changed: update _VIEW_FIELDS and TelemetryView.build")


def scenario_rules(scenario: Scenario) -> Rules:
    """The scenario's HA rules as a view shows them (:class:`~pvegym.sim.view.Rules`)."""
    return Rules(
        node_affinity=tuple(
            NodeAffinityRule(r.name, tuple(r.resources), tuple(sorted(r.nodes.items())), r.strict)
            for r in scenario.node_affinity
        ),
        resource_affinity=tuple(
            ResourceAffinityRule(r.name, tuple(r.resources), r.affinity == "positive")
            for r in scenario.resource_affinity
        ),
    )


class _SimView(ClusterView):
    """The simulation's :class:`ClusterView`: ``guest_running`` (a comparison over every guest)
    is computed when first read — no heuristic reads it, the view encoders do — from the
    view's own copy of the run fractions, so it is the snapshot's value whenever it is read."""

    __slots__ = ("_run_fraction", "_running_mask")
    _run_fraction: NDArray[np.float64]
    _running_mask: NDArray[np.bool_] | None

    @property
    def guest_running(self) -> NDArray[np.bool_]:
        running: NDArray[np.bool_] | None = _RUNNING_SLOT.__get__(self)
        if running is None:
            running = self._run_fraction > 0.0
            if self._running_mask is not None:
                running &= self._running_mask
            _RUNNING_SLOT.__set__(self, running)
        return running

    @guest_running.setter
    def guest_running(self, value: NDArray[np.bool_] | None) -> None:
        _RUNNING_SLOT.__set__(self, value)


class TelemetryView:
    """The views of one episode: the telemetry rows and constants bound once, the node states
    and running guests as the simulation reports them, one :meth:`build` per round."""

    def __init__(
        self,
        scenario: Scenario,
        cluster: ClusterState,
        telemetry: Telemetry,
        ha_idx: NDArray[np.int64],
        other_idx: NDArray[np.int64],
        rules: Rules,
    ) -> None:
        """What :meth:`build` reads, bound once per episode: the telemetry rows it copies in one
        ``take`` each (node: cpu, mem, the three avg10 series; HA guests: mem ratio, run
        fraction, cpu received, memhost, the four avg10 series) and the per-guest constants.
        ``ha_idx``/``other_idx``: the HA and the other guests' cluster indices."""
        self.cluster, self.telemetry = cluster, telemetry
        self.ha_idx, self._other_idx = ha_idx, other_idx
        cl, idx, tel = cluster, ha_idx, telemetry
        self.sids = tuple(cl.sids[i] for i in idx)
        self.rules = rules
        self._mode = scenario.crs_mode
        self._disabled = set(scenario.telemetry.disabled)
        self._nan_nodes = np.full(cl.n_nodes, np.nan)
        self._nan_guests = np.full(idx.size, np.nan)
        self._is_ha_list: list[bool] = [g.ha for g in cl.guests]
        self._states: tuple[str, ...] | None = None  # the HA guests' states, see states()
        self._ha_list: list[int] = idx.tolist()
        migratable = np.array([not g.local_resources for g in cl.guests])
        n_avg10 = L.N_AVG + L.AVG10 * L.N_SERIES
        g_avg10 = L.G_AVG + L.AVG10 * L.G_SERIES
        node_rows = np.array(
            [L.N_CPU, L.N_MEM, *(n_avg10 + k for k in (L.N_CPU_SOME, L.N_MEM_SOME, L.N_MEM_FULL))]
        )
        guest_rows = np.array(
            [L.G_MEM_RATIO, L.G_RUN_FRACTION, L.G_RECEIVED, L.G_MEMHOST]
            + [g_avg10 + k for k in (L.G_CPU_SOME, L.G_CPU_FULL, L.G_MEM_SOME, L.G_MEM_FULL)]
        )
        # pvestatd's samples (:mod:`pvegym.sim.telemetry`; the true rows when aligned and point),
        # as views: the rows are updated in place
        self._node_flat = tel.node_rows.reshape(-1)
        self._guest_flat = tel.guest_rows.reshape(-1)
        self._node_take = node_rows[:, None] * cl.n_nodes + np.arange(cl.n_nodes)[None, :]
        self._guest_take = guest_rows[:, None] * cl.n_guests + idx[None, :]
        # the view's blocks (one per view: a snapshot): the node rows, the guest rows and the
        # guests' reported memory (memhost × ratio), filled by one compiled call
        self._node_shape = self._node_take.shape
        self._guest_shape = (len(guest_rows) + 1, idx.size)
        self._snapshot = entry_point(
            view_snapshot,
            self._node_flat,
            self._node_take,
            self._guest_flat,
            self._guest_take,
            np.empty(self._node_shape),
            np.empty(self._guest_shape),
        )
        # constant facts every view of the episode shares (read-only: a view is a snapshot)
        #: the HA guests' configured vCPUs (0 = no CPU limit) and memory (bytes), in view order
        self.guest_maxcpu = cl.guest_cfg_maxcpu[idx]
        self.guest_maxmem = cl.guest_maxmem[idx]
        self._view_migratable = migratable[idx]
        for shared in (self.guest_maxcpu, self.guest_maxmem):
            shared.flags.writeable = False
        self._view_migratable.flags.writeable = False
        auto = np.array([g.auto_rebalance for g in cl.guests], dtype=bool)[idx]  # None: all on
        self._view_auto_rebalance = None if auto.all() else auto
        self._all_ha = idx.size == cl.n_guests
        self._no_other = self._other_idx.size == 0
        # size 0: nothing a policy could change in them, so every view may share them
        self._empty_other = (
            cl.node[:0].copy(),
            cl.guest_cfg_maxcpu[:0].copy(),
            cl.guest_maxmem[:0].copy(),
        )
        # the HA manager's node states and the guests that run, as the views show them
        # (:meth:`set_nodes`, :meth:`running_changed`; set by the simulation's reset)
        self._view_online = cl.node_online
        self._view_node_flags: tuple[NDArray[np.bool_] | None, NDArray[np.bool_] | None] = (
            None,
            None,
        )
        self._view_running = cl.running[idx]
        self._all_running = True
        self._other_running = cl.running[other_idx]

    def set_nodes(
        self,
        online: NDArray[np.bool_],
        maintenance: NDArray[np.bool_] | None = None,
        fenced: NDArray[np.bool_] | None = None,
    ) -> None:
        """The node states the views show from now on (copies, read-only: a view is a
        snapshot): usable (``node_online``), in maintenance, fenced (None: no such row, the
        model stack)."""
        arrays = [np.array(online, dtype=np.bool_)]
        if maintenance is not None and fenced is not None:
            arrays += [maintenance, fenced]
        for arr in arrays:
            arr.flags.writeable = False
        self._view_online = arrays[0]
        self._view_node_flags = (maintenance, fenced)

    def running_changed(self) -> None:
        """A guest started or stopped (``ClusterState.running``): the views from now on see it."""
        cl = self.cluster
        self._view_running = cl.running[self.ha_idx]
        self._all_running = bool(self._view_running.all())
        self._other_running = cl.running[self._other_idx]

    def states(self, svc_state: list[str]) -> tuple[str, ...]:
        """The HA guests' service states in view order, from the table by cluster guest; kept
        until :meth:`states_changed` (most rounds none changes: the views share one tuple, which
        a balancer compares by identity)."""
        states = self._states
        if states is None:
            svc = svc_state
            states = tuple(svc) if self._all_ha else tuple([svc[i] for i in self._ha_list])
            self._states = states
        return states

    def states_changed(self) -> None:
        """The service table changed: the next view reads it anew."""
        self._states = None

    def _view_results(self, ended: list[Job]) -> tuple[MotionResult, ...]:
        """The results of the HA guests' motions that ended in the last round (``ended``; see
        ``Simulation.ended_motions``)."""
        cl = self.cluster
        results: tuple[MotionResult, ...] = ()
        if ended:
            results = tuple(
                MotionResult(
                    j.sid,
                    cl.node_names[j.source],
                    cl.node_names[j.target],
                    j.ok,
                    j.reason,
                    j.t_issued,
                    float(j.t_end or 0.0),
                )
                for j in ended
                if self._is_ha_list[j.guest]
            )
        return results

    def build(
        self,
        t: float,
        svc_place: NDArray[np.int64],
        states: tuple[str, ...],
        ended: list[Job],
        motion_active: bool,
        killed: set[int],
    ) -> ClusterView:
        """The view of the round at ``t`` (s): the telemetry's samples now, the service table
        (``svc_place``: rows :data:`~pvegym.sim.layout.SVC_NODE`/``SVC_TARGET`` by cluster
        guest; ``states``: the HA guests' states in view order), the motions ``ended`` in the
        last round, whether a motion is queued or running, the guests the OOM killer killed."""
        cl, off = self.cluster, self._disabled
        # one copy of each telemetry block (the view is a snapshot: later rounds do not change it),
        # both in one compiled call (view_snapshot); their rows by index, which costs less than
        # half of unpacking a block (an iterator)
        nb, gb = np.empty(self._node_shape), np.empty(self._guest_shape)
        self._snapshot(self._node_flat, self._node_take, self._guest_flat, self._guest_take, nb, gb)
        n_cpu, n_mem, n_cpu_some, n_mem_some, n_mem_full = nb[0], nb[1], nb[2], nb[3], nb[4]
        run_fraction, received, memhost = gb[1], gb[2], gb[3]
        g_cpu_some, g_cpu_full, g_mem_some, g_mem_full = gb[4], gb[5], gb[6], gb[7]
        # every guest HA: ha_idx is 0 … n − 1, and a copy is the take
        place = svc_place.copy() if self._all_ha else svc_place.take(self.ha_idx, axis=1)
        guest_node, guest_target = place[L.SVC_NODE], place[L.SVC_TARGET]
        other_node, other_maxcpu, other_maxmem = self._other_view(killed)
        if off:
            nan_n, nan_g = self._nan_nodes, self._nan_guests
            n_cpu = nan_n if "node_cpu" in off else n_cpu
            n_mem = nan_n if "node_mem" in off else n_mem
            n_cpu_some = nan_n if "node_cpu_some" in off else n_cpu_some
            n_mem_some = nan_n if "node_mem_some" in off else n_mem_some
            n_mem_full = nan_n if "node_mem_full" in off else n_mem_full
            guest_cpu = nan_g if "guest_cpu" in off else received
            guest_mem = nan_g if "guest_mem" in off else gb[8]
            memhost = nan_g if "guest_memhost" in off else memhost
            g_cpu_some = nan_g if "guest_cpu_some" in off else g_cpu_some
            g_cpu_full = nan_g if "guest_cpu_full" in off else g_cpu_full
            g_mem_some = nan_g if "guest_mem_some" in off else g_mem_some
            g_mem_full = nan_g if "guest_mem_full" in off else g_mem_full
        else:
            guest_cpu, guest_mem = received, gb[8]  # memhost × ratio
        results = self._view_results(ended)
        # positional, in :data:`_VIEW_FIELDS` order: a call with 34 keywords costs ~1 µs more
        view = _SimView(
            t,  # t
            cl.node_names,  # node_names
            self._view_online,  # node_online
            cl.node_maxcpu,  # node_maxcpu
            cl.node_maxmem,  # node_maxmem
            n_cpu,  # node_cpu
            n_mem,  # node_mem
            n_cpu_some,  # node_cpu_some
            n_mem_some,  # node_mem_some
            n_mem_full,  # node_mem_full
            self.sids,  # sids
            guest_node,  # guest_node
            guest_target,  # guest_target
            states,  # guest_state
            _LATER,  # guest_running: from run_fraction, when read
            self.guest_maxcpu,  # guest_maxcpu
            self.guest_maxmem,  # guest_maxmem
            guest_cpu,  # guest_cpu
            guest_mem,  # guest_mem
            memhost,  # guest_memhost
            g_cpu_some,  # guest_cpu_some
            g_cpu_full,  # guest_cpu_full
            g_mem_some,  # guest_mem_some
            g_mem_full,  # guest_mem_full
            self._view_migratable,  # guest_migratable
            self.rules,  # rules
            results,  # results
            motion_active,  # motion_active
            self._mode,  # mode
            other_node,  # other_node
            other_maxcpu,  # other_maxcpu
            other_maxmem,  # other_maxmem
            self._view_node_flags[0],  # node_maintenance
            self._view_node_flags[1],  # node_fenced
            self._view_auto_rebalance,  # guest_auto_rebalance
        )
        view._run_fraction = run_fraction  # a row of this view's copy of the telemetry
        view._running_mask = None if self._all_running else self._view_running
        return view

    def _other_view(
        self, killed: set[int]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """The running non-HA guests' node, vCPUs and memory (bytes) for a view: none when every
        guest is HA (shared empty arrays, the values a selection of nothing gives)."""
        cl = self.cluster
        if self._no_other:
            return self._empty_other
        other = self._other_idx[self._other_running]  # non-HA guests that run
        if killed:  # the OOM killer's victims do not
            other = np.array([g for g in other.tolist() if g not in killed], dtype=np.int64)
        return cl.node[other], cl.guest_cfg_maxcpu[other], cl.guest_maxmem[other]
