"""One simulated cluster under the HA manager: physics, the CRM round and the motion pipeline.

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

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.sim import layout as L
from pvegym.sim import link
from pvegym.sim.affinity import allowed_targets
from pvegym.sim.cluster import ClusterState
from pvegym.sim.ha_stack import HAStack
from pvegym.sim.kernel import entry_point, view_snapshot
from pvegym.sim.memory import GuestMemory
from pvegym.sim.metrics import Metrics, MoveRecord
from pvegym.sim.migration import COMPLETED, RUNNING, Migration
from pvegym.sim.motions import MAX_WORKERS, MIGRATE, RELOCATE, Job, migration_template
from pvegym.sim.network import fair_rates
from pvegym.sim.scenario import Scenario
from pvegym.sim.telemetry import Telemetry
from pvegym.sim.view import (
    STARTED,
    STOPPED,
    Balancer,
    ClusterView,
    Motion,
    MotionResult,
    NodeAffinityRule,
    ResourceAffinityRule,
    Rules,
)

CHURN_PRESSURE_PCT = 10.0  # docs/metrics.md: churn_moves
#: rows of ``Simulation.node_flags``: in maintenance; fenced or being fenced (``fence``, or
#: ``unknown``/``gone``: outside the quorate partition, fenced before its services are recovered)
NODE_MAINTENANCE, NODE_FENCED = 0, 1
#: qemu-server ``QemuServer/Memory.pm`` ``hugepages_allocate``: the target cannot start the guest.
HUGEPAGES_FAILED = "hugepage allocation failed"


#: ClusterView's slot of the field, which _SimView's property reads and writes
_RUNNING_SLOT: Any = ClusterView.__dict__["guest_running"]
#: a ``guest_running`` to be computed when read (:class:`_SimView`)
_LATER: Any = None
#: :class:`ClusterView`'s fields in declaration order, the order ``Simulation._build_view``
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
    raise ImportError(
        "ClusterView's fields changed: update _VIEW_FIELDS and Simulation._build_view"
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


class Simulation:
    """A scenario, a seed and the HA manager: ``reset()`` then ``step(motion)`` once per round."""

    def __init__(self, scenario: Scenario, seed: int = 0) -> None:
        self.scenario = scenario
        self.round_s = scenario.round_s
        self.seed = seed
        self._migration_template = migration_template(scenario.migration)
        self.rules = Rules(
            node_affinity=tuple(
                NodeAffinityRule(
                    r.name, tuple(r.resources), tuple(sorted(r.nodes.items())), r.strict
                )
                for r in scenario.node_affinity
            ),
            resource_affinity=tuple(
                ResourceAffinityRule(r.name, tuple(r.resources), r.affinity == "positive")
                for r in scenario.resource_affinity
            ),
        )
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
        self.guests = cl.guests
        self.ha_idx = np.array([i for i, g in enumerate(cl.guests) if g.ha], dtype=np.int64)
        self._other_idx = np.array([i for i, g in enumerate(cl.guests) if not g.ha], dtype=np.int64)
        self.ha_sids = tuple(cl.sids[i] for i in self.ha_idx)
        self._is_ha = np.zeros(cl.n_guests, dtype=bool)
        self._is_ha[self.ha_idx] = True
        self.positive: dict[int, list[int]] = {}
        self.negative: dict[int, list[int]] = {}
        for rule in self.scenario.resource_affinity:
            members = [cl.guest_index[s] for s in rule.resources]
            table = self.positive if rule.affinity == "positive" else self.negative
            for m in members:
                table.setdefault(m, []).extend(
                    x for x in members if x != m and x not in table.get(m, [])
                )
        # negative-affinity partners in CSR form (cluster guest indices), for compiled mask code
        counts = [len(self.negative.get(i, ())) for i in range(cl.n_guests)]
        self.neg_ptr = np.cumsum([0, *counts]).astype(np.int64)
        self.neg_idx = np.array(
            [p for i in range(cl.n_guests) for p in self.negative.get(i, ())], dtype=np.int64
        )
        # node affinity: the targets each guest's rules allow (with the full stack recomputed as
        # the HA manager's node states change: set_node_states)
        self.node_allowed = allowed_targets(self.rules, cl.sids, cl.node_names, cl.node_online)
        self._migratable = np.array([not g.local_resources for g in cl.guests])
        # constant per-guest/per-node facts as Python lists: the per-motion code reads them one
        # element at a time, which costs a NumPy array several times a list's
        self._is_ha_list: list[bool] = self._is_ha.tolist()
        self._maxcpu_list: list[float] = cl.guest_maxcpu.tolist()  # vCPUs
        self._ha_list: list[int] = self.ha_idx.tolist()
        self._migratable_list: list[bool] = self._migratable.tolist()
        self._online_list: list[bool] = cl.node_online.tolist()
        self._motion_kind = [MIGRATE if sid.startswith("vm:") else RELOCATE for sid in cl.sids]
        self._lrm_delay_max_s = self.scenario.migration.lrm_delay_max_s
        # the migration links (bytes/s, by node index) and one stream's cap (pvegym.sim.network)
        ms, specs = self.scenario.migration, {n.name: n for n in self.scenario.nodes}
        self._link_bw: list[float] = [
            ms.link_bandwidth if (bw := specs[name].link_bandwidth) is None else bw
            for name in cl.node_names
        ]
        self._stream_cap = ms.bandwidth
        # _migration_costs' constants: its divisors (the very products it would compute each
        # round) and the migration threads' cores
        self._fault_scale = [c * self.round_s for c in self._maxcpu_list]
        self._wire_scale = ms.bandwidth * self.round_s
        self._cpu_source_cores = ms.cpu_source_cores
        self._cpu_target_cores = ms.cpu_target_cores
        # the model stack's LRM worker pool per source node; the full stack's LRMs keep their own
        self._max_workers = MAX_WORKERS if self.scenario.ha_stack == "model" else 1 << 30
        self._disabled = set(self.scenario.telemetry.disabled)
        self._nan_nodes = np.full(cl.n_nodes, np.nan)
        self._nan_guests = np.full(self.ha_idx.size, np.nan)
        self._bind_view()
        self._reset_state()

    def _reset_state(self) -> None:
        cl = self.cluster
        cl.reset()
        self.memory.reset()
        self.telemetry.reset()
        self.t = 0.0
        self.svc_state = [STARTED if g.state == "started" else STOPPED for g in cl.guests]
        self.svc_started = np.array([st == STARTED for st in self.svc_state], dtype=np.bool_)
        # the HA guests' states as a view's tuple, kept until a state changes (most rounds none
        # does: the views share one tuple, which a balancer compares by identity)
        self._view_states: tuple[str, ...] | None = None
        # where each service is and where it is going (-1: nowhere), rows of one array so that
        # compiled code takes them as one argument
        self.svc_place = np.empty((L.SVC_ROWS, cl.n_guests), dtype=np.int64)
        self.svc_node = self.svc_place[L.SVC_NODE]
        self.svc_target = self.svc_place[L.SVC_TARGET]
        self.svc_node[:] = cl.home
        self.svc_target[:] = -1
        self.cmds: dict[int, tuple[str, int]] = {}
        self.jobs: list[Job] = []  # in queueing order; the LRMs' workers run them at once
        self.finished: list[Job] = []  # ended, not yet seen by the CRM
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
        self._view: ClusterView | None = None
        self._results: list[Job] = []
        self._pending_move: dict[int, int] = {}  # guest -> index of its MoveRecord until queued
        # a bundle's motion (model stack): its record ends with the last member's job; until
        # then the leader's result (ok, aborted, reason, pause s) waits here, by move index
        self._bundle_moves: set[int] = set()
        self._leader_result: dict[int, tuple[bool, bool, str, float]] = {}
        # the streams whose rates _share_links set last: the same jobs, the same rates (the jobs
        # themselves, not their ids: an id may be reused once its job is freed)
        self._rate_streams: tuple[Job, ...] = ()
        self._pause_left: dict[int, float] = {}  # guest -> switchover pause still to serve (s)
        self._ended_migration: Migration | None = None  # its arrays serve the next migration
        self._motion_rows_set = True  # reserved_mem / motion_cpu need clearing
        self._killed: set[int] = set()  # guests the OOM killer killed
        # ha_stack = "full": the port's CRM and LRMs run the round (pvegym.sim.ha_stack); a
        # motion is queued or running in their manager status, or no master has written the
        # services' status yet (HAStack.sync)
        self._ha_active = self.scenario.ha_stack == "full"
        # the HA manager's node states (ha_stack = "full": its manager status; the model stack:
        # the configured online nodes throughout): what a balancer may target (``node_usable``,
        # ``_online_list``; the view's and the observation's ``online``) and the observation's
        # other node-state rows (``node_flags``: maintenance, fenced; the view's
        # ``node_maintenance``/``node_fenced``); ``node_state_version`` counts changes
        self.node_usable = cl.node_online.copy()
        self._online_list[:] = cl.node_online.tolist()
        self.node_flags = np.zeros((2, cl.n_nodes))
        self.node_state_version = 0
        self._view_online = cl.node_online.copy()
        self._view_online.flags.writeable = False
        self._view_node_flags: tuple[Any, Any] = (None, None)
        self._view_running = cl.running[self.ha_idx]
        self._all_running = bool(self._view_running.all())
        self._other_running = cl.running[self._other_idx]
        self._stack = HAStack(self) if self.scenario.ha_stack == "full" else None

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
            self._view = self._build_view()
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
        if self._pause_left:
            self._carry_pauses(dt)
        if self.jobs:
            self._motion_rows_set = True
            self._lrm(t0, t1)
        if self._stack is not None:  # between the motions' physics and the cluster's
            self._stack.lrm_ticks(t0, t1)
        if self._memory_moves:
            self.memory.round(t0, dt, self._migrating())
        tel = self.telemetry
        if tel.arrivals:  # moved guests whose samples are held back or report cpu 0
            tel.before_round(t1)
        cl.advance(t1, dt)  # clips run_fraction at 0: the pipeline may take more than a round
        if tel.rrd:  # the kernel took pvestatd's samples: the RRD's minute averages
            tel.after_round(t1)
        tot = cl.totals.tolist()  # one conversion: numpy scalar indexing costs ~100 ns a read
        if tot[L.T_OOM]:  # a node's memory in use went past MemTotal + swap
            self._oom_kill(t1)
        if self._stack is not None:  # HA services requested started that do not run
            self.metrics.services_down_s += dt * self._stack.down_count()
        elif self._killed:
            self.metrics.services_down_s += dt * sum(self._is_ha_list[g] for g in self._killed)
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
        joins them (:meth:`_join`)."""
        self._motion_rows_set = True
        if len(self.jobs) == 1:
            self._lrm(t0, t1)
        else:
            self._join(self.jobs[-1], t0, t1)

    def _oom_kill(self, t: float) -> None:
        """The kernel's OOM killer on each node whose memory in use exceeds MemTotal + swap
        (``mm/oom_kill.c``): it kills the task with the highest ``oom_badness`` — resident and
        swapped memory, qemu-server sets no ``oom_score_adj`` — i.e. the QEMU (``kvm``) process of
        the guest with the largest footprint, until the rest fits. The guest is down from the next
        round (its memory freed, its work shortfall); restarting an HA guest is the LRM's."""
        cl = self.cluster
        for n in np.flatnonzero(cl.mem_wanted > cl.oom_limit).tolist():
            if not cl.node_online[n]:
                continue
            over = float(cl.mem_wanted[n] - cl.oom_limit[n])
            while over > 0.0:
                alive = [
                    g
                    for g in np.flatnonzero((cl.node == n) & cl.running).tolist()
                    if g not in self._killed and cl.memhost[g] > 0.0
                ]
                if not alive:
                    break
                g = max(alive, key=lambda i: (float(cl.memhost[i]), -i))
                rss = float(cl.memhost[g])
                self._killed.add(g)
                cl.balloon[g] = 0.0  # the process is gone: no memory, no work
                over -= rss
                self.metrics.oom_kills += 1
                self._log.append(
                    (
                        t,
                        f"{cl.node_names[n]}: Out of memory: Killed process (kvm) of {cl.sids[g]}"
                        f" anon-rss:{rss / 1024:.0f}kB oom_score_adj:0",
                    )
                )

    def _migrating(self) -> tuple[int, ...]:
        """The guests whose live migration runs now (qemu-server holds ``lock migrate``)."""
        if not self.jobs:
            return ()
        return tuple(job.guest for job in self.jobs if job.phase == "transfer")

    def _carry_pauses(self, dt: float) -> None:
        """The part of a switchover pause that did not fit in the round it started in."""
        for g, left in list(self._pause_left.items()):
            take = min(left, dt)
            self.cluster.run_fraction[g] -= take / dt
            if left > take:
                self._pause_left[g] = left - take
            else:
                del self._pause_left[g]

    def _lrm(self, t0: float, t1: float) -> None:
        """The LRM workers over the round (t0, t1]: a lone job through its phases at its
        links' rate (:meth:`_run_alone`, the path every single motion takes); several jobs at
        once, sharing the migration links (:meth:`_lrm_shared`)."""
        if len(self.jobs) == 1:
            self._run_alone(self.jobs[0], t0, t1)
        else:
            self._lrm_shared(t0, t1)

    def _run_alone(self, job: Job, t0: float, t1: float, rate: float | None = None) -> None:
        """One job over the round (t0, t1] by itself, through its phases (queued → precheck →
        transfer, or queued → down for a container). ``rate``: its stream's bandwidth
        (bytes/s); None: a lone stream's (:meth:`_lone_rate`)."""
        cl = self.cluster
        dt = t1 - t0
        t = t0
        while job.phase != "done" and t < t1:
            start = max(job.t_start, t)
            if start >= t1:
                return
            g = job.guest
            phase = job.phase
            if phase == "queued":
                self._begin(job, start)
                phase = job.phase
            if phase == "precheck":
                if job.t_phase_end >= t1:
                    return
                t = job.t_phase_end
                if not self._start_transfer(job, t):
                    continue
                phase = "transfer"
            if phase == "transfer":
                if self._stack is not None and (
                    job.t_stall is not None or not self._stack.link_up(job.source, job.target)
                ):
                    t = self._stalled(job, t, t1)
                    if t >= t1:
                        return
                    if job.phase == "done":
                        continue
                mig = job.migration
                assert mig is not None
                if job.rate_shared or rate is not None:  # it shared a link, or it joins others
                    bandwidth = self._lone_rate(job) if rate is None else rate
                    if mig.bandwidth != bandwidth:
                        mig.set_bandwidth(bandwidth)
                outcome, throttled, fault_s, wire = mig.advance_costs(t1 - t)
                self._migration_costs(job, throttled / dt, fault_s, wire)
                if outcome == RUNNING:  # the target holds the incoming guest's memory, unmerged
                    reserved, target = cl.reserved_mem, job.target  # (a Python float sum: the
                    # same double as NumPy's scalar +=, without its boxing)
                    reserved[target] = reserved.item(target) + self.memory.footprint(g)
                    return
                t = _ends_at(job)
                self._transfer_ended(job, mig, outcome, t, t1, dt)
                continue
            if phase == "down":
                self._down_round(job, t0, t1)
                if job.t_phase_end >= t1:
                    return
                t = job.t_phase_end
                self._relocated(job)

    def _begin(self, job: Job, start: float) -> None:
        """A worker takes the job at ``start`` (s): a container shuts down (down until it started
        on the target), anything else runs its precheck."""
        ms = self.scenario.migration
        if job.kind == RELOCATE and self._migratable_list[job.guest]:
            job.phase = "down"
            job.t_transfer_start = start
            job.t_phase_end = start + ms.ct_shutdown_s + ms.ct_start_s
        else:
            job.phase = "precheck"
            job.t_phase_end = start + ms.precheck_s

    def _down_round(self, job: Job, t0: float, t1: float) -> None:
        """A relocating container's downtime within the round (t0, t1] (its work is shortfall)."""
        lo, hi = max(job.t_transfer_start, t0), min(job.t_phase_end, t1)
        self.cluster.run_fraction[job.guest] -= max(hi - lo, 0.0) / (t1 - t0)

    def _relocated(self, job: Job) -> None:
        """A container's relocation ends at ``t_phase_end``: it runs on the target."""
        t, g = job.t_phase_end, job.guest
        down = job.t_phase_end - job.t_transfer_start
        self.metrics.downtime_s += down
        self.cluster.node[g] = job.target
        self.memory.arrived(g)
        self.telemetry.arrived(g, t, job.source)
        self._finish(job, t, ok=True, pause_s=down)

    def _lone_rate(self, job: Job) -> float:
        """A stream alone on its links: one stream's cap, or less on a slower link (bytes/s)."""
        link = self._link_bw
        return min(self._stream_cap, link[job.source], link[job.target])

    # ------------------------------------------------------------------ motions at once
    def _lrm_shared(self, t0: float, t1: float) -> None:
        """Several jobs over the round (t0, t1] at once, event by event: a worker takes a job
        (model stack: while its source has a free worker, ``max_workers``), a precheck or a
        container's downtime ends, a live migration ends. The streams' rates are recomputed at
        every event (:meth:`_share_links`), so they are exact between events: no time slices."""
        dt = t1 - t0
        t = t0
        flows_from = self._stalls_in_round(t0, t1)
        while self.jobs:
            # the next event: the first fixed-time step due (a transfer has none: _due's inf)
            # or stalled stream flowing again; min is exact, so one pass in any order
            t_next = t1
            streams = []
            for j in self.jobs:
                if j.phase == "transfer":
                    at = flows_from.get(id(j), t0)
                    if at <= t:
                        streams.append(j)
                    else:
                        t_next = min(t_next, at)
                else:
                    t_next = min(t_next, self._due(j, t, t1))
            if streams:
                self._share_links(streams)
                t_next = self._advance_streams(streams, t, t_next, t1, dt)
            t = t_next
            if not self._transitions(t, t0, t1) and t >= t1:
                break
        cl = self.cluster
        for job in self.jobs:  # the round's end
            if job.phase == "transfer" and flows_from.get(id(job), t0) < t1:
                # the target holds the incoming guest's memory (a stall held it already)
                cl.reserved_mem[job.target] += self.memory.footprint(job.guest)
            elif job.phase == "down":
                self._down_round(job, t0, t1)

    def _stalls_in_round(self, t0: float, t1: float) -> dict[int, float]:
        """The transfers whose link is cut or was (full stack, :meth:`_stalled`) over the round
        (t0, t1]: the time each flows again from (s; ``inf`` while it stands still through the
        round), by ``id`` of the job; a stall that times out ends its job. Links change only
        between rounds, so one look at the round's start is exact."""
        stack = self._stack
        if stack is None:
            return {}
        flows_from: dict[int, float] = {}
        for job in list(self.jobs):
            if job.phase == "transfer" and (
                job.t_stall is not None or not stack.link_up(job.source, job.target)
            ):
                end = self._stalled(job, t0, t1)
                if job.phase == "transfer":
                    flows_from[id(job)] = math.inf if end >= t1 else end
        return flows_from

    def _due(self, job: Job, t: float, t1: float) -> float:
        """When the job's next fixed-time step falls, from ``t`` on (s): a worker takes it, its
        precheck or downtime ends; ``inf`` if not before ``t1`` or not fixed (a transfer)."""
        phase = job.phase
        if phase == "queued":
            start = max(job.t_start, t)
            return start if start < t1 and self._worker_free(job) else math.inf
        if phase == "precheck" or phase == "down":
            return job.t_phase_end if job.t_phase_end < t1 else math.inf
        return math.inf

    def _worker_free(self, job: Job) -> bool:
        """The job's source runs fewer than ``max_workers`` motions (``LRM.pm`` ``run_workers``;
        the full stack's LRMs count their workers themselves)."""
        busy = sum(1 for j in self.jobs if j.source == job.source and j.phase != "queued")
        return busy < self._max_workers

    def _transitions(self, t: float, t0: float, t1: float) -> bool:
        """Every fixed-time step due by ``t`` (s); whether any ran."""
        ran, again = False, True
        while again:
            again = False
            for job in list(self.jobs):
                if job.phase == "transfer":  # no fixed-time step (_due: inf)
                    continue
                at = self._due(job, t, t1)
                if at > t:
                    continue
                if job.phase == "queued":
                    self._begin(job, at)
                elif job.phase == "precheck":
                    self._start_transfer(job, at)
                else:
                    self._down_round(job, t0, t1)
                    self._relocated(job)
                ran = again = True
        return ran

    def _share_links(self, streams: list[Job]) -> None:
        """Each stream's rate: its max-min fair share of its source's and its target's migration
        link, at most one stream's cap (:func:`pvegym.sim.network.fair_rates`); recomputed when
        the set of streams changed (the links themselves are the scenario's constants)."""
        last = self._rate_streams
        if len(last) == len(streams) and all(a is b for a, b in zip(last, streams, strict=True)):
            return  # the same streams as last time (the same objects): the same rates
        self._rate_streams = tuple(streams)
        pairs = [(j.source, j.target) for j in streams]
        for job, rate in zip(
            streams, fair_rates(pairs, self._stream_cap, self._link_bw), strict=True
        ):
            job.rate_shared = True
            mig = job.migration
            assert mig is not None
            if mig.bandwidth != rate:
                mig.set_bandwidth(rate)

    def _advance_streams(
        self, streams: list[Job], t: float, t_next: float, t1: float, dt: float
    ) -> float:
        """Advance the live migrations from ``t`` to ``t_next`` (s) at their rates, or only to
        the first one's end before it (the others are rolled back and advanced to that instant:
        the rates change there); the time reached."""
        saved = [_mig(j).snapshot() for j in streams] if len(streams) > 1 else []
        steps = [_mig(j).advance_costs(t_next - t) for j in streams]
        first = t_next
        for job, step in zip(streams, steps, strict=True):
            if step[0] != RUNNING:  # not before t (an end at t, summed in another order)
                first = max(t, min(first, _ends_at(job)))
        if saved and first < t_next:
            for i, job in enumerate(streams):
                mig = _mig(job)
                if steps[i][0] == RUNNING or _ends_at(job) > first:
                    mig.restore(saved[i])
                    steps[i] = mig.advance_costs(first - t)
        for job, (outcome, throttled, fault_s, wire) in zip(streams, steps, strict=True):
            self._migration_costs(job, throttled / dt, fault_s, wire)
            if outcome != RUNNING:
                mig = _mig(job)
                self._transfer_ended(job, mig, outcome, _ends_at(job), t1, dt)
        return first

    def _join(self, job: Job, t0: float, t1: float) -> None:
        """A job a full-stack LRM worker queued at its tick in the round (t0, t1] while others
        have run through the round already: it runs over the rest of the round at once (so the
        worker's polls see its end) at the rate the others leave on its links — the whole of it
        when the links have room, as max-min fairness would give it too; none when they are full,
        and then it starts with the next round. From the next round on all share fairly."""
        link, rate = self._link_bw, self._stream_cap
        out, into = link[job.source], link[job.target]
        stack = self._stack
        for j in self.jobs:
            if j is job or j.phase != "transfer" or j.migration is None:
                continue
            if j.t_stall is None and (stack is None or stack.link_up(j.source, j.target)):
                if j.source == job.source:
                    out -= j.migration.bandwidth
                if j.target == job.target:
                    into -= j.migration.bandwidth
        rate = min(rate, out, into)
        if rate > 0.0:
            job.rate_shared = True
            self._run_alone(job, t0, t1, rate)

    def _start_transfer(self, job: Job, t: float) -> bool:
        """The end of a job's precheck at ``t``: start its live migration, or fail the job (a
        local resource, or huge pages the target cannot allocate); whether it transfers."""
        cl, g = self.cluster, job.guest
        if not self._migratable_list[g]:
            self._finish(job, t, ok=False, reason="local resource")
            return False
        if self._stack is not None and not self._stack.link_up(job.source, job.target):
            self._finish(job, t, ok=False, reason=link.NO_SSH)  # prepare's ssh test
            return False
        spec = self.guests[g]
        if spec.hugepages and (
            cl.node_maxmem[job.target] - cl.node_mem[job.target] < spec.maxmem
        ):  # qemu-server Memory.pm hugepages_allocate, when the target starts the guest
            self._finish(job, t, ok=False, reason=HUGEPAGES_FAILED)
            return False
        memory = spec.maxmem
        footprint = self.memory.footprint(g)  # KSM-merged pages are sent whole
        job.migration = Migration.for_guest(
            self._migration_template,
            memory,
            min(max(footprint, 1.0), memory),
            spec.dirty_rate,
            spec.wws if spec.wws is not None else memory,
            spec.throttle_sensitivity,
            spec.xbzrle_delta,
            reuse=self._ended_migration,
        )
        self._ended_migration = None
        rate = self._lone_rate(job)
        if rate != self._stream_cap:  # a link slower than one stream's cap
            job.migration.set_bandwidth(rate)
        job.phase = "transfer"
        job.t_transfer_start = t
        return True

    def _transfer_ended(
        self, job: Job, mig: Migration, outcome: str, t: float, t1: float, dt: float
    ) -> None:
        """A live migration that ended at ``t`` in the round ending ``t1`` (``dt`` s long):
        completed (the guest pauses, then counts on the target) or aborted."""
        cl, g, run_fraction = self.cluster, job.guest, self.cluster.run_fraction
        self.metrics.migration_bytes += mig.transferred
        self.metrics.migration_seconds += mig.t + job.stalled_s
        # nothing reads an ended migration: the next one reuses its arrays
        job.migration, self._ended_migration = None, mig
        if outcome == COMPLETED:  # from now on the guest counts on the target
            down = mig.guest_pause_s  # QEMU downtime + poll lag + resume on target
            run_fraction[g] -= min(down, t1 - t) / dt
            if down > t1 - t:  # a long pause continues into the next rounds
                self._pause_left[g] = down - (t1 - t)
            self.metrics.downtime_s += down
            cl.node[g] = job.target
            self.memory.arrived(g)
            self.telemetry.arrived(g, t + down, job.source)  # runs there after the pause
            self._finish(job, t, ok=True, pause_s=down)
        else:
            cl.reserved_mem[job.target] += self.memory.footprint(g)
            self._finish(job, t, ok=False, aborted=True, reason=mig.error or "no convergence")

    def _stalled(self, job: Job, t: float, t1: float) -> float:
        """A transfer whose link is cut at ``t`` or was (:mod:`pvegym.sim.link`), over the rest of
        the round ``(t, t1]``: the stream stands still (the guest runs on the source under the
        throttle it has, the target holds its memory) until TCP's next retransmission after the
        link is back carries it again, or fails it — the timeout (``tcp_retries2``), or the RST of
        a target that rebooted. Returns the time the LRM goes on from: ``t1`` if the stall lasts
        through the round, else when it ended (the job then flows again or is done)."""
        stack = self._stack
        assert stack is not None
        if job.t_stall is None:
            job.t_stall = t
        if not stack.link_up(job.source, job.target):
            job.t_resume = None  # (cut again before a retransmission got through)
        elif job.t_resume is None:  # back now: the first retransmission from now on
            job.t_resume = job.t_stall + link.next_retransmission(t - job.t_stall)
        timeout = job.t_stall + link.TCP_TIMEOUT_S
        end = timeout if job.t_resume is None else min(timeout, job.t_resume)
        mig = job.migration
        assert mig is not None
        cl = self.cluster
        cl.run_fraction[job.guest] -= mig.throttle_pct / 100.0 * (min(end, t1) - t) / self.round_s
        failed = end <= t1 and (end >= timeout or job.peer_reset)
        if (end > t1 or failed) and cl.node_online[job.target]:
            # the incoming QEMU holds the guest's memory (a stream that flows again: its round)
            cl.reserved_mem[job.target] += self.memory.footprint(job.guest)
        if end > t1:
            return t1
        if failed:
            self._stream_failed(job, mig, end)
        else:  # the link carries the stream again
            job.stalled_s += end - job.t_stall
            job.t_stall = job.t_resume = None
        return end

    def _stream_failed(self, job: Job, mig: Migration, t: float) -> None:
        """QEMU's migration failed at ``t`` when the tunnel's TCP connection died: qemu-server
        logs the error and cancels (``QemuMigrate.pm`` ``phase2``, ``phase2_cleanup``); the guest
        stays on its source, running."""
        assert job.t_stall is not None
        self.metrics.migration_bytes += mig.transferred
        self.metrics.migration_seconds += mig.t + job.stalled_s + (t - job.t_stall)
        job.migration, self._ended_migration = None, mig
        for line in (link.STREAM_FAILED, *link.PHASE2_CLEANUP):
            self._log.append((t, f"{job.sid}: {line}"))
        self._finish(job, t, ok=False, aborted=True, reason=link.STREAM_FAILED)

    def _migration_costs(self, job: Job, throttled: float, fault_s: float, wire: float) -> None:
        """What a live migration's round costs the guest and the hosts: the auto-converge
        throttle (``throttled``: the round's share the guest lost), the guest's dirty-tracking
        faults (vCPU seconds, spread over its vCPUs) and the migration threads' cores on the
        source and the target in proportion to the stream's duty (``wire`` bytes sent of what
        the bandwidth allows in a round).

        In Python floats (``item``, one store per element): the same IEEE double operations, in
        the same order, as ``run_fraction[g] -= throttled`` then ``-= fault_s / (maxcpu · dt)``
        on the array's elements, at a fraction of NumPy scalar arithmetic's cost; the divisors
        ``maxcpu · round_s`` and ``bandwidth · round_s`` are the same products computed once
        (:meth:`_build`)."""
        cl, g = self.cluster, job.guest
        run_fraction, motion_cpu = cl.run_fraction, cl.motion_cpu
        run_fraction[g] = run_fraction.item(g) - throttled - fault_s / self._fault_scale[g]
        duty = wire / self._wire_scale
        source, target = job.source, job.target
        motion_cpu[source] = motion_cpu.item(source) + self._cpu_source_cores * duty
        motion_cpu[target] = motion_cpu.item(target) + self._cpu_target_cores * duty

    def _finish(
        self,
        job: Job,
        t: float,
        ok: bool,
        aborted: bool = False,
        reason: str = "",
        pause_s: float = 0.0,
    ) -> None:
        job.phase, job.t_end, job.ok, job.aborted, job.reason = "done", t, ok, aborted, reason
        if self.jobs[0] is job:  # the running job (FIFO); a node's power-off ends any
            self.jobs.pop(0)
        else:
            self.jobs.remove(job)
        self.finished.append(job)
        if job.move_id is not None:
            rec = self.metrics.moves[job.move_id]
            if job.move_id in self._bundle_moves:
                self._bundle_job_ended(job, rec, (ok, aborted, reason, pause_s))
            else:
                self.metrics.move_ended(rec, ok, aborted, reason, t, pause_s)
        self._log.append((t, job))  # rendered by :attr:`log` when read

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
        if leader is None or any(j.move_id == mid for j in self.jobs):
            return
        del self._leader_result[mid]
        ok, aborted, reason, pause_s = leader
        self.metrics.move_ended(rec, ok, aborted, reason, job.t_end, pause_s)

    @property
    def log(self) -> list[tuple[float, str]]:
        """The HA manager's and the LRM's log of the episode, ``(t, line)``."""
        names = self.cluster.node_names
        out: list[tuple[float, str]] = []
        for t, entry in self._log:
            if isinstance(entry, Job):  # an ended motion
                verb = "migration" if entry.kind == MIGRATE else "relocation"
                outcome = "finished" if entry.ok else f"failed: {entry.reason}"
                entry = f"{entry.sid}: {verb} to {names[entry.target]} {outcome}"
            out.append((t, entry))
        return out

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
                self._queue(self.cluster.guest_index[ev.sid], self.cluster.node_index[ev.target])
            else:  # validation admits the other events with the full stack only
                assert self._stack is not None
                self._stack.event(ev)
        if self.finished:  # jobs end in (t − round, t], so every finished one is due now
            self._results, self.finished = self.finished, []
        self._view = None

    def result_flags(self) -> tuple[bool, bool]:
        """Whether an HA motion result arrived this round that succeeded / failed (the motions
        :meth:`ended_motions` lists)."""
        if not self._results:  # most rounds: read once per environment step
            return False, False
        is_ha = self._is_ha_list
        ok = failed = False
        for j in self._results:  # one pass, no generators: a result arrives every few rounds
            if is_ha[j.guest]:
                if j.ok:
                    ok = True
                else:
                    failed = True
        return ok, failed

    def ended_motions(self) -> list[tuple[int, int, int, bool, float, float]]:
        """The HA motions whose result the CRM sees this round (what ``view.results`` shows):
        ``(guest, source, target, ok, t_issued, t_end)`` with cluster guest and node indices and
        times in s. An environment's motion memory reads them without building the view.

        With the full stack: the motions the physics ended in the last round, whose result the
        port's CRM reads from the LRM's status this round or the next (when the LRM tick that
        collects it falls after the round of the end; ``pvegym.sim.ha_stack``)."""
        if not self._results:
            return []
        is_ha = self._is_ha_list
        return [
            (j.guest, j.source, j.target, j.ok, j.t_issued, float(j.t_end or 0.0))
            for j in self._results
            if is_ha[j.guest]
        ]

    def commit(self, motion: Motion | None) -> bool:
        """Queue the balancer's motion (if valid) and run the service state machine.

        Returns whether the motion was queued (an invalid one is logged and dropped, as the HA
        manager ignores a command for an offline or current node).
        """
        queued = False
        if motion is not None:
            queued = self._balancer_motion(motion)
        if self._stack is not None:  # the port's CRM round and the LRMs' ticks
            if queued and motion is not None:
                self._stack.describe(motion)
            self._stack.round()
            return queued
        self._next_states()
        return queued

    def commit_index(self, g: int, target: int) -> bool:
        """:meth:`commit` of the motion of guest ``g`` (cluster index) to node index ``target``,
        the environment's discrete action, without resolving names or building a
        :class:`Motion`.

        A motion :meth:`motion_possible` rejects is dropped without a log line (the environment
        counts it as an invalid action and never hands it to the HA manager); returns whether it
        was queued.
        """
        if self._stack is not None:
            queued = self.motion_possible(g, target)
            if queued:
                self._issue(g, target)
            self._stack.round()
            return queued
        if not self.motion_possible(g, target):
            self._next_states()
            return False
        if g in self.positive:  # a bundle: queue_resource_motion moves the partners too
            self._issue(g, target)
            self._next_states()
            return True
        # a lone guest, and motion_possible() implies an idle pipeline (no command, job or
        # result): queueing it and the state machine reduce to starting its one job
        move_id = self._record_move(g, target)
        self._start_job(g, self._motion_kind[g], target, int(self.svc_node[g]), move_id)
        return True

    def _next_states(self) -> None:
        """The service state machine of the CRM round: motion results, then queued commands."""
        cl = self.cluster
        if self._results:
            for job in self._results:  # next_state_migrate_relocate
                g = job.guest
                self.svc_state[g] = STARTED
                self._view_states = None
                self.svc_started[g] = True
                self.svc_target[g] = -1
                self.svc_node[g] = job.target if job.ok else job.source
            self._results = []
        if not self.cmds:  # most rounds: nothing queued
            return
        offsets: dict[int, float] = {}  # source node -> its LRM's tick in this round
        for g, (kind, target) in sorted(self.cmds.items()):  # next_state_started with a cmd
            if self.svc_state[g] == STOPPED:  # next_state_stopped: a stopped guest moves offline
                del self.cmds[g]
                self._drop_partner_move(g)
                if self._online_list[target]:
                    self.svc_node[g] = target
                    cl.node[g] = target
                continue
            if self.svc_state[g] != STARTED:
                continue  # still in a motion: the command waits for its result
            del self.cmds[g]
            if target == self.svc_node[g] or not self._online_list[target]:
                self._drop_partner_move(g)
                continue
            move_id = self._pending_move.pop(g, None)
            self._start_job(g, kind, target, int(self.svc_node[g]), move_id, offsets)

    def _drop_partner_move(self, g: int) -> None:
        """A bundle partner's command that starts no job: it takes no part in the record."""
        mid = self._pending_move.get(g)
        if mid is None or mid not in self._bundle_moves:
            return
        if self.metrics.moves[mid].guest != self.cluster.sids[g]:
            del self._pending_move[g]

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
        self._view_states = None
        self.svc_started[g] = False
        self.svc_target[g] = target
        offset = None if offsets is None else offsets.get(source)
        if offset is None:
            # = uniform(0, max): NumPy computes low + (high − low)·random(), the same double
            # from the same draw, at a quarter of uniform()'s argument handling
            offset = 0.0 + self._lrm_delay_max_s * self._lrm_rng.random()
            if offsets is not None:
                offsets[source] = offset
        job = Job(g, self.cluster.sids[g], source, target, kind, self.t, self.t + offset)
        job.move_id = move_id
        self.jobs.append(job)

    def motion_possible(self, g: int, target: int) -> bool:
        """Whether the HA manager would queue a balancer motion of guest ``g`` to ``target`` now."""
        # motion_active(), inlined
        if self.cmds or self.jobs or self.finished or self._results or self._ha_active:
            return False
        return self._placement_possible(g, target)

    def _placement_possible(self, g: int, target: int) -> bool:
        """:meth:`motion_possible` with an idle pipeline: ``g`` is a started HA service, and
        ``target`` an online node other than its own that its rules allow."""
        if not self._is_ha_list[g] or self.svc_state[g] != STARTED:
            return False
        if target == self.svc_node[g] or not self._online_list[target]:
            return False
        if not self.node_allowed[g, target]:
            return False
        negative = self.negative.get(g)
        if negative:  # a loop, not any() over a generator: this runs for every action taken
            svc_node, svc_target = self.svc_node, self.svc_target
            for p in negative:
                if svc_node[p] == target or svc_target[p] == target:
                    return False
        return True

    def motion_active(self) -> bool:
        """``any_resource_motion_queued_or_running``: a service in migrate/relocate or a queued cmd."""
        # a service is in migrate/relocate from its job's creation until the CRM has processed
        # the job's result, so the job lists answer this in O(1); with the full stack (its
        # manager status says) _ha_active
        return bool(self.cmds or self.jobs or self.finished or self._results or self._ha_active)

    def _balancer_motion(self, motion: Motion) -> bool:
        cl = self.cluster
        g = cl.guest_index.get(motion.sid)
        target = cl.node_index.get(motion.target)
        if g is None or target is None or not self._is_ha_list[g] or self.svc_state[g] != STARTED:
            self._log.append(
                (
                    self.t,
                    f"ignored motion {motion.sid} -> {motion.target}: not a started HA service",
                )
            )
            return False
        if not self.motion_possible(g, target):
            self._log.append(
                (self.t, f"ignored motion {motion.sid} -> {motion.target}: not possible now")
            )
            return False
        self._issue(g, target)
        return True

    def _issue(self, g: int, target: int) -> None:
        """Record the balancer's (possible) motion of guest ``g`` to ``target`` and queue it
        (with the full stack: this round's answer of the Manager's ``load_balance``, recorded
        once the master took it)."""
        if self._stack is not None:
            self._stack.answer(g, target, self.move_record(g, target))
            return
        move_id = self._pending_move[g] = self._record_move(g, target)
        self.bundle_record(move_id, self._queue(g, target))

    def bundle_record(self, move_id: int, members: list[int]) -> None:
        """The balancer's move ``move_id`` queued these guests (the leader and its positive
        partners not at the target yet): a bundle's record ends with its last member's job."""
        if len(members) > 1:
            self._bundle_moves.add(move_id)
            for m in members:
                self._pending_move[m] = move_id

    def move_record(self, g: int, target: int) -> tuple[MoveRecord, bool, bool]:
        """The balancer's motion of guest ``g`` to ``target`` as the metrics record it now: the
        record, whether it is churn, whether the HA manager's maintenance moves are pending."""
        cl = self.cluster
        rec = MoveRecord(self.t, cl.sids[g], cl.node_names[self.svc_node[g]], cl.node_names[target])
        maintenance = self._stack is not None and self._stack.maintenance_pending()
        return rec, self._no_true_pressure(), maintenance

    def register_move(self, rec: MoveRecord, churn: bool, maintenance: bool) -> int:
        """A :meth:`move_record` in the metrics; its move index."""
        self.metrics.move_issued(rec, churn=churn)
        if maintenance:
            self.metrics.maintenance_moves += 1
        return len(self.metrics.moves) - 1

    def _record_move(self, g: int, target: int) -> int:
        """The balancer's motion of guest ``g`` to ``target`` in the metrics; its move index."""
        return self.register_move(*self.move_record(g, target))

    def _no_true_pressure(self) -> bool:
        """No online node's true cpu or memory some avg10 reaches the churn threshold (NaN
        counts as pressure): the round kernel keeps the peak (NaN if any is NaN)."""
        return bool(self.cluster.totals[L.T_PEAK_SOME] < CHURN_PRESSURE_PCT)

    def _queue(self, g: int, target: int) -> list[int]:
        """``queue_resource_motion``: the service and its positive partners (not already there),
        the guests queued; with the full stack, a CRM command for the Manager's next round."""
        if self._stack is not None:
            self._stack.queue_command(g, target)
            return []
        cl = self.cluster
        for p in self.negative.get(g, ()):
            if self._bound_for(p, target):
                self._log.append(
                    (
                        self.t,
                        f"err: cannot move {cl.sids[g]} to {cl.node_names[target]}: "
                        f"negative affinity with {cl.sids[p]}",
                    )
                )
                return []
        members = [g, *self.bundle_partners(g, target)]
        for m in members:
            self.cmds[m] = (self._motion_kind[m], target)
        return members

    def bundle_partners(self, g: int, target: int) -> list[int]:
        """The positive-affinity partners of ``g`` that its motion to node ``target`` moves too
        (``queue_resource_motion``): those not on ``target`` nor on their way there."""
        return [p for p in self.positive.get(g, ()) if not self._bound_for(p, target)]

    def _bound_for(self, g: int, target: int) -> bool:
        """Guest ``g`` is on node ``target`` or on its way there."""
        return bool(self.svc_node[g] == target or self.svc_target[g] == target)

    # ------------------------------------------------------------------ the hardware (full stack)
    def set_running(self, g: int, on: bool) -> None:
        """Guest ``g`` starts or stops (the LRM's resource agent, a node's power): the physics
        and the views from now on see it."""
        cl = self.cluster
        cl.running[g] = on
        self._view_running = cl.running[self.ha_idx]
        self._all_running = bool(self._view_running.all())
        self._other_running = cl.running[self._other_idx]

    def power_off_node(self, n: int, t: float) -> None:
        """Node ``n`` lost its power at ``t`` (s): every guest on it stops (an OOM kill there is
        moot); a motion from it ends (its worker died with the node; the guest is down with it),
        as does a container's relocation to it. A live migration to it stalls
        (:meth:`_stalled`: its target rebooted, the connection cannot come back); one not yet
        transferring fails at its precheck (:meth:`_start_transfer`)."""
        cl = self.cluster
        for g in np.flatnonzero(cl.node == n).tolist():
            self._killed.discard(g)
            if cl.running[g]:
                self.set_running(g, False)
        for job in [j for j in self.jobs if n in (j.source, j.target)]:
            if job.source != n and job.phase != "down":
                job.peer_reset = job.peer_reset or job.phase == "transfer"
                continue
            job.migration = None
            self._finish(job, t, ok=False, reason="node powered off")

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
        self._online_list[:] = usable
        self.node_usable[:] = usable
        # node affinity's highest-priority group among the online nodes (``get_node_affinity``)
        cl = self.cluster
        self.node_allowed = allowed_targets(self.rules, cl.sids, cl.node_names, self.node_usable)
        self.node_flags[NODE_MAINTENANCE] = [st == "maintenance" for st in states]
        self.node_flags[NODE_FENCED] = [st in ("fence", "unknown", "gone") for st in states]
        self._view_online = np.array(usable, dtype=np.bool_)
        maintenance, fenced = self.node_flags.astype(np.bool_)  # copies: a view is a snapshot
        for arr in (self._view_online, maintenance, fenced):
            arr.flags.writeable = False
        self._view_node_flags = (maintenance, fenced)
        self.node_state_version += 1

    # ------------------------------------------------------------------ telemetry
    def _bind_view(self) -> None:
        """What :meth:`_build_view` reads, bound once per episode: the telemetry rows it copies
        in one ``take`` each (node: cpu, mem, the three avg10 series; HA guests: mem ratio, run
        fraction, cpu received, memhost, the four avg10 series) and the per-guest constants."""
        cl, idx, tel = self.cluster, self.ha_idx, self.telemetry
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
        self._view_maxcpu = cl.guest_maxcpu[idx]
        self._view_maxmem = cl.guest_maxmem[idx]
        self._view_migratable = self._migratable[idx]
        for shared in (self._view_maxcpu, self._view_maxmem):
            shared.flags.writeable = False
        self._view_migratable.flags.writeable = False
        auto = np.array([g.auto_rebalance for g in cl.guests], dtype=bool)[idx]  # None: all on
        self._view_auto_rebalance = None if auto.all() else auto
        self._all_ha = idx.size == cl.n_guests
        self._no_other = self._other_idx.size == 0
        # size 0: nothing a policy could change in them, so every view may share them
        self._empty_other = (
            cl.node[:0].copy(),
            cl.guest_maxcpu[:0].copy(),
            cl.guest_maxmem[:0].copy(),
        )

    def _view_results(self) -> tuple[MotionResult, ...]:
        """The results of the HA guests' motions that ended in the last round (see
        :meth:`ended_motions`)."""
        cl = self.cluster
        results: tuple[MotionResult, ...] = ()
        if self._results:
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
                for j in self._results
                if self._is_ha_list[j.guest]
            )
        return results

    def _build_view(self) -> ClusterView:
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
        place = self.svc_place.copy() if self._all_ha else self.svc_place.take(self.ha_idx, axis=1)
        guest_node, guest_target = place[L.SVC_NODE], place[L.SVC_TARGET]
        other_node, other_maxcpu, other_maxmem = self._other_view()
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
        results = self._view_results()
        states = self._view_states
        if states is None:
            svc = self.svc_state
            states = tuple(svc) if self._all_ha else tuple([svc[i] for i in self._ha_list])
            self._view_states = states
        # positional, in :data:`_VIEW_FIELDS` order: a call with 34 keywords costs ~1 µs more
        view = _SimView(
            self.t,  # t
            cl.node_names,  # node_names
            self._view_online,  # node_online
            cl.node_maxcpu,  # node_maxcpu
            cl.node_maxmem,  # node_maxmem
            n_cpu,  # node_cpu
            n_mem,  # node_mem
            n_cpu_some,  # node_cpu_some
            n_mem_some,  # node_mem_some
            n_mem_full,  # node_mem_full
            self.ha_sids,  # sids
            guest_node,  # guest_node
            guest_target,  # guest_target
            states,  # guest_state
            _LATER,  # guest_running: from run_fraction, when read
            self._view_maxcpu,  # guest_maxcpu
            self._view_maxmem,  # guest_maxmem
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
            self.motion_active(),  # motion_active
            self.scenario.crs_mode,  # mode
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

    def _other_view(self) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """The running non-HA guests' node, vCPUs and memory (bytes) for a view: none when every
        guest is HA (shared empty arrays, the values a selection of nothing gives)."""
        cl = self.cluster
        if self._no_other:
            return self._empty_other
        other = self._other_idx[self._other_running]  # non-HA guests that run
        if self._killed:  # the OOM killer's victims do not
            other = np.array([g for g in other.tolist() if g not in self._killed], dtype=np.int64)
        return cl.node[other], cl.guest_maxcpu[other], cl.guest_maxmem[other]

    # ------------------------------------------------------------------ results
    def transfer_in_flight(self) -> tuple[float, float]:
        """Bytes sent and seconds spent so far by the live migrations that have not ended yet."""
        sent = seconds = 0.0
        for job in self.jobs:
            if job.phase == "transfer" and job.migration is not None:
                stall = job.stalled_s + (self.t - job.t_stall if job.t_stall is not None else 0.0)
                sent += job.migration.transferred
                seconds += job.migration.t + stall
        return sent, seconds

    def result(self) -> dict[str, Any]:
        """Metrics (``docs/metrics.md``) and the balancer's moves, including a migration still running at the end."""
        return {
            "metrics": self.metrics.result(),
            "moves": [r.as_dict() for r in self.metrics.moves],
        }


def _ends_at(job: Job) -> float:
    """When a job's live migration, at its present clock, ends (s): its transfer's start, the
    time it stood still, and the migration's own clock."""
    return job.t_transfer_start + job.stalled_s + _mig(job).t


def _mig(job: Job) -> Migration:
    """The live migration of a job in its transfer phase."""
    assert job.migration is not None
    return job.migration
