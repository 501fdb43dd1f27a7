"""The CRS modes' node scores for the engine's placements (``Usage/{Basic,Static,Dynamic}.pm``).

``select_service_node`` sorts the nodes it may choose by ``score_nodes_to_start_service`` (lower is
better). In the port (:mod:`pvegym.sim.ha.usage`, :mod:`pvegym.sim.ha.scheduler`,
:mod:`pvegym.sim.crs`):

* ``basic``: the number of services counted on the node (the engine's ``N_COUNT``);
* ``static``: the negated TOPSIS score of starting the service on each node, every placed service
  counted at its configured size (``maxcpu``, ``maxmem``) on top of a zero node
  (``StartedResourceAggregator``), the nodes' capacities their ``maxcpu``/``maxmem``;
* ``dynamic``: the same over the nodes' measured usage (``cpu`` cores, ``mem`` bytes, a per-round
  input) plus every placed service that is not running at its configured size
  (``StartingAsStartedResourceAggregator``).

Inputs (float64, per round): ``fsvc[s, FS_*]`` (a guest's cpu, maxcpu, mem, maxmem) and
``fnode[n, FN_*]`` (a node's cpu, maxcpu, mem, maxmem; static mode reads the capacities only).

Exactness: the arithmetic is :mod:`pvegym.sim.crs`'s, in its order — per node the services are
added in the order the port's usage holds them (the round's usage is built in sid order; a
service whose state changes is removed and added again at the end: the order of its last
``E_STATE_CHANGE`` event), folds over nodes and alternatives are sequential, no fastmath — so the
scores are the port's bit for bit. A service's ``running`` flag is the one it had when it was last
added (a success its LRM reports later does not re-add it, as in the port).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pvegym.sim.crs import PVE_TOPSIS_WEIGHTS
from pvegym.sim.engine import events as ev
from pvegym.sim.engine.codes import (
    CRS_BASIC,
    CRS_STATIC,
    F_RUNNING,
    F_STATE,
    F_USE_CUR,
    F_USE_TGT,
    FN_AGG_CPU,
    FN_AGG_MEM,
    FN_CPU,
    FN_MAXCPU,
    FN_MAXMEM,
    FN_MEM,
    FN_SCORE,
    FS_MAXCPU,
    FS_MAXMEM,
    K_N_EVENTS,
    N_COUNT,
    N_USAGE,
    NONE,
    RK_CRS_MODE,
    SS_ABSENT,
    SS_STARTED,
    US_LAST_ADD,
    US_RUNNING0,
)

#: ``PVE_TOPSIS_WEIGHTS`` of :mod:`pvegym.sim.crs` (``scheduler.rs``) made positive: all four are
#: minimised there (a negative weight), which the ideal below (the column minimum) assumes
_W = tuple(-w for w in PVE_TOPSIS_WEIGHTS)


@njit(cache=True)
def snapshot_usage(svc, clu, evbuf, rx):
    """Right after the round's usage is built: each service's ``running`` flag as it was added
    (``add_service_usage``: started and running, or another state with a current node); in the
    static and dynamic modes the scheduler refuses a service whose target is its current node
    (after ``arm-ha`` moved it onto its target), with upstream's warning."""
    usvc = rx[5]
    scheduler = rx[3][RK_CRS_MODE] != CRS_BASIC
    for s in range(svc.shape[0]):
        st = svc[s, F_STATE]
        if st == SS_STARTED:
            usvc[s, US_RUNNING0] = 1 if svc[s, F_RUNNING] else 0
        else:
            usvc[s, US_RUNNING0] = 1 if st != SS_ABSENT and svc[s, F_USE_CUR] >= 0 else 0
        if scheduler and st != SS_ABSENT and _same_nodes(svc, s):
            ev.emit(evbuf, clu, ev.E_USAGE_SAME_NODE, s, -1, -1, -1, -1, -1, -1)


@njit(cache=True)
def _same_nodes(svc, s):
    return svc[s, F_USE_CUR] >= 0 and svc[s, F_USE_CUR] == svc[s, F_USE_TGT]


@njit(cache=True)
def _add_resource(svc, fsvc, fnode, usvc, s, static, changed):
    """Add service ``s``'s usage to the aggregated node stats (``ClusterUsage.aggregate``)."""
    a, b = svc[s, F_USE_CUR], svc[s, F_USE_TGT]
    if _same_nodes(svc, s):  # refused by the scheduler (snapshot_usage)
        return
    if a < 0:  # the scheduler expects a current node: a lone target counts as current
        a, b = b, NONE
    if a < 0:
        return
    if changed:  # re-added after its last state change: running was cleared
        running = svc[s, F_STATE] != SS_STARTED and svc[s, F_USE_CUR] >= 0
    else:
        running = usvc[s, US_RUNNING0] != 0
    if not static and running:
        return
    for n in (a, b):
        if n < 0:
            continue
        mc = fsvc[s, FS_MAXCPU]
        fnode[n, FN_AGG_CPU] += fnode[n, FN_MAXCPU] if mc == 0.0 else mc
        fnode[n, FN_AGG_MEM] += fsvc[s, FS_MAXMEM]


