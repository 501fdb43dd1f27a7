"""One live migration of one guest: QEMU pre-copy with auto-converge, driven by qemu-server.

Model (``docs/model.md``, *Live migration*; qemu-server ``QemuMigrate.pm``, QEMU ``migration/``):

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
  6th (cap 2,000,000 ms). The convergence patch (``docs/model.md``): once transferred > 1.5 × memory set
  ``cpu-throttle-increment 20``/``max-cpu-throttle 99`` once, abort when > 4 × memory.

Time is discretised only where QEMU itself is discrete: QEMU re-checks the pending amount once per
migration iteration, and ``ram_save_iterate`` returns at the latest after ``MAX_WAIT`` = 50 ms, so
all events fall on a 50 ms grid (20 ticks per second): pass-end syncs, the 5 s sync timer (100 ticks)
and qemu-server's polls (20 or 2 ticks). Between events the state evolves in closed form (linear
sending, exponential WWS saturation), so advancing costs O(events), not O(pages) or O(ticks): polls
at 100 ms whose outcome is known (``remaining`` falling, no patch threshold crossed) are skipped in
one step. If nothing is pending the stream idles until the next iteration check (≤ 50 ms).

* **XBZRLE** (``ram.c`` ``save_xbzrle_page``, ``page_cache.c``). qemu-server enables it with a
  cache of 10 % of the guest memory rounded up to a power of two (``QemuMigrate.pm``). After the
  bulk round a dirty page found in the direct-mapped cache is sent as its delta to the copy last
  sent (``xbzrle_delta`` of a page; 1 = pages rewritten whole, the encoder overflows), a miss is
  sent whole and cached. The hit rate follows the cache's fill (see
  :func:`~pvegym.sim.migration_kernel._xbzrle_cost`): near 1 for a hot set that fits, ≈ C/W for
  one that does not. QEMU counts encoded bytes in ``ram.transferred`` and in its bandwidth, so
  XBZRLE lowers the passes the convergence patch counts, and ``remaining`` drains faster than the wire.
* **Dirty tracking in the guest.** KVM write-protects the guest's pages while the dirty log is on;
  the first write to a page after each sync faults (``dirty_fault_us`` of vCPU time each):
  :attr:`Migration.tracking_overhead_s` integrates it for the cluster model.

Simplifications (documented, shared by the page-level reference in the tests): ``ram.total`` = the
configured memory, no zero-page savings beyond ``resident``, no XBZRLE header bytes, QEMU's
measured bandwidth = ``B`` when computing ``threshold_size``, QEMU events at a tick are ordered
iteration check → sync timer → qemu-server poll.

Known limit: for a small hot WWS re-dirtied within a few iterations, ``remaining`` hovers at the
threshold with ~zero drift; real (and page-level) fluctuations then make qemu-server count "remaining
grew" on about every other poll, which this mean-field model does not reproduce (it escalates the
downtime limit later). Larger working sets — the convergence patch's case — agree with a page-level simulation.

A pass ends as soon as ``remaining < threshold``, so QEMU switches over with a tail close to
``B × downtime_limit`` (real QEMU downtimes sit just below the limit, F.3 "QEMU downtime ≈ 0.8 s").
The classic geometric model of C.2/F.4 instead sends every pending page before the pass-end sync;
``classic_passes=True`` selects that variant (used to check the pass mechanics against C.2).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.sim import migration_kernel as K
from pvegym.sim.kernel import entry_point
from pvegym.sim.migration_kernel import TICKS_PER_S

#: Guest page size (x86 ``TARGET_PAGE_SIZE``, reported as ``ram.page-size``).
PAGE_SIZE: Final = 4096

RUNNING: Final = "running"
COMPLETED: Final = "completed"
ABORTED: Final = "aborted"

#: Error text of the convergence patch (``QemuMigrate.pm`` phase2), formatted with passes.
ABORT_MESSAGE: Final = (
    "aborting migration - no convergence: transferred {passes:.1f}x the guest memory without "
    "completing, the guest dirties its memory faster than it can be transferred"
)
BOOST_MESSAGE: Final = (
    "migration does not converge - escalating the auto-converge cpu throttling of the guest to "
    "force convergence"
)


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
    """Apply the convergence patch (throttle boost at ``boost_factor``, abort at ``abort_factor``)."""
    boost_factor: float = 1.5
    """The convergence patch's ``$migrate_throttle_boost_factor``: passes after which the throttle is escalated."""
    abort_factor: float = 4.0
    """The convergence patch's ``$migrate_abort_factor``: passes after which qemu-server aborts."""
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
    """The convergence patch: ``'cpu-throttle-increment' => 20`` after the boost factor."""
    boost_max_throttle_pct: int = 99
    """The convergence patch: ``'max-cpu-throttle' => 99`` after the boost factor."""
    downtime_max_ms: float = 2_000_000.0
    """qemu-server ``$migrate_downtime_max = 2000 * 1000`` = QEMU ``MAX_MIGRATE_DOWNTIME_SECONDS``."""
    page_size: int = PAGE_SIZE
    """Guest page size in bytes: the smallest guest memory (the model itself is in bytes)."""
    device_state_bytes: float = 0.0
    """Device state sent during the downtime (bytes). Not in ``docs/model.md``'s migration
    figures (QEMU sends it after the RAM tail, ``migration/savevm.c``); a virtio guest has well under 1 MiB, VFIO devices can have much more."""
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
    xbzrle: bool = True
    """qemu-server ``set_migration_caps`` enables ``xbzrle`` (A.1); False = the capability off."""
    xbzrle_cache: float | None = None
    """XBZRLE cache (bytes, a power of two of pages); None = qemu-server's 10 % of the memory
    rounded up to a power of two (:func:`xbzrle_cache_size`)."""
    xbzrle_delta: float = 1.0
    """Encoded size of an XBZRLE cache hit over the page size (0–1]: the share of a page's bytes
    that changed since it was last sent. 1 = pages rewritten whole (random full-page writes):
    the encoder overflows and sends the page, XBZRLE gains nothing."""
    dirty_fault_us: float = 1.0
    """vCPU time (µs) of one dirty-tracking write fault (the first write to a page after a sync).
    An estimate: a KVM write-protection fault on the fast path is of the order of a microsecond;
    Intel PML batches them (less). Only :attr:`Migration.tracking_overhead_s` reads it."""

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
        non_negative(self.dirty_fault_us, "--dirty-fault-us", "dirty-tracking fault cost")
        d = self.xbzrle_delta
        if not (isinstance(d, int | float) and 0.0 < d <= 1.0):
            raise ConfigError("--xbzrle-delta", f"must be within (0, 1], got {d!r}")
        if self.xbzrle_cache is not None:
            positive(self.xbzrle_cache, "--xbzrle-cache", "XBZRLE cache size")
            pages = self.xbzrle_cache / self.page_size
            if pages != int(pages) or int(pages) & (int(pages) - 1):
                # QEMU migration/page_cache.c cache_init: "number of pages is not a power of two"
                raise ConfigError("--xbzrle-cache", "must be a power of two number of pages")

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

    The event loop is compiled (:mod:`pvegym.sim.migration_kernel`); this class owns its state
    arrays, turns the kernel's events into qemu-server's log lines and the diagnostics lists, and
    exposes the state. Read-only state (all in SI units: s, bytes, ms where the name says so):
    :attr:`t`, :attr:`outcome`, :attr:`transferred`, :attr:`remaining`, :attr:`passes`,
    :attr:`throttle_pct`, :attr:`max_throttle_pct_seen`, :attr:`downtime_limit_ms`,
    :attr:`downtime_s`, :attr:`guest_pause_s`, :attr:`error`, :attr:`throttle_integral`,
    :attr:`log`, :attr:`timeline`, plus diagnostics (:attr:`pass1_end_s`, :attr:`throttle_steps`,
    :attr:`doublings`, :attr:`switchover_s`, :attr:`sync_count`, :attr:`reported_dirty_rate`).
    """

    __slots__ = ("_advance", "_events", "_f", "_p", "_s", "_segments")

    def __init__(
        self, params: MigrationParams | NDArray[np.float64], record_timeline: bool = True
    ) -> None:
        """``params``: validated :class:`MigrationParams`, or an array from :func:`params_array`
        (see :meth:`for_guest` for a cluster's migrations).
        ``record_timeline=False`` skips the per-second :attr:`timeline` (the cluster model does
        not read it)."""
        # the kernel's compiled entry point takes only arrays laid out as ours (a caller's
        # parameter array goes through the dispatcher, which checks its type)
        if isinstance(params, MigrationParams):
            p = params_array(params)
            self._advance = _own_entry("advance")
        else:
            p = params
            self._advance = K.advance
        self._p = p
        self._f = np.empty(K.N_F)
        self._s = np.empty(K.N_S, dtype=np.int64)
        K.init_state(p, self._f, self._s, record_timeline, True)
        # raw kernel output, turned into log lines and entries only when asked for (the cluster
        # never reads them)
        self._events: list[list[float]] = []
        self._segments: list[list[float]] = []

    @classmethod
    def for_guest(
        cls,
        template: NDArray[np.float64],
        memory: float,
        resident: float,
        dirty_rate: float,
        wws: float,
        sensitivity: float,
        xbzrle_delta: float = 1.0,
        reuse: Migration | None = None,
    ) -> Migration:
        """A guest's migration in a cluster: ``template`` (:func:`params_array` of validated
        shared settings) with the guest's already validated values (bytes, bytes/s, fraction);
        it keeps neither :attr:`log` nor :attr:`timeline` nor the diagnostics lists, which the
        cluster never reads (a motion starts every few rounds, so the set-up cost counts).
        ``reuse``: an ended migration nobody reads any more, whose arrays are reinitialised
        instead of allocating new ones."""
        if reuse is None:
            m = cls.__new__(cls)
            m._p = np.empty(K.N_P)
            m._f = np.empty(K.N_F)
            m._s = np.empty(K.N_S, dtype=np.int64)
            m._events = []
            m._segments = []
            m._advance = _own_entry("advance")
        else:
            m = reuse
            m._events.clear()
            m._segments.clear()
        _own_entry("start_guest")(
            template,
            m._p,
            m._f,
            m._s,
            float(memory),
            float(resident),
            float(dirty_rate),
            float(wws),
            float(sensitivity),
            float(xbzrle_delta),
        )
        return m

    # ------------------------------------------------------------------ a shared link
    @property
    def bandwidth(self) -> float:
        """The stream's throughput now (bytes/s): the settings' ``bandwidth`` unless the
        cluster's link sharing changed it (:meth:`set_bandwidth`)."""
        return self._p.item(K.P_B)

    def set_bandwidth(self, bandwidth: float) -> None:
        """From now on the stream sends at ``bandwidth`` bytes/s (> 0): its share of a migration
        link that other streams started or stopped using. The switchover threshold follows it,
        as QEMU's does (:func:`pvegym.sim.migration_kernel.set_bandwidth`). :attr:`timeline` and
        the log's average speed assume one bandwidth throughout (the cluster reads neither)."""
        own = self._advance is not K.advance  # arrays it allocated itself: the entry point
        setter = _own_entry("set_bandwidth") if own else K.set_bandwidth
        setter(self._f, self._s, self._p, float(bandwidth))

    def snapshot(self) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """A copy of the mutable state, for :meth:`restore` (a cluster migration's: it keeps no
        log, so the state is all there is)."""
        return self._f.copy(), self._s.copy()

    def restore(self, state: tuple[NDArray[np.float64], NDArray[np.int64]]) -> None:
        """Back to a :meth:`snapshot` (the parameters, e.g. the bandwidth, stay as they are)."""
        self._f[:] = state[0]
        self._s[:] = state[1]

    # ------------------------------------------------------------------ read-only state
    @property
    def t(self) -> float:
        """Seconds since the ``migrate`` command."""
        return self._f.item(K.F_T)  # a Python float without boxing a NumPy scalar

    @property
    def outcome(self) -> str:
        """``"running"``, ``"completed"`` or ``"aborted"``."""
        return _OUTCOMES[int(self._s[K.S_OUTCOME])]

    @property
    def transferred(self) -> float:
        """RAM bytes sent so far (``ram.transferred``)."""
        return self._f.item(K.F_TRANSFERRED)

    @property
    def remaining(self) -> float:
        """RAM bytes pending in the migration bitmap (``ram.remaining``); jumps up at syncs."""
        return float(self._f[K.F_BULK] + self._f[K.F_DIRTY])

    @property
    def passes(self) -> float:
        """Transferred bytes in units of the guest memory (the convergence patch's measure)."""
        return float(self._f[K.F_TRANSFERRED] / self._p[K.P_M])

    @property
    def throttle_pct(self) -> int:
        """Current auto-converge vCPU throttle in percent (0 when not throttling)."""
        return int(self._s[K.S_PCT])

    @property
    def max_throttle_pct_seen(self) -> int:
        """Highest throttle applied during the migration, in percent."""
        return int(self._s[K.S_MAX_SEEN])

    @property
    def downtime_limit_ms(self) -> float:
        """Current downtime limit (ms), as escalated by qemu-server."""
        return float(self._f[K.F_TD_MS])

    @property
    def downtime_s(self) -> float:
        """QEMU's downtime at switchover (s): the tail + device state at B. 0 unless completed."""
        return float(self._f[K.F_DOWNTIME]) if self._s[K.S_OUTCOME] == K.COMPLETED_CODE else 0.0

    @property
    def guest_pause_s(self) -> float:
        """Guest-visible pause (s): QEMU downtime + wait for qemu-server's next poll + resume
        latency (A.3). 0 unless completed."""
        return self._f.item(K.F_PAUSE) if self._s.item(K.S_OUTCOME) == K.COMPLETED_CODE else 0.0

    @property
    def error(self) -> str:
        """The abort message (the convergence patch) or ``""``."""
        if self._s[K.S_OUTCOME] != K.ABORTED_CODE:
            return ""
        return ABORT_MESSAGE.format(passes=self._f[K.F_ABORT_MEM] / self._p[K.P_M])

    @property
    def tracking_overhead_s(self) -> float:
        """vCPU seconds the guest lost to dirty-tracking write faults so far."""
        return float(self._f[K.F_TRACK_S])

    @property
    def xbzrle_cache_bytes(self) -> float:
        """The XBZRLE cache in use (bytes; 0 when XBZRLE is off)."""
        return float(self._p[K.P_XCACHE])

    @property
    def wire_cost(self) -> float:
        """Wire bytes per byte of a dirty page now (1 without XBZRLE gains)."""
        return float(self._f[K.F_XCOST])

    @property
    def throttle_integral(self) -> float:
        """∫ throttle fraction dt (s): vCPU-seconds per vCPU the guest lost to throttling."""
        return float(self._f[K.F_THROTTLE_INTEGRAL])

    @property
    def effective_dirty_rate(self) -> float:
        """Current guest write rate after throttling (bytes/s); 0 while paused or finished."""
        s, p = self._s, self._p
        if s[K.S_STOPPED] or s[K.S_OUTCOME] != K.RUNNING_CODE:
            return 0.0
        return float(p[K.P_RAW] * (1.0 - int(s[K.S_PCT]) / 100.0 * p[K.P_SENS]))

    @property
    def pass1_end_s(self) -> float | None:
        """Time of the sync that ended pass 1 (s), or None while pass 1 is running."""
        v = float(self._f[K.F_PASS1_END])
        return None if math.isnan(v) else v

    @property
    def switchover_s(self) -> float | None:
        """Time QEMU stopped the guest for the final copy (s), or None before that."""
        return int(self._s[K.S_SWITCH_TICK]) / TICKS_PER_S if self._s[K.S_SWITCHED] else None

    @property
    def throttle_steps(self) -> list[tuple[float, int]]:
        """(t, new throttle %) for every auto-converge step."""
        return [(k / TICKS_PER_S, int(v)) for k, c, v in self._events if c == K.EV_THROTTLE]

    @property
    def doublings(self) -> list[tuple[float, float]]:
        """(t, new downtime limit ms) for every qemu-server escalation."""
        return [(k / TICKS_PER_S, v) for k, c, v in self._events if c == K.EV_DOUBLE]

    @property
    def log(self) -> list[tuple[float, str]]:
        """qemu-server's task log lines of the migration, (t, text)."""
        p = self._p
        m = float(p[K.P_M])
        out: list[tuple[float, str]] = []
        if p[K.P_TD0] > p[K.P_TD_MAX]:
            out.append((0.0, f"capping downtime limit to maximum possible: {p[K.P_TD_MAX]:.0f} ms"))
        for when, code, value in self._events:
            t = when / TICKS_PER_S
            if code == K.EV_BOOST:
                out.append((t, BOOST_MESSAGE))
            elif code == K.EV_CAP:
                out.append((t, f"capping downtime limit to maximum possible: {value:.0f} ms"))
            elif code == K.EV_DOUBLE:
                out.append((t, f"auto-increased downtime to continue migration: {value:.0f} ms"))
            elif code == K.EV_ABORT:
                out.append((t, ABORT_MESSAGE.format(passes=value / m)))
            elif code == K.EV_FINISH:  # ``when`` is a time (s), not a tick
                speed = _render_bytes(m / when)
                downtime_ms = self._f[K.F_DOWNTIME] * 1000
                out.append(
                    (when, f"average migration speed: {speed}/s - downtime {downtime_ms:.0f} ms")
                )
                out.append(
                    (when, f"migration completed, transferred {_render_bytes(value)} VM-state")
                )
        return out

    @property
    def timeline(self) -> list[TimelineEntry]:
        """State at every whole second (before the events of that instant), from t = 0; only the
        start unless constructed with ``record_timeline=True``."""
        b = float(self._p[K.P_B])
        out = [TimelineEntry(0.0, 0.0, float(self._p[K.P_M]), 0, float(self._p_td0()))]
        for t0, t1, transferred, pending, pct, td_ms, bulk, cost in self._segments:
            # the bulk rest goes whole, dirty pages at ``cost`` wire bytes per byte (XBZRLE)
            need = pending if cost == 1.0 or pending <= bulk else bulk + (pending - bulk) * cost
            for sec in range(math.floor(t0) + 1, math.floor(t1) + 1):
                sent = min(b * (sec - t0), need)
                drained = sent if cost == 1.0 or sent <= bulk else bulk + (sent - bulk) / cost
                out.append(
                    TimelineEntry(
                        float(sec), transferred + sent, max(pending - drained, 0.0), int(pct), td_ms
                    )
                )
        return out

    def _p_td0(self) -> float:
        """The downtime limit at the start (ms): the configured one, capped at the maximum."""
        return min(float(self._p[K.P_TD0]), float(self._p[K.P_TD_MAX]))

    @property
    def sync_count(self) -> int:
        """QEMU ``dirty-sync-count`` (the setup sync counts as 1)."""
        return int(self._s[K.S_SYNC_COUNT])

    @property
    def reported_dirty_rate(self) -> float:
        """QEMU's ``dirty-pages-rate`` × page size (bytes/s) of the last closed period: newly set
        pages only, so it differs from the raw rate (C.4 caveat)."""
        return float(self._f[K.F_REPORTED_RATE])

    @property
    def done(self) -> bool:
        """True once completed or aborted."""
        return bool(self._s[K.S_OUTCOME] != K.RUNNING_CODE)

    # ------------------------------------------------------------------ advancing
    def advance(self, dt: float) -> str:
        """Advance simulated time by up to ``dt`` seconds; stops early at completion or abort.
        Returns :attr:`outcome`."""
        if dt < 0 or not math.isfinite(dt):
            raise ValueError(f"dt must be a finite non-negative number of seconds, got {dt!r}")
        f, s, advance = self._f, self._s, self._advance
        target = f.item(K.F_T) + dt
        result = advance(f, s, self._p, target, _SEGMENTS, _EVENTS)
        while result & K.NEED_DRAIN:
            self._drain()
            result = advance(f, s, self._p, target, _SEGMENTS, _EVENTS)
        if result & K.HAS_OUTPUT:
            self._drain()
        return _OUTCOMES[result >> 2]

    def advance_costs(self, dt: float) -> tuple[str, float, float, float]:
        """:meth:`advance` by ``dt`` seconds, and what it added to :attr:`throttle_integral` (s),
        :attr:`tracking_overhead_s` (s) and :attr:`transferred` (bytes): a cluster's round of
        the migration in one call instead of seven."""
        item = self._f.item  # a Python float straight away (float(f[i]) boxes a NumPy scalar)
        throttle = item(K.F_THROTTLE_INTEGRAL)
        faults = item(K.F_TRACK_S)
        wire = item(K.F_TRANSFERRED)
        outcome = self.advance(dt)
        return (
            outcome,
            item(K.F_THROTTLE_INTEGRAL) - throttle,
            item(K.F_TRACK_S) - faults,
            item(K.F_TRANSFERRED) - wire,
        )

    def run(self, max_duration: float) -> Migration:
        """Advance until completion, abort or ``max_duration`` seconds; returns ``self``."""
        self.advance(max(0.0, max_duration - self.t))
        return self

    def _drain(self) -> None:
        """Keep the kernel's events and timeline segments, and empty its buffers."""
        s = self._s
        if s[K.S_TL_N]:
            self._segments.extend(_SEGMENTS[: s[K.S_TL_N]].tolist())
            s[K.S_TL_N] = 0
        if s[K.S_EV_N]:
            self._events.extend(_EVENTS[: s[K.S_EV_N]].tolist())
            s[K.S_EV_N] = 0


