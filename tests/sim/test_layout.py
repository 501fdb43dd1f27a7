"""The kernel matrices' row layout: named rows are the attributes, and the compiled round kernel
agrees with its Python source (a compiled kernel cached before a layout change would not)."""

from __future__ import annotations

import numpy as np

from pvegym.sim import catalog
from pvegym.sim import layout as L
from pvegym.sim.cluster import ClusterState
from pvegym.sim.kernel import cluster_round


def _cluster() -> ClusterState:
    return ClusterState(catalog.scenario("contended-3node"), np.random.default_rng(3))


def test_rows_are_the_named_attributes() -> None:
    cl = _cluster()
    assert cl.node_rows.shape[0] == L.NODE_MATRIX_ROWS
    assert cl.guest_rows.shape[0] == L.GUEST_MATRIX_ROWS
    # the state first, then pvestatd's samples in the same layout (pvegym.sim.telemetry)
    assert L.N_TEL == L.NODE_ROWS and L.G_TEL == L.GUEST_ROWS
    assert np.shares_memory(cl.node_cpu, cl.node_rows[L.N_CPU])
    assert np.shares_memory(cl.run_fraction, cl.guest_rows[L.G_RUN_FRACTION])
    cl.advance(10.0, 10.0)
    assert (cl.node_cpu == cl.node_rows[L.N_CPU]).all()
    np.testing.assert_array_equal(cl.node_avg10()[0], cl.node_rows[L.N_AVG + L.N_CPU_SOME])
    np.testing.assert_array_equal(cl.guest_avg10()[3], cl.guest_rows[L.G_AVG + L.G_MEM_FULL])
    assert cl.totals[L.T_ONLINE] == 3
    assert cl.totals[L.T_STALL_CPU] == cl.node_inst[L.N_CPU_SOME].sum()  # node1 is overloaded
    assert cl.totals[L.T_STALL_CPU] > 0


def test_compiled_round_kernel_matches_its_python_source() -> None:
    """Every output row after a few rounds, compiled vs ``cluster_round.py_func`` (same inputs)."""
    compiled, python = _cluster(), _cluster()
    python._round = cluster_round.py_func  # type: ignore[method-assign]
    for r in range(1, 7):
        compiled.advance(10.0 * r, 10.0)
        python.advance(10.0 * r, 10.0)
    np.testing.assert_allclose(compiled.node_rows, python.node_rows, rtol=1e-12, atol=0)
    np.testing.assert_allclose(compiled.guest_rows, python.guest_rows, rtol=1e-12, atol=0)
    np.testing.assert_allclose(compiled.totals, python.totals, rtol=1e-12, atol=0)
    assert compiled.totals[L.T_STALL_CPU] > 0  # the rounds exercised pressure
