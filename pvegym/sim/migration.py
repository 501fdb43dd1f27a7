"""One live migration of one guest: QEMU pre-copy with auto-converge, driven by qemu-server.

Model (``MODEL.md`` §6, ``reference/migration-psi.md`` §A–§C, event model C.3):

* **Sender.** A single stream sends pending pages at the bandwidth ``B`` (PVE enables neither multifd
  nor postcopy, A.1). Pass 1 sends all memory: the migration bitmap starts all-ones.
* **Guest.** The guest writes at ``raw × (1 − throttle × sensitivity)`` bytes/s, uniformly over its
  writable working set (WWS) ``W``; the KVM dirty log holds the *distinct* pages written since the
  last sync, ``W (1 − e^(−R/W))`` for ``R`` bytes written (C.2).
* **Dirty sync** (``migration/ram.c migration_bitmap_sync``). ORs the log into the bitmap and counts
  only *newly* set pages. Writes are uniform and independent of which pages are still pending, so the
  expected newly set amount is ``log × (1 − pending_in_wws / W)``. Syncs happen (B.2) when QEMU's
  per-iteration check finds ``remaining < threshold`` (the "exact" pending, i.e. the end of a pass)
  and, with auto-converge on QEMU ≥ 9.2, on a 5 s timer after pass 1.
* **Auto-converge** (B.3). Per ≥ 1 s period: if newly dirtied bytes > 50 % of the bytes sent, count a
  "high" period; every 2nd one (the counter is not reset by low periods) steps the throttle 0 → 20,
  then + increment, capped at the maximum.
* **Switchover** (B.2). After an exact sync, if ``remaining < B × downtime_limit`` QEMU stops the guest
  and sends the rest: QEMU downtime ≈ (remaining + device state) / B.
* **qemu-server** (A.2, ``src/PVE/QemuMigrate.pm`` ``phase2``). Polls ``query-migrate`` every 1 s,
  permanently every 100 ms once ``remaining < transferred/polls``; on polls where ``transferred``
  changed it counts those where ``remaining`` grew (or is 0) and doubles the downtime limit on every
  6th (cap 2,000,000 ms). The seed patch (``seeds/004``): once transferred > 1.5 × memory set
  ``cpu-throttle-increment 20``/``max-cpu-throttle 99`` once, abort when > 4 × memory.

Time is discretised only where QEMU itself is discrete: QEMU re-checks the pending amount once per
migration iteration, and ``ram_save_iterate`` returns at the latest after ``MAX_WAIT`` = 50 ms, so
all events fall on a 50 ms grid (20 ticks per second): pass-end syncs, the 5 s sync timer (100 ticks)
and qemu-server's polls (20 or 2 ticks). Between events the state evolves in closed form (linear
sending, exponential WWS saturation), so advancing costs O(events), not O(pages) or O(ticks): polls
at 100 ms whose outcome is known (``remaining`` falling, no patch threshold crossed) are skipped in
one step. If nothing is pending the stream idles until the next iteration check (≤ 50 ms).

Simplifications (documented, shared by the page-level reference in the tests): ``ram.total`` = the
configured memory, no zero-page or XBZRLE savings, QEMU's measured bandwidth = ``B`` when computing
``threshold_size``, QEMU events at a tick are ordered iteration check → sync timer → qemu-server poll.

Known limit: for a small hot WWS re-dirtied within a few iterations, ``remaining`` hovers at the
threshold with ~zero drift; real (and page-level) fluctuations then make qemu-server count "remaining
grew" on about every other poll, which this mean-field model does not reproduce (it escalates the
downtime limit later). Larger working sets — the seed's case — agree with a page-level simulation.

A pass ends as soon as ``remaining < threshold``, so QEMU switches over with a tail close to
``B × downtime_limit`` (real QEMU downtimes sit just below the limit, F.3 "QEMU downtime ≈ 0.8 s").
The classic geometric model of C.2/F.4 instead sends every pending page before the pass-end sync;
``classic_passes=True`` selects that variant (used to check the pass mechanics against C.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, NamedTuple

from pvegym.errors import ConfigError

# --- time grid ---------------------------------------------------------------------------------
#: Ticks per second. One tick = ``MAX_WAIT`` (50 ms) in QEMU ``migration/ram.c``: the longest a
#: ``ram_save_iterate`` call runs before ``migration_iteration_run`` re-checks the pending amount.
TICKS_PER_S: Final = 20
#: qemu-server ``QemuMigrate.pm`` phase2: ``my $usleep = 1000000`` (first poll interval, 1 s).
POLL_SLOW_TICKS: Final = 20
#: qemu-server ``QemuMigrate.pm`` phase2: ``$usleep = 100_000 if $avglstat && $rem < $avglstat``.
POLL_FAST_TICKS: Final = 2
#: QEMU ``migration/cpu-throttle.c`` ``CPU_THROTTLE_DIRTY_SYNC_TIMESLICE_MS`` (5000 ms).
SYNC_TIMER_TICKS: Final = 100
#: QEMU ``migration/ram.c`` ``migration_bitmap_sync``: a rate period closes only when
#: ``end_time > time_last_bitmap_sync + 1000`` ms.
PERIOD_MIN_TICKS: Final = 20
#: qemu-server ``QemuMigrate.pm`` phase2: ``if ($downtimecounter > 5)`` — every 6th event doubles.
DOWNTIME_EVENTS_PER_DOUBLING: Final = 6
#: Guest page size (x86 ``TARGET_PAGE_SIZE``, reported as ``ram.page-size``).
PAGE_SIZE: Final = 4096

RUNNING: Final = "running"
COMPLETED: Final = "completed"
ABORTED: Final = "aborted"

#: Error text of the seed patch (``seeds/004``, ``QemuMigrate.pm`` phase2), formatted with passes.
ABORT_MESSAGE: Final = (
    "aborting migration - no convergence: transferred {passes:.1f}x the guest memory without "
    "completing, the guest dirties its memory faster than it can be transferred"
)
BOOST_MESSAGE: Final = (
    "migration does not converge - escalating the auto-converge cpu throttling of the guest to "
    "force convergence"
)

_NEVER: Final = 1 << 62


@dataclass(frozen=True, slots=True)
class MigrationParams:
    """Everything that determines one live migration. Sizes in bytes, rates in bytes/s.

    Validated on construction; a bad value raises :class:`ConfigError` naming the CLI flag.
    """

    memory: float
    """Guest memory M (bytes); pass 1 sends all of it (``ram.total``)."""
    bandwidth: float
    """Effective single-stream throughput B (bytes/s), e.g. the ``migration speed limit``."""
    dirty_rate: float
    """Raw guest write rate (bytes/s of page writes) before throttling — not QEMU's reported rate."""
    wws: float | None = None
    """Writable working set W (bytes) the writes fall into; default: all memory."""
    throttle_sensitivity: float = 1.0
    """Fraction (0–1) of writes the vCPU throttle slows (CPU-bound writers 1, DMA/devices 0)."""
    downtime_limit_ms: float = 100.0
    """Start downtime limit; qemu-server's ``migrate_downtime`` schema default 0.1 s (A.1)."""
    qemu_server_patched: bool = False
    """Apply the seed patch 004 (throttle boost at ``boost_factor``, abort at ``abort_factor``)."""
    boost_factor: float = 1.5
    """Seed 004 ``$migrate_throttle_boost_factor``: passes after which the throttle is escalated."""
    abort_factor: float = 4.0
    """Seed 004 ``$migrate_abort_factor``: passes after which qemu-server aborts."""
    auto_converge: bool = True
    """qemu-server ``set_migration_caps`` always enables ``auto-converge`` (A.1)."""
    sync_timer: bool = True
    """QEMU ≥ 9.2 dirty-sync timer (``migration/cpu-throttle.c``); False = older QEMU (G.2)."""
    throttle_trigger_pct: float = 50.0
    """QEMU ``migration/options.c`` ``DEFAULT_MIGRATE_THROTTLE_TRIGGER_THRESHOLD`` (50 %)."""
    throttle_initial_pct: int = 20
    """QEMU ``migration/options.c`` ``DEFAULT_MIGRATE_CPU_THROTTLE_INITIAL`` (20 %)."""
    throttle_increment_pct: int = 10
    """QEMU ``migration/options.c`` ``DEFAULT_MIGRATE_CPU_THROTTLE_INCREMENT`` (10 %)."""
    max_throttle_pct: int = 99
    """QEMU ``migration/options.c`` ``DEFAULT_MIGRATE_MAX_CPU_THROTTLE`` (99 %)."""
    boost_increment_pct: int = 20
    """Seed 004: ``'cpu-throttle-increment' => 20`` after the boost factor."""
    boost_max_throttle_pct: int = 99
    """Seed 004: ``'max-cpu-throttle' => 99`` after the boost factor."""
    downtime_max_ms: float = 2_000_000.0
    """qemu-server ``$migrate_downtime_max = 2000 * 1000`` = QEMU ``MAX_MIGRATE_DOWNTIME_SECONDS``."""
    page_size: int = PAGE_SIZE
    """Guest page size in bytes (only used to report pages; the model is in bytes)."""
    device_state_bytes: float = 0.0
    """Device state sent during the downtime (bytes). Not in the spec's figures (F.4 "+ device
    state"); a virtio guest has well under 1 MiB, VFIO devices can have much more."""
    resume_latency_ms: float = 100.0
    """qemu-server phase3 until ``qm resume`` on the target runs (config move, NBD stop, resume
    RPC). Not in QEMU's downtime; A.3 estimates "tens to a few hundred ms". Only in
    :attr:`Migration.guest_pause_s`."""
    resident: float | None = None
    """Bytes of guest RAM that hold data (the host footprint); pass 1 sends only these, since
    QEMU sends a zero page as a few header bytes (``ram.c`` ``save_zero_page``). None = all of
    ``memory``. The patch's pass count stays relative to ``memory`` (``ram.total``)."""
    classic_passes: bool = False
    """True: every pass sends all pending pages before its sync (C.2 geometric model); False: QEMU's
    exact sync as soon as ``remaining < threshold`` (B.2)."""

    def __post_init__(self) -> None:
        def positive(value: float, flag: str, what: str) -> None:
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ConfigError(flag, f"{what} must be a positive number, got {value!r}")

        def non_negative(value: float, flag: str, what: str) -> None:
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(flag, f"{what} must be a non-negative number, got {value!r}")

        positive(self.memory, "--memory", "guest memory")
        if self.memory < self.page_size:
            raise ConfigError(
                "--memory", f"guest memory must be at least one page ({self.page_size} B)"
            )
        positive(self.bandwidth, "--bandwidth", "migration bandwidth")
        non_negative(self.dirty_rate, "--dirty-rate", "dirty rate")
        if self.resident is not None and not 0.0 < self.resident <= self.memory:
            raise ConfigError("resident", "must be in (0, memory] bytes")
        if self.wws is not None:
            non_negative(self.wws, "--wws", "writable working set")
            if self.wws > self.memory:
                raise ConfigError("--wws", "writable working set cannot exceed the guest memory")
        s = self.throttle_sensitivity
        if not (isinstance(s, int | float) and 0.0 <= s <= 1.0):
            raise ConfigError("--throttle-sensitivity", f"must be within [0, 1], got {s!r}")
        positive(self.downtime_limit_ms, "--downtime-limit", "downtime limit")
        positive(self.downtime_max_ms, "--downtime-max", "maximum downtime limit")
        positive(self.boost_factor, "--boost-factor", "throttle boost factor")
        positive(self.abort_factor, "--abort-factor", "abort factor")
        if self.qemu_server_patched and self.abort_factor <= self.boost_factor:
            raise ConfigError("--abort-factor", "must be larger than --boost-factor")
        if not 0 <= self.throttle_trigger_pct <= 100:
            raise ConfigError("--throttle-trigger", "must be within [0, 100] %")
        for flag, pct in (
            ("--throttle-initial", self.throttle_initial_pct),
            ("--throttle-increment", self.throttle_increment_pct),
            ("--max-throttle", self.max_throttle_pct),
            ("--boost-increment", self.boost_increment_pct),
            ("--boost-max-throttle", self.boost_max_throttle_pct),
        ):
            # QEMU qapi/migration.json: cpu-throttle-* and max-cpu-throttle are 1..99 %.
            if not (isinstance(pct, int) and 1 <= pct <= 99):
                raise ConfigError(
                    flag, f"must be an integer percentage within [1, 99], got {pct!r}"
                )
        if not (isinstance(self.page_size, int) and self.page_size > 0):
            raise ConfigError("--page-size", "must be a positive integer")
        non_negative(self.device_state_bytes, "--device-state", "device state size")
        non_negative(self.resume_latency_ms, "--resume-latency", "resume latency")

    @property
    def working_set(self) -> float:
        """The writable working set W in bytes (``wws`` or all memory)."""
        return self.memory if self.wws is None else self.wws


