"""A slow, page-level reference for :mod:`pvegym.sim.migration` (tests only).

Implements the same rules (``docs/model.md``, *Live migration*) the straightforward
way: 4 KiB pages, a migration bitmap and a KVM dirty log as boolean arrays, guest writes as a Poisson
number of uniformly random page writes over the writable working set (a random subset of the pages)
per 50 ms tick, a sender that scans the bitmap in address order at the bandwidth, and QEMU's and
qemu-server's rules evaluated at every tick (iteration check → sync timer → poll). It shares no code
with the fast model, so agreement checks the closed forms (WWS saturation, overlap of the log with
the pending set, poll skipping) against a direct simulation.
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
            xfer = (sent_pages - period_xfer) * PAGE
            if auto_converge and period_dirty * PAGE > xfer * 50 / 100:
                high += 1
                if high >= 2:
                    high = 0
                    pct = 20 if pct == 0 else min(pct + inc, max_pct)
                    max_seen = max(max_seen, pct)
            period_k, period_xfer, period_dirty = k, sent_pages, 0

    k = 0
    max_k = round(duration * TICKS_PER_S)
    while k < max_k:
        # --- one tick of guest writes and sending
        writes = rng.poisson(dirty_rate * (1 - pct / 100 * sensitivity) * DT / PAGE)
        if writes and nw:
            log[wws_pages[rng.integers(0, nw, size=writes)]] = True
        credit += bandwidth * DT
        want = int(credit // PAGE)
        want = min(want, n_pending)
        if want:
            chosen: list[np.ndarray] = []
            got = 0
            while got < want:  # address-order scan from the cursor, wrapping around
                hi = min(n, cursor + max(8 * (want - got), 65536))
                idx = np.flatnonzero(pending[cursor:hi])
                if len(idx) >= want - got:
                    idx = idx[: want - got]
                    nxt = cursor + int(idx[-1]) + 1
                else:
                    nxt = hi
                chosen.append(idx + cursor)
                got += len(idx)
                cursor = 0 if nxt >= n else nxt
            sel = np.concatenate(chosen)
            pending[sel] = False
            n_pending -= want
            sent_pages += want
            credit -= want * PAGE
        if not n_pending:
            credit = 0.0  # the stream idles until the next iteration
        k += 1
        # --- QEMU iteration check: exact sync when remaining < threshold, then maybe switchover
        threshold = bandwidth * td / 1000.0
        if n_pending * PAGE < threshold:
            do_sync(k)
            if n_pending == 0 or n_pending * PAGE < threshold:
                downtime = n_pending * PAGE / bandwidth
                return RefResult(
                    "completed",
                    k * DT + downtime,
                    (sent_pages + n_pending) * PAGE,
                    td,
                    doublings,
                    downtime,
                    max_seen,
                    pass1_end,
                    boost_t,
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
            mem = sent_pages * PAGE
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
        sent_pages * PAGE,
        td,
        doublings,
        0.0,
        max_seen,
        pass1_end,
        boost_t,
    )


def passes(result: RefResult, memory: float) -> float:
    """Transferred bytes over the guest memory."""
    return result.transferred / (math.floor(memory / PAGE) * PAGE)
