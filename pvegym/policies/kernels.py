"""The compiled inner loops of the heuristic balancers: per-round node statistics, the imbalance,
the pressure gate, bruteforce scoring of candidate motions and guest-centric relief.

Why compiled: a balancer runs every CRM round, and as NumPy operations on a few nodes and tens of
guests its bookkeeping was ~30–60 array calls of ~1 µs each — several times the model's own round
(``pvegym bench``: ``day_decide_us``). One ``numba.njit`` call does the same arithmetic in one
pass. Every kernel computes **the same bits** as the NumPy expressions it replaces (the same IEEE
operations in the same order: sequential folds where NumPy folds sequentially, NumPy's pairwise
summation where the policy called ``np.sum``, ``np.maximum``'s NaN rule); the formulas and why
they are so stay documented in the policies that call these kernels. Recorded trajectories prove
it (``scripts/record_decisions.py``), and ``tests/policies/test_kernels.py`` checks each kernel
against its NumPy form.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pvegym.sim.crs import TRUNCATION_FACTOR

_PW_BLOCK = 128  # NumPy's PW_BLOCKSIZE (numpy/_core/src/umath/loops_utils.h.src)


@njit(cache=True, inline="always")
def _pairwise_block(a: np.ndarray, lo: int, n: int) -> float:
    """NumPy's ``pairwise_sum`` of a block of ``n ≤ 128`` elements ``a[lo:lo + n]``: a plain
    fold below 8, else 8 accumulators, combined as a tree, then the remainder."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = 8
    stop = n - (n % 8)
    while i < stop:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise(a: np.ndarray, lo: int, n: int) -> float:
    """NumPy's ``pairwise_sum`` of ``a[lo:lo + n]``: blocks of ≤ 128 (:func:`_pairwise_block`),
    above that ``sum(first n2) + sum(rest)`` with ``n2 = n/2`` rounded down to a multiple of 8.
    The recursion is unrolled onto a stack (numba's cache cannot hold recursive functions)."""
    if n <= _PW_BLOCK:
        return _pairwise_block(a, lo, n)
    task_lo = np.empty(128, dtype=np.int64)
    task_n = np.empty(128, dtype=np.int64)
    task_combine = np.zeros(128, dtype=np.bool_)
    values = np.empty(128)
    top = 0
    nv = 0
    task_lo[0], task_n[0], task_combine[0] = lo, n, False
    top = 1
    while top > 0:
        top -= 1
        t_lo, t_n, combine = task_lo[top], task_n[top], task_combine[top]
        if combine:  # both halves are on the value stack: left below right
            nv -= 1
            values[nv - 1] = values[nv - 1] + values[nv]
        elif t_n <= _PW_BLOCK:
            values[nv] = _pairwise_block(a, t_lo, t_n)
            nv += 1
        else:
            n2 = t_n // 2
            n2 -= n2 % 8
            # run order: left half, right half, then combine (a stack: pushed in reverse)
            task_lo[top], task_n[top], task_combine[top] = t_lo, t_n, True
            task_lo[top + 1], task_n[top + 1], task_combine[top + 1] = t_lo + n2, t_n - n2, False
            task_lo[top + 2], task_n[top + 2], task_combine[top + 2] = t_lo, n2, False
            top += 3
    return values[0]


@njit(cache=True)
def np_sum(a: np.ndarray, n: int) -> float:
    """``np.sum`` of the first ``n`` elements of ``a``: the identity 0.0 plus the pairwise sum."""
    return 0.0 + _pairwise(a, 0, n)


@njit(cache=True, inline="always")
def _np_maximum(a: float, b: float) -> float:
    """``np.maximum(a, b)`` for floats: ``a`` if ``a >= b`` or ``a`` is NaN, else ``b``."""
    return a if (a >= b or a != a) else b


@njit(cache=True, inline="always")
def _fold_imbalance(loads: np.ndarray, n: int, normalized: bool) -> float:
    """``crs.imbalance`` of ``loads[:n]``: sequential folds, CV, optionally ``/ sqrt(n − 1)``."""
    if n < 2:
        return 0.0
    total = 0.0
    for j in range(n):
        total += loads[j]
    mean = total / n
    sq = 0.0
    for j in range(n):
        d = loads[j] - mean
        sq += d * d
    if total == 0.0:
        return 0.0
    cv = math.sqrt(sq / n) / mean
    return cv / math.sqrt(n - 1) if normalized else cv