_OUTCOMES: Final = (RUNNING, COMPLETED, ABORTED)  # by kernel outcome code
# the kernel's output buffers, shared by every migration: each advance() drains them before it
# returns, so one pair serves all. Not thread-safe (only migrations that keep a log or timeline
# write to them; pvegym parallelises with processes, never threads).
_EVENTS: Final = np.empty((K.EV_CAP_ROWS, 3))
_SEGMENTS: Final = np.empty((K.EV_CAP_ROWS, 8))


@functools.cache
def _own_entry(kernel: str) -> Any:
    """The compiled entry point of the kernel function ``kernel`` (``"advance"``,
    ``"set_bandwidth"`` or ``"start_guest"``) for the arrays a :class:`Migration` allocates
    itself (float64/int64 vectors, the shared output buffers; float guest values for
    ``start_guest``: :meth:`Migration.for_guest` converts them, ``float()`` of an int being the
    conversion the int specialisation made inside), made on first use: each skips the
    dispatcher's type resolution (:func:`pvegym.sim.kernel.entry_point`; ~0.5 µs for
    ``start_guest``'s ten arguments, paid at every motion before)."""
    f, s, p = np.empty(K.N_F), np.empty(K.N_S, dtype=np.int64), np.empty(K.N_P)
    examples: dict[str, tuple[Any, ...]] = {
        "advance": (f, s, p, 0.0, _SEGMENTS, _EVENTS),
        "set_bandwidth": (f, s, p, 0.0),
        "start_guest": (p, np.empty(K.N_P), f, s, *(0.0,) * 6),
    }
    return entry_point(getattr(K, kernel), *examples[kernel])