class TimelineEntry(NamedTuple):
    """State at a whole second (before the events of that instant)."""

    t: float
    transferred_bytes: float
    remaining_bytes: float
    throttle_pct: int
    downtime_limit_ms: float


class Migration:
    """One live migration, advanced in simulated time by :meth:`advance`.

    Read-only state (all in SI units: s, bytes, ms where the name says so): :attr:`t`,
    :attr:`outcome`, :attr:`transferred`, :attr:`remaining`, :attr:`passes`, :attr:`throttle_pct`,
    :attr:`max_throttle_pct_seen`, :attr:`downtime_limit_ms`, :attr:`downtime_s`,
    :attr:`guest_pause_s`, :attr:`error`, :attr:`throttle_integral`, :attr:`log`,
    :attr:`timeline`, plus diagnostics (:attr:`pass1_end_s`, :attr:`throttle_steps`,
    :attr:`doublings`, :attr:`switchover_s`, :attr:`sync_count`, :attr:`reported_dirty_rate`).
    """

    def __init__(self, params: MigrationParams, record_timeline: bool = True) -> None:
        """``record_timeline=False`` skips the per-second :attr:`timeline` (the cluster model
        does not read it, and building it is most of the cost of a round)."""
        self.params = params
        self._record_timeline = record_timeline
        p = params
        self._m = float(p.memory)
        self._b = float(p.bandwidth)
        self._w = float(p.working_set)
        self._raw = float(p.dirty_rate)
        self._sens = float(p.throttle_sensitivity)
        self._bh = self._b / TICKS_PER_S  # bytes sent per tick
        # time
        self._t = 0.0
        self._k = 0  # last tick whose events were processed
        self._outcome = RUNNING
        self._error = ""
        # RAM state: pending = the unsent rest of the all-ones bulk bitmap + pages set by syncs
        self._transferred = 0.0
        self._bulk = self._m if p.resident is None else float(p.resident)
        self._dirty = 0.0
        self._written = 0.0  # raw bytes written into the WWS since the last sync
        # auto-converge (migration/ram.c, migration/cpu-throttle.c)
        self._pct = 0
        self._increment = p.throttle_increment_pct
        self._max_pct = p.max_throttle_pct
        self._high_cnt = 0
        self._max_seen = 0
        self._throttle_integral = 0.0
        self._throttle_steps: list[tuple[float, int]] = []
        # syncs: the setup sync (ram_init_bitmaps) is sync 1 and starts the first rate period
        self._sync_count = 1
        self._period_tick = 0
        self._period_xfer = 0.0
        self._period_dirty = 0.0
        self._timer_prev = 1
        self._pass1_end: float | None = None
        self._reported_dirty_rate = 0.0
        # qemu-server phase2
        self._td_ms = min(float(p.downtime_limit_ms), float(p.downtime_max_ms))
        self._poll_i = 0
        self._poll_next = POLL_SLOW_TICKS
        self._usleep = POLL_SLOW_TICKS
        self._lastrem = 0.0  # 0 = undef/false, as in Perl's ``$lastrem &&``
        self._last_mem = 0.0
        self._downcnt = 0
        self._boosted = False
        self._doublings: list[tuple[float, float]] = []
        self.log: list[tuple[float, str]] = []
        # switchover / downtime phase
        self._stopped = False
        self._switched = False
        self._switch_tick = 0
        self._t_end = math.inf
        self._downtime_s = 0.0
        self._guest_pause_s = 0.0
        self.timeline: list[TimelineEntry] = [TimelineEntry(0.0, 0.0, self._m, 0, self._td_ms)]
        if p.downtime_limit_ms > p.downtime_max_ms:
            self.log.append(
                (0.0, f"capping downtime limit to maximum possible: {p.downtime_max_ms:.0f} ms")
            )
        self._next_check = self._compute_next_check()
        self._next_timer = SYNC_TIMER_TICKS if (p.auto_converge and p.sync_timer) else _NEVER

    # ------------------------------------------------------------------ read-only state
    @property
    def t(self) -> float:
        """Seconds since the ``migrate`` command."""
        return self._t

    @property
    def outcome(self) -> str:
        """``"running"``, ``"completed"`` or ``"aborted"``."""
        return self._outcome

    @property
    def transferred(self) -> float:
        """RAM bytes sent so far (``ram.transferred``)."""
        return self._transferred

    @property
    def remaining(self) -> float:
        """RAM bytes pending in the migration bitmap (``ram.remaining``); jumps up at syncs."""
        return self._bulk + self._dirty

    @property
    def passes(self) -> float:
        """Transferred bytes in units of the guest memory (the seed patch's convergence measure)."""
        return self._transferred / self._m

    @property
    def throttle_pct(self) -> int:
        """Current auto-converge vCPU throttle in percent (0 when not throttling)."""
        return self._pct

    @property
    def max_throttle_pct_seen(self) -> int:
        """Highest throttle applied during the migration, in percent."""
        return self._max_seen

    @property
    def downtime_limit_ms(self) -> float:
        """Current downtime limit (ms), as escalated by qemu-server."""
        return self._td_ms

    @property
    def downtime_s(self) -> float:
        """QEMU's downtime at switchover (s): the tail + device state at B. 0 unless completed."""
        return self._downtime_s if self._outcome == COMPLETED else 0.0

    @property
    def guest_pause_s(self) -> float:
        """Guest-visible pause (s): QEMU downtime + wait for qemu-server's next poll + resume
        latency (A.3). 0 unless completed."""
        return self._guest_pause_s if self._outcome == COMPLETED else 0.0

    @property
    def error(self) -> str:
        """The abort message (seed 004) or ``""``."""
        return self._error

    @property
    def throttle_integral(self) -> float:
        """∫ throttle fraction dt (s): vCPU-seconds per vCPU the guest lost to throttling."""
        return self._throttle_integral

    @property
    def effective_dirty_rate(self) -> float:
        """Current guest write rate after throttling (bytes/s); 0 while paused or finished."""
        if self._stopped or self._outcome != RUNNING:
            return 0.0
        return self._raw * (1.0 - self._pct / 100.0 * self._sens)

    @property
    def pass1_end_s(self) -> float | None:
        """Time of the sync that ended pass 1 (s), or None while pass 1 is running."""
        return self._pass1_end

    @property
    def switchover_s(self) -> float | None:
        """Time QEMU stopped the guest for the final copy (s), or None before that."""
        return self._switch_tick / TICKS_PER_S if self._switched else None

    @property
    def throttle_steps(self) -> list[tuple[float, int]]:
        """(t, new throttle %) for every auto-converge step."""
        return list(self._throttle_steps)

    @property
    def doublings(self) -> list[tuple[float, float]]:
        """(t, new downtime limit ms) for every qemu-server escalation."""
        return list(self._doublings)

    @property
    def sync_count(self) -> int:
        """QEMU ``dirty-sync-count`` (the setup sync counts as 1)."""
        return self._sync_count

    @property
    def reported_dirty_rate(self) -> float:
        """QEMU's ``dirty-pages-rate`` × page size (bytes/s) of the last closed period: newly set
        pages only, so it differs from the raw rate (C.4 caveat)."""
        return self._reported_dirty_rate

    @property
    def done(self) -> bool:
        """True once completed or aborted."""
        return self._outcome != RUNNING

    # ------------------------------------------------------------------ advancing
    def advance(self, dt: float) -> None:
        """Advance simulated time by up to ``dt`` seconds; stops early at completion or abort."""
        if dt < 0 or not math.isfinite(dt):
            raise ValueError(f"dt must be a finite non-negative number of seconds, got {dt!r}")
        target = self._t + dt
        while self._outcome == RUNNING:
            if self._stopped:
                if self._t_end > target:
                    self._evolve(target)
                    return
                self._evolve(self._t_end)
                self._finish()
                return
            if self._usleep == POLL_SLOW_TICKS:
                self._skip_slow_polls(target)
                if self._outcome != RUNNING:
                    return
            ke = min(self._next_check, self._next_timer, self._poll_next)
            te = ke / TICKS_PER_S
            if te > target:
                self._evolve(target)
                return
            self._evolve(te)
            self._k = ke
            if ke == self._next_check and self._iteration_check(ke):
                continue  # switched over: the downtime phase follows
            if ke == self._next_timer:
                self._timer_tick(ke)
            polled = ke == self._poll_next
            if polled:
                self._poll(ke)
                if self._outcome != RUNNING:
                    return
            self._next_check = self._compute_next_check()
            if polled:
                self._skip_idle_polls(ke)

    def run(self, max_duration: float) -> Migration:
        """Advance until completion, abort or ``max_duration`` seconds; returns ``self``."""
        self.advance(max(0.0, max_duration - self._t))
        return self

    # ------------------------------------------------------------------ internals
    def _evolve(self, t1: float) -> None:
        """Closed-form evolution from ``self._t`` to ``t1`` with no event in between."""
        t0 = self._t
        dt = t1 - t0
        if dt <= 0.0:
            return
        pending = self._bulk + self._dirty
        # whole-second samples in (t0, t1], taken before the events at that instant
        s = math.floor(t0) + 1
        if self._record_timeline and s <= t1:
            tl = self.timeline
            for sec in range(s, math.floor(t1) + 1):
                sent = min(self._b * (sec - t0), pending)
                tl.append(
                    TimelineEntry(
                        float(sec), self._transferred + sent, pending - sent, self._pct, self._td_ms
                    )
                )
        sent = min(self._b * dt, pending)
        self._transferred += sent
        from_bulk = min(sent, self._bulk)  # the bulk rest lies just ahead of the scan cursor
        self._bulk -= from_bulk
        self._dirty -= sent - from_bulk
        if self._dirty < 0.0:
            self._dirty = 0.0
        if not self._stopped:
            frac = self._pct / 100.0
            self._written += self._raw * (1.0 - frac * self._sens) * dt
            self._throttle_integral += frac * dt
        self._t = t1

    def _threshold(self) -> float:
        """QEMU ``threshold_size`` = bandwidth × downtime limit (bytes)."""
        return self._b * self._td_ms / 1000.0

    def _compute_next_check(self) -> int:
        """First tick after ``_k`` whose iteration check finds ``remaining < threshold``.

        In the classic variant a pass ends only when nothing is pending any more."""
        pending = self._bulk + self._dirty
        limit = 0.0 if self.params.classic_passes else self._threshold()
        if self.params.classic_passes:
            # the tick at which the last pending byte has been sent (pending reaches 0)
            return self._k + max(1, math.ceil(pending / self._bh))
        if pending < limit:
            return self._k + 1
        return self._k + int((pending - limit) // self._bh) + 1

    def _log_distinct(self) -> float:
        """Distinct WWS bytes in the KVM dirty log: W (1 − e^(−R/W)) (C.2 saturation)."""
        if self._w <= 0.0 or self._written <= 0.0:
            return 0.0
        return self._w * -math.expm1(-self._written / self._w)

    def _sync(self, k: int) -> None:
        """``migration_bitmap_sync``: OR the log into the bitmap, count newly set pages, and close a
        rate period (≥ 1 s) with the auto-converge trigger."""
        if self._w > 0.0:
            pending_w = self._bulk * (self._w / self._m) + self._dirty
            overlap = min(1.0, pending_w / self._w)
            newly = self._log_distinct() * (1.0 - overlap)
        else:
            newly = 0.0
        self._dirty += newly
        self._written = 0.0
        self._sync_count += 1
        self._period_dirty += newly
        if self._sync_count == 2:
            self._pass1_end = k / TICKS_PER_S
        if k - self._period_tick > PERIOD_MIN_TICKS:
            xfer = self._transferred - self._period_xfer
            self._reported_dirty_rate = self._period_dirty * TICKS_PER_S / (k - self._period_tick)
            # migration_trigger_throttle: bytes_dirty_period > bytes_xfer_period × threshold / 100
            if (
                self.params.auto_converge
                and self._period_dirty > xfer * self.params.throttle_trigger_pct / 100.0
            ):
                self._high_cnt += 1
                if self._high_cnt >= 2:
                    self._high_cnt = 0
                    self._throttle_down(k)
            self._period_tick = k
            self._period_xfer = self._transferred
            self._period_dirty = 0.0

    def _throttle_down(self, k: int) -> None:
        """``mig_throttle_guest_down`` without tailslow (QEMU default ``cpu-throttle-tailslow`` off)."""
        if self._pct == 0:
            new = min(self.params.throttle_initial_pct, 99)  # cpu_throttle_set clamps to 1..99
        else:
            new = min(self._pct + self._increment, self._max_pct)
        new = max(new, 1)
        if new != self._pct:
            self._pct = new
            self._max_seen = max(self._max_seen, new)
        self._throttle_steps.append((k / TICKS_PER_S, new))

    def _iteration_check(self, k: int) -> bool:
        """QEMU ``migration_iteration_run`` at tick ``k``: exact sync and maybe switchover.

        Returns True when the migration switched over."""
        threshold = self._threshold()
        if self._bulk + self._dirty >= threshold and not self.params.classic_passes:
            return False
        self._sync(k)
        pending = self._bulk + self._dirty
        if pending == 0.0 or pending < threshold:
            self._switchover(k, pending)
            return True
        return False

    def _switchover(self, k: int, pending: float) -> None:
        """``migration_completion``: stop the guest and send the tail plus device state."""
        self._stopped = True
        self._switched = True
        self._switch_tick = k
        self._downtime_s = (pending + self.params.device_state_bytes) / self._b
        self._t_end = k / TICKS_PER_S + self._downtime_s
        # the throttle ends with the iteration phase (cpu_throttle_stop); the guest is paused
        self._pct = 0
        # qemu-server sees 'completed' at its first poll at or after the end (its poll grid)
        # (skipped 100 ms polls still lie on the grid poll_next + j × usleep)
        end_tick = self._t_end * TICKS_PER_S
        first = self._poll_next - ((self._poll_next - k) // self._usleep) * self._usleep
        seen = first + math.ceil(max(0.0, end_tick - first) / self._usleep) * self._usleep
        self._guest_pause_s = (seen - k) / TICKS_PER_S + self.params.resume_latency_ms / 1000.0

    def _finish(self) -> None:
        self._outcome = COMPLETED
        self._stopped = False
        self._bulk = 0.0
        self._dirty = 0.0
        total = self._transferred
        self.log.append(
            (
                self._t,
                f"average migration speed: {_render_bytes(self._m / self._t)}/s - downtime "
                f"{self._downtime_s * 1000:.0f} ms",
            )
        )
        self.log.append(
            (self._t, f"migration completed, transferred {_render_bytes(total)} VM-state")
        )

    def _timer_tick(self, k: int) -> None:
        """``cpu_throttle_dirty_sync_timer_tick``: sync unless a sync happened since the last tick;
        skipped during pass 1 (``dirty_sync_count <= 1``)."""
        if self._sync_count > 1 and self._sync_count == self._timer_prev:
            self._sync(k)
        self._timer_prev = self._sync_count
        self._next_timer = k + SYNC_TIMER_TICKS

    def _poll(self, k: int) -> None:
        """One iteration of qemu-server's phase2 loop (``query-migrate``) at tick ``k``."""
        self._poll_i += 1
        avglstat = self._last_mem / self._poll_i if self._last_mem else 0.0
        mem = self._transferred
        if mem != self._last_mem:
            rem = self._bulk + self._dirty
            if avglstat and rem < avglstat:
                self._usleep = POLL_FAST_TICKS
            p = self.params
            if p.qemu_server_patched:
                # QEMU's ram.transferred is a whole number of bytes: compare it as one, so float
                # rounding of the closed-form sends cannot cross a threshold it only touches
                mem_b = float(round(mem))
                if mem_b > p.abort_factor * self._m:
                    self._abort(k, mem)
                    return
                if not self._boosted and mem_b > p.boost_factor * self._m:
                    self._boosted = True
                    self.log.append((k / TICKS_PER_S, BOOST_MESSAGE))
                    self._increment = p.boost_increment_pct
                    self._max_pct = p.boost_max_throttle_pct
            if (self._lastrem and rem > self._lastrem) or rem == 0.0:
                self._downcnt += 1
            self._lastrem = rem
            if self._downcnt >= DOWNTIME_EVENTS_PER_DOUBLING:
                self._downcnt = 0
                t = k / TICKS_PER_S
                new = self._td_ms * 2.0
                if new > p.downtime_max_ms:
                    new = float(p.downtime_max_ms)
                    self.log.append(
                        (t, f"capping downtime limit to maximum possible: {new:.0f} ms")
                    )
                self._td_ms = new
                self._doublings.append((t, new))
                self.log.append((t, f"auto-increased downtime to continue migration: {new:.0f} ms"))
        self._last_mem = mem
        self._poll_next = k + self._usleep

    def _skip_slow_polls(self, target: float) -> None:
        """Run 1 s polls that fall before the next QEMU event (and by ``target``) as bookkeeping.

        Between QEMU events nothing is synced, so ``remaining`` only falls and ``transferred``
        grows linearly (:meth:`_evolve`): once a poll has seen the last sync, the next ones cannot
        count a downtime event, and their state is known in closed form. It updates ``$i``, ``$lastrem``, ``$last_mem_transferred`` and
        may switch to 100 ms polling (then :meth:`_skip_idle_polls` takes over). A poll that would
        cross a patch threshold, or find nothing pending, is left to :meth:`_poll`."""
        limit = min(self._next_check, self._next_timer)
        last_tick = math.floor(target * TICKS_PER_S + 1e-9)
        pending = self._bulk + self._dirty
        t, tr, b = self._t, self._transferred, self._b
        p = self.params
        thr = math.inf
        if p.qemu_server_patched:
            thr = p.abort_factor * self._m if self._boosted else p.boost_factor * self._m
        while self._usleep == POLL_SLOW_TICKS:
            k = self._poll_next
            if k >= limit or k > last_tick:
                return
            sent = b * (k / TICKS_PER_S - t)
            if sent >= pending:
                return  # remaining reaches 0: a downtime event, for _poll
            mem = tr + sent
            rem = pending - sent
            if round(mem) > thr or (self._lastrem and rem > self._lastrem):
                return  # a patch threshold or a sync since the last poll: _poll counts it
            self._poll_i += 1
            avglstat = self._last_mem / self._poll_i if self._last_mem else 0.0
            if mem != self._last_mem:
                if avglstat and rem < avglstat:
                    self._usleep = POLL_FAST_TICKS
                self._lastrem = rem
            self._last_mem = mem
            self._poll_next = k + self._usleep

    def _abort(self, k: int, mem: float) -> None:
        self._outcome = ABORTED
        self._error = ABORT_MESSAGE.format(passes=mem / self._m)
        self._pct = 0
        self.log.append((k / TICKS_PER_S, self._error))

    def _skip_idle_polls(self, k: int) -> None:
        """Jump over 100 ms polls whose effect is known: between QEMU events ``remaining`` only
        falls (no counter event), stays > 0 and ``transferred`` changes, so such a poll only
        updates ``$i``, ``$lastrem`` and ``$last_mem_transferred`` — which the last of them
        overwrites. The last poll before the next QEMU event (or a patch threshold) still runs."""
        if self._usleep != POLL_FAST_TICKS:
            return
        limit = min(self._next_check, self._next_timer)
        p = self.params
        if p.qemu_server_patched:
            thr = p.abort_factor * self._m if self._boosted else p.boost_factor * self._m
            # first tick at which transferred exceeds thr (linear while pending > 0 before limit)
            need = thr - self._transferred
            cross = k + (int(need // self._bh) + 1 if need >= 0 else 0)
            limit = min(limit, cross)
        nxt = self._poll_next
        if limit <= nxt:
            return
        last = nxt + ((limit - 1 - nxt) // POLL_FAST_TICKS) * POLL_FAST_TICKS
        if last > nxt:
            self._poll_i += (last - nxt) // POLL_FAST_TICKS
            self._poll_next = last


def _render_bytes(value: float) -> str:
    """Like PVE ``render_bytes($v, 1)``: binary units with two decimals."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    i = 0
    while value >= 1024 and i < len(units) - 1:
        value /= 1024
        i += 1
    return f"{value:.2f} {units[i]}"


def simulate(params: MigrationParams, duration: float) -> Migration:
    """Run one migration for at most ``duration`` seconds and return it."""
    return Migration(params).run(duration)
