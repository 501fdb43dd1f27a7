"""The compiled event loop of one live migration (the model is documented in
:mod:`pvegym.sim.migration`, which wraps this module).

Why compiled: in a cluster a motion starts every few rounds, and as Python methods one round of a
migration cost ~20–30 µs (a dozen small method calls per QEMU event) — more than the rest of an
environment step. One ``numba.njit`` call per round runs the same arithmetic in the same order, so
results are bit-for-bit those of the Python formulation it replaced (IEEE arithmetic, no fastmath;
``round`` is round-half-even and float ``//`` is CPython's algorithm in both).

State lives in flat arrays so that the call has few arguments and nothing is boxed:

* ``p`` (float64, ``P_*`` slots): the parameters, constant during the migration;
* ``f`` (float64, ``F_*``) and ``s`` (int64, ``S_*``): the mutable state;
* ``ev`` (float64, ``(EV_CAP_ROWS, 3)``: tick, ``EV_*`` code, value): what qemu-server logs and the
  diagnostics lists, drained by the wrapper after each call;
* ``tl`` (float64, ``(EV_CAP_ROWS, 8)``: t0, t1, transferred, pending, throttle percent, downtime
  limit ms, bulk rest, wire bytes per dirty page byte) when ``s[S_RECORD]`` is set: the
  closed-form segments the wrapper expands into the per-second timeline.

:func:`advance` returns flags and the outcome code in one int (:func:`_result`): whether a buffer
is nearly full (:data:`NEED_DRAIN`: the caller drains them and calls again with the same target)
or holds anything (:data:`HAS_OUTPUT`). ``NUMBA_DISABLE_JIT=1`` runs
the same code as plain Python.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numba import njit

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
NEVER: Final = 1 << 62

# --- outcome codes (s[S_OUTCOME]) ------------------------------------------------------------
RUNNING_CODE: Final = 0
COMPLETED_CODE: Final = 1
ABORTED_CODE: Final = 2

# --- parameter slots (p) ---------------------------------------------------------------------
P_M: Final = 0  # guest memory (bytes)
P_B: Final = 1  # bandwidth (bytes/s)
P_W: Final = 2  # writable working set (bytes)
P_RAW: Final = 3  # raw dirty rate (bytes/s)
P_SENS: Final = 4  # throttle sensitivity (fraction 0-1)
P_BH: Final = 5  # bytes sent per tick
P_RESIDENT: Final = 6  # bytes pass 1 sends
P_TD0: Final = 7  # start downtime limit (ms)
P_TD_MAX: Final = 8  # maximum downtime limit (ms)
P_PATCHED: Final = 9  # 1 = the convergence patch
P_BOOST: Final = 10  # boost factor (passes)
P_ABORT: Final = 11  # abort factor (passes)
P_AUTO_CONVERGE: Final = 12  # 1 = auto-converge on
P_SYNC_TIMER: Final = 13  # 1 = QEMU >= 9.2 dirty-sync timer
P_TRIGGER: Final = 14  # throttle trigger (percent)
P_INITIAL: Final = 15  # initial throttle (percent)
P_INCREMENT: Final = 16  # throttle increment (percent)
P_MAX_PCT: Final = 17  # max throttle (percent)
P_BOOST_INC: Final = 18  # increment after the boost (percent)
P_BOOST_MAX: Final = 19  # max throttle after the boost (percent)
P_DEVICE: Final = 20  # device state (bytes)
P_RESUME_MS: Final = 21  # resume latency (ms)
P_CLASSIC: Final = 22  # 1 = classic geometric passes
P_XCACHE: Final = 23  # XBZRLE cache (bytes), 0 = XBZRLE off
P_XDELTA: Final = 24  # XBZRLE encoded size of a cache hit / page size (0-1]
P_FAULT_S: Final = 25  # vCPU seconds per dirty-tracking write fault
P_PAGE: Final = 26  # page size (bytes)
N_P: Final = 27

# --- float state slots (f) -------------------------------------------------------------------
F_T: Final = 0  # s since the migrate command
F_TRANSFERRED: Final = 1  # bytes sent
F_BULK: Final = 2  # unsent rest of the all-ones bitmap (bytes)
F_DIRTY: Final = 3  # pages set by syncs, unsent (bytes)
F_WRITTEN: Final = 4  # raw bytes written into the WWS since the last sync
F_THROTTLE_INTEGRAL: Final = 5  # integral of the throttle fraction (s)
F_PERIOD_XFER: Final = 6  # transferred at the start of the rate period (bytes)
F_PERIOD_DIRTY: Final = 7  # newly dirtied in the rate period (bytes)
F_PASS1_END: Final = 8  # s, NaN while pass 1 runs
F_REPORTED_RATE: Final = 9  # QEMU dirty-pages-rate x page size (bytes/s)
F_TD_MS: Final = 10  # current downtime limit (ms)
F_LASTREM: Final = 11  # qemu-server $lastrem (0 = undef)
F_LAST_MEM: Final = 12  # qemu-server $last_mem_transferred
F_T_END: Final = 13  # s, end of the switchover copy (inf before)
F_DOWNTIME: Final = 14  # QEMU downtime (s)
F_PAUSE: Final = 15  # guest-visible pause (s)
F_ABORT_MEM: Final = 16  # transferred when aborted (bytes)
F_XSENT: Final = 17  # page bytes sent after the bulk round (XBZRLE's cache fills from these)
F_XCOST: Final = 18  # wire bytes per page byte of a dirty page (1 without XBZRLE gain)
F_TRACK_S: Final = 19  # vCPU seconds lost to dirty-tracking write faults
N_F: Final = 20

# --- int state slots (s) ---------------------------------------------------------------------
S_K: Final = 0  # last tick whose events were processed
S_OUTCOME: Final = 1
S_PCT: Final = 2  # current throttle (percent)
S_INCREMENT: Final = 3
S_MAX_PCT: Final = 4
S_HIGH_CNT: Final = 5
S_MAX_SEEN: Final = 6
S_SYNC_COUNT: Final = 7
S_PERIOD_TICK: Final = 8
S_TIMER_PREV: Final = 9
S_POLL_I: Final = 10  # qemu-server $i
S_POLL_NEXT: Final = 11
S_USLEEP: Final = 12  # ticks
S_DOWNCNT: Final = 13
S_BOOSTED: Final = 14
S_STOPPED: Final = 15
S_SWITCHED: Final = 16
S_SWITCH_TICK: Final = 17
S_NEXT_CHECK: Final = 18
S_NEXT_TIMER: Final = 19
S_EV_N: Final = 20  # events in the buffer
S_TL_N: Final = 21  # timeline rows written
S_RECORD: Final = 22  # 1 = write the timeline
S_LOG: Final = 23  # 1 = write events (log lines, diagnostics lists)
N_S: Final = 24

# --- events (ev rows: tick or time, code, value) ---------------------------------------------
EV_THROTTLE: Final = 1  # tick, new throttle percent
EV_BOOST: Final = 2  # tick, -
EV_CAP: Final = 3  # tick, capped limit (ms)
EV_DOUBLE: Final = 4  # tick, new limit (ms)
EV_ABORT: Final = 5  # tick, transferred (bytes)
EV_FINISH: Final = 6  # time (s), transferred (bytes)
EV_CAP_ROWS: Final = 64
_EV_MARGIN: Final = 8  # one pass of the loop adds at most 4 events and 2 segments

# advance()'s result: these flags | outcome code << 2
NEED_DRAIN: Final = 1  # stopped early: a buffer is nearly full, drain and call again
HAS_OUTPUT: Final = 2  # the buffers hold events or segments


@njit(cache=True, inline="always")
def _wire_for(f: np.ndarray, drop: float) -> float:
    """Wire bytes that drain ``drop`` bytes of pending pages: the bulk rest first (sent whole),
    then dirty pages at :data:`F_XCOST` wire bytes per page byte (XBZRLE hits)."""
    c = f[F_XCOST]
    if c == 1.0 or drop <= f[F_BULK]:
        return drop
    return f[F_BULK] + (drop - f[F_BULK]) * c


@njit(cache=True, inline="always")
def _drained(f: np.ndarray, wire: float) -> float:
    """Bytes of pending pages that ``wire`` bytes on the stream drain (inverse of
    :func:`_wire_for`, not capped at the pending amount)."""
    c = f[F_XCOST]
    if c == 1.0 or wire <= f[F_BULK]:
        return wire
    return f[F_BULK] + (wire - f[F_BULK]) / c


@njit(cache=True)
def _next_check(f: np.ndarray, s: np.ndarray, p: np.ndarray) -> int:
    """First tick after ``S_K`` whose iteration check finds ``remaining < threshold`` (classic:
    the tick at which the last pending byte has been sent)."""
    pending = f[F_BULK] + f[F_DIRTY]
    classic = p[P_CLASSIC] != 0.0
    limit = 0.0 if classic else p[P_B] * f[F_TD_MS] / 1000.0
    k = s[S_K]
    if classic:
        return k + max(1, math.ceil(_wire_for(f, pending) / p[P_BH]))
    if pending < limit:
        return k + 1
    return k + int(_wire_for(f, pending - limit) // p[P_BH]) + 1


@njit(cache=True)
def init_state(p: np.ndarray, f: np.ndarray, s: np.ndarray, record: bool, log: bool) -> None:
    """Write the state of a migration that has just been started into ``f`` (``N_F`` floats) and
    ``s`` (``N_S`` int64); filled here rather than returned, as boxing arrays back to Python
    costs more than allocating them there. ``record``: write timeline segments; ``log``: write
    events."""
    f[:] = 0.0
    s[:] = 0
    s[S_LOG] = 1 if log else 0
    f[F_BULK] = p[P_RESIDENT]
    f[F_PASS1_END] = np.nan
    f[F_TD_MS] = min(p[P_TD0], p[P_TD_MAX])
    f[F_T_END] = np.inf
    f[F_XCOST] = 1.0
    s[S_INCREMENT] = int(p[P_INCREMENT])
    s[S_MAX_PCT] = int(p[P_MAX_PCT])
    s[S_SYNC_COUNT] = 1  # the setup sync (ram_init_bitmaps) starts the first rate period
    s[S_TIMER_PREV] = 1
    s[S_POLL_NEXT] = POLL_SLOW_TICKS
    s[S_USLEEP] = POLL_SLOW_TICKS
    s[S_RECORD] = 1 if record else 0
    s[S_NEXT_CHECK] = _next_check(f, s, p)
    timer = p[P_AUTO_CONVERGE] != 0.0 and p[P_SYNC_TIMER] != 0.0
    s[S_NEXT_TIMER] = SYNC_TIMER_TICKS if timer else NEVER


@njit(cache=True)
def start_guest(
    template: np.ndarray,
    p: np.ndarray,
    f: np.ndarray,
    s: np.ndarray,
    memory: float,
    resident: float,
    dirty_rate: float,
    wws: float,
    sensitivity: float,
    xbzrle_delta: float,
) -> None:
    """A cluster's migration in one call: ``p`` = ``template`` with the guest's values, state
    initialised, neither events nor timeline written (the cluster reads neither). The XBZRLE
    cache follows the guest's memory as qemu-server sizes it (:func:`xbzrle_cache_size`) when
    the template enables XBZRLE (``P_XCACHE`` > 0)."""
    p[:] = template
    p[P_M] = memory
    p[P_RESIDENT] = resident
    p[P_RAW] = dirty_rate
    p[P_W] = wws
    p[P_SENS] = sensitivity
    p[P_XDELTA] = xbzrle_delta
    if template[P_XCACHE] > 0.0:
        p[P_XCACHE] = xbzrle_cache_size(memory)
    init_state(p, f, s, False, False)


@njit(cache=True)
def xbzrle_cache_size(memory: float) -> float:
    """qemu-server ``QemuMigrate.pm`` ``phase2_start_local_cluster``: ``xbzrle-cache-size`` = 10 %
    of the guest memory, ``round_powerof2`` = ``2 << int(log2(x − 1))`` (bytes; 24 GiB → 4 GiB,
    8 GiB → 1 GiB, 4 GiB → 512 MiB). Memory is configured in MiB, so ``int(MiB × 1048576 / 10)``."""
    x = float(int(math.floor(memory / 1048576.0) * 1048576 / 10))
    if x < 2.0:
        return 1.0
    return float(2 << int(math.log(x - 1.0) / math.log(2.0)))


@njit(cache=True)
def _event(s: np.ndarray, ev: np.ndarray, when: float, code: int, value: float) -> None:
    if s[S_LOG] == 0:
        return
    n = s[S_EV_N]
    ev[n, 0] = when
    ev[n, 1] = code
    ev[n, 2] = value
    s[S_EV_N] = n + 1


@njit(cache=True)
def _evolve(f: np.ndarray, s: np.ndarray, p: np.ndarray, t1: float, tl: np.ndarray) -> None:
    """Closed-form evolution from ``F_T`` to ``t1`` with no event in between."""
    t0 = f[F_T]
    dt = t1 - t0
    if dt <= 0.0:
        return
    pending = f[F_BULK] + f[F_DIRTY]
    b = p[P_B]
    # whole-second samples in (t0, t1] are taken before the events at that instant: the
    # segment is enough to compute them (the wrapper expands it)
    if s[S_RECORD] != 0 and math.floor(t0) + 1 <= t1:
        n = s[S_TL_N]
        tl[n, 0] = t0
        tl[n, 1] = t1
        tl[n, 2] = f[F_TRANSFERRED]
        tl[n, 3] = pending
        tl[n, 4] = s[S_PCT]
        tl[n, 5] = f[F_TD_MS]
        tl[n, 6] = f[F_BULK]
        tl[n, 7] = f[F_XCOST]
        s[S_TL_N] = n + 1
    if f[F_XCOST] == 1.0:
        sent = min(b * dt, pending)
        f[F_TRANSFERRED] += sent
        from_bulk = min(sent, f[F_BULK])  # the bulk rest lies just ahead of the scan cursor
        f[F_BULK] -= from_bulk
        dirty_sent = sent - from_bulk
    else:  # XBZRLE hits cost F_XCOST wire bytes per page byte
        wire = min(b * dt, _wire_for(f, pending))
        f[F_TRANSFERRED] += wire
        from_bulk = min(wire, f[F_BULK])
        f[F_BULK] -= from_bulk
        dirty_sent = (wire - from_bulk) / f[F_XCOST]
    f[F_DIRTY] -= dirty_sent
    f[F_XSENT] += dirty_sent
    if f[F_DIRTY] < 0.0:
        f[F_DIRTY] = 0.0
    if s[S_STOPPED] == 0:
        frac = s[S_PCT] / 100.0
        written = p[P_RAW] * (1.0 - frac * p[P_SENS]) * dt
        w = p[P_W]
        if p[P_FAULT_S] > 0.0 and w > 0.0 and written > 0.0:
            # pages first written since the last sync fault once (write protection): the growth
            # of the distinct log W (1 − e^(−R/W)) while R grows by ``written``
            first = -w * math.exp(-f[F_WRITTEN] / w) * math.expm1(-written / w)
            f[F_TRACK_S] += first / p[P_PAGE] * p[P_FAULT_S]
        f[F_WRITTEN] += written
        f[F_THROTTLE_INTEGRAL] += frac * dt
    f[F_T] = t1


@njit(cache=True)
def _throttle_down(s: np.ndarray, p: np.ndarray, k: int, ev: np.ndarray) -> None:
    """``mig_throttle_guest_down`` without tailslow (QEMU default ``cpu-throttle-tailslow`` off)."""
    if s[S_PCT] == 0:
        new = min(int(p[P_INITIAL]), 99)  # cpu_throttle_set clamps to 1..99
    else:
        new = min(s[S_PCT] + s[S_INCREMENT], s[S_MAX_PCT])
    new = max(new, 1)
    if new != s[S_PCT]:
        s[S_PCT] = new
        s[S_MAX_SEEN] = max(s[S_MAX_SEEN], new)
    _event(s, ev, k, EV_THROTTLE, new)


@njit(cache=True)
def _xbzrle_cost(f: np.ndarray, p: np.ndarray) -> float:
    """Wire bytes per byte of a dirty page with XBZRLE (``ram.c`` ``save_xbzrle_page``).

    After the bulk round every page sent goes through the cache (``xbzrle_started``): a miss is
    inserted and sent whole, a hit is sent as the delta to the copy last sent, ``P_XDELTA`` of a
    page (1 = whole pages rewritten: the encoder overflows and sends the page). The cache
    (``page_cache.c``) is direct-mapped by page number and keeps a slot for its page while it is
    used; with the hot set of W bytes scattered over the guest's memory, the pages that own a slot
    are C (1 − e^(−W/C)) bytes of the C-byte cache (all of W when it fits sparsely, ≈ 63 % when
    W = C). Of those, the ones sent at least once since the bulk round are cached: with sends
    uniform over W, a fraction 1 − e^(−X/W) of X bytes sent. Evaluated at each sync."""
    w, c = p[P_W], p[P_XCACHE]
    owners = c * -math.expm1(-w / c)
    cached = min(owners, w) * -math.expm1(-f[F_XSENT] / w)
    hit = cached / w
    return 1.0 - hit * (1.0 - p[P_XDELTA])


@njit(cache=True)
def _sync(f: np.ndarray, s: np.ndarray, p: np.ndarray, k: int, ev: np.ndarray) -> None:
    """``migration_bitmap_sync``: OR the log into the bitmap, count newly set pages, and close a
    rate period (>= 1 s) with the auto-converge trigger."""
    w, m = p[P_W], p[P_M]
    if w > 0.0:
        pending_w = f[F_BULK] * (w / m) + f[F_DIRTY]
        overlap = min(1.0, pending_w / w)
        # distinct WWS bytes in the KVM dirty log: W (1 - e^(-R/W)) (C.2 saturation)
        written = f[F_WRITTEN]
        log = w * -math.expm1(-written / w) if written > 0.0 else 0.0
        newly = log * (1.0 - overlap)
    else:
        newly = 0.0
    f[F_DIRTY] += newly
    f[F_WRITTEN] = 0.0
    if p[P_XCACHE] > 0.0 and p[P_XDELTA] < 1.0 and w > 0.0:
        f[F_XCOST] = _xbzrle_cost(f, p)
    s[S_SYNC_COUNT] += 1
    f[F_PERIOD_DIRTY] += newly
    if s[S_SYNC_COUNT] == 2:
        f[F_PASS1_END] = k / TICKS_PER_S
    if k - s[S_PERIOD_TICK] > PERIOD_MIN_TICKS:
        xfer = f[F_TRANSFERRED] - f[F_PERIOD_XFER]
        f[F_REPORTED_RATE] = f[F_PERIOD_DIRTY] * TICKS_PER_S / (k - s[S_PERIOD_TICK])
        # migration_trigger_throttle: bytes_dirty_period > bytes_xfer_period x threshold / 100
        if p[P_AUTO_CONVERGE] != 0.0 and f[F_PERIOD_DIRTY] > xfer * p[P_TRIGGER] / 100.0:
            s[S_HIGH_CNT] += 1
            if s[S_HIGH_CNT] >= 2:
                s[S_HIGH_CNT] = 0
                _throttle_down(s, p, k, ev)
        s[S_PERIOD_TICK] = k
        f[F_PERIOD_XFER] = f[F_TRANSFERRED]
        f[F_PERIOD_DIRTY] = 0.0


@njit(cache=True)
def _switchover(f: np.ndarray, s: np.ndarray, p: np.ndarray, k: int, pending: float) -> None:
    """``migration_completion``: stop the guest and send the tail plus device state."""
    s[S_STOPPED] = 1
    s[S_SWITCHED] = 1
    s[S_SWITCH_TICK] = k
    f[F_DOWNTIME] = (_wire_for(f, pending) + p[P_DEVICE]) / p[P_B]
    f[F_T_END] = k / TICKS_PER_S + f[F_DOWNTIME]
    # the throttle ends with the iteration phase (cpu_throttle_stop); the guest is paused
    s[S_PCT] = 0
    # qemu-server sees 'completed' at its first poll at or after the end (its poll grid)
    # (skipped 100 ms polls still lie on the grid poll_next + j x usleep)
    end_tick = f[F_T_END] * TICKS_PER_S
    nxt, us = s[S_POLL_NEXT], s[S_USLEEP]
    first = nxt - ((nxt - k) // us) * us
    seen = first + math.ceil(max(0.0, end_tick - first) / us) * us
    f[F_PAUSE] = (seen - k) / TICKS_PER_S + p[P_RESUME_MS] / 1000.0


@njit(cache=True)
def _iteration_check(f: np.ndarray, s: np.ndarray, p: np.ndarray, k: int, ev: np.ndarray) -> bool:
    """QEMU ``migration_iteration_run`` at tick ``k``: exact sync and maybe switchover.

    Returns True when the migration switched over."""
    threshold = p[P_B] * f[F_TD_MS] / 1000.0
    if f[F_BULK] + f[F_DIRTY] >= threshold and p[P_CLASSIC] == 0.0:
        return False
    _sync(f, s, p, k, ev)
    pending = f[F_BULK] + f[F_DIRTY]
    if pending == 0.0 or pending < threshold:
        _switchover(f, s, p, k, pending)
        return True
    return False


@njit(cache=True)
def _timer_tick(f: np.ndarray, s: np.ndarray, p: np.ndarray, k: int, ev: np.ndarray) -> None:
    """``cpu_throttle_dirty_sync_timer_tick``: sync unless a sync happened since the last tick;
    skipped during pass 1 (``dirty_sync_count <= 1``)."""
    if s[S_SYNC_COUNT] > 1 and s[S_SYNC_COUNT] == s[S_TIMER_PREV]:
        _sync(f, s, p, k, ev)
    s[S_TIMER_PREV] = s[S_SYNC_COUNT]
    s[S_NEXT_TIMER] = k + SYNC_TIMER_TICKS


@njit(cache=True)
def _poll(f: np.ndarray, s: np.ndarray, p: np.ndarray, k: int, ev: np.ndarray) -> None:
    """One iteration of qemu-server's phase2 loop (``query-migrate``) at tick ``k``."""
    s[S_POLL_I] += 1
    last_mem = f[F_LAST_MEM]
    avglstat = last_mem / s[S_POLL_I] if last_mem != 0.0 else 0.0
    mem = f[F_TRANSFERRED]
    if mem != last_mem:
        rem = f[F_BULK] + f[F_DIRTY]
        if avglstat != 0.0 and rem < avglstat:
            s[S_USLEEP] = POLL_FAST_TICKS
        if p[P_PATCHED] != 0.0:
            # QEMU's ram.transferred is a whole number of bytes: compare it as one, so float
            # rounding of the closed-form sends cannot cross a threshold it only touches
            mem_b = float(round(mem))
            if mem_b > p[P_ABORT] * p[P_M]:
                s[S_OUTCOME] = ABORTED_CODE
                s[S_PCT] = 0
                f[F_ABORT_MEM] = mem
                _event(s, ev, k, EV_ABORT, mem)
                return
            if s[S_BOOSTED] == 0 and mem_b > p[P_BOOST] * p[P_M]:
                s[S_BOOSTED] = 1
                _event(s, ev, k, EV_BOOST, 0.0)
                s[S_INCREMENT] = int(p[P_BOOST_INC])
                s[S_MAX_PCT] = int(p[P_BOOST_MAX])
        lastrem = f[F_LASTREM]
        if (lastrem != 0.0 and rem > lastrem) or rem == 0.0:
            s[S_DOWNCNT] += 1
        f[F_LASTREM] = rem
        if s[S_DOWNCNT] >= DOWNTIME_EVENTS_PER_DOUBLING:
            s[S_DOWNCNT] = 0
            new = f[F_TD_MS] * 2.0
            if new > p[P_TD_MAX]:
                new = p[P_TD_MAX]
                _event(s, ev, k, EV_CAP, new)
            f[F_TD_MS] = new
            _event(s, ev, k, EV_DOUBLE, new)
    f[F_LAST_MEM] = mem
    s[S_POLL_NEXT] = k + s[S_USLEEP]


