"""A port of proxmox-resource-scheduling (the Rust crate behind Proxmox VE's CRS), numpy only.

Why a port: the upstream balancer's decisions (and pvegym's ``imbalance`` metric) are defined by this
crate's arithmetic, down to a 15-digit truncation that decides ties. Every formula below follows
the crate (``proxmox-resource-scheduling`` 2.1 in proxmox-rs:
``src/node.rs``, ``src/scheduler.rs``, ``src/topsis.rs``), and reproduces the crate's unit vectors
(its ``tests/``; ``tests/sim/test_crs.py``).

Exactness rules kept on purpose:

* sums over nodes and over TOPSIS alternatives are **sequential left folds**, like Rust's
  ``iter().sum()``/``fold`` (numpy's pairwise ``sum`` would differ in the last bit and could flip a
  tie after truncation). Vectorisation is over *candidates*; the fold runs over the ≤64 nodes.
* the bruteforce score is truncated to 15 decimal digits (``f64::DIGITS``) before sorting by
  ``(imbalance, sid, source, target)`` (``scheduler.rs`` ``ScoredMigration::new``, L119–140).
* TOPSIS sorts stably by descending score (Rust ``sort_by`` with ``total_cmp``).

Units: cpu in cores, memory in bytes; loads and imbalances are dimensionless.

This module is part of the model layer: it must not import policies or gymnasium.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: ``f64::DIGITS``: the bruteforce score keeps 15 decimal digits (``scheduler.rs`` L119–140).
TRUNCATION_FACTOR = 1e15

#: The four TOPSIS criteria of ``scheduler.rs`` (``PveTopsisAlternative``, L59–74): average CPU,
#: highest CPU, average memory, highest memory; negative weight = minimise.
PVE_TOPSIS_WEIGHTS: tuple[float, float, float, float] = (-1.0, -2.0, -5.0, -10.0)


class TopsisError(ValueError):
    """TOPSIS input the crate rejects: a non-finite matrix value or weights that sum to zero."""


# --------------------------------------------------------------------------------------------
# Node and resource stats (node.rs)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceStats:
    """A guest's usage: ``cpu`` cores in use, ``maxcpu`` vCPUs, ``mem``/``maxmem`` bytes."""

    cpu: float
    maxcpu: float
    mem: float
    maxmem: float


@dataclass(slots=True)
class NodeStats:
    """A node's usage (``node.rs`` ``NodeStats``): cores and bytes used out of ``maxcpu``/``maxmem``."""

    cpu: float
    maxcpu: float
    mem: float
    maxmem: float

    def add_started_resource(self, r: ResourceStats) -> None:
        """Count ``r`` at its configured size (``node.rs`` L20–30); ``maxcpu == 0`` means "no
        limit" and is charged as the whole node."""
        self.cpu += self.maxcpu if r.maxcpu == 0 else r.maxcpu
        self.mem += r.maxmem

    def add_running_resource(self, r: ResourceStats) -> None:
        """Count ``r`` at its current usage (``node.rs`` L33–36)."""
        self.cpu += r.cpu
        self.mem += r.mem

    def remove_running_resource(self, r: ResourceStats) -> None:
        """Remove ``r``'s current usage, saturating at 0 (``node.rs`` L39–42)."""
        self.cpu = max(0.0, self.cpu - r.cpu)
        self.mem = max(0.0, self.mem - r.mem)

    def cpu_load(self) -> float:
        return self.cpu / self.maxcpu

    def mem_load(self) -> float:
        return self.mem / self.maxmem

    def load(self) -> float:
        """``(cpu/maxcpu + mem/maxmem) / 2`` (``node.rs`` L45–57)."""
        return (self.cpu_load() + self.mem_load()) / 2.0


@dataclass(frozen=True, slots=True, order=True)
class Migration:
    """One move; ordered like the Rust ``derive(Ord)``: sid, then source node, then target node."""

    sid: str
    source_node: str
    target_node: str


