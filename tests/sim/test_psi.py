"""PSI: the kernel's averages (docs/model.md, Targets) and the contention model's invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pvegym.sim.psi import (
    _RHO_GRID,
    PsiAverages,
    _mmc_table,
    cpu_some,
    decay_factors,
    guest_pressure,
    memory_some,
    mmc_some,
)


def _step_response(seconds: float) -> PsiAverages:
    psi = PsiAverages(1)
    psi.update(np.array([100.0]), periods=int(seconds / 2))
    return psi


@pytest.mark.parametrize(
    ("seconds", "window", "expected"),
    [
        (2, "avg10", 18.1),
        (10, "avg10", 63.2),
        (20, "avg10", 86.4),
        (30, "avg10", 95.0),
        (60, "avg60", 63.1),
        (300, "avg300", 64.3),
    ],
)
def test_step_response_matches_kernel_figures(seconds: float, window: str, expected: float) -> None:
    # docs/model.md, Targets: constant 100 % stall from idle, ±0.2 pp
    assert getattr(_step_response(seconds), window)[0] == pytest.approx(expected, abs=0.2)


def test_closed_form_equals_period_by_period_updates() -> None:
    a, b = PsiAverages(2), PsiAverages(2)
    pct = np.array([37.0, 80.0])
    a.update(pct, periods=5)
    for _ in range(5):
        b.update(pct, periods=1)
    np.testing.assert_allclose(a.avg10, b.avg10, rtol=1e-12)
    np.testing.assert_allclose(a.avg300, b.avg300, rtol=1e-12)


def test_decay_to_zero_after_stall_ends() -> None:
    psi = _step_response(30)
    psi.update(np.array([0.0]), periods=5)  # 10 s idle: avg10 falls by e^-1 (1677/2048)^5
    assert psi.avg10[0] == pytest.approx(95.0 * (1677 / 2048) ** 5, abs=0.2)


def test_kernel_hog_examples() -> None:
    # psi.c worked example: 257 CPU hogs on 256 CPUs -> some = 1/256 = 0.39 %
    some = cpu_some(np.array([257.0]), np.array([256.0]), blend=0.2, hog_share=1.0)
    assert 100 * some[0] == pytest.approx(100 / 256, abs=0.01)
    # N = 2P hogs -> 100 %
    some = cpu_some(np.array([16.0]), np.array([8.0]), blend=0.2, hog_share=1.0)
    assert some[0] == pytest.approx(1.0)
    # hogs that fit the CPUs never wait
    assert cpu_some(np.array([8.0]), np.array([8.0]), 0.2, 1.0)[0] == 0.0


@pytest.mark.parametrize(
    ("cores", "row"),
    [
        (8, [0.74, 7.4, 19.0, 45.0, 67.5]),
        (16, [0.06, 1.9, 7.4, 27.1, 51.9]),
        (32, [0.00, 0.28, 2.0, 12.4, 33.3]),
        (64, [0.00, 0.02, 0.35, 4.4, 16.8]),
    ],
)
def test_mmc_term_matches_reference_table(cores: int, row: list[float]) -> None:
    # the M/M/c term (docs/model.md, Contention and PSI) tabulated independently while the model
    # was specified, printed to 2-3 significant digits
    for rho, expected in zip([0.5, 0.7, 0.8, 0.9, 0.95], row, strict=True):
        assert 100 * mmc_some(cores, rho) == pytest.approx(expected, abs=0.06)


def test_per_runqueue_term_is_rho_squared() -> None:
    rho = np.array([0.5, 0.7, 0.9])
    some = cpu_some(rho * 8, np.full(3, 8.0), blend=1.0, hog_share=0.0)
    np.testing.assert_allclose(some, rho**2)


@settings(max_examples=200, deadline=None)
@given(
    cores=st.integers(1, 128),
    blend=st.floats(0.0, 1.0),
    hog=st.floats(0.0, 1.0),
    lo=st.floats(0.0, 3.0),
    extra=st.floats(0.0, 3.0),
)
def test_cpu_some_is_monotone_in_load(
    cores: int, blend: float, hog: float, lo: float, extra: float
) -> None:
    c = np.array([float(cores)])
    a = cpu_some(np.array([lo * cores]), c, blend, hog)[0]
    b = cpu_some(np.array([(lo + extra) * cores]), c, blend, hog)[0]
    assert 0.0 <= a <= b + 1e-9 <= 1.0 + 1e-9


def test_memory_pressure_only_beyond_watermark() -> None:
    total = np.full(3, 64.0)
    used = np.array([40.0, 62.7, 70.0])
    some = memory_some(used, total, watermark=0.02, gain=10.0)
    assert some[0] == 0.0 and some[1] == 0.0  # 62.7 < 64 * 0.98 = 62.72
    assert some[2] == pytest.approx(min(1.0, (70 - 62.72) / 62.72 * 10))


# ------------------------------------------------------------------ a guest's own PSI (issue 17 item 4)
def test_guest_of_257_hogs_on_256_cpus_is_the_kernels_example() -> None:
    """``kernel/sched/psi.c`` header: 257 CPU hogs on 256 CPUs — some = 1/256, full = 0. As one
    cgroup (a guest with 257 busy vCPU threads that owns all the node's load), its own pressure is
    the same: per CPU the doubled runqueue has one of its threads waiting (SOME) while its sibling
    runs (no FULL)."""
    node_some = cpu_some(np.array([257.0]), np.array([256.0]), blend=0.2, hog_share=1.0)
    cpu, full, mem, mem_full = guest_pressure(
        node_some,
        np.zeros(1),
        node_busy=np.ones(1),
        runnable=np.array([257.0]),
        vcpus=np.array([257.0]),
        own_share=np.ones(1),
    )
    assert 100 * cpu[0] == pytest.approx(100 / 256, abs=0.01)
    assert full[0] == 0.0 and mem[0] == mem_full[0] == 0.0


def test_guest_that_barely_runs_barely_waits() -> None:
    """psi.c aggregates a cgroup's per-CPU stall weighted by *its own* non-idle time: on a node at
    90 % with node cpu some S, a guest whose vCPU threads run 10 % of the time waits 10/90 of what
    a busy CPU does — its some is S/9, far below the node's (acceptance: guest some below the
    node's for a guest that barely waits); a fully busy guest sees S/0.9 (its threads are runnable
    all the time, the node's CPUs only 90 %). Full counts the wait behind other guests only."""
    rho = 0.9
    node_some = cpu_some(np.array([rho * 16]), np.array([16.0]), blend=0.2, hog_share=0.0)
    s = float(node_some[0])
    cpu, full, _, _ = guest_pressure(
        np.full(2, s),
        np.zeros(2),
        node_busy=np.full(2, rho),
        runnable=np.array([0.4, 4.0]),  # 4 vCPUs each: 10 % and 100 % busy threads
        vcpus=np.array([4.0, 4.0]),
        own_share=np.array([0.4 / (rho * 16), 4.0 / (rho * 16)]),
    )
    assert cpu[0] == pytest.approx(s * 0.1 / rho, rel=1e-12) and cpu[0] < s
    assert cpu[1] == pytest.approx(min(s / rho, 1.0), rel=1e-12)
    assert full[0] == pytest.approx(cpu[0] * (1 - 0.4 / 14.4), rel=1e-12)


def test_guest_memory_stall_follows_its_own_activity() -> None:
    """Memory stalls (reclaim, refaults of its own pages) fall on tasks that run: an idle guest on
    an overcommitted node has no memory pressure of its own, a busy one more than the node
    average; with one vCPU thread per CPU a stalled thread is its cgroup's only runnable task
    there, so memory full = some (psi.c MEM_FULL)."""
    _, _, mem, mem_full = guest_pressure(
        np.zeros(3),
        np.full(3, 0.2),
        node_busy=np.full(3, 0.5),
        runnable=np.array([0.0, 1.0, 4.0]),
        vcpus=np.full(3, 4.0),
        own_share=np.zeros(3),
    )
    np.testing.assert_allclose(mem, [0.0, 0.2 * 0.25 / 0.5, 0.2 / 0.5])
    np.testing.assert_array_equal(mem, mem_full)


@pytest.mark.parametrize("cores", [1, 2, 3, 8, 24, 64])
def test_mmc_table_is_the_scalar_formula_bit_for_bit(cores: int) -> None:
    # the compiled table and the readable formula both call libm (never NumPy's CPU-dispatched
    # math): equal bits here mean equal bits on any machine with the same libm
    table = _mmc_table(cores)
    scalar = [0.0, *(mmc_some(cores, float(r)) for r in _RHO_GRID[1:-1]), 1.0]
    assert table.tolist() == scalar


def test_decay_factors_are_libm_powers() -> None:
    assert decay_factors(5).tolist() == [(1677 / 2048) ** 5, (1981 / 2048) ** 5, (2034 / 2048) ** 5]