@njit(cache=True)
def online_imbalance(
    cpu: np.ndarray,
    mem: np.ndarray,
    maxcpu: np.ndarray,
    maxmem: np.ndarray,
    online: np.ndarray,
    normalized: bool,
) -> float:
    """``crs.imbalance(crs.node_loads(...)[online])``: loads ``(cpu/maxcpu + mem/maxmem)/2`` of
    the online nodes in node order, then their imbalance."""
    loads = np.empty(cpu.shape[0])
    k = 0
    for i in range(cpu.shape[0]):
        if online[i]:
            loads[k] = (cpu[i] / maxcpu[i] + mem[i] / maxmem[i]) / 2.0
            k += 1
    return _fold_imbalance(loads, k, normalized)


@njit(cache=True, inline="always")
def _guest_usage(cpu: float, mem: float, memhost: float, use_memhost: bool) -> tuple[float, float]:
    """One guest's ``(cpu, mem)`` a move transfers in dynamic mode: a missing sample (NaN) is 0;
    with ``use_memhost`` memory is ``memhost`` where it is finite."""
    c = 0.0 if cpu != cpu else cpu
    m = 0.0 if mem != mem else mem
    if use_memhost and math.isfinite(memhost):
        m = memhost
    return c, m


@njit(cache=True)
def guest_stats_dynamic(
    cpu: np.ndarray,
    mem: np.ndarray,
    memhost: np.ndarray,
    use_memhost: bool,
    out_cpu: np.ndarray,
    out_mem: np.ndarray,
) -> None:
    """:func:`_guest_usage` of every guest into ``out_cpu``/``out_mem``."""
    for g in range(cpu.shape[0]):
        out_cpu[g], out_mem[g] = _guest_usage(cpu[g], mem[g], memhost[g], use_memhost)


@njit(cache=True, inline="always")
def _residual_ema(
    stat: np.ndarray, ema: np.ndarray, alpha: float, update: bool, out: np.ndarray
) -> None:
    """Patch 6 for one series (cpu or memory), from the attributed sums ``out`` holds on entry:
    with ``update`` the EMA (NaN = not yet initialised) advances in place — ``ema + α (x − ema)``
    where both are finite, ``x`` where only ``x`` is, unchanged where ``x`` is NaN; a node whose
    sample is NaN reads NaN; clipped at 0 like ``np.maximum(·, 0)``. One series per call, in
    place: no array chosen inside the loop and no scratch arrays (each costs the per-round call
    reference counting or an allocation)."""
    for i in range(stat.shape[0]):
        attributed = out[i]
        if update:
            x = stat[i] - attributed
            old = ema[i]
            upd = old + alpha * (x - old) if math.isfinite(old) else x
            ema[i] = upd if math.isfinite(x) else old
        v = attributed + ema[i] if math.isfinite(stat[i]) else np.nan
        out[i] = _np_maximum(v, 0.0)


@njit(cache=True)
def patched_node_stats(
    node_cpu: np.ndarray,
    node_mem: np.ndarray,
    guest_cpu: np.ndarray,
    guest_mem: np.ndarray,
    guest_memhost: np.ndarray,
    use_memhost: bool,
    node: np.ndarray,
    here: np.ndarray,
    ema_cpu: np.ndarray,
    ema_mem: np.ndarray,
    alpha: float,
    update: bool,
    out_cpu: np.ndarray,
    out_mem: np.ndarray,
) -> None:
    """Patch 6 in one pass from the view's telemetry (the patched balancer's every round): node
    load = Σ usage (:func:`_guest_usage`) of the HA guests counted on their node (``here`` and a
    node ≥ 0; ``np.bincount``'s fold, guest order, summed in ``out_cpu``/``out_mem``) + EMA of
    the residual (:func:`_residual_ema`), into ``out_cpu``/``out_mem``."""
    for i in range(node_cpu.shape[0]):
        out_cpu[i] = 0.0
        out_mem[i] = 0.0
    for g in range(node.shape[0]):
        if here[g] and node[g] >= 0:
            c, m = _guest_usage(guest_cpu[g], guest_mem[g], guest_memhost[g], use_memhost)
            out_cpu[node[g]] += c
            out_mem[node[g]] += m
    _residual_ema(node_cpu, ema_cpu, alpha, update, out_cpu)
    _residual_ema(node_mem, ema_mem, alpha, update, out_mem)


