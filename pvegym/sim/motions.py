"""The LRM side of a motion: what happens to a guest between ``migrate`` and the LRM's exit.

A queued motion is picked up by the source node's LRM at its next 10 s tick (a seeded uniform offset
after the CRM round), and workers run one motion at a time: the HA balancer serializes motions
cluster-wide, and a live migration's single stream occupies the migration network.

* A VM with a local resource (e.g. a CD-ROM) fails after the precheck (``precheck_s``), as
  ``qm migrate`` refuses it.
* Not enough free memory on the target (MemTotal minus what is in use there) fails after the
  precheck too.
* Otherwise a VM live-migrates through :class:`pvegym.sim.migration.Migration`: the target holds its
  memory from the start, auto-converge throttling takes CPU time from it, and it is paused for the
  switchover downtime. qemu-server's non-convergence abort (the seed patch) fails the motion.
* A container relocates: shutdown, move, start, down the whole time (``ct_shutdown_s + ct_start_s``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pvegym.sim.migration import Migration, MigrationParams

MIGRATE = "migrate"
RELOCATE = "relocate"


@dataclass
class Job:
    """One motion of one service, from CRM queueing to the LRM's exit."""

    guest: int  # guest index (ClusterState order)
    sid: str
    source: int
    target: int
    kind: str  # migrate | relocate
    t_issued: float  # s, CRM round that queued it
    t_start: float  # s, when the LRM worker picks it up (may be delayed by the serialization)
    move_id: int | None = None  # index into Metrics.moves for a balancer motion's leader
    phase: str = "queued"  # queued | precheck | transfer | down | done
    t_phase_end: float = 0.0  # s, end of a fixed-length phase (precheck, container downtime)
    migration: Migration | None = None
    t_transfer_start: float = 0.0
    t_end: float | None = None
    ok: bool = False
    aborted: bool = False
    reason: str = ""
    delivered: bool = False


def migration_params(
    memory: float,
    resident: float,
    dirty_rate: float,
    wws: float | None,
    sensitivity: float,
    settings: object,
) -> MigrationParams:
    """The migration of a guest of ``memory`` bytes, ``resident`` of them in use (its memhost),
    under the scenario's migration settings."""
    s = settings
    return MigrationParams(
        memory=memory,
        resident=min(max(resident, 1.0), memory),
        bandwidth=s.bandwidth,  # type: ignore[attr-defined]
        dirty_rate=dirty_rate,
        wws=wws if wws is not None else memory,
        throttle_sensitivity=sensitivity,
        downtime_limit_ms=s.downtime_limit_ms,  # type: ignore[attr-defined]
        qemu_server_patched=s.qemu_server == "patched",  # type: ignore[attr-defined]
        boost_factor=s.boost_factor,  # type: ignore[attr-defined]
        abort_factor=s.abort_factor,  # type: ignore[attr-defined]
        sync_timer=s.sync_timer,  # type: ignore[attr-defined]
    )