@dataclass(frozen=True, slots=True)
class MigrationCandidate:
    migration: Migration
    stats: ResourceStats


@dataclass(frozen=True, slots=True)
class ScoredMigration:
    """A candidate and the imbalance after it (truncated to 15 digits, ``scheduler.rs`` L119–140)."""

    migration: Migration
    imbalance: float

    @staticmethod
    def new(migration: Migration, imbalance: float) -> ScoredMigration:
        return ScoredMigration(migration, truncate_imbalance(imbalance))

    def sort_key(self) -> tuple[float, str, str, str]:
        m = self.migration
        return (self.imbalance, m.sid, m.source_node, m.target_node)


def truncate_imbalance(x: float) -> float:
    """``trunc(x·1e15)/1e15``: drop float noise so near-equal moves tie and fall to the name order."""
    return math.trunc(x * TRUNCATION_FACTOR) / TRUNCATION_FACTOR


def truncate_imbalances(x: FloatArray) -> FloatArray:
    """Vector form of :func:`truncate_imbalance`."""
    return np.trunc(x * TRUNCATION_FACTOR) / TRUNCATION_FACTOR


# --------------------------------------------------------------------------------------------
# Loads and imbalance (scheduler.rs L29–57)
# --------------------------------------------------------------------------------------------


def node_loads(cpu: ArrayLike, mem: ArrayLike, maxcpu: ArrayLike, maxmem: ArrayLike) -> FloatArray:
    """Per-node load ``(cpu/maxcpu + mem/maxmem)/2``; broadcasts (e.g. candidates × nodes)."""
    c = np.asarray(cpu, dtype=np.float64)
    m = np.asarray(mem, dtype=np.float64)
    return (
        c / np.asarray(maxcpu, dtype=np.float64) + m / np.asarray(maxmem, dtype=np.float64)
    ) / 2.0


