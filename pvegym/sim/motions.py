"""The LRM side of a motion: what happens to a guest between ``migrate`` and the LRM's exit.

A queued motion is picked up by the source node's LRM at its next 10 s tick (a seeded uniform offset
after the CRM round). The LRM runs its motions in a worker pool (``LRM.pm`` ``run_workers`` forks up
to ``max_workers`` workers in one iteration; ``Env/PVE2.pm`` ``get_max_workers``: datacenter.cfg
``max_workers``, default :data:`MAX_WORKERS`), so the motions queued in one CRM round on one
source — a bundle's positive-affinity partners, the HA manager's recovery and maintenance moves —
start at the same tick and run at once; a motion beyond the pool waits for a worker. The balancer
itself still issues one motion at a time (``any_resource_motion_queued_or_running``). Concurrent
live migrations share the nodes' migration links (:mod:`pvegym.sim.network`): each stream's rate
is its max-min fair share of its source's and its target's link, at most one stream's cap,
recomputed whenever a stream starts or ends (:meth:`MotionPipeline.run`); a lone stream runs at
``min(bandwidth, links)``. :class:`MotionPipeline` runs them; the CRM (the simulation's round or
the port's LRM workers) appends a :class:`Job` to :attr:`MotionPipeline.jobs` and reads the ended
ones from :attr:`MotionPipeline.finished`.

* A VM with a local resource (e.g. a CD-ROM) fails after the precheck (``precheck_s``), as
  ``qm migrate`` refuses it (qemu-server ``QemuMigrate.pm`` ``prepare``:
  ``check_local_resources``, local CD-ROMs and disks).
* Free memory on the target is *not* checked (qemu-server's ``prepare``/``phase1`` do not): a
  migration onto a full node proceeds and the target overcommits — memory pressure, and past its
  swap an OOM kill. Only a guest backed by huge pages fails there, when the target's free memory
  cannot hold them: starting it on the target allocates them (``QemuServer/Memory.pm``
  ``hugepages_allocate``: "hugepage allocation failed").
* Otherwise a VM live-migrates through :class:`pvegym.sim.migration.Migration`: the target holds its
  memory from the start, auto-converge throttling and dirty-tracking faults take CPU time from it,
  the migration threads keep a core busy on the source and on the target while the stream sends
  (``cpu_source_cores``/``cpu_target_cores``), and it is paused for the switchover downtime.
  qemu-server's non-convergence abort (the convergence patch) fails the motion.
* With the full HA stack, a transfer whose link is cut (the target's power, either node's network)
  stalls until TCP's timeout fails it or the link carries it again (:mod:`pvegym.sim.link`); a
  source that loses its power ends its motions at once (the worker dies with the node).
* A container relocates: shutdown, move, start, down the whole time (``ct_shutdown_s + ct_start_s``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from pvegym.sim import link
from pvegym.sim.cluster import ClusterState
from pvegym.sim.memory import GuestMemory
from pvegym.sim.metrics import Metrics
from pvegym.sim.migration import (
    COMPLETED,
    PAGE_SIZE,
    RUNNING,
    Migration,
    MigrationParams,
    params_array,
)
from pvegym.sim.network import fair_rates
from pvegym.sim.scenario import MigrationSettings, Scenario
from pvegym.sim.telemetry import Telemetry

MIGRATE = "migrate"
RELOCATE = "relocate"
#: ``Env/PVE2.pm`` ``get_max_workers``: datacenter.cfg ``max_workers``, default 4 — workers an
#: LRM runs at once
MAX_WORKERS = 4
#: qemu-server ``QemuServer/Memory.pm`` ``hugepages_allocate``: the target cannot start the guest.
HUGEPAGES_FAILED = "hugepage allocation failed"


@dataclass(slots=True)
class Job:
    """One motion of one service, from CRM queueing to the LRM's exit."""

    guest: int  # guest index (ClusterState order)
    sid: str
    source: int
    target: int
    kind: str  # migrate | relocate
    t_issued: float  # s, CRM round that queued it
    t_start: float  # s, when the LRM worker picks it up (later if the worker pool is full)
    move_id: int | None = None  # index into Metrics.moves for a balancer motion's leader
    phase: str = "queued"  # queued | precheck | transfer | down | done
    t_phase_end: float = 0.0  # s, end of a fixed-length phase (precheck, container downtime)
    migration: Migration | None = None
    t_transfer_start: float = 0.0
    t_end: float | None = None
    #: a transfer whose link is cut (:mod:`pvegym.sim.link`): when the current stall began (s),
    #: when the link is back and TCP's next retransmission carries the stream again (s), the
    #: seconds it stood still in earlier stalls, and whether its target rebooted meanwhile
    t_stall: float | None = None
    t_resume: float | None = None
    stalled_s: float = 0.0
    peer_reset: bool = False
    #: its stream ran at a rate other than a lone stream's (links shared with other streams,
    #: :meth:`MotionPipeline._share_links`, or joined at what they left,
    #: ``_join``): until then its migration runs at the lone rate it started with, and a round
    #: of it alone needs no rate check
    rate_shared: bool = False
    ok: bool = False
    aborted: bool = False
    reason: str = ""


