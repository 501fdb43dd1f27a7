"""A slow, page-level reference for :mod:`pvegym.sim.migration` (tests only).

Implements the same rules (``docs/model.md``, *Live migration*) the straightforward
way: 4 KiB pages, a migration bitmap and a KVM dirty log as boolean arrays, guest writes as a Poisson
number of uniformly random page writes over the writable working set (a random subset of the pages)
per 50 ms tick, a sender that scans the bitmap in address order at the bandwidth, and QEMU's and
qemu-server's rules evaluated at every tick (iteration check → sync timer → poll). It shares no code
with the fast model, so agreement checks the closed forms (WWS saturation, overlap of the log with
the pending set, poll skipping) against a direct simulation.

XBZRLE (``xbzrle_delta`` < 1) is QEMU's page cache as written: qemu-server's size (10 % of the
memory rounded up to a power of two, ``QemuMigrate.pm``), direct-mapped by page number, a slot
taken over only when its page was not used in the last two syncs (``page_cache.c``), started after
the first complete round (``ram.c`` ``find_dirty_block``); a hit costs ``xbzrle_delta`` of a page
on the wire, a miss a whole page and is cached (not in the last stage). ``transferred`` counts
wire bytes, as ``ram.transferred`` does. Dirty-tracking faults are the pages newly set in the
KVM log, each costing ``dirty_fault_s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

PAGE = 4096
TICKS_PER_S = 20  # QEMU ram.c MAX_WAIT = 50 ms per iteration
DT = 1.0 / TICKS_PER_S


@dataclass
class RefResult:
    outcome: str
    duration: float
    transferred: float
    downtime_limit_ms: float
    doublings: list[float] = field(default_factory=list)
    downtime_s: float = 0.0
    max_throttle: int = 0
    pass1_end: float | None = None
    boost_t: float | None = None
    error: str = ""
    track_s: float = 0.0


def simulate_reference(
    *,
    memory: float,
    bandwidth: float,
    dirty_rate: float,
    wws: float | None = None,
    sensitivity: float = 1.0,
    downtime_limit_ms: float = 100.0,
    patched: bool = False,
    boost_factor: float = 1.5,
    abort_factor: float = 4.0,
    auto_converge: bool = True,
    sync_timer: bool = True,
    duration: float = 600.0,
    seed: int = 0,
    xbzrle_delta: float = 1.0,
    dirty_fault_s: float = 0.0,
) -> RefResult:
    """Simulate one migration page by page for at most ``duration`` seconds."""
    rng = np.random.default_rng(seed)
    n = int(memory // PAGE)
    m_bytes = n * PAGE
    nw = n if wws is None else int(wws // PAGE)
    wws_pages = np.arange(n) if nw == n else np.sort(rng.choice(n, size=nw, replace=False))
    pending = np.ones(n, dtype=bool)  # bulk stage: all pages pending
    n_pending = n
    log = np.zeros(n, dtype=bool)
    cursor = 0
    credit = 0.0  # bytes the sender may still send (fractional pages)
    sent_pages = 0
    wire = 0.0  # bytes on the stream (ram.transferred)
    # XBZRLE page cache: qemu-server's size, cache_init's slots
    raw_cache = int(int(memory // 2**20) * 1048576 / 10)
    slots = (2 << int(math.log2(raw_cache - 1))) // PAGE if raw_cache >= 2 else 1
    use_xbzrle = xbzrle_delta < 1.0
    cache_addr = np.full(slots, -1, dtype=np.int64)
    cache_age = np.zeros(slots, dtype=np.int64)
    xbzrle_started = False
    track_s = 0.0
    # QEMU state
    pct, inc, max_pct, high = 0, 10, 99, 0
    max_seen = 0
    sync_count = 1  # the setup sync
    period_k, period_xfer, period_dirty = 0, 0, 0
    timer_prev = 1
    pass1_end: float | None = None
    # qemu-server state
    td = float(downtime_limit_ms)
    poll_next, usleep, poll_i = 20, 20, 0
    lastrem, last_mem, downcnt = 0, 0, 0
    boosted = False
    boost_t: float | None = None
    doublings: list[float] = []

    def do_sync(k: int) -> None:
        nonlocal n_pending, sync_count, period_k, period_xfer, period_dirty, high, pct, max_seen
        nonlocal pass1_end
        newly = int(np.count_nonzero(log & ~pending))
        pending[log] = True
        log[:] = False
        n_pending += newly
        sync_count += 1
        period_dirty += newly
        if sync_count == 2:
            pass1_end = k * DT
        if k - period_k > 20:  # period > 1000 ms
            xfer = wire - period_xfer
            if auto_converge and period_dirty * PAGE > xfer * 50 / 100:
                high += 1
                if high >= 2:
                    high = 0
                    pct = 20 if pct == 0 else min(pct + inc, max_pct)
                    max_seen = max(max_seen, pct)
            period_k, period_xfer, period_dirty = k, wire, 0

    def scan(start: int, want: int) -> np.ndarray:
        """The next ``want`` pending pages in address order from ``start``, wrapping around."""
        chosen: list[np.ndarray] = []
        got = 0
        at = start
        while got < want:
            hi = min(n, at + max(8 * (want - got), 65536))
            idx = np.flatnonzero(pending[at:hi])
            if len(idx) >= want - got:
                idx = idx[: want - got]
            chosen.append(idx + at)
            got += len(idx)
            at = 0 if hi >= n and got < want else hi
        return np.concatenate(chosen)

    def xbzrle_costs(pages: np.ndarray) -> np.ndarray:
        """Wire bytes of each page if sent now: a cache hit its delta, a miss the whole page."""
        hit = cache_addr[pages & (slots - 1)] == pages  # cache_is_cached
        return np.where(hit, xbzrle_delta * PAGE, float(PAGE))

    def xbzrle_sent(pages: np.ndarray) -> None:
        """The cache after sending ``pages`` in order (save_xbzrle_page, not the last stage):
        a hit refreshes its slot's age, a miss takes an empty or stale slot (cache_insert)."""
        gen = sync_count
        for pg, sl in zip(pages.tolist(), (pages & (slots - 1)).tolist(), strict=True):
            if cache_addr[sl] == pg:
                cache_age[sl] = gen
            elif not (cache_addr[sl] >= 0 and cache_age[sl] + 2 > gen):
                cache_addr[sl] = pg
                cache_age[sl] = gen

    k = 0
    max_k = round(duration * TICKS_PER_S)
    while k < max_k:
        # --- one tick of guest writes and sending
        writes = rng.poisson(dirty_rate * (1 - pct / 100 * sensitivity) * DT / PAGE)
        if writes and nw:
            hit = wws_pages[rng.integers(0, nw, size=writes)]
            if dirty_fault_s:  # first writes since the last sync fault once
                track_s += np.unique(hit[~log[hit]]).size * dirty_fault_s
            log[hit] = True
        credit += bandwidth * DT
        xb = use_xbzrle and xbzrle_started
        want = min(int(credit // (xbzrle_delta * PAGE if xb else PAGE)), n_pending)
        if want:
            sel = scan(cursor, want)
            if xb:  # pages cost their encoded size: take as many as the credit pays for
                costs = xbzrle_costs(sel)
                take = int(np.searchsorted(np.cumsum(costs), credit, side="right"))
                sel, cost = sel[:take], float(costs[:take].sum())
                xbzrle_sent(sel)
            else:
                cost = float(len(sel) * PAGE)
                if use_xbzrle and xbzrle_started:
                    xbzrle_sent(sel)
            if len(sel):
                pending[sel] = False
                n_pending -= len(sel)
                sent_pages += len(sel)
                credit -= cost
                wire += cost
                nxt = int(sel[-1]) + 1
                if nxt >= n or np.any(np.diff(sel) < 0):
                    xbzrle_started = True  # the first round is complete
                cursor = 0 if nxt >= n else nxt
        if not n_pending:
            credit = 0.0  # the stream idles until the next iteration
        k += 1
        # --- QEMU iteration check: exact sync when remaining < threshold, then maybe switchover
        threshold = bandwidth * td / 1000.0
        if n_pending * PAGE < threshold:
            do_sync(k)
            if n_pending == 0 or n_pending * PAGE < threshold:
                tail = np.flatnonzero(pending)
                if use_xbzrle and xbzrle_started:
                    tail_bytes = float(xbzrle_costs(tail).sum())
                else:
                    tail_bytes = float(len(tail) * PAGE)
                downtime = tail_bytes / bandwidth
                return RefResult(
                    "completed",
                    k * DT + downtime,
                    wire + tail_bytes,
                    td,
                    doublings,
                    downtime,
                    max_seen,
                    pass1_end,
                    boost_t,
                    track_s=track_s,
                )
        # --- QEMU dirty-sync timer (every 5 s, not during pass 1, not if a sync happened since)
        if auto_converge and sync_timer and k % 100 == 0:
            if sync_count > 1 and sync_count == timer_prev:
                do_sync(k)
            timer_prev = sync_count
        # --- qemu-server poll
        if k == poll_next:
            poll_i += 1
            avg = last_mem / poll_i if last_mem else 0
            mem = wire
            if mem != last_mem:
                rem = n_pending * PAGE
                if avg and rem < avg:
                    usleep = 2
                if patched and mem > abort_factor * m_bytes:
                    return RefResult(
                        "aborted",
                        k * DT,
                        mem,
                        td,
                        doublings,
                        0.0,
                        max_seen,
                        pass1_end,
                        boost_t,
                        f"transferred {mem / m_bytes:.1f}x",
                        track_s,
                    )
                if patched and not boosted and mem > boost_factor * m_bytes:
                    boosted, boost_t, inc, max_pct = True, k * DT, 20, 99
                if (lastrem and rem > lastrem) or rem == 0:
                    downcnt += 1
                lastrem = rem
                if downcnt > 5:
                    downcnt = 0
                    td = min(td * 2, 2_000_000.0)
                    doublings.append(k * DT)
            last_mem = mem
            poll_next = k + usleep
    return RefResult(
        "running",
        duration,
        wire,
        td,
        doublings,
        0.0,
        max_seen,
        pass1_end,
        boost_t,
        track_s=track_s,
    )


def passes(result: RefResult, memory: float) -> float:
    """Transferred bytes over the guest memory."""
    return result.transferred / (math.floor(memory / PAGE) * PAGE)
