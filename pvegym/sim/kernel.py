"""The compiled inner loops of one round: workload sampling and cluster physics.

Why compiled: a round touches every guest a dozen times; as separate NumPy operations that is
~60 array calls of ~1 µs each even for 4 guests, which would make the environment's step an order
of magnitude dearer than ``CartPole``'s. One ``numba.njit`` call per round does the same arithmetic
in a single pass (sequential sums, so results are bit-for-bit deterministic). The formulas are
documented where they are defined (:mod:`pvegym.sim.workload`, :mod:`pvegym.sim.cluster`,
:mod:`pvegym.sim.psi`); this module only evaluates them. ``NUMBA_DISABLE_JIT=1`` runs the same code
as plain Python for debugging.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numba
import numpy as np
from numba import njit

from pvegym.sim.layout import (
    AVG10,
    G_AVG,
    G_BALLOON,
    G_CPU_FULL,
    G_CPU_SOME,
    G_DEMAND,
    G_INST,
    G_INV_MAXCPU,
    G_KSM_FRAC,
    G_MAXCPU,
    G_MEM_FULL,
    G_MEM_PREV,
    G_MEM_RATIO,
    G_MEM_SOME,
    G_MEMHOST,
    G_RECEIVED,
    G_RUN_FRACTION,
    G_SERIES,
    G_TEL,
    G_TEL_STATE,
    G_WEIGHT,
    N_AGE,
    N_AVG,
    N_CPU,
    N_CPU_SOME,
    N_CS_BUSY,
    N_DEMAND,
    N_INST,
    N_INV_CPU,
    N_MAXCPU,
    N_MAXMEM,
    N_MEM,
    N_MEM_FULL,
    N_MEM_SOME,
    N_MEM_WANTED,
    N_MOTION_CPU,
    N_MS_BUSY,
    N_OOM_LIMIT,
    N_PREV,
    N_RESERVED_MEM,
    N_SCALE,
    N_SERIES,
    N_TEL,
    NODE_SAMPLED,
    T_GUEST_STALL,
    T_IMBALANCE,
    T_ONLINE,
    T_OOM,
    T_PEAK_SOME,
    T_SHORTFALL,
    T_STALL_CPU,
    T_STALL_MEM,
    T_TEL_FIRST,
    T_TEL_ON,
    T_TEL_STATES,
    TEL_HOLD,
    TEL_ZERO_CPU,
    WINDOWS,
)

F = TypeVar("F", bound=Callable[..., Any])


def entry_point(kernel: F, *example: Any) -> F:
    """The compiled entry point of the ``njit`` function ``kernel`` for the argument types of
    ``example`` (compiled or loaded from the cache now).

    Why: a dispatcher call resolves the type of every argument before it runs the machine code
    (~20 ns each, and the round kernels take ~30); the entry point skips that. It does not check
    types, so the caller must always pass arrays of the example's dtype, dimensions and layout —
    in practice the very arrays of a bound argument tuple — and scalars of the same kinds. Under
    ``NUMBA_DISABLE_JIT`` the plain Python function is returned.
    """
    compile_ = getattr(kernel, "compile", None)
    if compile_ is None:
        return kernel
    entry: F = compile_(tuple(numba.typeof(a) for a in example))
    return entry


_N_INT_PARTS = 9  # ou_idx, di_idx, bu_idx, st_idx, st_ptr, tr_idx, tr_lo, tr_n, tr_loop


@njit(cache=True, inline="always")
def _bank_part(floats: np.ndarray, layout: np.ndarray, k: int) -> np.ndarray:
    """Float part ``k`` of a workload bank (``WorkloadBank`` layout: out, const, ou, di, bu, st,
    tr, trace samples)."""
    return floats[layout[_N_INT_PARTS + 1 + k] : layout[_N_INT_PARTS + 2 + k]]


@njit(cache=True)
def sample_signals(
    t: float,
    dt: float,
    floats: np.ndarray,  # WorkloadBank float buffer: out | const | ou | di | bu | st | tr | samples
    ints: np.ndarray,  # ou_idx | di_idx | bu_idx | st_idx | st_ptr | tr_idx | tr_lo | tr_n | tr_loop
    layout: np.ndarray,  # where each int part starts (10 entries), then each float part (9)
) -> None:
    """Sum of components at time ``t`` into ``out`` (see :mod:`pvegym.sim.workload`). Matrix parts
    by rows: ``ou`` (5, k) mean, phi, innov, state (in/out), this round's standard normals;
    ``di`` (3, k) amplitude, angular frequency (rad/s), phase (s); ``bu`` (5, k) time left (in/out),
    p(start), duration, height, uniforms; ``st`` (2, m) step times, values; ``tr`` (3, k) sample
    interval (s), offset (s), scale.

    Trace ``k`` reads ``tr_n[k]`` samples from ``tr_vals[tr_lo[k]:]``, one every ``tr_step[k]``
    seconds, at position ``(t + offset) / step``: linear interpolation between neighbours; looped
    (modulo ``n``, the last sample interpolating into the first) or held at the ends.
    """
    ou_idx = ints[layout[0] : layout[1]]
    di_idx = ints[layout[1] : layout[2]]
    bu_idx = ints[layout[2] : layout[3]]
    st_idx = ints[layout[3] : layout[4]]
    st_ptr = ints[layout[4] : layout[5]]
    tr_idx = ints[layout[5] : layout[6]]
    tr_lo = ints[layout[6] : layout[7]]
    tr_n = ints[layout[7] : layout[8]]
    tr_loop = ints[layout[8] : layout[9]]
    out = _bank_part(floats, layout, 0)
    const = _bank_part(floats, layout, 1)
    ou = _bank_part(floats, layout, 2).reshape((5, ou_idx.size))
    di = _bank_part(floats, layout, 3).reshape((3, di_idx.size))
    bu = _bank_part(floats, layout, 4).reshape((5, bu_idx.size))
    st = _bank_part(floats, layout, 5).reshape((2, st_ptr[st_ptr.size - 1]))
    tr = _bank_part(floats, layout, 6).reshape((3, tr_idx.size))
    tr_vals = _bank_part(floats, layout, 7)
    ou_mean, ou_phi, ou_innov, ou_state, normals = ou[0], ou[1], ou[2], ou[3], ou[4]
    di_amp, di_w, di_phase = di[0], di[1], di[2]
    bu_left, bu_p, bu_dur, bu_height, uniforms = bu[0], bu[1], bu[2], bu[3], bu[4]
    st_times, st_vals = st[0], st[1]
    tr_step, tr_offset, tr_scale = tr[0], tr[1], tr[2]
    for i in range(out.size):
        out[i] = const[i]
    for k in range(ou_idx.size):
        x = ou_mean[k] + (ou_state[k] - ou_mean[k]) * ou_phi[k] + ou_innov[k] * normals[k]
        ou_state[k] = x
        out[ou_idx[k]] += x
    for k in range(di_idx.size):
        out[di_idx[k]] += di_amp[k] * math.sin(di_w[k] * (t + di_phase[k]))
    for k in range(bu_idx.size):
        left = bu_left[k] - dt
        if uniforms[k] < bu_p[k]:
            left = bu_dur[k]
        bu_left[k] = left
        if left > 0.0:
            out[bu_idx[k]] += bu_height[k]
    for k in range(st_idx.size):
        lo, hi = st_ptr[k], st_ptr[k + 1]
        j = lo
        while j < hi and st_times[j] <= t:
            j += 1
        if j > lo:
            out[st_idx[k]] += st_vals[j - 1]
    for k in range(tr_idx.size):
        n = tr_n[k]
        base = tr_lo[k]
        x = (t + tr_offset[k]) / tr_step[k]
        if tr_loop[k] != 0:
            x = x % n  # Python semantics: in [0, n) for negative x too
            i = min(int(x), n - 1)
            f = x - i
            v0 = tr_vals[base + i]
            v1 = tr_vals[base + (i + 1) % n]
        elif x <= 0.0:
            f = 0.0
            v0 = v1 = tr_vals[base]
        elif x >= n - 1:
            f = 0.0
            v0 = v1 = tr_vals[base + n - 1]
        else:
            i = int(x)
            f = x - i
            v0 = tr_vals[base + i]
            v1 = tr_vals[base + i + 1]
        out[tr_idx[k]] += tr_scale[k] * (v0 + (v1 - v0) * f)


@njit(cache=True)
def cluster_round(
    t: float,  # s, the round's start: the workloads are sampled there
    dt: float,  # s, the round's length
    floats: np.ndarray,  # the WorkloadBank's buffers (see sample_signals); its ``out`` part is
    ints: np.ndarray,  # [guest cpu (g) | guest memhost wanted (g) | node base cpu (n) |
    layout: np.ndarray,  # node base mem (n)]
    node: np.ndarray,
    running: np.ndarray,
    guest_rows: np.ndarray,  # (GUEST_ROWS, g) ClusterState.guest_rows (pvegym.sim.layout):
    # maxcpu, maxmem, mem_ratio, run_fraction (in/out: clipped at 0 in place, the pipeline may
    # take more), balloon and ksm_frac (in); out: demand, received, memhost, pressure, PSI
    # averages (percent)
    node_rows: np.ndarray,  # (NODE_ROWS, n): maxcpu, maxmem, reserved_mem, motion_cpu,
    # oom_limit; out: demand, cpu, mem, mem_wanted, pressure, PSI averages (percent); N_SCALE,
    # N_CS_BUSY and N_MS_BUSY are scratch
    node_online: np.ndarray,
    mmc_tables: np.ndarray,
    mmc_row: np.ndarray,
    grid_steps: int,
    blend: float,
    hog_share: float,
    mem_watermark: float,
    mem_gain: float,
    mem_full_ratio: float,
    decay: np.ndarray,  # (3,) per-round decay of avg10/60/300: e**periods
    totals: np.ndarray,  # (TOTALS,) out: the round's totals (layout.T_*); in: T_TEL_* switches
) -> None:
    """The physics of the round (t, t + dt]: the workloads (:func:`sample_signals`), then
    supply, memory and pressure, in one call from Python."""
    sample_signals(t, dt, floats, ints, layout)
    signals = _bank_part(floats, layout, 0)
    guest_maxcpu, run_fraction = guest_rows[G_MAXCPU], guest_rows[G_RUN_FRACTION]
    balloon, ksm_frac = guest_rows[G_BALLOON], guest_rows[G_KSM_FRAC]
    demand, received, memhost = guest_rows[G_DEMAND], guest_rows[G_RECEIVED], guest_rows[G_MEMHOST]
    node_maxcpu, node_maxmem = node_rows[N_MAXCPU], node_rows[N_MAXMEM]
    reserved_mem = node_rows[N_RESERVED_MEM]
    node_demand, node_cpu, node_mem = node_rows[N_DEMAND], node_rows[N_CPU], node_rows[N_MEM]
    n_n = node_rows.shape[1]
    g_n = guest_rows.shape[1]
    node_inst = node_rows[N_INST : N_INST + N_SERIES]
    node_avg = node_rows[N_AVG : N_AVG + WINDOWS * N_SERIES].reshape((WINDOWS, N_SERIES, n_n))
    guest_inst = guest_rows[G_INST : G_INST + G_SERIES]
    guest_avg = guest_rows[G_AVG : G_AVG + WINDOWS * G_SERIES].reshape((WINDOWS, G_SERIES, g_n))
    scale = node_rows[N_SCALE]  # scratch: the share of its demand each node supplies
    # scratch for the guests' own PSI: the node's cpu / memory some per busy CPU
    cs_busy, ms_busy = node_rows[N_CS_BUSY], node_rows[N_MS_BUSY]
    inv_cpu, inv_maxcpu = node_rows[N_INV_CPU], guest_rows[G_INV_MAXCPU]
    motion_cpu = node_rows[N_MOTION_CPU]
    # pvestatd's samples (pvegym.sim.telemetry), mixed in where the round computes each value: a
    # sample is the new value + w × (the value a round ago − the new one), w = its age in rounds
    tel = totals[T_TEL_ON] != 0.0
    w = guest_rows[G_WEIGHT]
    tel_host, tel_ratio = guest_rows[G_TEL + G_MEMHOST], guest_rows[G_TEL + G_MEM_RATIO]
    tel_rf, tel_rec = guest_rows[G_TEL + G_RUN_FRACTION], guest_rows[G_TEL + G_RECEIVED]
    mem_prev, ratio = guest_rows[G_MEM_PREV], guest_rows[G_MEM_RATIO]
    if tel:
        _telemetry_weights(node_rows, guest_rows, node, totals)
    for n in range(n_n):
        node_demand[n] = max(signals[2 * g_n + n], 0.0) + motion_cpu[n]
        node_mem[n] = max(signals[2 * g_n + n_n + n], 0.0) + reserved_mem[n]
    for g in range(g_n):
        d = min(max(signals[g], 0.0), guest_maxcpu[g])
        m = min(max(signals[g_n + g], 0.0), balloon[g]) * (1.0 - ksm_frac[g])
        if not running[g]:
            d = 0.0
            m = 0.0
        if tel:  # the sampled memhost and mem (memhost × ratio, one value); the run state now
            mem = m * ratio[g]
            wg = w[g]
            tel_host[g] = m + wg * (memhost[g] - m)
            tel_ratio[g] = mem + wg * (mem_prev[g] - mem)  # mem for now: see _telemetry_rest
            tel_rf[g] = run_fraction[g]
            mem_prev[g] = mem
        demand[g] = d
        memhost[g] = m
        rf = run_fraction[g]
        if rf <= 0.0:  # as np.maximum(rf, 0.0): -0.0 → 0.0, NaN stays
            rf = 0.0
            run_fraction[g] = rf
        node_demand[node[g]] += d * rf
        node_mem[node[g]] += m
    stall_cpu = 0.0
    stall_mem = 0.0
    load_sum = 0.0
    online = 0
    oom = 0
    for n in range(n_n):
        cores = node_maxcpu[n]
        nd = node_demand[n]
        scale[n] = min(1.0, cores / max(nd, 1e-12))
        node_cpu[n] = min(nd, cores)
        used = node_mem[n]
        node_mem[n] = min(used, node_maxmem[n])
        node_rows[N_MEM_WANTED, n] = used
        if used > node_rows[N_OOM_LIMIT, n]:
            oom += 1
        rho = nd / cores
        rho_r = min(rho, 1.0)
        x = rho_r * grid_steps
        i = min(int(x), grid_steps - 1)
        lo = mmc_tables[mmc_row[n] + i]
        mmc = lo + (mmc_tables[mmc_row[n] + i + 1] - lo) * (x - i)
        some = (1.0 - hog_share) * (blend * rho_r * rho_r + (1.0 - blend) * mmc)
        some = min(some + min(max(rho - 1.0, 0.0), 1.0), 1.0)
        avail = node_maxmem[n] * (1.0 - mem_watermark)
        msome = min(max(used - avail, 0.0) * mem_gain / avail, 1.0)
        node_inst[N_CPU_SOME, n] = some
        node_inst[N_MEM_SOME, n] = msome
        node_inst[N_MEM_FULL, n] = msome * mem_full_ratio
        busy = node_cpu[n] / cores
        if busy > 0.0:
            cs_busy[n] = some / busy
            ms_busy[n] = msome / busy
            inv_cpu[n] = min(1.0 / node_cpu[n], 1e300)  # a subnormal load must not overflow
        else:
            cs_busy[n] = ms_busy[n] = inv_cpu[n] = 0.0
        if node_online[n]:
            stall_cpu += some
            stall_mem += msome
            load_sum += (node_cpu[n] / cores + node_mem[n] / node_maxmem[n]) / 2.0
            online += 1
    guest_stall = 0.0
    shortfall = 0.0
    for g in range(g_n):
        n = node[g]
        r = demand[g] * run_fraction[g]
        rec = r * scale[n]
        if tel:
            tel_rec[g] = rec + w[g] * (received[g] - rec)
        received[g] = rec
        shortfall += demand[g] - rec
        # the guest's own PSI (psi.guest_pressure): its threads' runnable share scales the node's
        # stall per busy CPU; full = the part of the wait behind other cgroups' threads
        u = min(r * inv_maxcpu[g], 1.0)
        cs = min(cs_busy[n] * u, 1.0)
        guest_inst[G_CPU_SOME, g] = cs
        guest_inst[G_CPU_FULL, g] = cs * (1.0 - min(rec * inv_cpu[n], 1.0))
        ms = min(ms_busy[n] * u, 1.0)
        mf = ms
        want = signals[g_n + g]
        if running[g] and want > balloon[g] > 0.0:  # its own memory beyond its size: reclaim
            own = min((want - balloon[g]) / balloon[g] * mem_gain, 1.0)
            ms = max(ms, own)
            mf = max(mf, own * mem_full_ratio)
        guest_inst[G_MEM_SOME, g] = ms
        guest_inst[G_MEM_FULL, g] = mf
        guest_stall += cs + ms
    for win in range(WINDOWS):
        e = decay[win]
        for k in range(N_SERIES):
            for n in range(n_n):
                node_avg[win, k, n] = node_avg[win, k, n] * e + 100.0 * node_inst[k, n] * (1.0 - e)
        for k in range(G_SERIES):
            avg, inst = guest_avg[win, k], guest_inst[k]
            if tel and win == AVG10:  # the sampled avg10 mixes in the value a round ago
                out = guest_rows[G_TEL + G_AVG + AVG10 * G_SERIES + k]
                for g in range(g_n):
                    old = avg[g]
                    new = old * e + 100.0 * inst[g] * (1.0 - e)
                    avg[g] = new
                    out[g] = new + w[g] * (old - new)
                continue
            for g in range(g_n):
                avg[g] = avg[g] * e + 100.0 * inst[g] * (1.0 - e)
    imbalance = 0.0
    if online >= 2 and load_sum > 0.0:
        mean = load_sum / online
        var = 0.0
        for n in range(n_n):
            if node_online[n]:
                dev = (node_cpu[n] / node_maxcpu[n] + node_mem[n] / node_maxmem[n]) / 2.0 - mean
                var += dev * dev
        imbalance = math.sqrt(var / online) / mean / math.sqrt(online - 1.0)
    totals[T_STALL_CPU] = stall_cpu
    totals[T_STALL_MEM] = stall_mem
    totals[T_GUEST_STALL] = guest_stall
    totals[T_SHORTFALL] = shortfall
    totals[T_IMBALANCE] = imbalance
    totals[T_ONLINE] = online
    peak = -math.inf
    for n in range(n_n):
        if node_online[n]:
            for k in (N_CPU_SOME, N_MEM_SOME):
                v = node_avg[AVG10, k, n]
                if v != v:
                    peak = math.nan
                elif v > peak:  # NaN stays: NaN > x is False
                    peak = v
    totals[T_PEAK_SOME] = peak
    totals[T_OOM] = oom
    if tel:
        _telemetry_rest(node_rows, guest_rows, totals)


@njit(cache=True)
def _telemetry_weights(
    node_rows: np.ndarray, guest_rows: np.ndarray, node: np.ndarray, totals: np.ndarray
) -> None:
    """Before the round overwrites them: each node's sampled rows as they are (a round ago), and
    each guest's weight of the older value — its node's sample age, 0 in the first round (no
    earlier sample), 1 for a guest whose new node has not sampled it yet (its latest sample is
    a round old)."""
    first = totals[T_TEL_FIRST] != 0.0
    age = node_rows[N_AGE]
    for i in range(len(NODE_SAMPLED)):
        node_rows[N_PREV + i] = node_rows[NODE_SAMPLED[i]]
    w = guest_rows[G_WEIGHT]
    for g in range(guest_rows.shape[1]):
        w[g] = 0.0 if first else age[node[g]]
    if totals[T_TEL_STATES] != 0.0:
        state = guest_rows[G_TEL_STATE]
        for g in range(guest_rows.shape[1]):
            if state[g] == TEL_HOLD:
                w[g] = 1.0


@njit(cache=True)
def _telemetry_rest(node_rows: np.ndarray, guest_rows: np.ndarray, totals: np.ndarray) -> None:
    """After the round: the nodes' samples (their rows a round ago were kept), a guest's sampled
    ``mem_ratio`` = sampled mem / sampled memhost, cpu 0 in a moved guest's first sample."""
    first = totals[T_TEL_FIRST] != 0.0
    totals[T_TEL_FIRST] = 0.0
    age = node_rows[N_AGE]
    n_n = node_rows.shape[1]
    for i in range(len(NODE_SAMPLED)):
        r = NODE_SAMPLED[i]
        cur, old, out = node_rows[r], node_rows[N_PREV + i], node_rows[N_TEL + r]
        for n in range(n_n):
            a = 0.0 if first else age[n]
            out[n] = cur[n] + a * (old[n] - cur[n])
    tel_host, tel_ratio = guest_rows[G_TEL + G_MEMHOST], guest_rows[G_TEL + G_MEM_RATIO]
    for g in range(guest_rows.shape[1]):
        h = tel_host[g]
        tel_ratio[g] = tel_ratio[g] / h if h > 0.0 else 0.0
    if totals[T_TEL_STATES] != 0.0:
        state, tel_rec = guest_rows[G_TEL_STATE], guest_rows[G_TEL + G_RECEIVED]
        for g in range(guest_rows.shape[1]):
            if state[g] == TEL_ZERO_CPU:
                tel_rec[g] = 0.0


