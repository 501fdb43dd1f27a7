"""The heuristics' compiled kernels compute the same bits as the NumPy expressions they replace.

Inputs are drawn over many magnitudes, with NaN (missing telemetry), zeros and offline nodes, so
that an operation done in another order or a different NaN rule shows as a bit difference
(``assert_array_equal`` compares exactly; NaN equals NaN there).
"""

from __future__ import annotations

import numpy as np
import pytest

from pvegym.policies import kernels
from pvegym.sim import crs


def rng_values(rng: np.random.Generator, n: int, nan_share: float = 0.0) -> np.ndarray:
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 10, n)
    if nan_share:
        x[rng.random(n) < nan_share] = np.nan
    return x


@pytest.mark.parametrize("n", [*range(0, 20), 31, 63, 64, 65, 127, 128, 129, 255, 257, 1000, 2003])
def test_np_sum_is_numpys_pairwise_sum(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(20):
        x = rng_values(rng, n)
        assert kernels.np_sum(x, n) == np.sum(x)
        if n:
            assert kernels.np_sum(x, n - 1) == np.sum(x[: n - 1])


def test_online_imbalance_is_crs_imbalance_of_online_loads() -> None:
    rng = np.random.default_rng(1)
    for trial in range(500):
        n = int(rng.integers(0, 10))
        cpu, mem = np.abs(rng_values(rng, n, 0.05)), np.abs(rng_values(rng, n, 0.05))
        if trial % 7 == 0:
            cpu[:] = 0.0
            mem[:] = 0.0
        maxcpu, maxmem = rng.uniform(1, 64, n), rng.uniform(1e9, 1e12, n)
        on = rng.random(n) < 0.8
        for normalized in (True, False):
            want = crs.imbalance(
                crs.node_loads(cpu[on], mem[on], maxcpu[on], maxmem[on]), normalized
            )
            got = kernels.online_imbalance(cpu, mem, maxcpu, maxmem, on, normalized)
            np.testing.assert_array_equal(got, want)


def test_bruteforce_best_is_argmin_of_crs_bruteforce() -> None:
    rng = np.random.default_rng(2)
    for trial in range(300):
        n = int(rng.integers(2, 9))
        k = int(rng.integers(1, 60))
        cpu, mem = rng.uniform(0, 32, n), rng.uniform(0, 1e11, n)
        maxcpu, maxmem = rng.uniform(8, 64, n), rng.uniform(1e11, 4e11, n)
        src = rng.integers(0, n, k)
        tgt = (src + rng.integers(1, n, k)) % n
        dc, dm = rng.uniform(0, 40, k), rng.uniform(0, 2e11, k)  # may exceed the source's
        if trial % 5 == 0:
            dc[:] = 0.0  # many ties: the first minimum must win
            dm[:] = 0.0
        if trial % 11 == 0:
            cpu[rng.integers(0, n)] = np.nan
        for normalized in (True, False):
            imb = crs.bruteforce_imbalances(cpu, mem, maxcpu, maxmem, src, tgt, dc, dm, normalized)
            best, value = kernels.bruteforce_best(
                cpu, mem, maxcpu, maxmem, src, tgt, dc, dm, normalized
            )
            assert best == int(np.argmin(imb))
            np.testing.assert_array_equal(value, imb[best])


def test_guest_stats_dynamic_is_nan_to_zero_then_memhost() -> None:
    rng = np.random.default_rng(3)
    cpu, mem, host = (rng_values(rng, 200, 0.2) for _ in range(3))
    host[::17] = np.inf
    for use_memhost in (True, False):
        got_cpu, got_mem = np.empty(200), np.empty(200)
        kernels.guest_stats_dynamic(cpu, mem, host, use_memhost, got_cpu, got_mem)
        want_mem = np.where(np.isnan(mem), 0.0, mem)
        if use_memhost:
            want_mem = np.where(np.isfinite(host), host, want_mem)
        np.testing.assert_array_equal(got_cpu, np.where(np.isnan(cpu), 0.0, cpu))
        np.testing.assert_array_equal(got_mem, want_mem)


def reference_residual(
    stat: np.ndarray,
    usage: np.ndarray,
    node: np.ndarray,
    here: np.ndarray,
    old: np.ndarray | None,
    alpha: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Patch 6 as NumPy (the policy's former code): bincount, EMA, NaN rules, clip at 0."""
    n = stat.shape[0]
    attributed = np.bincount(node[here], weights=usage[here], minlength=n)[:n]
    new = stat - attributed
    if old is None:
        ema = np.where(np.isfinite(new), new, np.nan)
    else:
        upd = np.where(np.isfinite(old), old + alpha * (new - old), new)
        ema = np.where(np.isfinite(new), upd, old)
    out = np.where(np.isfinite(stat), attributed + ema, np.nan)
    return np.maximum(out, 0.0), ema


def test_patched_node_stats_is_patch6_in_numpy() -> None:
    rng = np.random.default_rng(4)
    n, g = 6, 40
    node = rng.integers(0, n, g)
    node[::9] = -1  # not placed: never counted
    ema_cpu, ema_mem = np.full(n, np.nan), np.full(n, np.nan)
    ref_cpu: np.ndarray | None = None
    ref_mem: np.ndarray | None = None
    got_cpu, got_mem = np.empty(n), np.empty(n)
    for _ in range(200):
        stat_cpu, stat_mem = rng_values(rng, n, 0.1), rng_values(rng, n, 0.1)
        raw_cpu, raw_mem, host = (rng_values(rng, g, 0.1) for _ in range(3))
        gcpu, gmem = np.empty(g), np.empty(g)
        kernels.guest_stats_dynamic(raw_cpu, raw_mem, host, True, gcpu, gmem)
        here = rng.random(g) < 0.9
        counted = here & (node >= 0)
        kernels.patched_node_stats(
            stat_cpu, stat_mem, raw_cpu, raw_mem, host, True, node, here, ema_cpu, ema_mem,
            0.2, True, got_cpu, got_mem,
        )  # fmt: skip
        want_cpu, ref_cpu = reference_residual(stat_cpu, gcpu, node, counted, ref_cpu, 0.2)
        want_mem, ref_mem = reference_residual(stat_mem, gmem, node, counted, ref_mem, 0.2)
        np.testing.assert_array_equal(got_cpu, want_cpu)
        np.testing.assert_array_equal(got_mem, want_mem)
        np.testing.assert_array_equal(ema_cpu, ref_cpu)
        np.testing.assert_array_equal(ema_mem, ref_mem)
    # without update the EMA stays and the same stats come out again
    before, first = ema_cpu.copy(), got_cpu.copy()
    kernels.patched_node_stats(
        stat_cpu, stat_mem, raw_cpu, raw_mem, host, True, node, here, ema_cpu, ema_mem,
        0.2, False, got_cpu, got_mem,
    )  # fmt: skip
    np.testing.assert_array_equal(ema_cpu, before)
    np.testing.assert_array_equal(got_cpu, first)


def test_patched_stats_imbalance_is_node_stats_then_online_imbalance() -> None:
    """The patched round's one call gives the bits of its two kernels called one after the
    other: the stats, the EMA and the imbalance of the online nodes."""
    rng = np.random.default_rng(7)
    n, g = 5, 30
    node = rng.integers(-1, n, g)
    ema = [np.full(n, np.nan) for _ in range(4)]  # cpu, mem: the fused call's, then the pair's
    maxcpu, maxmem = rng.random(n) * 64 + 1, rng.random(n) * 1e12 + 1
    for k in range(100):
        stat_cpu, stat_mem = np.abs(rng_values(rng, n, 0.1)), np.abs(rng_values(rng, n, 0.1))
        cpu, mem, host = (rng_values(rng, g, 0.1) for _ in range(3))
        here, online = rng.random(g) < 0.9, rng.random(n) < 0.8
        update, normalized = bool(k % 3), bool(k % 2)
        args = (stat_cpu, stat_mem, cpu, mem, host, True, node, here)
        got_cpu, got_mem, want_cpu, want_mem = (np.empty(n) for _ in range(4))
        got = kernels.patched_stats_imbalance(
            *args, ema[0], ema[1], 0.2, update, got_cpu, got_mem, maxcpu, maxmem, online,
            normalized,
        )  # fmt: skip
        kernels.patched_node_stats(*args, ema[2], ema[3], 0.2, update, want_cpu, want_mem)
        want = kernels.online_imbalance(want_cpu, want_mem, maxcpu, maxmem, online, normalized)
        np.testing.assert_array_equal(got_cpu, want_cpu)
        np.testing.assert_array_equal(got_mem, want_mem)
        np.testing.assert_array_equal(ema[0], ema[2])
        np.testing.assert_array_equal(ema[1], ema[3])
        assert got == want or (np.isnan(got) and np.isnan(want))


@pytest.mark.parametrize(
    ("cpu", "mem", "online", "expected"),
    [
        ([1.0, 2.0], [0.0, 9.9], [True, True], False),  # no pressure
        ([1.0, 12.0], [0.0, 0.0], [True, True], True),  # cpu some on node 2
        ([1.0, 2.0], [0.0, 10.0], [True, True], True),  # memory some reaches the threshold
        ([1.0, 50.0], [0.0, 0.0], [True, False], False),  # the pressured node is offline
        ([1.0, np.nan], [0.0, 0.0], [True, True], True),  # missing: fail open
        ([1.0, np.nan], [0.0, 0.0], [True, False], False),  # missing but offline: ignored
        ([50.0], [50.0], [False], True),  # no online node: fail open (as before)
    ],
)
def test_pressure_gate(
    cpu: list[float], mem: list[float], online: list[bool], expected: bool
) -> None:
    assert kernels.pressure_gate(np.array(cpu), np.array(mem), np.array(online), 10.0) is expected
