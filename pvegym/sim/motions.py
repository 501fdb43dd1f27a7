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
recomputed whenever a stream starts or ends (``Simulation._lrm``); a lone stream runs at
``min(bandwidth, links)``.

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

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.migration import PAGE_SIZE, Migration, MigrationParams, params_array
from pvegym.sim.scenario import MigrationSettings

MIGRATE = "migrate"
RELOCATE = "relocate"
#: ``Env/PVE2.pm`` ``get_max_workers``: datacenter.cfg ``max_workers``, default 4 — workers an
#: LRM runs at once
MAX_WORKERS = 4


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
    #: :meth:`~pvegym.sim.simulation.Simulation._share_links`, or joined at what they left,
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