@njit(cache=True)
def patched_stats_imbalance(
    node_cpu: np.ndarray,
    node_mem: np.ndarray,
    guest_cpu: np.ndarray,
    guest_mem: np.ndarray,
    guest_memhost: np.ndarray,
    use_memhost: bool,
    node: np.ndarray,
    here: np.ndarray,
    ema_cpu: np.ndarray,
    ema_mem: np.ndarray,
    alpha: float,
    update: bool,
    out_cpu: np.ndarray,
    out_mem: np.ndarray,
    maxcpu: np.ndarray,
    maxmem: np.ndarray,
    online: np.ndarray,
    normalized: bool,
) -> float:
    """:func:`patched_node_stats`, then :func:`online_imbalance` of its output, in one call: the
    patched balancer's every round (most rounds end at the threshold), so that the pair costs
    one dispatch of ~20 arguments instead of two (the same code, so the same bits)."""
    patched_node_stats(
        node_cpu, node_mem, guest_cpu, guest_mem, guest_memhost, use_memhost, node, here,
        ema_cpu, ema_mem, alpha, update, out_cpu, out_mem,
    )  # fmt: skip
    return online_imbalance(out_cpu, out_mem, maxcpu, maxmem, online, normalized)


@njit(cache=True)
def pressure_gate(
    cpu_some: np.ndarray, mem_some: np.ndarray, online: np.ndarray, min_pct: float
) -> bool:
    """Patch 7's gate: some online node's cpu or memory some ≥ ``min_pct``; True (fail-open) when
    there is no online node or any online reading is missing."""
    seen = False
    hit = False
    for i in range(cpu_some.shape[0]):
        if not online[i]:
            continue
        seen = True
        a = cpu_some[i]
        b = mem_some[i]
        if not (math.isfinite(a) and math.isfinite(b)):
            return True
        if a >= min_pct or b >= min_pct:
            hit = True
    return hit or not seen


@njit(cache=True)
def bruteforce_best(
    cpu: np.ndarray,
    mem: np.ndarray,
    maxcpu: np.ndarray,
    maxmem: np.ndarray,
    source: np.ndarray,
    target: np.ndarray,
    move_cpu: np.ndarray,
    move_mem: np.ndarray,
    normalized: bool,
) -> tuple[int, float]:
    """``argmin`` of ``crs.bruteforce_imbalances`` and its value: for each candidate, the nodes
    after ``remove_running_resource`` on the source (saturating at 0) and
    ``add_running_resource`` on the target, their loads, the imbalance truncated to 15 digits.
    Like ``np.argmin``: the first minimum, or the first NaN if there is one."""
    n = cpu.shape[0]
    c2 = np.empty(n)
    m2 = np.empty(n)
    loads = np.empty(n)
    best = -1
    best_v = np.inf
    for k in range(source.shape[0]):
        for j in range(n):
            c2[j] = cpu[j]
            m2[j] = mem[j]
        s = source[k]
        t = target[k]
        c2[s] = _np_maximum(0.0, cpu[s] - move_cpu[k])
        m2[s] = _np_maximum(0.0, mem[s] - move_mem[k])
        c2[t] = c2[t] + move_cpu[k]
        m2[t] = m2[t] + move_mem[k]
        for j in range(n):
            loads[j] = (c2[j] / maxcpu[j] + m2[j] / maxmem[j]) / 2.0
        v = _fold_imbalance(loads, n, normalized)
        v = np.trunc(v * TRUNCATION_FACTOR) / TRUNCATION_FACTOR
        if v != v:
            return k, v
        if best < 0 or v < best_v:
            best = k
            best_v = v
    return best, best_v


# --------------------------------------------------------------------------------------------
# guest-centric: candidate checks and relief (pvegym/policies/guest_centric.py documents the model)
# --------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _py_min(a: float, b: float) -> float:
    """Python's ``min(a, b)``: ``a`` unless ``b < a``."""
    return b if b < a else a


@njit(cache=True, inline="always")
def _py_max(a: float, b: float) -> float:
    """Python's ``max(a, b)``: ``a`` unless ``b > a``."""
    return b if b > a else a


@njit(cache=True, inline="always")
def _np_minimum(a: float, b: float) -> float:
    """``np.minimum(a, b)`` for floats: ``a`` if ``a <= b`` or ``a`` is NaN, else ``b``."""
    return a if (a <= b or a != a) else b


@njit(cache=True, inline="always")
def _nan_to_num(x: float) -> float:
    """``np.nan_to_num(x, nan=0.0)``: NaN → 0, ±inf → ± the largest double."""
    if x != x:
        return 0.0
    if x == np.inf:
        return 1.7976931348623157e308
    if x == -np.inf:
        return -1.7976931348623157e308
    return x


