"""The Rust unit vectors of proxmox-resource-scheduling (crate ``tests/scheduler.rs``, ``tests/topsis.rs``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pvegym.sim import crs
from pvegym.sim.crs import (
    Migration,
    MigrationCandidate,
    NodeStats,
    ResourceStats,
    ScoredMigration,
    TopsisError,
    rank_alternatives,
)

GIB = 1 << 30
MIB = 1 << 20


def homogeneous() -> dict[str, NodeStats]:
    return {
        "node1": NodeStats(1.7, 16, 12334 * MIB, 64 * GIB),
        "node2": NodeStats(15.184, 16, 529 * MIB, 64 * GIB),
        "node3": NodeStats(5.2, 16, 9381 * MIB, 64 * GIB),
    }


def heterogeneous() -> dict[str, NodeStats]:
    return {
        "node1": NodeStats(1.7, 16, 12334 * MIB, 128 * GIB),
        "node2": NodeStats(15.184, 32, 529 * MIB, 96 * GIB),
        "node3": NodeStats(5.2, 24, 9381 * MIB, 64 * GIB),
    }


M1 = Migration("vm:101", "node1", "node2")
M2 = Migration("vm:101", "node1", "node3")


def simple_candidates() -> list[MigrationCandidate]:
    stats = ResourceStats(0.7, 4.0, 8 * GIB, 16 * GIB)
    return [MigrationCandidate(M1, stats), MigrationCandidate(M2, stats)]


@pytest.mark.parametrize(
    ("cluster", "normalized", "raw"),
    [
        (homogeneous, 0.3460548572604576, 0.4893954724628247),
        (heterogeneous, 0.23352917788066363, 0.33026013056867354),
    ],
)
def test_node_imbalance(cluster, normalized, raw):
    nodes = list(cluster().values())
    assert abs(crs.node_imbalance(nodes) - normalized) <= 1e-12
    assert abs(crs.node_imbalance(nodes, normalized=False) - raw) <= 1e-12
    assert abs(crs.node_imbalance(nodes, normalized=False) - raw) <= np.finfo(float).eps


def test_imbalance_degenerate():
    assert crs.node_imbalance([]) == 0.0
    node = NodeStats(1.7, 16, 224395264, 68719476736)
    assert crs.node_imbalance([node]) == 0.0
    assert crs.node_imbalance([node, NodeStats(1.7, 16, 224395264, 68719476736), node]) == 0.0
    assert crs.imbalance([0.0, 0.0, 0.0]) == 0.0
    # one loaded node of n: raw CV sqrt(n-1), normalized 1
    assert math.isclose(crs.imbalance([0.5, 0, 0, 0], normalized=False), math.sqrt(3))
    assert math.isclose(crs.imbalance([0.5, 0, 0, 0]), 1.0)


def test_imbalances_vectorised_matches_scalar():
    rng = np.random.default_rng(1)
    loads = rng.random((50, 17))
    vec = crs.imbalances(loads)
    for row, v in zip(loads, vec, strict=True):
        assert crs.imbalance(row) == v


@pytest.mark.parametrize("cluster", [homogeneous, heterogeneous])
def test_bruteforce_ranking(cluster):
    ranked = crs.score_best_balancing_migrations(cluster(), simple_candidates(), limit=2)
    assert [s.migration for s in ranked] == [M2, M1]
    assert crs.score_best_balancing_migrations(cluster(), [], limit=2) == []


def test_bruteforce_values():
    h = crs.score_best_balancing_migrations(homogeneous(), simple_candidates(), limit=2)
    assert [round(s.imbalance, 6) for s in h] == [0.422346, 0.511933]
    h = crs.score_best_balancing_migrations(heterogeneous(), simple_candidates(), limit=2)
    assert [round(s.imbalance, 6) for s in h] == [0.371254, 0.409710]


@pytest.mark.parametrize("cluster", [homogeneous, heterogeneous])
def test_topsis_ranking(cluster):
    ranked = crs.score_best_balancing_migrations_topsis(cluster(), simple_candidates(), limit=2)
    assert [s.migration for s in ranked] == [M1, M2]
    assert crs.score_best_balancing_migrations_topsis(cluster(), [], limit=2) == []


def test_scored_migration_order():
    m1 = ScoredMigration.new(Migration("vm:102", "node1", "node2"), 0.7231749488916931)
    m2 = ScoredMigration.new(Migration("vm:102", "node1", "node3"), 0.723174948891693)
    m3 = ScoredMigration.new(Migration("vm:101", "node1", "node2"), 0.723174948891693 + 1e-15)
    ordered = sorted([m3, m2, m1], key=ScoredMigration.sort_key)
    assert ordered == [m1, m2, m3]
    assert m1.imbalance == m2.imbalance < m3.imbalance


START = [
    (ResourceStats(0, 1.0, 0, 12 * GIB), ["node2", "node3", "node1"], ["node2", "node1", "node3"]),
    (ResourceStats(0, 12.0, 0, 0), ["node1", "node3", "node2"], ["node3", "node2", "node1"]),
    (ResourceStats(0, 0.0, 0, 0), ["node1", "node3", "node2"], ["node1", "node3", "node2"]),
    (ResourceStats(0, 12.0, 0, 12 * GIB), ["node2", "node3", "node1"], ["node2", "node1", "node3"]),
]


@pytest.mark.parametrize(("resource", "homo", "hetero"), START)
def test_start_scoring(resource, homo, hetero):
    assert crs.rank_nodes_to_start_resource(homogeneous(), resource) == homo
    assert crs.rank_nodes_to_start_resource(heterogeneous(), resource) == hetero


SINGLE = [
    ([[0]], [0], [0]),
    ([[0], [2]], [1, 0], [0, 1]),
    ([[1], [2]], [1, 0], [0, 1]),
    ([[1], [2], [5], [3], [4]], [2, 4, 3, 1, 0], [0, 1, 3, 4, 2]),
    ([[-2], [-5], [-4], [1], [-3]], [3, 0, 4, 2, 1], [1, 2, 4, 0, 3]),
]


@pytest.mark.parametrize(("matrix", "maximize", "minimize"), SINGLE)
def test_topsis_single_criterion(matrix, maximize, minimize):
    assert rank_alternatives(matrix, [1.0]) == maximize
    assert rank_alternatives(matrix, [-1.0]) == minimize


TWO = [
    ([[0, 0]], [0], [0], [0], [0]),
    (
        [[0, 1], [1, 0], [1, -1], [1, 1], [0, 0]],
        [2, 1, 4, 3, 0],
        [0, 3, 4, 1, 2],
        [2, 4, 1, 0, 3],
        [3, 0, 1, 4, 2],
    ),
    (
        [[7, 4], [1, 0.5], [-1, -1], [-8.5, 11.5], [4, 7]],
        [0, 1, 4, 2, 3],
        [3, 2, 4, 1, 0],
        [2, 3, 1, 0, 4],
        [4, 0, 1, 3, 2],
    ),
]


@pytest.mark.parametrize(("matrix", "maxmin", "minmax", "minmin", "maxmax"), TWO)
def test_topsis_two_criteria(matrix, maxmin, minmax, minmin, maxmax):
    assert rank_alternatives(matrix, [1, -1]) == maxmin
    assert rank_alternatives(matrix, [-1, 1]) == minmax
    assert rank_alternatives(matrix, [-1, -1]) == minmin
    assert rank_alternatives(matrix, [1, 1]) == maxmax


FIRST, SECOND, THIRD, MIN = [10, 0.2, 0.1], [0.2, 10, 0.1], [0.2, 0.1, 10], [-10, -5, 0.1]
THREE = [
    ([[1, 0, 0], [0, 1, 0], [0, 0, 1]], [0, 1, 2], [1, 0, 2], [2, 0, 1], [2, 1, 0]),
    ([[1, 0, 0], [0, 1, 0], [0, 0, 1000]], [0, 1, 2], [1, 0, 2], [2, 0, 1], [2, 1, 0]),
    ([[-1, 0, 0], [0, -1, 0], [0, 0, 1]], [2, 1, 0], [2, 0, 1], [2, 1, 0], [0, 1, 2]),
]


@pytest.mark.parametrize(("matrix", "first", "second", "third", "minimum"), THREE)
def test_topsis_three_criteria(matrix, first, second, third, minimum):
    assert rank_alternatives(matrix, FIRST) == first
    assert rank_alternatives(matrix, SECOND) == second
    assert rank_alternatives(matrix, THIRD) == third
    assert rank_alternatives(matrix, MIN) == minimum


def test_topsis_special_cases():
    assert rank_alternatives([[0, 0, 0], [0, 1, 0], [0, 0, 1]], FIRST) == [1, 2, 0]
    with pytest.raises(TopsisError):
        rank_alternatives([[0.0, float("nan")], [1.0, 2.0]], [1, 1])
    with pytest.raises(TopsisError):
        rank_alternatives([[1.0, 2.0]], [0.0, 0.0])


def test_node_stats_helpers():
    node = NodeStats(cpu=2.0, maxcpu=8, mem=1 * GIB, maxmem=4 * GIB)
    node.add_started_resource(ResourceStats(0.5, 0.0, 0, 1 * GIB))  # maxcpu 0 -> node maxcpu
    assert node.cpu == 10.0 and node.mem == 2 * GIB
    node.remove_running_resource(ResourceStats(20.0, 4, 3 * GIB, 0))
    assert node.cpu == 0.0 and node.mem == 0.0
    node.add_running_resource(ResourceStats(4.0, 4, 2 * GIB, 0))
    assert node.load() == (4.0 / 8 + 0.5) / 2


@given(
    st.lists(
        st.floats(min_value=0.0, max_value=1e3) | st.just(math.nan),
        min_size=0,
        max_size=70,
    ),
    st.booleans(),
)
def test_scalar_imbalance_is_bit_identical_to_the_vectorised_one(
    loads: list[float], normalized: bool
) -> None:
    """``imbalance`` (one vector, Python floats) and ``imbalances`` (candidate rows, NumPy) must
    give the same bits: the balancer compares the current imbalance with the candidates'."""
    one = crs.imbalance(loads, normalized)
    rows = crs.imbalances(np.asarray(loads, dtype=np.float64).reshape(1, -1), normalized)[0]
    assert one == rows or (math.isnan(one) and math.isnan(rows))