@njit(cache=True)
def _skip_slow_polls(f: np.ndarray, s: np.ndarray, p: np.ndarray, target: float) -> None:
    """Run 1 s polls that fall before the next QEMU event (and by ``target``) as bookkeeping.

    Between QEMU events nothing is synced, so ``remaining`` only falls and ``transferred`` grows
    linearly: once a poll has seen the last sync, the next ones cannot count a downtime event, and
    their state is known in closed form. It updates ``$i``, ``$lastrem``,
    ``$last_mem_transferred`` and may switch to 100 ms polling (then :func:`_skip_idle_polls`
    takes over). A poll that would cross a patch threshold, or find nothing pending, is left to
    :func:`_poll`."""
    limit = min(s[S_NEXT_CHECK], s[S_NEXT_TIMER])
    last_tick = math.floor(target * TICKS_PER_S + 1e-9)
    pending = f[F_BULK] + f[F_DIRTY]
    t, tr, b = f[F_T], f[F_TRANSFERRED], p[P_B]
    thr = math.inf
    if p[P_PATCHED] != 0.0:
        thr = p[P_ABORT] * p[P_M] if s[S_BOOSTED] != 0 else p[P_BOOST] * p[P_M]
    while s[S_USLEEP] == POLL_SLOW_TICKS:
        k = s[S_POLL_NEXT]
        if k >= limit or k > last_tick:
            return
        sent = b * (k / TICKS_PER_S - t)
        if sent >= _wire_for(f, pending):
            return  # remaining reaches 0: a downtime event, for _poll
        mem = tr + sent
        rem = pending - _drained(f, sent)
        lastrem = f[F_LASTREM]
        if round(mem) > thr or (lastrem != 0.0 and rem > lastrem):
            return  # a patch threshold or a sync since the last poll: _poll counts it
        s[S_POLL_I] += 1
        last_mem = f[F_LAST_MEM]
        avglstat = last_mem / s[S_POLL_I] if last_mem != 0.0 else 0.0
        if mem != last_mem:
            if avglstat != 0.0 and rem < avglstat:
                s[S_USLEEP] = POLL_FAST_TICKS
            f[F_LASTREM] = rem
        f[F_LAST_MEM] = mem
        s[S_POLL_NEXT] = k + s[S_USLEEP]