@njit(cache=True, inline="always")
def _curve(rho: float, a: float, k: float) -> float:
    """The guest-centric pressure curve ``100 (a ρ² + (1 − a) ρ^k)`` (100 from ρ ≥ 1)."""
    if rho >= 1.0:
        return 100.0
    r = _py_max(rho, 0.0)
    return 100.0 * (a * r * r + (1.0 - a) * r**k)


@njit(cache=True, inline="always")
def _full(rho: float) -> float:
    """CPU full (percent) at utilisation ``rho``."""
    return 100.0 * _py_max(0.0, 1.0 - 1.0 / rho) if rho > 1.0 else 0.0


@njit(cache=True)
def curve_values(rho: np.ndarray, a: float, k: float) -> np.ndarray:
    """:func:`_curve` of every element (the nodes' utilisations)."""
    out = np.empty(rho.shape[0])
    for i in range(rho.shape[0]):
        out[i] = _curve(rho[i], a, k)
    return out


@njit(cache=True)
def gc_prefilter(
    ptr: np.ndarray,
    members: np.ndarray,
    source: np.ndarray,
    target: np.ndarray,
    returning: np.ndarray,
    migratable: np.ndarray,
    suffering: np.ndarray,
    online: np.ndarray,
    node_mem: np.ndarray,
    maxmem: np.ndarray,
    memhost: np.ndarray,
    demand: np.ndarray,
    headroom_frac: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The guest-centric checks before a candidate's cost: not a return within the block
    (``returning[guest, node]``), every member migratable, some member suffering, source and
    target online, the target's memory known and room for the bundle's ``memhost`` with the
    headroom. Returns the mask and each candidate's Σ memhost (bytes) and Σ demand (cores),
    summed over its members in order (``members[ptr[i]:ptr[i + 1]]``) like Python's ``sum``."""
    k = source.shape[0]
    keep = np.zeros(k, dtype=np.bool_)
    m_b = np.zeros(k)
    d_b = np.zeros(k)
    for i in range(k):
        s = source[i]
        d = target[i]
        lo = ptr[i]
        hi = ptr[i + 1]
        mem_sum = 0.0
        dem_sum = 0.0
        back = False
        pinned = False
        suffers = False
        for j in range(lo, hi):
            m = members[j]
            back = back or returning[m, d]
            pinned = pinned or not migratable[m]
            suffers = suffers or suffering[m]
            mem_sum += memhost[m]
            dem_sum += demand[m]
        m_b[i] = mem_sum
        d_b[i] = dem_sum
        if back or pinned or not suffers:
            continue
        if not (online[s] and online[d]) or not math.isfinite(node_mem[d]):
            continue
        if node_mem[d] + mem_sum > (1.0 - headroom_frac) * maxmem[d]:
            continue
        keep[i] = True
    return keep, m_b, d_b


@njit(cache=True)
def gc_relief(
    ptr: np.ndarray,
    members: np.ndarray,
    source: np.ndarray,
    target: np.ndarray,
    d_b: np.ndarray,
    m_b: np.ndarray,
    cost: np.ndarray,
    node_demand: np.ndarray,
    cores: np.ndarray,
    maxmem: np.ndarray,
    psi_s: np.ndarray,
    nms: np.ndarray,
    nmf: np.ndarray,
    gcs: np.ndarray,
    gcf: np.ndarray,
    gms: np.ndarray,
    gmf: np.ndarray,
    relievable: np.ndarray,
    active: np.ndarray,
    nd: np.ndarray,
    weights: np.ndarray,  # w_cpu_some, w_cpu_full, w_mem_some, w_mem_full
    params: np.ndarray,  # curve a, curve k, mem_band_frac, horizon_s, cost_factor, min_pressure
    prefer_cheapest_adequate: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Relief (guest-stall seconds over the horizon) of each candidate, the predicted source cpu
    some, target cpu some and source memory some after it (percent), and the chosen candidate
    (−1: none eligible) — ``GuestCentricPolicy`` steps 6–7, one candidate at a time as before,
    with NumPy's summation order for its sums."""
    w_cs, w_cf, w_ms, w_mf = weights[0], weights[1], weights[2], weights[3]
    ca, ck, band, horizon, cost_factor, min_p = (
        params[0], params[1], params[2], params[3], params[4], params[5]
    )  # fmt: skip
    k = source.shape[0]
    g_n = nd.shape[0]
    relief = np.empty(k)
    src_after = np.empty(k)
    tgt_after = np.empty(k)
    mem_after = np.empty(k)
    moving = np.zeros(g_n, dtype=np.bool_)
    buf_a = np.empty(g_n)
    buf_b = np.empty(g_n)
    buf_c = np.empty(g_n)
    buf_d = np.empty(g_n)
    best = -1
    best_tier = 0
    best_x1 = 0.0
    best_x2 = 0.0
    for i in range(k):
        s = source[i]
        d = target[i]
        rho_s = node_demand[s] / cores[s]
        rho_s2 = _py_max(node_demand[s] - d_b[i], 0.0) / cores[s]
        rho_d = node_demand[d] / cores[d]
        rho_d2 = (node_demand[d] + d_b[i]) / cores[d]
        p_s = psi_s[s]
        c_s = _curve(rho_s, ca, ck)
        c_s2 = _curve(rho_s2, ca, ck)
        p_s2 = _py_min(p_s * c_s2 / c_s, p_s) if c_s > 0.5 else _py_min(c_s2, p_s)
        f_s2 = _full(rho_s2)
        p_d = psi_s[d]
        p_d2 = _py_min(p_d + _py_max(_curve(rho_d2, ca, ck) - _curve(rho_d, ca, ck), 0.0), 100.0)
        f_d2 = _full(rho_d2)
        for j in range(ptr[i], ptr[i + 1]):
            moving[members[j]] = True
        ms_s = _nan_to_num(nms[s])
        mf_s = _nan_to_num(nmf[s])
        # the source's remaining guests (guest order, as the boolean masks select them)
        n_s = 0
        for g in range(g_n):
            if active[g] and nd[g] == s and not moving[g]:
                buf_a[n_s] = _np_minimum(gcs[g], p_s) - _np_minimum(gcs[g], p_s2)
                buf_b[n_s] = gcf[g] - _np_minimum(gcf[g], f_s2)
                buf_c[n_s] = _np_minimum(gms[g], ms_s)
                buf_d[n_s] = _np_minimum(gmf[g], mf_s)
                n_s += 1
        src = w_cs * np_sum(buf_a, n_s) + w_cf * np_sum(buf_b, n_s)
        frac = _py_min(1.0, m_b[i] / (band * maxmem[s])) if ms_s > 0 else 0.0
        src += frac * (w_ms * np_sum(buf_c, n_s) + w_mf * np_sum(buf_d, n_s))
        # the moved guests leave their relievable contention behind and inherit the target's
        n_m = 0
        for j in range(ptr[i], ptr[i + 1]):
            buf_a[n_m] = relievable[members[j]]
            moving[members[j]] = False
            n_m += 1
        moved = np_sum(buf_a, n_m)
        ms_d = _nan_to_num(nms[d])
        mf_d = _nan_to_num(nmf[d])
        inherit = n_m * (w_cs * p_d2 + w_cf * f_d2 + w_ms * ms_d + w_mf * mf_d)
        # the target's guests: more cpu contention
        n_d = 0
        for g in range(g_n):
            if active[g] and nd[g] == d:
                buf_b[n_d] = _np_maximum(f_d2 - gcf[g], 0.0)
                n_d += 1
        added = w_cs * float(n_d) * (p_d2 - p_d) + w_cf * np_sum(buf_b, n_d)
        net = src + moved - inherit - added
        r = net / 100.0 * horizon
        relief[i] = r
        src_after[i] = p_s2
        tgt_after[i] = p_d2
        mem_after[i] = ms_s * (1.0 - frac)
        # step 7: eligible when relief > cost_factor × cost; the smallest key wins (Python's
        # tuple order: the first differing element decides): (0, cost, −net, i) for an
        # adequate motion when the cheapest is preferred, else (1, −net, 0, i)
        c = cost[i]
        if r <= 0.0 or r <= cost_factor * c:
            continue
        net_c = r - cost_factor * c
        adequate = p_s2 < min_p and p_d2 < min_p and mem_after[i] < min_p
        if adequate and prefer_cheapest_adequate:
            tier, x1, x2 = 0, c, -net_c
        else:
            tier, x1, x2 = 1, -net_c, 0.0
        if best < 0:
            better = True
        elif tier != best_tier:
            better = tier < best_tier
        elif x1 != best_x1:
            better = x1 < best_x1
        elif x2 != best_x2:
            better = x2 < best_x2
        else:
            better = False  # i > best: the earlier candidate keeps it
        if better:
            best, best_tier, best_x1, best_x2 = i, tier, x1, x2
    return relief, src_after, tgt_after, mem_after, best
