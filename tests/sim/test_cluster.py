"""Cluster physics: conservation of CPU, memory pressure under overcommit, pressure reaching PSI."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvegym.sim.cluster import ClusterState
from pvegym.sim.psi import EXP_10S, guest_pressure
from pvegym.sim.scenario import scenario_from_dict
from pvegym.units import GiB


def _cluster(
    guest_cpu: list[float], cores: int = 8, mem: list[float] | None = None, node_gib: float = 64
) -> ClusterState:
    mem = mem or [1.0] * len(guest_cpu)
    data = {
        "name": "t",
        "nodes": [
            {"name": "n1", "maxcpu": cores, "maxmem": node_gib * GiB},
            {"name": "n2", "maxcpu": cores, "maxmem": node_gib * GiB},
        ],
        "guests": [
            {
                "sid": f"vm:{100 + i}",
                "node": "n1" if i % 2 == 0 else "n2",
                "maxcpu": 16,
                "maxmem": 64 * GiB,
                "cpu": c,
                "memhost": m * GiB,
            }
            for i, (c, m) in enumerate(zip(guest_cpu, mem, strict=True))
        ],
    }
    cl = ClusterState(scenario_from_dict(data), np.random.default_rng(0))
    cl.reset()
    return cl


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 12.0), min_size=1, max_size=12), st.integers(1, 32))
def test_cpu_received_never_exceeds_demand_or_cores(demands: list[float], cores: int) -> None:
    cl = _cluster(demands, cores)
    cl.advance(10.0, 10.0)
    assert (cl.received <= cl.demand + 1e-9).all()
    per_node = np.bincount(cl.node, weights=cl.received, minlength=2)
    assert (per_node <= cl.node_maxcpu + 1e-9).all()
    assert (cl.node_cpu <= cl.node_maxcpu + 1e-9).all()
    # nothing is lost when there is room: received == demand on an uncontended node
    for n in range(2):
        on = cl.node == n
        if cl.demand[on].sum() <= cores:
            np.testing.assert_allclose(cl.received[on], cl.demand[on])


def test_overloaded_node_shares_cores_and_shows_pressure() -> None:
    cl = _cluster([6.0, 1.0, 6.0], cores=8)  # n1: 12 cores wanted on 8, n2: 1
    for k in range(1, 4):
        cl.advance(10.0 * k, 10.0)
    assert cl.received[cl.node == 0].sum() == pytest.approx(8.0)
    assert cl.node_cpu_some[0] > 0.5 and cl.node_cpu_some[1] < 0.05
    cpu_some, _, _ = cl.node_avg10()
    # three 10 s rounds (15 kernel periods of 2 s) of the same stall, from 0: the kernel's average
    assert cpu_some[0] == pytest.approx(100.0 * cl.node_cpu_some[0] * (1.0 - EXP_10S**15), rel=1e-9)
    _, g_full, _, _ = cl.guest_avg10()
    assert g_full[0] > 0.0 and g_full[1] == 0.0  # guests on the overloaded node wait entirely


def test_memory_overcommit_is_pressure_not_memory() -> None:
    cl = _cluster([0.1, 0.1, 0.1], mem=[40.0, 1.0, 40.0], node_gib=64)  # n1 holds 80 GiB on 64
    cl.advance(10.0, 10.0)
    assert cl.node_mem[0] <= cl.node_maxmem[0]
    assert cl.node_mem_some[0] > 0.0 and cl.node_mem_some[1] == 0.0
    assert cl.guest_mem_some[0] > 0.0 and cl.guest_mem_some[1] == 0.0


def test_guest_memory_beyond_its_maxmem_is_its_own_pressure() -> None:
    data = {
        "name": "t",
        "nodes": [{"name": "n1", "maxcpu": 8, "maxmem": 64 * GiB}],
        "guests": [
            {
                "sid": "vm:1",
                "node": "n1",
                "maxcpu": 2,
                "maxmem": 4 * GiB,
                "cpu": 0.5,
                "memhost": 5 * GiB,
            }
        ],
    }
    cl = ClusterState(scenario_from_dict(data), np.random.default_rng(0))
    cl.reset()
    cl.advance(10.0, 10.0)
    assert cl.memhost[0] == 4 * GiB  # never more than maxmem
    assert cl.guest_mem_some[0] > 0.0 and cl.node_mem_some[0] == 0.0


def test_throttled_guest_gets_less_cpu_but_adds_no_pressure() -> None:
    cl = _cluster([2.0, 0.5], cores=8)
    cl.run_fraction[0] = 0.3
    cl.advance(10.0, 10.0)
    assert cl.received[0] == pytest.approx(0.6)
    assert cl.node_cpu_some[0] < 0.05


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 12.0), min_size=1, max_size=12), st.integers(1, 32))
def test_round_kernel_cpu_pressure_is_the_psi_models(demands: list[float], cores: int) -> None:
    """The compiled round evaluates :class:`pvegym.sim.psi.CpuPressureModel` (whose targets
    ``test_psi`` checks) on each node's demand, not a formula of its own."""
    cl = _cluster(demands, cores)
    cl.advance(10.0, 10.0)
    np.testing.assert_allclose(
        cl.node_cpu_some, cl.cpu_pressure(cl.node_demand), rtol=1e-12, atol=1e-15
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 12.0, allow_subnormal=False), min_size=1, max_size=12),
    st.integers(1, 32),
    st.lists(st.floats(0.0, 1.0), min_size=12, max_size=12),
)
def test_round_kernel_guest_pressure_is_the_psi_models(
    demands: list[float], cores: int, fractions: list[float]
) -> None:
    """The compiled round evaluates :func:`pvegym.sim.psi.guest_pressure` (a guest's own PSI, as
    ``psi.c`` aggregates a cgroup's per-CPU states), throttled run fractions included."""
    cl = _cluster(demands, cores, mem=[20.0] * len(demands), node_gib=64)
    cl.run_fraction[:] = fractions[: len(demands)]
    rf = cl.run_fraction.copy()
    cl.advance(10.0, 10.0)
    n = cl.node
    busy = cl.node_cpu / cl.node_maxcpu
    share = np.divide(
        cl.received, cl.node_cpu[n], out=np.zeros(cl.n_guests), where=cl.node_cpu[n] > 0
    )
    expect = guest_pressure(
        cl.node_cpu_some[n],
        cl.node_mem_some[n],
        busy[n],
        cl.demand * rf,
        cl.guest_maxcpu,
        share,
    )
    for got, want in zip(cl.guest_inst, expect, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