@njit(cache=True)
def _skip_idle_polls(f: np.ndarray, s: np.ndarray, p: np.ndarray, k: int) -> None:
    """Jump over 100 ms polls whose effect is known: between QEMU events ``remaining`` only falls
    (no counter event), stays > 0 and ``transferred`` changes, so such a poll only updates ``$i``,
    ``$lastrem`` and ``$last_mem_transferred`` — which the last of them overwrites. The last poll
    before the next QEMU event (or a patch threshold) still runs."""
    if s[S_USLEEP] != POLL_FAST_TICKS:
        return
    limit = min(s[S_NEXT_CHECK], s[S_NEXT_TIMER])
    if p[P_PATCHED] != 0.0:
        m = p[P_M]
        thr = p[P_ABORT] * m if s[S_BOOSTED] != 0 else p[P_BOOST] * m
        # first tick at which transferred exceeds thr (linear while pending > 0 before limit)
        need = thr - f[F_TRANSFERRED]
        cross = k + (int(need // p[P_BH]) + 1 if need >= 0 else 0)
        limit = min(limit, cross)
    nxt = s[S_POLL_NEXT]
    if limit <= nxt:
        return
    last = nxt + ((limit - 1 - nxt) // POLL_FAST_TICKS) * POLL_FAST_TICKS
    if last > nxt:
        s[S_POLL_I] += (last - nxt) // POLL_FAST_TICKS
        s[S_POLL_NEXT] = last


@njit(cache=True)
def _finish(f: np.ndarray, s: np.ndarray, ev: np.ndarray) -> None:
    s[S_OUTCOME] = COMPLETED_CODE
    s[S_STOPPED] = 0
    f[F_BULK] = 0.0
    f[F_DIRTY] = 0.0
    _event(s, ev, f[F_T], EV_FINISH, f[F_TRANSFERRED])


@njit(cache=True)
def set_bandwidth(f: np.ndarray, s: np.ndarray, p: np.ndarray, b: float) -> None:
    """The stream's throughput changes to ``b`` bytes/s at ``F_T`` (another migration started or
    ended on its source's or target's link).

    QEMU measures the bandwidth of every iteration (``migration/migration.c``
    ``migration_update_counters``: ``bandwidth = transferred / time_spent``, ``threshold_size =
    bandwidth × downtime_limit``), so both the sending rate and the switchover threshold follow
    the share from the next iteration check on. The next check is recomputed from the current
    tick with the new rate; it may fall early (never late), and an early check is a no-op that
    recomputes it on the grid. 100 ms polls :func:`_skip_idle_polls` counted ahead with the old
    rate are handed back (they run again, at the new rate). A change during the switchover copy
    (the guest paused, well under a second as a rule) keeps its end: QEMU's downtime was
    computed at the old rate."""
    p[P_B] = b
    p[P_BH] = b / TICKS_PER_S
    if s[S_OUTCOME] != RUNNING_CODE or s[S_STOPPED] != 0:
        return
    now = math.floor(f[F_T] * TICKS_PER_S + 1e-9)  # the last tick whose events ran
    if s[S_USLEEP] == POLL_FAST_TICKS and s[S_POLL_NEXT] > now + POLL_FAST_TICKS:
        back = (s[S_POLL_NEXT] - now - 1) // POLL_FAST_TICKS
        s[S_POLL_NEXT] -= back * POLL_FAST_TICKS
        s[S_POLL_I] -= back
    k = s[S_K]
    s[S_K] = max(k, now)
    s[S_NEXT_CHECK] = max(_next_check(f, s, p), k + 1)
    s[S_K] = k


@njit(cache=True, inline="always")
def _result(s: np.ndarray) -> int:
    """``outcome code << 2`` | :data:`HAS_OUTPUT` if the buffers hold anything."""
    out = HAS_OUTPUT if s[S_EV_N] > 0 or s[S_TL_N] > 0 else 0
    return (s[S_OUTCOME] << 2) | out


@njit(cache=True)
def advance(
    f: np.ndarray, s: np.ndarray, p: np.ndarray, target: float, tl: np.ndarray, ev: np.ndarray
) -> int:
    """Advance to ``target`` seconds since the start (or to the completion or abort).

    Returns :func:`_result`: :data:`NEED_DRAIN` if it stopped early because a buffer is nearly
    full."""
    cap = ev.shape[0] - _EV_MARGIN
    tl_cap = tl.shape[0] - _EV_MARGIN
    while s[S_OUTCOME] == RUNNING_CODE:
        if s[S_EV_N] > cap or (s[S_RECORD] != 0 and s[S_TL_N] > tl_cap):
            return _result(s) | NEED_DRAIN
        if s[S_STOPPED] != 0:
            if f[F_T_END] > target:
                _evolve(f, s, p, target, tl)
                return _result(s)
            _evolve(f, s, p, f[F_T_END], tl)
            _finish(f, s, ev)
            return _result(s)
        if s[S_USLEEP] == POLL_SLOW_TICKS:
            _skip_slow_polls(f, s, p, target)
        ke = min(s[S_NEXT_CHECK], s[S_NEXT_TIMER], s[S_POLL_NEXT])
        te = ke / TICKS_PER_S
        if te > target:
            _evolve(f, s, p, target, tl)
            return _result(s)
        _evolve(f, s, p, te, tl)
        s[S_K] = ke
        if ke == s[S_NEXT_CHECK] and _iteration_check(f, s, p, ke, ev):
            continue  # switched over: the downtime phase follows
        if ke == s[S_NEXT_TIMER]:
            _timer_tick(f, s, p, ke, ev)
        polled = ke == s[S_POLL_NEXT]
        if polled:
            _poll(f, s, p, ke, ev)
            if s[S_OUTCOME] != RUNNING_CODE:
                return _result(s)
        s[S_NEXT_CHECK] = _next_check(f, s, p)
        if polled:
            _skip_idle_polls(f, s, p, ke)
    return _result(s)
