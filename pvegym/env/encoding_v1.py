"""Compiled observation encoder of ``pvegym/Cluster-v1`` (layout: :mod:`pvegym.env.observation_layout`).

One kernel serves every caller: the environment hands it the simulation's telemetry arrays (rows
of :class:`~pvegym.sim.cluster.ClusterState` with a row-index vector, HA guests picked by index);
a deployed agent hands it the arrays of a :class:`~pvegym.sim.view.ClusterView`
(:mod:`pvegym.env.view_encoding_v1`); a batched environment can call it per cluster. Same float64
inputs, same code, so the two paths give the same bits — there is no second implementation to keep
in step.

Telemetry switched off is read as 0 everywhere, including in derived features (``cpu_after`` of a
cluster without guest CPU telemetry adds 0): the environment passes the scenario's ``disabled``
flags, the view path passes NaN arrays (and flags derived from them), and both read 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pvegym.env import observation_layout as L
from pvegym.env.encoding import fill_mask
from pvegym.env.memory import (
    BACKOFF_UNTIL,
    FAIL_T,
    LAST_DURATION,
    LAST_END,
    LAST_STATE,
    LEFT_T,
    STATE_FAILED,
    STATE_OK,
)

# row-index vectors (what the caller's telemetry matrices hold where)
#: node_src rows: cpu (cores busy), mem (bytes), cpu some, mem some, mem full (PSI avg10 %)
NODE_CPU, NODE_MEM, NODE_CS, NODE_MS, NODE_MF = range(5)
#: guest_src rows: cpu (cores), memhost (bytes), mem = a·b (bytes), run fraction, PSI avg10 % ×4
G_CPU, G_MEMHOST, G_MEM_A, G_MEM_B, G_RUN, G_CS, G_CF, G_MS, G_MF = range(9)
#: guest_static rows (HA order): maxcpu, maxmem, migratable, container
S_MAXCPU, S_MAXMEM, S_MIGRATABLE, S_CONTAINER = range(4)
#: opts: window (s), backoff cap (s), 1 / bandwidth (s/B)
O_WINDOW, O_BACKOFF_CAP, O_INV_BW = range(3)

# TELEMETRY_FIELDS order (pvegym.sim.scenario)
_T_NCPU, _T_NMEM, _T_NCS, _T_NMS, _T_NMF = 0, 1, 2, 3, 4
_T_GCPU, _T_GMEM, _T_GMH, _T_GCS, _T_GCF, _T_GMS, _T_GMF = 5, 6, 7, 8, 9, 10, 11

# feature indices (numba reads module-level ints as constants)
_GL_TIME, _GL_ACTIVE, _GL_NODES, _GL_GUESTS = 0, 1, 2, 3
_GL_IMB, _GL_OK, _GL_FAILED, _GL_PMAX, _GL_MISSING = 4, 5, 6, 7, 8
assert L.GLOBAL_FEATURES[_GL_MISSING] == "missing_node_cpu"
_NF = L.N_INDEX
_N_PRESENT, _N_ONLINE, _N_MAXCPU, _N_MAXMEM = (
    _NF["present"],
    _NF["online"],
    _NF["maxcpu"],
    _NF["maxmem"],
)
_N_CPU, _N_MEM, _N_CS, _N_MS, _N_MF = (
    _NF["cpu"],
    _NF["mem"],
    _NF["cpu_some"],
    _NF["mem_some"],
    _NF["mem_full"],
)
_N_GUESTS, _N_HACPU, _N_HAMEM, _N_IN, _N_PR = (
    _NF["guests"],
    _NF["ha_cpu"],
    _NF["ha_memhost"],
    _NF["incoming"],
    _NF["pressure_rounds"],
)
_CPU_LOG, _MEM_LOG, _DURATION_LOG = L.GUEST_CPU_LOG, L.GUEST_MEM_LOG, L.DURATION_LOG
_GF = L.GU_INDEX
_G_BACKOFF = _GF["backoff"]
_G_CONTAINER = _GF["container"]
_G_CPU = _GF["cpu"]
_G_CPU_FULL = _GF["cpu_full"]
_G_CPU_NODE_SHARE = _GF["cpu_node_share"]
_G_CPU_SOME = _GF["cpu_some"]
_G_FAILURES = _GF["failures"]
_G_LAST_DURATION = _GF["last_duration"]
_G_LAST_FAILED = _GF["last_failed"]
_G_LAST_OK = _GF["last_ok"]
_G_MAXCPU = _GF["maxcpu"]
_G_MAXMEM = _GF["maxmem"]
_G_MEM = _GF["mem"]
_G_MEM_FULL = _GF["mem_full"]
_G_MEM_SOME = _GF["mem_some"]
_G_MEMHOST = _GF["memhost"]
_G_MEMHOST_NODE_SHARE = _GF["memhost_node_share"]
_G_MIGRATABLE = _GF["migratable"]
_G_MOTION_RECENCY = _GF["motion_recency"]
_G_MOVING = _GF["moving"]
_G_NODE = _GF["node"]
_G_PRESENT = _GF["present"]
_G_RUNNING = _GF["running"]
_G_SOURCE_CPU_AFTER = _GF["source_cpu_after"]
_G_STARTED = _GF["started"]
_G_TARGET = _GF["target"]
_G_TRANSFER_S = _GF["transfer_s"]
_PF = L.P_INDEX
_P_BACKOFF = _PF["backoff"]
_P_CPU_AFTER = _PF["cpu_after"]
_P_FAIL_RECENCY = _PF["fail_recency"]
_P_LEFT_RECENCY = _PF["left_recency"]
_P_MEM_AFTER = _PF["mem_after"]


@njit(cache=True, inline="always")
def _unit(x: float) -> float:
    """Clip to [0, 1]; NaN → 0."""
    if not x > 0.0:
        return 0.0
    return 1.0 if x > 1.0 else x


@njit(cache=True, inline="always")
def _log_unit(x: float, scale: tuple[float, float]) -> float:
    """``log(1 + x/x0) / log(1 + max/x0)`` clipped to [0, 1] (``layout``'s log scales)."""
    if not x > 0.0:
        return 0.0
    return _unit(math.log1p(x / scale[0]) / math.log1p(scale[1] / scale[0]))


@njit(cache=True, inline="always")
def _tel(x: float, off: bool) -> float:
    """A telemetry value, 0 when switched off or NaN."""
    if off or x != x:  # NaN
        return 0.0
    return x


@njit(cache=True, inline="always")
def _recency(t: float, then: float, window: float) -> float:
    """1 just now, falling linearly to 0 after ``window`` s; 0 for never (−inf)."""
    if not then > -1e300:
        return 0.0
    return _unit(1.0 - (t - then) / window)


@njit(cache=True)
def encode_v1(
    obs: np.ndarray,  # float32 (Layout.size,)
    max_nodes: int,
    max_guests: int,
    disabled: np.ndarray,  # (12,) bool, TELEMETRY_FIELDS order
    node_online: np.ndarray,  # (n,) bool
    node_cap: np.ndarray,  # (2, n) cores, bytes
    node_src: np.ndarray,  # (R, n) telemetry rows
    node_rows: np.ndarray,  # (5,) int: rows of node_src (NODE_* order)
    gidx: np.ndarray,  # (g,) int: column of HA guest i in place/started/running/guest_src
    place: np.ndarray,  # (2, G) int: node, motion target (−1: none)
    started: np.ndarray,  # (G,) bool: HA state started
    running: np.ndarray,  # (G,) bool
    guest_src: np.ndarray,  # (R, G) telemetry rows
    guest_rows: np.ndarray,  # (9,) int: rows of guest_src (G_* order)
    guest_static: np.ndarray,  # (4, g) HA order: maxcpu, maxmem, migratable, container
    mem_guest: np.ndarray,  # (3, g) MotionMemory.guest
    mem_failures: np.ndarray,  # (g, FAILURE_RING) MotionMemory.failures
    mem_pair: np.ndarray,  # (4, g, n) MotionMemory.pair
    pressure_rounds: np.ndarray,  # (n,) MotionMemory.pressure_rounds
    opts: np.ndarray,  # (3,) window s, backoff cap s, 1 / bandwidth
    t: float,
    time_frac: float,
    motion_active: bool,
    result_ok: bool,
    result_failed: bool,
) -> None:
    """Write the whole observation (every slot; padding 0)."""
    n_gl = len(L.GLOBAL_FEATURES)
    n_nf, n_gf, n_pf = len(L.NODE_FEATURES), len(L.GUEST_FEATURES), len(L.PAIR_FEATURES)
    node_end = n_gl + n_nf * max_nodes
    guest_end = node_end + n_gf * max_guests
    obs[:] = 0.0
    glob = obs[:n_gl]
    nodef = obs[n_gl:node_end].reshape((n_nf, max_nodes))
    guestf = obs[node_end:guest_end].reshape((n_gf, max_guests))
    pairf = obs[guest_end:].reshape((n_pf, max_guests, max_nodes))
    n_n = node_online.size
    g_n = gidx.size
    window, cap, inv_bw = opts[O_WINDOW], opts[O_BACKOFF_CAP], opts[O_INV_BW]
    inv_mn, inv_mg = 1.0 / max_nodes, 1.0 / max_guests

    # ------------------------------------------------------------------ nodes
    ncpu = np.zeros(n_n)
    nmem = np.zeros(n_n)
    ha_cpu = np.zeros(n_n)
    ha_mem = np.zeros(n_n)
    load_sum = 0.0
    online = 0
    pmax = 0.0
    for n in range(n_n):
        maxcpu, maxmem = node_cap[0, n], node_cap[1, n]
        c = _tel(node_src[node_rows[NODE_CPU], n], disabled[_T_NCPU])
        m = _tel(node_src[node_rows[NODE_MEM], n], disabled[_T_NMEM])
        cs = _tel(node_src[node_rows[NODE_CS], n], disabled[_T_NCS])
        ms = _tel(node_src[node_rows[NODE_MS], n], disabled[_T_NMS])
        mf = _tel(node_src[node_rows[NODE_MF], n], disabled[_T_NMF])
        ncpu[n], nmem[n] = c, m
        nodef[_N_PRESENT, n] = 1.0
        nodef[_N_ONLINE, n] = 1.0 if node_online[n] else 0.0
        nodef[_N_MAXCPU, n] = _unit(maxcpu / L.CORES_SCALE)
        nodef[_N_MAXMEM, n] = _unit(maxmem / L.NODE_MEM_SCALE)
        cpu_f, mem_f = _unit(c / maxcpu), _unit(m / maxmem)
        nodef[_N_CPU, n] = cpu_f
        nodef[_N_MEM, n] = mem_f
        nodef[_N_CS, n] = _unit(cs * 0.01)
        nodef[_N_MS, n] = _unit(ms * 0.01)
        nodef[_N_MF, n] = _unit(mf * 0.01)
        nodef[_N_PR, n] = _unit(pressure_rounds[n] / L.PRESSURE_ROUNDS_SCALE)
        if node_online[n]:
            load_sum += (cpu_f + mem_f) / 2.0
            online += 1
            pmax = max(pmax, cs, ms)

    # ------------------------------------------------------------------ guests
    svc_node, svc_target = place[0], place[1]
    for i in range(g_n):
        c = gidx[i]
        node = svc_node[c]
        tgt = svc_target[c]
        maxcpu, maxmem = guest_static[S_MAXCPU, i], guest_static[S_MAXMEM, i]
        cpu = _tel(guest_src[guest_rows[G_CPU], c], disabled[_T_GCPU])
        memhost = _tel(guest_src[guest_rows[G_MEMHOST], c], disabled[_T_GMH])
        mem = _tel(
            guest_src[guest_rows[G_MEM_A], c] * guest_src[guest_rows[G_MEM_B], c],
            disabled[_T_GMEM],
        )
        guestf[_G_PRESENT, i] = 1.0
        guestf[_G_NODE, i] = (node + 1) * inv_mn
        guestf[_G_TARGET, i] = (tgt + 1) * inv_mn if tgt >= 0 else 0.0
        guestf[_G_STARTED, i] = 1.0 if started[c] else 0.0
        guestf[_G_MOVING, i] = 1.0 if tgt >= 0 else 0.0
        guestf[_G_RUNNING, i] = 1.0 if running[c] and guest_src[guest_rows[G_RUN], c] > 0.0 else 0.0
        guestf[_G_CONTAINER, i] = guest_static[S_CONTAINER, i]
        guestf[_G_MIGRATABLE, i] = guest_static[S_MIGRATABLE, i]
        guestf[_G_MAXCPU, i] = _log_unit(maxcpu, _CPU_LOG)
        guestf[_G_MAXMEM, i] = _log_unit(maxmem, _MEM_LOG)
        guestf[_G_CPU, i] = _unit(cpu / maxcpu)
        guestf[_G_MEM, i] = _unit(mem / maxmem)
        guestf[_G_MEMHOST, i] = _unit(memhost / maxmem)
        guestf[_G_CPU_SOME, i] = _unit(
            _tel(guest_src[guest_rows[G_CS], c], disabled[_T_GCS]) * 0.01
        )
        guestf[_G_CPU_FULL, i] = _unit(
            _tel(guest_src[guest_rows[G_CF], c], disabled[_T_GCF]) * 0.01
        )
        guestf[_G_MEM_SOME, i] = _unit(
            _tel(guest_src[guest_rows[G_MS], c], disabled[_T_GMS]) * 0.01
        )
        guestf[_G_MEM_FULL, i] = _unit(
            _tel(guest_src[guest_rows[G_MF], c], disabled[_T_GMF]) * 0.01
        )
        if 0 <= node < n_n:
            nodef[_N_GUESTS, node] += inv_mg
            ha_cpu[node] += cpu
            ha_mem[node] += memhost
            guestf[_G_CPU_NODE_SHARE, i] = _unit(cpu / node_cap[0, node])
            guestf[_G_MEMHOST_NODE_SHARE, i] = _unit(memhost / node_cap[1, node])
            guestf[_G_SOURCE_CPU_AFTER, i] = _unit((ncpu[node] - cpu) / node_cap[0, node])
        if 0 <= tgt < n_n:
            nodef[_N_IN, tgt] = 1.0
        guestf[_G_TRANSFER_S, i] = _log_unit(memhost * inv_bw, _DURATION_LOG)
        state = mem_guest[LAST_STATE, i]
        guestf[_G_LAST_OK, i] = 1.0 if state == STATE_OK else 0.0
        guestf[_G_LAST_FAILED, i] = 1.0 if state == STATE_FAILED else 0.0
        guestf[_G_MOTION_RECENCY, i] = _recency(t, mem_guest[LAST_END, i], window)
        fails = 0.0
        for k in range(mem_failures.shape[1]):
            if mem_failures[i, k] > -1e300 and t - mem_failures[i, k] < window:
                fails += 1.0
        guestf[_G_FAILURES, i] = _unit(fails / L.FAILURES_SCALE)
        guestf[_G_LAST_DURATION, i] = _log_unit(mem_guest[LAST_DURATION, i], _DURATION_LOG)
        longest = 0.0
        for n in range(n_n):
            back = mem_pair[BACKOFF_UNTIL, i, n] - t
            if back > longest:
                longest = back
            pairf[_P_LEFT_RECENCY, i, n] = _recency(t, mem_pair[LEFT_T, i, n], window)
            pairf[_P_FAIL_RECENCY, i, n] = _recency(t, mem_pair[FAIL_T, i, n], window)
            pairf[_P_BACKOFF, i, n] = _unit(back / cap)
            if n == node:
                cpu_after, mem_after = ncpu[n], nmem[n]
            else:
                cpu_after, mem_after = ncpu[n] + cpu, nmem[n] + memhost
            pairf[_P_CPU_AFTER, i, n] = _unit(cpu_after / node_cap[0, n] / L.AFTER_SCALE)
            pairf[_P_MEM_AFTER, i, n] = _unit(mem_after / node_cap[1, n] / L.AFTER_SCALE)
        guestf[_G_BACKOFF, i] = _unit(longest / cap)
    for n in range(n_n):
        nodef[_N_HACPU, n] = _unit(ha_cpu[n] / node_cap[0, n])
        nodef[_N_HAMEM, n] = _unit(ha_mem[n] / node_cap[1, n])

    # ------------------------------------------------------------------ globals
    glob[_GL_TIME] = _unit(time_frac)
    glob[_GL_ACTIVE] = 1.0 if motion_active else 0.0
    glob[_GL_NODES] = n_n * inv_mn
    glob[_GL_GUESTS] = g_n * inv_mg
    imb = 0.0
    if online >= 2 and load_sum > 0.0:
        mean = load_sum / online
        var = 0.0
        for n in range(n_n):
            if node_online[n]:
                d = (_unit(ncpu[n] / node_cap[0, n]) + _unit(nmem[n] / node_cap[1, n])) / 2.0 - mean
                var += d * d
        imb = math.sqrt(var / online) / mean / math.sqrt(online - 1.0)
    glob[_GL_IMB] = _unit(imb)
    glob[_GL_OK] = 1.0 if result_ok else 0.0
    glob[_GL_FAILED] = 1.0 if result_failed else 0.0
    glob[_GL_PMAX] = _unit(pmax * 0.01)
    for k in range(disabled.size):
        glob[_GL_MISSING + k] = 1.0 if disabled[k] else 0.0


@njit(cache=True)
def fill_mask_v1(
    grid: np.ndarray,  # (max_guests, max_nodes) bool, C order: rows < guests, columns < nodes written
    allowed: np.ndarray,  # (guests, nodes) bool: online, node affinity, migratability (static)
    ha_idx: np.ndarray,
    svc_place: np.ndarray,  # (2, guests) node, target (−1: none)
    svc_started: np.ndarray,
    neg_ptr: np.ndarray,
    neg_idx: np.ndarray,
    node_mem: np.ndarray,  # (n,) bytes in use (telemetry; NaN: unknown)
    node_maxmem: np.ndarray,  # (n,) bytes
    memhost: np.ndarray,  # (G,) guest host footprint, bytes (telemetry; NaN: unknown)
    headroom: float,  # fraction of a target's memory that must stay free; < 0: no check
) -> bool:
    """:func:`pvegym.env.encoding.fill_mask`, then (``headroom ≥ 0``) without targets whose
    memory in use plus the guest's footprint exceeds ``(1 − headroom)`` of their memory — the
    LRM's precheck refuses a target without room (``headroom`` 0), and a margin keeps the target
    out of reclaim. Unknown telemetry (NaN) fails open. Returns whether any motion is valid."""
    any_valid = fill_mask(grid, allowed, ha_idx, svc_place, svc_started, neg_ptr, neg_idx)
    if headroom < 0.0 or not any_valid:
        return any_valid
    g_n, n_n = allowed.shape
    any_valid = False
    for i in range(g_n):
        need = memhost[ha_idx[i]]
        row = grid[i]
        for n in range(n_n):
            if row[n] and node_mem[n] + need > (1.0 - headroom) * node_maxmem[n]:
                row[n] = False
            any_valid = any_valid or row[n]
    return any_valid


__all__ = ["encode_v1", "fill_mask_v1"]
