"""Compiled observation encoding and action masking for :class:`~pvegym.env.cluster_env.ClusterEnv`.

Why compiled: the observation touches ~16 features of every guest and the mask every guest × node
pair each step; as NumPy calls that is dozens of small-array operations (~1 µs each), most of an
environment step. Both kernels read the same telemetry a :class:`~pvegym.sim.view.ClusterView`
carries — the pvestatd point samples of :class:`~pvegym.sim.cluster.ClusterState`, the HA
manager's service table of :class:`~pvegym.sim.simulation.Simulation` — and nothing else; a field
whose telemetry is switched off reads 0 with its ``missing_<field>`` flag set. ``tests/env``
checks that the encoding equals one computed from the ``ClusterView``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pvegym.sim.layout import (
    AVG10,
    G_AVG,
    G_CPU_FULL,
    G_CPU_SOME,
    G_MEM_FULL,
    G_MEM_RATIO,
    G_MEM_SOME,
    G_MEMHOST,
    G_RECEIVED,
    G_RUN_FRACTION,
    G_SERIES,
    N_AVG,
    N_CPU,
    N_CPU_SOME,
    N_MEM,
    N_MEM_FULL,
    N_MEM_SOME,
    N_SERIES,
    SVC_NODE,
    SVC_TARGET,
)
from pvegym.sim.scenario import TELEMETRY_FIELDS

# indices of TELEMETRY_FIELDS in the ``disabled`` flag array
_NODE_CPU = TELEMETRY_FIELDS.index("node_cpu")
_NODE_MEM = TELEMETRY_FIELDS.index("node_mem")
_NODE_CPU_SOME = TELEMETRY_FIELDS.index("node_cpu_some")
_NODE_MEM_SOME = TELEMETRY_FIELDS.index("node_mem_some")
_NODE_MEM_FULL = TELEMETRY_FIELDS.index("node_mem_full")
_GUEST_CPU = TELEMETRY_FIELDS.index("guest_cpu")
_GUEST_MEM = TELEMETRY_FIELDS.index("guest_mem")
_GUEST_MEMHOST = TELEMETRY_FIELDS.index("guest_memhost")
_GUEST_CPU_SOME = TELEMETRY_FIELDS.index("guest_cpu_some")
_GUEST_CPU_FULL = TELEMETRY_FIELDS.index("guest_cpu_full")
_GUEST_MEM_SOME = TELEMETRY_FIELDS.index("guest_mem_some")
_GUEST_MEM_FULL = TELEMETRY_FIELDS.index("guest_mem_full")
# the avg10 rows of the PSI averages
_N_AVG10 = N_AVG + AVG10 * N_SERIES
_G_AVG10 = G_AVG + AVG10 * G_SERIES


@njit(cache=True, inline="always")
def _unit(x: float) -> float:
    """Clip to [0, 1]; NaN → 0."""
    if not x > 0.0:
        return 0.0
    return 1.0 if x > 1.0 else x


@njit(cache=True)
def encode(
    obs: np.ndarray,  # float32: globals | node features × max_nodes | guest features × max_guests
    n_global: int,
    n_node_features: int,
    disabled: np.ndarray,  # (12,) bool, TELEMETRY_FIELDS order
    node_online: np.ndarray,
    node_rows: np.ndarray,  # ClusterState.node_rows: cores busy, bytes in use, PSI avg10 (%)
    inv_node: np.ndarray,  # (2, n) 1 / maxcpu, 1 / maxmem
    ha_idx: np.ndarray,  # view index -> cluster guest index
    svc_place: np.ndarray,  # (2, guests) Simulation.svc_place: node, target (-1: none)
    svc_started: np.ndarray,
    running: np.ndarray,
    guest_rows: np.ndarray,  # ClusterState.guest_rows: mem_ratio, run_fraction, received,
    # memhost, PSI avg10 (%) cpu some, cpu full, mem some, mem full
    inv_guest: np.ndarray,  # (2, HA guests) 1 / maxcpu, 1 / maxmem
    max_nodes: int,
    max_guests: int,
    time_frac: float,
    motion_active: bool,
    result_ok: bool,
    result_failed: bool,
) -> None:
    """Write the dynamic features (layout: ``cluster_env.GLOBAL/NODE/GUEST_FEATURES``).

    The per-round scalars come last: the caller binds every argument before them once per
    episode (the arrays are updated in place)."""
    node_end = n_global + n_node_features * max_nodes
    glob = obs[:n_global]
    nodef = obs[n_global:node_end].reshape((n_node_features, max_nodes))
    guestf = obs[node_end:].reshape((-1, max_guests))
    svc_node, svc_target = svc_place[SVC_NODE], svc_place[SVC_TARGET]
    node_cpu, node_mem = node_rows[N_CPU], node_rows[N_MEM]
    node_avg10 = node_rows[_N_AVG10 : _N_AVG10 + N_SERIES]  # (cpu some, mem some, mem full)
    guest_avg10 = guest_rows[_G_AVG10 : _G_AVG10 + G_SERIES]  # (cpu/mem some/full)
    inv_node_cpu, inv_node_mem = inv_node[0], inv_node[1]
    mem_ratio, run_fraction = guest_rows[G_MEM_RATIO], guest_rows[G_RUN_FRACTION]
    received, memhost = guest_rows[G_RECEIVED], guest_rows[G_MEMHOST]
    inv_guest_cpu, inv_guest_mem = inv_guest[0], inv_guest[1]
    n_n = node_cpu.size
    g_n = ha_idx.size
    # the switches, read once (the compiler cannot hoist loads that may alias the outputs)
    off_ncpu, off_nmem = disabled[_NODE_CPU], disabled[_NODE_MEM]
    off_ncs, off_nms, off_nmf = (
        disabled[_NODE_CPU_SOME],
        disabled[_NODE_MEM_SOME],
        disabled[_NODE_MEM_FULL],
    )
    off_gcpu, off_gmem, off_gmh = (
        disabled[_GUEST_CPU],
        disabled[_GUEST_MEM],
        disabled[_GUEST_MEMHOST],
    )
    off_gcs, off_gcf = disabled[_GUEST_CPU_SOME], disabled[_GUEST_CPU_FULL]
    off_gms, off_gmf = disabled[_GUEST_MEM_SOME], disabled[_GUEST_MEM_FULL]
    inv_mn = 1.0 / max_nodes
    # nodes: online, cpu, mem, cpu_some, mem_some, mem_full, guests (rows 1, 4..9)
    load_sum = 0.0
    online = 0
    for n in range(n_n):
        nodef[1, n] = 1.0 if node_online[n] else 0.0
        cpu = 0.0 if off_ncpu else _unit(node_cpu[n] * inv_node_cpu[n])
        mem = 0.0 if off_nmem else _unit(node_mem[n] * inv_node_mem[n])
        nodef[4, n] = cpu
        nodef[5, n] = mem
        nodef[6, n] = 0.0 if off_ncs else _unit(node_avg10[N_CPU_SOME, n] * 0.01)
        nodef[7, n] = 0.0 if off_nms else _unit(node_avg10[N_MEM_SOME, n] * 0.01)
        nodef[8, n] = 0.0 if off_nmf else _unit(node_avg10[N_MEM_FULL, n] * 0.01)
        nodef[9, n] = 0.0
        if node_online[n]:
            load_sum += (cpu + mem) / 2.0
            online += 1
    inv_mg = 1.0 / max_guests
    for i in range(g_n):
        c = ha_idx[i]
        node = svc_node[c]
        nodef[9, node] += inv_mg
        guestf[1, i] = (node + 1) * inv_mn
        tgt = svc_target[c]
        guestf[2, i] = (tgt + 1) * inv_mn if tgt >= 0 else 0.0
        guestf[3, i] = 1.0 if svc_started[c] else 0.0
        guestf[4, i] = 1.0 if tgt >= 0 else 0.0
        guestf[5, i] = 1.0 if running[c] and run_fraction[c] > 0.0 else 0.0
        guestf[8, i] = 0.0 if off_gcpu else _unit(received[c] * inv_guest_cpu[i])
        mh = memhost[c] * inv_guest_mem[i]
        guestf[9, i] = 0.0 if off_gmem else _unit(mh * mem_ratio[c])
        guestf[10, i] = 0.0 if off_gmh else _unit(mh)
        guestf[11, i] = 0.0 if off_gcs else _unit(guest_avg10[G_CPU_SOME, c] * 0.01)
        guestf[12, i] = 0.0 if off_gcf else _unit(guest_avg10[G_CPU_FULL, c] * 0.01)
        guestf[13, i] = 0.0 if off_gms else _unit(guest_avg10[G_MEM_SOME, c] * 0.01)
        guestf[14, i] = 0.0 if off_gmf else _unit(guest_avg10[G_MEM_FULL, c] * 0.01)
    # globals: time_frac, motion_active, (nodes_frac, guests_frac static), imbalance, results,
    # missing flags
    glob[0] = _unit(time_frac)
    glob[1] = 1.0 if motion_active else 0.0
    imb = 0.0
    if online >= 2 and load_sum > 0.0:
        mean = load_sum / online
        var = 0.0
        for n in range(n_n):
            if node_online[n]:
                d = (nodef[4, n] + nodef[5, n]) / 2.0 - mean
                var += d * d
        imb = math.sqrt(var / online) / mean / math.sqrt(online - 1.0)
    glob[4] = _unit(imb)
    glob[5] = 1.0 if result_ok else 0.0
    glob[6] = 1.0 if result_failed else 0.0
    for k in range(disabled.size):
        glob[7 + k] = 1.0 if disabled[k] else 0.0


@njit(cache=True)
def fill_mask(
    grid: np.ndarray,  # (max_guests, max_nodes) bool, C order; rows < guests, columns < nodes written
    allowed: np.ndarray,  # (guests, nodes) bool: online and permitted by node affinity (static)
    ha_idx: np.ndarray,
    svc_place: np.ndarray,  # (2, guests) Simulation.svc_place: node, target (-1: none)
    svc_started: np.ndarray,
    neg_ptr: np.ndarray,
    neg_idx: np.ndarray,
) -> bool:
    """Valid guest × node motions with the pipeline idle (``Simulation.motion_possible``: online,
    not its node, allowed by node affinity, no negative-affinity partner there);
    returns whether any is valid. ``allowed`` holds what does not change within an episode, so a
    started guest's row is a copy of it with its node and its partners' nodes cleared."""
    g_n, n_n = allowed.shape
    svc_node, svc_target = svc_place[SVC_NODE], svc_place[SVC_TARGET]
    anyv = False
    for i in range(g_n):
        c = ha_idx[i]
        row = grid[i]
        if not svc_started[c]:
            row[:n_n] = False
            continue
        row[:n_n] = allowed[i]
        row[svc_node[c]] = False
        for k in range(neg_ptr[c], neg_ptr[c + 1]):
            p = neg_idx[k]
            row[svc_node[p]] = False
            if svc_target[p] >= 0:
                row[svc_target[p]] = False
        if not anyv:
            for n in range(n_n):
                if row[n]:
                    anyv = True
                    break
    return anyv