def migration_template(settings: MigrationSettings) -> NDArray[np.float64]:
    """The scenario's migration settings as a kernel parameter vector (validated once, through
    :class:`MigrationParams`); :meth:`pvegym.sim.migration.Migration.for_guest` adds a guest's values."""
    s = settings
    return params_array(
        MigrationParams(
            memory=float(PAGE_SIZE),  # placeholder: every guest sets its own
            bandwidth=s.bandwidth,
            dirty_rate=0.0,
            downtime_limit_ms=s.downtime_limit_ms,
            qemu_server_patched=s.qemu_server == "patched",
            boost_factor=s.boost_factor,
            abort_factor=s.abort_factor,
            sync_timer=s.sync_timer,
            xbzrle=s.xbzrle,
            dirty_fault_us=s.dirty_fault_us,
        )
    )


def log_lines(
    log: list[tuple[float, str | Job]], node_names: tuple[str, ...]
) -> list[tuple[float, str]]:
    """An episode's log as ``(t, line)``: an ended motion (a :class:`Job` entry, formatted only
    when the log is read) as the LRM's line of its outcome."""
    out: list[tuple[float, str]] = []
    for t, entry in log:
        if isinstance(entry, Job):  # an ended motion
            verb = "migration" if entry.kind == MIGRATE else "relocation"
            outcome = "finished" if entry.ok else f"failed: {entry.reason}"
            entry = f"{entry.sid}: {verb} to {node_names[entry.target]} {outcome}"
        out.append((t, entry))
    return out


class Links(Protocol):
    """Which nodes' migration links carry a stream now (the full HA stack's hardware:
    :meth:`pvegym.sim.ha_stack.HAStack.link_up`)."""

    def link_up(self, a: int, b: int) -> bool: ...


#: ``(job, ok, aborted, reason, pause s)``: a balancer's motion (a job with a ``move_id``) ended
MoveEnded = Callable[[Job, bool, bool, str, float], None]


