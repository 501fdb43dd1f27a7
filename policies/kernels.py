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


@njit(cache=True)
def _pairwise(a: np.ndarray, lo: int, n: int) -> float:
    """NumPy's ``pairwise_sum`` of ``a[lo:lo + n]`` (8 accumulators per block of ≤ 128, halves
    above), the fold behind ``np.sum`` of a contiguous float64 array."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    if n <= _PW_BLOCK:
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
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, lo, n2) + _pairwise(a, lo + n2, n - n2)


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


@njit(cache=True)
def guest_stats_dynamic(
    cpu: np.ndarray, mem: np.ndarray, memhost: np.ndarray, use_memhost: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per-guest ``(cpu, mem)`` a move transfers in dynamic mode: missing samples (NaN) as 0;
    with ``use_memhost`` memory is ``memhost`` where it is finite."""
    n = cpu.shape[0]
    out_cpu = np.empty(n)
    out_mem = np.empty(n)
    for g in range(n):
        c = cpu[g]
        out_cpu[g] = 0.0 if c != c else c
        m = mem[g]
        m = 0.0 if m != m else m
        if use_memhost:
            h = memhost[g]
            if math.isfinite(h):
                m = h
        out_mem[g] = m
    return out_cpu, out_mem


@njit(cache=True)
def residual_ema_stats(
    node_cpu: np.ndarray,
    node_mem: np.ndarray,
    gcpu: np.ndarray,
    gmem: np.ndarray,
    node: np.ndarray,
    here: np.ndarray,
    ema_cpu: np.ndarray,
    ema_mem: np.ndarray,
    alpha: float,
    update: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Patch 6: node load = Σ HA-guest usage on the node + EMA of the residual.

    Sums are ``np.bincount`` folds (guest order); with ``update`` the EMA (``ema_cpu``/``ema_mem``,
    NaN = not yet initialised) advances in place: ``ema + α (x − ema)`` where both are finite, ``x``
    where only ``x`` is, unchanged where ``x`` is NaN. A node whose sample is NaN reads NaN; the
    result is clipped at 0 like ``np.maximum(·, 0)``."""
    n = node_cpu.shape[0]
    sum_cpu = np.zeros(n)
    sum_mem = np.zeros(n)
    for g in range(node.shape[0]):
        if here[g]:
            sum_cpu[node[g]] += gcpu[g]
            sum_mem[node[g]] += gmem[g]
    out_cpu = np.empty(n)
    out_mem = np.empty(n)
    for i in range(n):
        for series in range(2):
            stat = node_cpu[i] if series == 0 else node_mem[i]
            attributed = sum_cpu[i] if series == 0 else sum_mem[i]
            ema = ema_cpu if series == 0 else ema_mem
            if update:
                x = stat - attributed
                old = ema[i]
                upd = old + alpha * (x - old) if math.isfinite(old) else x
                ema[i] = upd if math.isfinite(x) else old
            v = attributed + ema[i] if math.isfinite(stat) else np.nan
            v = _np_maximum(v, 0.0)
            if series == 0:
                out_cpu[i] = v
            else:
                out_mem[i] = v
    return out_cpu, out_mem


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