@njit(cache=True)
def view_snapshot(
    node_flat: np.ndarray,  # the sampled node rows, flattened (Telemetry.node_rows)
    node_take: np.ndarray,  # (rows, nodes): where each of the view's node values is in node_flat
    guest_flat: np.ndarray,  # the sampled guest rows, flattened (Telemetry.guest_rows)
    guest_take: np.ndarray,  # (rows, HA guests): where each view guest value is in guest_flat
    out_node: np.ndarray,  # (rows, nodes)
    out_guest: np.ndarray,  # (rows + 1, HA guests): the taken rows, then memhost × mem ratio
) -> None:
    """A telemetry view's copy of its sampled rows (``TelemetryView.build``): what two
    ``take`` calls and a product did (the same values: copies, and one IEEE product per guest,
    of row 3 (memhost) by row 0 (mem ratio), the guest-reported memory) in one compiled call,
    because the view is built every round and each NumPy call costs ~0.5 µs."""
    for r in range(node_take.shape[0]):
        for i in range(node_take.shape[1]):
            out_node[r, i] = node_flat[node_take[r, i]]
    rows = guest_take.shape[0]
    for r in range(rows):
        for i in range(guest_take.shape[1]):
            out_guest[r, i] = guest_flat[guest_take[r, i]]
    for i in range(guest_take.shape[1]):
        out_guest[rows, i] = out_guest[3, i] * out_guest[0, i]