class MotionPipeline:
    """The LRM workers' motions of one episode: the queued and running :attr:`jobs` through their
    phases, round by round (:meth:`run`), sharing the migration links, and their costs to the
    guests, the hosts and the metrics.

    ``log`` is the episode's log (an ended job is appended as itself); ``move_ended`` records the
    end of a balancer's motion. ``links`` is the full HA stack's hardware (None: every link up).
    """

    def __init__(
        self,
        scenario: Scenario,
        template: NDArray[np.float64],
        cluster: ClusterState,
        memory: GuestMemory,
        telemetry: Telemetry,
        metrics: Metrics,
        log: list[tuple[float, str | Job]],
        move_ended: MoveEnded,
    ) -> None:
        cl = cluster
        self.cluster, self.memory, self.telemetry, self.metrics = cl, memory, telemetry, metrics
        self._log = log
        self._move_ended = move_ended
        self.links: Links | None = None
        self.round_s = scenario.round_s
        self._ms = ms = scenario.migration
        self._migration_template = template
        self.guests = cl.guests
        self._migratable_list: list[bool] = [not g.local_resources for g in cl.guests]
        # the migration links (bytes/s, by node index) and one stream's cap (pvegym.sim.network)
        specs = {n.name: n for n in scenario.nodes}
        self._link_bw: list[float] = [
            ms.link_bandwidth if (bw := specs[name].link_bandwidth) is None else bw
            for name in cl.node_names
        ]
        self._stream_cap = ms.bandwidth
        # _migration_costs' constants: its divisors (the very products it would compute each
        # round) and the migration threads' cores
        self._fault_scale = [c * self.round_s for c in cl.guest_maxcpu.tolist()]
        self._wire_scale = ms.bandwidth * self.round_s
        self._cpu_source_cores = ms.cpu_source_cores
        self._cpu_target_cores = ms.cpu_target_cores
        # the model stack's LRM worker pool per source node; the full stack's LRMs keep their own
        self._max_workers = MAX_WORKERS if scenario.ha_stack == "model" else 1 << 30
        self.jobs: list[Job] = []  # in queueing order; the LRMs' workers run them at once
        self.finished: list[Job] = []  # ended, not yet seen by the CRM
        # the streams whose rates _share_links set last: the same jobs, the same rates (the jobs
        # themselves, not their ids: an id may be reused once its job is freed)
        self._rate_streams: tuple[Job, ...] = ()
        self._pause_left: dict[int, float] = {}  # guest -> switchover pause still to serve (s)
        self._ended_migration: Migration | None = None  # its arrays serve the next migration

    def take_finished(self) -> list[Job]:
        """The jobs that ended since the last call (the CRM's next round reads them)."""
        done, self.finished = self.finished, []
        return done

    @property
    def pausing(self) -> bool:
        """A switchover pause carries into the next round (:meth:`carry_pauses`)."""
        return bool(self._pause_left)

    def in_flight(self, t: float) -> tuple[float, float]:
        """Bytes sent and seconds spent by ``t`` (s) by the live migrations not ended yet."""
        sent = seconds = 0.0
        for job in self.jobs:
            if job.phase == "transfer" and job.migration is not None:
                stall = job.stalled_s + (t - job.t_stall if job.t_stall is not None else 0.0)
                sent += job.migration.transferred
                seconds += job.migration.t + stall
        return sent, seconds

    def migrating(self) -> tuple[int, ...]:
        """The guests whose live migration runs now (qemu-server holds ``lock migrate``)."""
        if not self.jobs:
            return ()
        return tuple(job.guest for job in self.jobs if job.phase == "transfer")

    def carry_pauses(self, dt: float) -> None:
        """The part of a switchover pause that did not fit in the round it started in."""
        for g, left in list(self._pause_left.items()):
            take = min(left, dt)
            self.cluster.run_fraction[g] -= take / dt
            if left > take:
                self._pause_left[g] = left - take
            else:
                del self._pause_left[g]

    def run(self, t0: float, t1: float) -> None:
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
                if self.links is not None and (
                    job.t_stall is not None or not self.links.link_up(job.source, job.target)
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
        ms = self._ms
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
        self.finish(job, t, ok=True, pause_s=down)

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
        stack = self.links
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

    def join(self, job: Job, t0: float, t1: float) -> None:
        """A job a full-stack LRM worker queued at its tick in the round (t0, t1] while others
        have run through the round already: it runs over the rest of the round at once (so the
        worker's polls see its end) at the rate the others leave on its links — the whole of it
        when the links have room, as max-min fairness would give it too; none when they are full,
        and then it starts with the next round. From the next round on all share fairly."""
        link, rate = self._link_bw, self._stream_cap
        out, into = link[job.source], link[job.target]
        stack = self.links
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
            self.finish(job, t, ok=False, reason="local resource")
            return False
        if self.links is not None and not self.links.link_up(job.source, job.target):
            self.finish(job, t, ok=False, reason=link.NO_SSH)  # prepare's ssh test
            return False
        spec = self.guests[g]
        if spec.hugepages and (
            cl.node_maxmem[job.target] - cl.node_mem[job.target] < spec.maxmem
        ):  # qemu-server Memory.pm hugepages_allocate, when the target starts the guest
            self.finish(job, t, ok=False, reason=HUGEPAGES_FAILED)
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
            self.finish(job, t, ok=True, pause_s=down)
        else:
            cl.reserved_mem[job.target] += self.memory.footprint(g)
            self.finish(job, t, ok=False, aborted=True, reason=mig.error or "no convergence")

    def _stalled(self, job: Job, t: float, t1: float) -> float:
        """A transfer whose link is cut at ``t`` or was (:mod:`pvegym.sim.link`), over the rest of
        the round ``(t, t1]``: the stream stands still (the guest runs on the source under the
        throttle it has, the target holds its memory) until TCP's next retransmission after the
        link is back carries it again, or fails it — the timeout (``tcp_retries2``), or the RST of
        a target that rebooted. Returns the time the LRM goes on from: ``t1`` if the stall lasts
        through the round, else when it ended (the job then flows again or is done)."""
        stack = self.links
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
        self.finish(job, t, ok=False, aborted=True, reason=link.STREAM_FAILED)

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

    def finish(
        self,
        job: Job,
        t: float,
        ok: bool,
        aborted: bool = False,
        reason: str = "",
        pause_s: float = 0.0,
    ) -> None:
        """The job ended at ``t`` (s): out of the pipeline, into :attr:`finished` for the CRM's
        next round; a balancer's motion's record ends (``move_ended``)."""
        job.phase, job.t_end, job.ok, job.aborted, job.reason = "done", t, ok, aborted, reason
        if self.jobs[0] is job:  # the running job (FIFO); a node's power-off ends any
            self.jobs.pop(0)
        else:
            self.jobs.remove(job)
        self.finished.append(job)
        if job.move_id is not None:  # a balancer's motion: its record (the CRM's)
            self._move_ended(job, ok, aborted, reason, pause_s)
        self._log.append((t, job))  # rendered by ``Simulation.log`` when read


def _ends_at(job: Job) -> float:
    """When a job's live migration, at its present clock, ends (s): its transfer's start, the
    time it stood still, and the migration's own clock."""
    return job.t_transfer_start + job.stalled_s + _mig(job).t


def _mig(job: Job) -> Migration:
    """The live migration of a job in its transfer phase."""
    assert job.migration is not None
    return job.migration