@njit(cache=True)
def score_nodes(svc, nodes, clu, evbuf, rx, s):
    """``score_nodes_to_start_service`` for ``s``: ``fnode[n, FN_SCORE]`` of every node of the
    usage (lower is better)."""
    rk, usvc, fsvc, fnode = rx[3], rx[5], rx[6], rx[7]
    nn = nodes.shape[0]
    mode = rk[RK_CRS_MODE]
    if mode == CRS_BASIC:
        for n in range(nn):
            fnode[n, FN_SCORE] = float(nodes[n, N_COUNT])
        return
    static = mode == CRS_STATIC
    for n in range(nn):
        fnode[n, FN_AGG_CPU] = 0.0 if static else fnode[n, FN_CPU]
        fnode[n, FN_AGG_MEM] = 0.0 if static else fnode[n, FN_MEM]
    ns = svc.shape[0]
    for i in range(ns):
        usvc[i, US_LAST_ADD] = -1
    ne = clu[K_N_EVENTS]
    for i in range(ne):
        if evbuf[i, 0] == ev.E_STATE_CHANGE:
            usvc[evbuf[i, 1], US_LAST_ADD] = i
    for i in range(ns):  # the usage as built, in sid order
        if svc[i, F_STATE] != SS_ABSENT and usvc[i, US_LAST_ADD] < 0:
            _add_resource(svc, fsvc, fnode, usvc, i, static, False)
    for e in range(ne):  # then each re-added service, in the order of its last change
        if evbuf[e, 0] != ev.E_STATE_CHANGE:
            continue
        i = evbuf[e, 1]
        if usvc[i, US_LAST_ADD] == e and svc[i, F_STATE] != SS_ABSENT:
            _add_resource(svc, fsvc, fnode, usvc, i, static, True)
    # TOPSIS over the usage's nodes (alternative j: the service started on node j)
    k = 0
    for n in range(nn):
        if nodes[n, N_USAGE]:
            k += 1
    idx = np.empty(k, dtype=np.int64)
    j = 0
    for n in range(nn):
        if nodes[n, N_USAGE]:
            idx[j] = n
            j += 1
    x = np.empty((k, 4))
    nk = float(k) if k else 1.0
    mc = fsvc[s, FS_MAXCPU]
    mm = fsvc[s, FS_MAXMEM]
    for alt in range(k):
        hc = 0.0
        hm = 0.0
        sc = 0.0
        sm = 0.0
        for jj in range(k):
            n = idx[jj]
            c = fnode[n, FN_AGG_CPU]
            m = fnode[n, FN_AGG_MEM]
            if jj == alt:
                c = c + (fnode[n, FN_MAXCPU] if mc == 0.0 else mc)
                m = m + mm
            a = c / fnode[n, FN_MAXCPU]
            b = m / fnode[n, FN_MAXMEM]
            hc = max(hc, a)
            hm = max(hm, b)
            sc = sc + a * a
            sm = sm + b * b
        x[alt, 0] = 1.0 + math.sqrt(sc / nk)
        x[alt, 1] = 1.0 + hc
        x[alt, 2] = 1.0 + math.sqrt(sm / nk)
        x[alt, 3] = 1.0 + hm
    divisor = 0.0
    for v in _W:
        divisor += v
    w = np.empty(4)
    for c4 in range(4):
        w[c4] = _W[c4] / divisor
    best = np.empty(4)
    worst = np.empty(4)
    for c4 in range(4):
        sq = 0.0
        for alt in range(k):
            sq = sq + x[alt, c4] * x[alt, c4]
        norm = math.sqrt(sq)
        if norm != 0.0:
            for alt in range(k):
                x[alt, c4] = x[alt, c4] / norm
        lo = x[0, c4]
        hi = x[0, c4]
        for alt in range(1, k):
            lo = min(lo, x[alt, c4])
            hi = max(hi, x[alt, c4])
        best[c4] = lo  # minimised: the ideal is the column's minimum
        worst[c4] = hi
    for alt in range(k):
        db = 0.0
        dw = 0.0
        for c4 in range(4):
            vb = (x[alt, c4] - best[c4]) * w[c4]
            vw = (x[alt, c4] - worst[c4]) * w[c4]
            db = db + vb * vb
            dw = dw + vw * vw
        db = math.sqrt(db)
        dw = math.sqrt(dw)
        div = dw + db
        score = 0.0 if div == 0.0 else dw / div
        fnode[idx[alt], FN_SCORE] = -score