def params_array(p: MigrationParams) -> NDArray[np.float64]:
    """The kernel's parameter vector (:mod:`pvegym.sim.migration_kernel` ``P_*`` slots)."""
    a = np.zeros(K.N_P)
    a[K.P_M] = p.memory
    a[K.P_B] = p.bandwidth
    a[K.P_W] = p.working_set
    a[K.P_RAW] = p.dirty_rate
    a[K.P_SENS] = p.throttle_sensitivity
    a[K.P_BH] = float(p.bandwidth) / TICKS_PER_S
    a[K.P_RESIDENT] = p.memory if p.resident is None else p.resident
    a[K.P_TD0] = p.downtime_limit_ms
    a[K.P_TD_MAX] = p.downtime_max_ms
    a[K.P_PATCHED] = p.qemu_server_patched
    a[K.P_BOOST] = p.boost_factor
    a[K.P_ABORT] = p.abort_factor
    a[K.P_AUTO_CONVERGE] = p.auto_converge
    a[K.P_SYNC_TIMER] = p.sync_timer
    a[K.P_TRIGGER] = p.throttle_trigger_pct
    a[K.P_INITIAL] = p.throttle_initial_pct
    a[K.P_INCREMENT] = p.throttle_increment_pct
    a[K.P_MAX_PCT] = p.max_throttle_pct
    a[K.P_BOOST_INC] = p.boost_increment_pct
    a[K.P_BOOST_MAX] = p.boost_max_throttle_pct
    a[K.P_DEVICE] = p.device_state_bytes
    a[K.P_RESUME_MS] = p.resume_latency_ms
    a[K.P_CLASSIC] = p.classic_passes
    if p.xbzrle:
        a[K.P_XCACHE] = xbzrle_cache_size(p.memory) if p.xbzrle_cache is None else p.xbzrle_cache
    a[K.P_XDELTA] = p.xbzrle_delta
    a[K.P_FAULT_S] = p.dirty_fault_us * 1e-6
    a[K.P_PAGE] = p.page_size
    return a


def xbzrle_cache_size(memory: float) -> float:
    """qemu-server's XBZRLE cache for a guest of ``memory`` bytes (``QemuMigrate.pm``: 10 % of the
    memory, ``round_powerof2``): 24 GiB → 4 GiB, 8 GiB → 1 GiB, 4 GiB → 512 MiB (F.1)."""
    return float(K.xbzrle_cache_size(float(memory)))


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