def imbalances(loads: ArrayLike, normalized: bool = True) -> FloatArray:
    """Row-wise imbalance of a ``(k, n)`` load matrix: population CV, optionally ``/ sqrt(n-1)``.

    The crate's ``calculate_node_imbalance``: 0 when ``n < 2`` or the load sum is 0; mean and squared
    deviations are sequential left folds over the nodes (bit-identical to Rust). ``normalized`` is
    crate 2.1.0 (range [0, 1]); ``False`` is the raw CV of crate 2.0 that ha-manager 5.2.0's
    ``log.expect`` files show (the newer crate divides it by √(n−1)).
    """
    arr = np.asarray(loads, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    k, n = arr.shape
    out = np.zeros(k, dtype=np.float64)
    if n < 2:
        return out
    total = np.zeros(k, dtype=np.float64)
    for j in range(n):
        total = total + arr[:, j]
    mean = total / n
    sq = np.zeros(k, dtype=np.float64)
    for j in range(n):
        d = arr[:, j] - mean
        sq = sq + d * d
    nz = total != 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.sqrt(sq / n) / mean
    if normalized:
        cv = cv / math.sqrt(n - 1)
    out[nz] = cv[nz]
    return out


def imbalance(loads: ArrayLike, normalized: bool = True) -> float:
    """Imbalance of one vector of node loads (see :func:`imbalances`): the same folds on Python
    floats (IEEE doubles, the same operations in the same order, so the same bits), without a
    NumPy call per node — the balancer evaluates it every round."""
    vals = np.asarray(loads, dtype=np.float64).reshape(-1).tolist()
    n = len(vals)
    if n < 2:
        return 0.0
    total = 0.0
    for v in vals:
        total += v
    mean = total / n
    sq = 0.0
    for v in vals:
        d = v - mean
        sq += d * d
    if total == 0.0:
        return 0.0
    cv = math.sqrt(sq / n) / mean
    return cv / math.sqrt(n - 1) if normalized else cv


def node_imbalance(nodes: Sequence[NodeStats], normalized: bool = True) -> float:
    """Imbalance of a list of :class:`NodeStats` (``Scheduler::node_imbalance``)."""
    if not nodes:
        return 0.0
    return imbalance([n.load() for n in nodes], normalized)


# --------------------------------------------------------------------------------------------
# Applying candidate moves, vectorised over candidates
# --------------------------------------------------------------------------------------------


def moved_stats(
    cpu: ArrayLike,
    mem: ArrayLike,
    source: ArrayLike,
    target: ArrayLike,
    move_cpu: ArrayLike,
    move_mem: ArrayLike,
) -> tuple[FloatArray, FloatArray]:
    """Node cpu/mem after each candidate move, shape ``(k, n)``.

    Row ``i`` is the nodes with ``remove_running_resource`` on ``source[i]`` (saturating at 0) and
    ``add_running_resource`` on ``target[i]`` (``scheduler.rs`` L217–270, ``node.rs`` L33–42).
    """
    c = np.asarray(cpu, dtype=np.float64)
    m = np.asarray(mem, dtype=np.float64)
    src = np.asarray(source, dtype=np.int64)
    tgt = np.asarray(target, dtype=np.int64)
    dc = np.asarray(move_cpu, dtype=np.float64)
    dm = np.asarray(move_mem, dtype=np.float64)
    k = src.shape[0]
    rows = np.arange(k)
    c2 = np.broadcast_to(c, (k, c.shape[0])).copy()
    m2 = np.broadcast_to(m, (k, m.shape[0])).copy()
    c2[rows, src] = np.maximum(0.0, c[src] - dc)
    m2[rows, src] = np.maximum(0.0, m[src] - dm)
    c2[rows, tgt] = c2[rows, tgt] + dc
    m2[rows, tgt] = m2[rows, tgt] + dm
    return c2, m2


def bruteforce_imbalances(
    cpu: ArrayLike,
    mem: ArrayLike,
    maxcpu: ArrayLike,
    maxmem: ArrayLike,
    source: ArrayLike,
    target: ArrayLike,
    move_cpu: ArrayLike,
    move_mem: ArrayLike,
    normalized: bool = True,
) -> FloatArray:
    """Truncated imbalance after each candidate move (the bruteforce score, lower is better)."""
    c2, m2 = moved_stats(cpu, mem, source, target, move_cpu, move_mem)
    return truncate_imbalances(imbalances(node_loads(c2, m2, maxcpu, maxmem), normalized))


def topsis_criteria(
    cpu: FloatArray, mem: FloatArray, maxcpu: ArrayLike, maxmem: ArrayLike
) -> FloatArray:
    """The ``(k, 4)`` TOPSIS matrix for ``k`` alternatives given as ``(k, n)`` node cpu/mem.

    Columns (``scheduler.rs`` L59–74, L283–323): ``1 + RMS(cpu_load)``, ``1 + max(0, max cpu_load)``,
    ``1 + RMS(mem_load)``, ``1 + max(0, max mem_load)``; the "+1" keeps tiny differences from
    dominating. Folds over nodes are sequential, as in Rust.
    """
    cl = np.asarray(cpu, dtype=np.float64) / np.asarray(maxcpu, dtype=np.float64)
    ml = np.asarray(mem, dtype=np.float64) / np.asarray(maxmem, dtype=np.float64)
    k, n = cl.shape
    hc = np.zeros(k)
    hm = np.zeros(k)
    sc = np.zeros(k)
    sm = np.zeros(k)
    for j in range(n):
        a = cl[:, j]
        b = ml[:, j]
        hc = np.fmax(hc, a)
        hm = np.fmax(hm, b)
        sc = sc + a * a
        sm = sm + b * b
    out = np.empty((k, 4), dtype=np.float64)
    nn = float(n) if n else 1.0
    out[:, 0] = 1.0 + np.sqrt(sc / nn)
    out[:, 1] = 1.0 + hc
    out[:, 2] = 1.0 + np.sqrt(sm / nn)
    out[:, 3] = 1.0 + hm
    return out


# --------------------------------------------------------------------------------------------
# TOPSIS (topsis.rs)
# --------------------------------------------------------------------------------------------


def _seq_l2_rows(x: FloatArray) -> FloatArray:
    """Row-wise L2 norm with a sequential fold over columns (``topsis.rs`` ``l2_norm``)."""
    acc = np.zeros(x.shape[0])
    for j in range(x.shape[1]):
        acc = acc + x[:, j] * x[:, j]
    return np.sqrt(acc)


def score_alternatives(matrix: ArrayLike, weights: Sequence[float]) -> FloatArray:
    """TOPSIS closeness of each alternative (row) to the ideal; higher is better, in [0, 1].

    ``topsis.rs``: weights are made positive (a negative weight means "minimise") and divided by
    their sum (error if the sum is 0); every column is divided by its L2 norm over the alternatives
    (a zero column is left as is; any non-finite result is an error); ideal best/worst are the column
    max/min (swapped for minimised criteria); distances are ``‖w ⊙ (x − ideal)‖₂``; the score is
    ``d_worst / (d_best + d_worst)``, 0 when both are 0 (all alternatives equal).
    """
    w_raw = [float(w) for w in weights]
    maximize = np.array([w >= 0.0 for w in w_raw], dtype=bool)
    w = np.array([abs(v) for v in w_raw], dtype=np.float64)
    divisor = 0.0
    for v in w:
        divisor += float(v)
    if divisor == 0.0:
        raise TopsisError("no criterion has a non-zero weight")
    w = w / divisor
    if not np.all(np.isfinite(w)) or np.any(w > 1.0) or np.any(w < 0.0):
        raise TopsisError(f"invalid criterion weights {w_raw}")
    x = np.array(matrix, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(w_raw):
        raise TopsisError(f"matrix must have shape (k, {len(w_raw)}), got {x.shape}")
    k = x.shape[0]
    if k == 0:
        return np.zeros(0)
    for j in range(x.shape[1]):
        col = x[:, j]
        sq = np.cumsum(col * col)[-1]  # sequential fold over alternatives
        norm = math.sqrt(sq) if sq >= 0 else float("nan")
        if norm != 0.0:
            col = col / norm
            if not np.all(np.isfinite(col)):
                raise TopsisError(f"criterion {j} got an invalid (non-finite) value")
            x[:, j] = col
    colmax = x.max(axis=0)
    colmin = x.min(axis=0)
    best = np.where(maximize, colmax, colmin)
    worst = np.where(maximize, colmin, colmax)
    d_best = _seq_l2_rows((x - best) * w)
    d_worst = _seq_l2_rows((x - worst) * w)
    div = d_worst + d_best
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(div == 0.0, 0.0, d_worst / np.where(div == 0.0, 1.0, div))
    if not np.all(np.isfinite(scores)):
        raise TopsisError("invalid score")
    return scores


def rank_alternatives(matrix: ArrayLike, weights: Sequence[float]) -> list[int]:
    """Indices of the alternatives, best first (stable for equal scores, like Rust ``sort_by``)."""
    scores = score_alternatives(matrix, weights)
    return [int(i) for i in np.argsort(-scores, kind="stable")]


# --------------------------------------------------------------------------------------------
# Scheduler entry points (scheduler.rs)
# --------------------------------------------------------------------------------------------


def _node_arrays(
    nodes: Mapping[str, NodeStats],
) -> tuple[list[str], FloatArray, FloatArray, FloatArray, FloatArray]:
    names = list(nodes)
    cpu = np.array([nodes[n].cpu for n in names], dtype=np.float64)
    mem = np.array([nodes[n].mem for n in names], dtype=np.float64)
    maxcpu = np.array([nodes[n].maxcpu for n in names], dtype=np.float64)
    maxmem = np.array([nodes[n].maxmem for n in names], dtype=np.float64)
    return names, cpu, mem, maxcpu, maxmem


def _candidate_arrays(
    names: list[str], candidates: Sequence[MigrationCandidate]
) -> tuple[IntArray, IntArray, FloatArray, FloatArray]:
    index = {n: i for i, n in enumerate(names)}
    src = np.array([index[c.migration.source_node] for c in candidates], dtype=np.int64)
    tgt = np.array([index[c.migration.target_node] for c in candidates], dtype=np.int64)
    dc = np.array([c.stats.cpu for c in candidates], dtype=np.float64)
    dm = np.array([c.stats.mem for c in candidates], dtype=np.float64)
    return src, tgt, dc, dm


def score_best_balancing_migrations(
    nodes: Mapping[str, NodeStats],
    candidates: Sequence[MigrationCandidate],
    limit: int = 1,
    normalized: bool = True,
) -> list[ScoredMigration]:
    """The "bruteforce" method: the ``limit`` moves with the lowest imbalance after the move.

    ``scheduler.rs`` L217–270: score = truncated imbalance after the move; ascending order by
    ``(imbalance, sid, source, target)``.
    """
    if not candidates or limit <= 0:
        return []
    names, cpu, mem, maxcpu, maxmem = _node_arrays(nodes)
    src, tgt, dc, dm = _candidate_arrays(names, candidates)
    imb = bruteforce_imbalances(cpu, mem, maxcpu, maxmem, src, tgt, dc, dm, normalized)
    scored = [ScoredMigration(c.migration, float(v)) for c, v in zip(candidates, imb, strict=True)]
    scored.sort(key=ScoredMigration.sort_key)
    return scored[:limit]


def score_best_balancing_migrations_topsis(
    nodes: Mapping[str, NodeStats],
    candidates: Sequence[MigrationCandidate],
    limit: int = 1,
    normalized: bool = True,
) -> list[ScoredMigration]:
    """The "topsis" method: rank the moves by TOPSIS over the 4 criteria, keep the first ``limit``,
    each with its (truncated) imbalance after the move (``scheduler.rs`` L169–205, L283–323)."""
    if not candidates or limit <= 0:
        return []
    names, cpu, mem, maxcpu, maxmem = _node_arrays(nodes)
    src, tgt, dc, dm = _candidate_arrays(names, candidates)
    c2, m2 = moved_stats(cpu, mem, src, tgt, dc, dm)
    order = rank_alternatives(topsis_criteria(c2, m2, maxcpu, maxmem), PVE_TOPSIS_WEIGHTS)[:limit]
    imb = imbalances(node_loads(c2[order], m2[order], maxcpu, maxmem), normalized)
    return [
        ScoredMigration.new(candidates[i].migration, float(v))
        for i, v in zip(order, imb, strict=True)
    ]


def score_nodes_to_start_resource(
    nodes: Mapping[str, NodeStats], resource: ResourceStats
) -> list[tuple[str, float]]:
    """TOPSIS score (higher is better) of starting ``resource`` on each node, in node order.

    ``scheduler.rs`` L332+: alternative *k* = all nodes as they are, node *k* plus
    ``add_started_resource(resource)`` (so ``maxcpu == 0`` charges the whole node).
    """
    names, cpu, mem, maxcpu, maxmem = _node_arrays(nodes)
    n = len(names)
    if n == 0:
        return []
    add_cpu = np.where(resource.maxcpu == 0, maxcpu, resource.maxcpu)
    c2 = np.broadcast_to(cpu, (n, n)).copy()
    m2 = np.broadcast_to(mem, (n, n)).copy()
    diag = np.arange(n)
    c2[diag, diag] = cpu + add_cpu
    m2[diag, diag] = mem + resource.maxmem
    scores = score_alternatives(topsis_criteria(c2, m2, maxcpu, maxmem), PVE_TOPSIS_WEIGHTS)
    return [(names[i], float(scores[i])) for i in range(n)]


def rank_nodes_to_start_resource(
    nodes: Mapping[str, NodeStats], resource: ResourceStats
) -> list[str]:
    """Node names best first (stable descending score), as the crate's tests rank them."""
    scored = score_nodes_to_start_resource(nodes, resource)
    order = sorted(range(len(scored)), key=lambda i: -scored[i][1])
    return [scored[i][0] for i in order]
