"""Tests of the live-migration model against the spec (``docs/model.md``, *Live migration*, *Targets*).

Tolerances come from the spec's targets, never from what the model printed.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from pvegym.errors import ConfigError
from pvegym.sim.migration import (
    ABORTED,
    COMPLETED,
    RUNNING,
    Migration,
    MigrationParams,
    xbzrle_cache_size,
)
from pvegym.units import GiB, MiB


def _load_reference():  # type: ignore[no-untyped-def]
    """Import the page-level reference by path (tests/ is not a package)."""
    name = "pvegym_tests_reference_migration"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name("reference_migration.py")
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ref = _load_reference()

SEED = {"memory": 24 * GiB, "bandwidth": 430 * MiB, "dirty_rate": 680 * MiB}


# ------------------------------------------------------------------ the convergence patch's observation (docs/model.md)
def test_seed_observation() -> None:
    """24 GiB, 430 MiB/s, raw 680 MiB/s over all memory, sensitivity 1, unpatched, 5 s timer."""
    m = Migration(MigrationParams(**SEED))
    m.advance(150.0)
    assert m.pass1_end_s is not None and abs(m.pass1_end_s - 57.0) <= 2.0
    assert abs(m.passes - 2.6) <= 0.15
    assert abs(m.transferred / GiB - 62.0) <= 3.5
    assert m.downtime_limit_ms == 800.0
    times = [t for t, _ in m.doublings]
    assert len(times) == 3
    for got, want in zip(times, (85.0, 115.0, 145.0), strict=True):
        assert abs(got - want) <= 10.0
    assert 60 <= m.max_throttle_pct_seen <= 80
    assert [msg for _, msg in m.log] == [
        f"auto-increased downtime to continue migration: {ms} ms" for ms in (200, 400, 800)
    ]
    # F.3: with the raw-write calibration it completes at ≈ 145–155 s with QEMU downtime ≈ 0.8 s
    m.advance(60.0)
    assert m.outcome == COMPLETED
    assert 145.0 <= m.t <= 155.0
    assert 0.5 <= m.downtime_s <= 0.8  # tail < B × 800 ms, so below the limit
    assert m.remaining == 0.0


def test_timeline_per_second() -> None:
    m = Migration(MigrationParams(**SEED))
    m.advance(60.0)
    assert [e.t for e in m.timeline] == [float(s) for s in range(61)]
    first = m.timeline[10]
    assert first.transferred_bytes == pytest.approx(10 * 430 * MiB)
    assert first.remaining_bytes == pytest.approx(24 * GiB - 10 * 430 * MiB)
    # pass 1 ended at 57 s: remaining jumped up to the pages dirtied during pass 1
    assert m.timeline[58].remaining_bytes > m.timeline[57].remaining_bytes


# ------------------------------------------------------------------ sensitivity 0 (docs/model.md)
def test_sensitivity0_patched_boost_and_abort() -> None:
    m = Migration(MigrationParams(**SEED, throttle_sensitivity=0.0, qemu_server_patched=True))
    m.run(600.0)
    boost = [t for t, msg in m.log if msg.startswith("migration does not converge")]
    assert len(boost) == 1
    # 1.5 passes = 1.5 × 24 GiB / 430 MiB/s = 85.7 s; the next poll is ≤ 0.1 s later
    assert abs(boost[0] - 86.0) <= 1.0
    assert m.outcome == ABORTED
    assert abs(m.t - 229.0) <= 5.0
    assert m.error == (
        "aborting migration - no convergence: transferred 4.0x the guest memory without "
        "completing, the guest dirties its memory faster than it can be transferred"
    )
    assert m.log[-1] == (m.t, m.error)
    assert m.max_throttle_pct_seen == 99  # the boost (+20 steps) reached the cap


def test_sensitivity0_unpatched_completes_after_8_doublings_with_23s_pause() -> None:
    """``docs/model.md``, Targets (revised), with the 5 s sync timer (QEMU >= 9.2 ``migration/cpu-throttle.c``):
    every timer sync raises ``remaining``, so qemu-server (``QemuMigrate.pm`` ``phase2``) doubles
    the limit on every 6th such poll, i.e. every ~30 s after pass 1 (C.3), and QEMU
    (``migration.c`` ``migration_iteration_run``) switches over as soon as the tail is below
    ``B × limit``.

    The tail follows from the model's own closed forms: between two timer syncs 5 s apart the
    guest writes R = 5 s × 680 MiB/s into the 24 GiB WWS, L = W(1 − e^(−R/W)) distinct bytes, of
    which the part not already pending is new; the stream sends d = 5 s × B. The pending amount
    just after a sync settles where what is added equals what is sent:
    S = d + W (1 − d / L) ≈ 9.8 GiB, so the pause is S/B ≈ 23.4 s. That needs the limit that first
    exceeds 23.4 s: 100 ms × 2^8 = 25.6 s (12.8 s is too short), reached by the 8th doubling at
    ≈ 55 + 8 × 30 = 295 s — completion at ≈ 295 + 23.4 ≈ 318 s (docs/model.md, Targets: ≈ 300–320 s, ≈ 23 s)."""
    m = Migration(MigrationParams(**SEED, throttle_sensitivity=0.0))
    m.advance(229.0)  # where the patched qemu-server aborts
    assert m.outcome == RUNNING
    assert m.passes > 4.0
    m.run(600.0)
    b, w = SEED["bandwidth"], SEED["memory"]
    d = 5.0 * b
    written = 5.0 * SEED["dirty_rate"]
    log = w * -math.expm1(-written / w)
    tail = d + w * (1.0 - d / log)
    assert m.outcome == COMPLETED
    assert m.downtime_limit_ms == 100.0 * 2**8
    assert len(m.doublings) == 8
    assert abs(m.doublings[-1][0] - (55.0 + 8 * 30.0)) <= 10.0  # C.3: one doubling per ~30 s
    assert m.downtime_s == pytest.approx(tail / b, rel=0.05)
    assert 12.8 < m.downtime_s < 25.6  # the 8th limit is the first that holds the tail
    assert 300.0 <= m.t <= 320.0  # docs/model.md, Targets
    assert m.t == pytest.approx(m.doublings[-1][0] + m.downtime_s, abs=1.0)
    # the guest sees QEMU's downtime plus qemu-server's poll lag (1 s polls: remaining never fell
    # below the mean bytes per poll) and the resume on the target (A.3)
    assert m.downtime_s + 0.1 <= m.guest_pause_s <= m.downtime_s + 1.0 + 0.1


def test_sensitivity0_unpatched_matches_page_level_reference() -> None:
    """The same case scaled down 24× (every time is unchanged: pass times M/B, the 5 s timer, the
    threshold B × limit scales with the pending bytes): the page-level reference
    (``tests/sim/reference_migration.py``, no shared code) completes at the same time with the same
    pause (the issue's 318.5 s / 23.5 s)."""
    k = 24
    kw = {key: v / k for key, v in SEED.items()}
    r = ref.simulate_reference(**kw, sensitivity=0.0, duration=700.0)
    m = Migration(MigrationParams(**kw, throttle_sensitivity=0.0)).run(700.0)
    assert (m.outcome, r.outcome) == (COMPLETED, "completed")
    assert m.t == pytest.approx(r.duration, rel=0.02)
    assert m.downtime_s == pytest.approx(r.downtime_s, rel=0.05)
    assert m.downtime_limit_ms == r.downtime_limit_ms == 25600.0


def test_sensitivity0_unpatched_without_sync_timer_still_running_at_600s() -> None:
    """The docs/model.md figure holds for QEMU < 9.2 (no 5 s dirty-sync timer: QEMU's ``migration/cpu-throttle.c``): syncs
    only at pass ends, ~6 passes per doubling, so the limit stays far below pending/B."""
    m = Migration(MigrationParams(**SEED, throttle_sensitivity=0.0, sync_timer=False)).run(600.0)
    assert m.outcome == RUNNING
    assert m.downtime_limit_ms <= 800.0


# ------------------------------------------------------------------ geometric case (F.4)
GEOMETRIC = {"memory": 4 * GiB, "bandwidth": 1 * GiB, "dirty_rate": 100 * MiB}


def test_geometric_classic_passes() -> None:
    """F.4 (C.2 formulas, each pass sends everything pending): ≈ 4.43 GiB, ≈ 4.4 s, ≈ 38 ms."""
    m = Migration(MigrationParams(**GEOMETRIC, downtime_limit_ms=300.0, classic_passes=True))
    m.run(60.0)
    assert m.outcome == COMPLETED
    assert m.transferred / GiB == pytest.approx(4.43, rel=0.10)
    assert m.t == pytest.approx(4.4, rel=0.10)
    assert m.downtime_s * 1000 == pytest.approx(38.0, rel=0.10)
    # setup sync, end of pass 1 (V1 = 381 MiB ≥ V_th), end of pass 2 (V2 ≈ 37 MiB < V_th): the 2nd
    # iterative pass is the stop-and-copy of V2
    assert m.sync_count == 3


def test_geometric_qemu_rule() -> None:
    """QEMU's rule (exact sync as soon as remaining < threshold) on the F.4 case: the same bytes and
    time within the target's 10 %, but the switchover happens with a tail just under the threshold:
    tail ∈ [threshold − B × 50 ms, threshold) → downtime within [250, 300) ms."""
    m = Migration(MigrationParams(**GEOMETRIC, downtime_limit_ms=300.0))
    m.run(60.0)
    assert m.outcome == COMPLETED
    assert m.transferred / GiB == pytest.approx(4.43, rel=0.10)
    assert m.t == pytest.approx(4.4, rel=0.10)
    assert 0.250 <= m.downtime_s < 0.300


def test_geometric_qemu_rule_matches_page_level_reference() -> None:
    """``docs/model.md``, Targets (revised): the model's downtime on the geometric sanity case is QEMU's switchover rule's (a tail
    just under B × 300 ms), not the classic 38 ms — and the page-level reference, which sends page
    by page and syncs exactly when ``remaining < threshold``, leaves the same tail."""
    r = ref.simulate_reference(**GEOMETRIC, downtime_limit_ms=300.0, duration=60.0)
    assert r.outcome == "completed"
    assert 0.250 <= r.downtime_s < 0.300
    assert r.transferred / GiB == pytest.approx(4.43, rel=0.10)


# ------------------------------------------------------------------ against the page-level reference
def _compare(
    kwargs: dict[str, float | bool | None], duration: float, skip_abort_race: bool = False
) -> None:
    """Fast model vs reference: outcome equal, duration and bytes within 10 %, doublings ± 1."""
    r = ref.simulate_reference(duration=duration, **kwargs)
    if skip_abort_race and kwargs["patched"]:
        t_abort = 4.0 * float(kwargs["memory"] or 0) / float(kwargs["bandwidth"] or 1)
        assume(abs(r.duration - t_abort) >= 0.10 * t_abort)
    p = MigrationParams(
        memory=kwargs["memory"],
        bandwidth=kwargs["bandwidth"],
        dirty_rate=kwargs["dirty_rate"],
        wws=kwargs["wws"],
        throttle_sensitivity=kwargs["sensitivity"],
        downtime_limit_ms=kwargs["downtime_limit_ms"],
        qemu_server_patched=kwargs["patched"],
    )
    m = Migration(p).run(duration)
    if m.switchover_s is not None:
        m.advance(1e9)  # the reference finishes a switchover begun before the cap, too
    assert m.outcome == r.outcome, (m.outcome, m.t, r.outcome, r.duration)
    assert m.t == pytest.approx(r.duration, rel=0.10)
    assert m.transferred == pytest.approx(r.transferred, rel=0.10)
    assert abs(len(m.doublings) - len(r.doublings)) <= 1


def test_seed_scaled_matches_reference() -> None:
    """The convergence patch's case scaled down 24× (1 GiB at 430/24 MiB/s) runs through the same phases."""
    _compare(
        {
            "memory": 1 * GiB,
            "bandwidth": 430 * MiB / 24,
            "dirty_rate": 680 * MiB / 24,
            "wws": None,
            "sensitivity": 1.0,
            "downtime_limit_ms": 100.0,
            "patched": False,
        },
        300.0,
    )


# The duration cap is 4.5 × the pass-1 time (a patched migration aborts by 4 passes).
# Restricted regions, where the two legitimately disagree (tolerances are not loosened):
# * downtime limit < 100 ms: the threshold B × limit is then about the bytes one 50 ms iteration
#   sends, so whether a pass-end sync switches over hinges on one iteration's *random* writes;
# * WWS < half the memory or pass 1 < 15 s: a small hot set is re-dirtied within a few iterations, the
#   pass-end syncs come every iteration and `remaining` hovers at the threshold with ~zero drift per
#   poll. qemu-server's "remaining grew" counter then counts the reference's page-level
#   fluctuations (≈ every other poll) but not the mean-field model's steady drift, so the doublings,
#   and hence the completion time, differ (seen: 9.4 s vs 21.8 s). This is a real limit of the
#   mean-field model for tiny hot sets, noted in the module docstring;
# * patched runs whose reference ends within 10 % of the abort time (4 passes at full rate): the
#   abort and a switchover then race within a second or two, and which comes first depends on when
#   the reference's sender idled on an empty bitmap (seen: reference completed at 90.96 s and 82.1 s
#   where the 4th pass ends at 86 s and 80 s).
# Derandomized, so CI runs the same examples every time.
@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    memory_mib=st.sampled_from([256, 512]),
    pass1_s=st.floats(15.0, 30.0),
    rho=st.floats(0.0, 2.5),
    wws_frac=st.floats(0.5, 1.0),
    sensitivity=st.floats(0.0, 1.0),
    downtime_ms=st.floats(100.0, 1000.0),
    patched=st.booleans(),
)
def test_property_matches_reference(
    memory_mib: int,
    pass1_s: float,
    rho: float,
    wws_frac: float,
    sensitivity: float,
    downtime_ms: float,
    patched: bool,
) -> None:
    memory = memory_mib * MiB
    bandwidth = memory / pass1_s
    wws = round(memory * wws_frac / 4096) * 4096
    _compare(
        {
            "memory": memory,
            "bandwidth": bandwidth,
            "dirty_rate": rho * bandwidth,
            "wws": float(wws),
            "sensitivity": sensitivity,
            "downtime_limit_ms": downtime_ms,
            "patched": patched,
        },
        4.5 * pass1_s,
        skip_abort_race=True,
    )


# ------------------------------------------------------------------ XBZRLE and dirty tracking (item 7)
@pytest.mark.parametrize(
    ("memory_gib", "cache_mib"), [(24, 4096), (8, 1024), (4, 512), (2, 256), (16, 2048)]
)
def test_xbzrle_cache_is_qemu_servers(memory_gib: int, cache_mib: int) -> None:
    """qemu-server ``QemuMigrate.pm`` ``phase2``: ``xbzrle-cache-size`` = 10 % of the guest memory,
    ``round_powerof2`` (``2 << int(log2(x − 1))``)."""
    assert xbzrle_cache_size(memory_gib * GiB) == cache_mib * MiB
    m = Migration(MigrationParams(memory=memory_gib * GiB, bandwidth=GiB, dirty_rate=0.0))
    assert m.xbzrle_cache_bytes == cache_mib * MiB
    off = Migration(
        MigrationParams(memory=memory_gib * GiB, bandwidth=GiB, dirty_rate=0.0, xbzrle=False)
    )
    assert off.xbzrle_cache_bytes == 0.0


# 512 MiB guest (cache 64 MiB), pass 1 in 20 s, unthrottleable dirtying at 1.5 × the bandwidth
XBZRLE_CASE = {"memory": 512 * MiB, "bandwidth": 512 * MiB / 20, "dirty_rate": 1.5 * 512 * MiB / 20}


@pytest.mark.parametrize("wws_mib", [16, 48])
def test_xbzrle_hot_set_that_fits_matches_page_level_reference(wws_mib: int) -> None:
    """QEMU ``ram.c`` ``save_xbzrle_page`` / ``page_cache.c``: a hot set that fits the cache is
    re-sent as deltas (here 10 % of a page). Without XBZRLE the guest dirties faster than the
    stream sends (ρ = 1.5) and only qemu-server's doubling ends the migration; with it, the
    wire cost of a dirty page falls towards 1 − h (1 − δ), h = C (1 − e^(−W/C)) / W (the share
    of the hot set a direct-mapped cache of C bytes holds), so the stream outruns the guest and
    the migration converges at the configured 100 ms limit. The page-level reference (real cache
    slots, the two-sync age rule) agrees on outcome, time and bytes within 10 %."""
    kw = {**XBZRLE_CASE, "wws": wws_mib * MiB}
    plain = Migration(MigrationParams(**kw, throttle_sensitivity=0.0)).run(200.0)
    m = Migration(MigrationParams(**kw, throttle_sensitivity=0.0, xbzrle_delta=0.1)).run(200.0)
    r = ref.simulate_reference(**kw, sensitivity=0.0, duration=200.0, xbzrle_delta=0.1)
    assert plain.downtime_limit_ms > 100.0  # needs doublings without XBZRLE
    assert m.outcome == r.outcome == COMPLETED
    assert m.downtime_limit_ms == r.downtime_limit_ms == 100.0
    assert m.t == pytest.approx(r.duration, rel=0.10)
    assert m.transferred == pytest.approx(r.transferred, rel=0.10)
    c, w = m.xbzrle_cache_bytes, wws_mib * MiB
    floor = 1.0 - c * -math.expm1(-w / c) / w * 0.9
    assert floor <= m.wire_cost < 0.5


def test_xbzrle_hot_set_larger_than_cache_gains_at_most_its_share() -> None:
    """A direct-mapped cache of C bytes holds at most C of a W-byte hot set: a dirty page costs at
    least 1 − (C/W)(1 − δ) of itself on the wire (W = 4 C → ≥ 0.775 at δ = 0.1)."""
    kw = {**XBZRLE_CASE, "wws": 256 * MiB}
    m = Migration(MigrationParams(**kw, throttle_sensitivity=0.0, xbzrle_delta=0.1))
    m.advance(60.0)
    c = m.xbzrle_cache_bytes
    assert c == 64 * MiB
    assert 1.0 - (c / (256 * MiB)) * 0.9 <= m.wire_cost < 1.0


def test_dirty_tracking_faults_match_page_level_reference() -> None:
    """KVM write-protects guest pages while the dirty log is on: the first write to a page after
    each sync faults. The model integrates W (1 − e^(−R/W)) growth between syncs; the page-level
    reference counts the pages newly set in its log. 1 µs each, the convergence patch's case scaled 24×."""
    kw = {"memory": 1 * GiB, "bandwidth": 430 * MiB / 24, "dirty_rate": 680 * MiB / 24}
    m = Migration(MigrationParams(**kw, dirty_fault_us=1.0)).run(300.0)
    r = ref.simulate_reference(**kw, duration=300.0, dirty_fault_s=1e-6)
    assert m.tracking_overhead_s == pytest.approx(r.track_s, rel=0.05)
    # bounded by one fault per page written: raw writes / page × 1 µs over the migration
    assert m.tracking_overhead_s < kw["dirty_rate"] * m.t / 4096 * 1e-6


# ------------------------------------------------------------------ validation and determinism
@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"bandwidth": 0.0}, "--bandwidth"),
        ({"bandwidth": -1.0}, "--bandwidth"),
        ({"memory": -1.0}, "--memory"),
        ({"memory": 0.0}, "--memory"),
        ({"dirty_rate": -5.0}, "--dirty-rate"),
        ({"wws": -1.0}, "--wws"),
        ({"wws": 25.0 * GiB}, "--wws"),
        ({"throttle_sensitivity": 1.5}, "--throttle-sensitivity"),
        ({"throttle_sensitivity": -0.1}, "--throttle-sensitivity"),
        ({"downtime_limit_ms": 0.0}, "--downtime-limit"),
        ({"boost_factor": 0.0}, "--boost-factor"),
        ({"qemu_server_patched": True, "abort_factor": 1.0}, "--abort-factor"),
        ({"throttle_increment_pct": 0}, "--throttle-increment"),
        ({"max_throttle_pct": 100}, "--max-throttle"),
        ({"bandwidth": float("nan")}, "--bandwidth"),
        ({"xbzrle_delta": 0.0}, "--xbzrle-delta"),
        ({"xbzrle_delta": 1.5}, "--xbzrle-delta"),
        ({"xbzrle_cache": 3 * 4096.0}, "--xbzrle-cache"),
        ({"dirty_fault_us": -1.0}, "--dirty-fault-us"),
    ],
)
def test_validation(kwargs: dict[str, float], flag: str) -> None:
    with pytest.raises(ConfigError) as err:
        MigrationParams(**{**SEED, **kwargs})
    assert err.value.path == flag
    assert str(err.value).startswith(flag)


def test_deterministic_and_chunking_independent() -> None:
    params = MigrationParams(**SEED, qemu_server_patched=True)
    a = Migration(params).run(600.0)
    b = Migration(params)
    while not b.done and b.t < 600.0:
        b.advance(10.0)  # the cluster advances in 10 s rounds
    c = Migration(params)
    for _ in range(2000):
        c.advance(0.37)  # off-grid steps
    for other in (b, c):
        assert other.outcome == a.outcome
        assert other.t == pytest.approx(a.t, abs=1e-9)
        assert other.transferred == pytest.approx(a.transferred, rel=1e-9)
        assert [msg for _, msg in other.log] == [msg for _, msg in a.log]
        assert other.doublings == a.doublings
        assert other.throttle_integral == pytest.approx(a.throttle_integral, rel=1e-9)
        assert [e.t for e in other.timeline] == [e.t for e in a.timeline]


def test_throttle_integral_and_rate() -> None:
    m = Migration(MigrationParams(**SEED))
    m.advance(150.0)
    end = m.switchover_s if m.switchover_s is not None else 150.0  # the throttle stops there
    # the integral the kernel accumulates equals the step function of the throttle steps it
    # reported (two separate code paths: the closed-form evolution and the event log)
    expected = sum(
        pct / 100 * (end - start)
        for (start, pct), end in zip(
            m.throttle_steps, [t for t, _ in m.throttle_steps[1:]] + [end], strict=True
        )
    )
    assert m.throttle_integral == pytest.approx(expected, rel=1e-9)
    running = Migration(MigrationParams(**SEED, throttle_sensitivity=0.5))
    running.advance(140.0)
    assert running.effective_dirty_rate == pytest.approx(
        680 * MiB * (1 - running.throttle_pct / 100 * 0.5)
    )


def test_more_events_than_the_kernel_buffer_are_all_kept() -> None:
    """The compiled loop hands events and timeline segments over in fixed buffers: a long
    migration with hundreds of them loses none (throttle steps every 2nd 5 s period, capped
    doublings, one timeline entry per second)."""
    from pvegym.sim.migration_kernel import EV_CAP_ROWS

    m = Migration(MigrationParams(**SEED, throttle_sensitivity=0.0, downtime_max_ms=200.0))
    m.run(3600.0)
    assert m.outcome == RUNNING  # insensitive to the throttle, capped at 200 ms: never converges
    steps = [t for t, _ in m.throttle_steps]
    assert len(steps) > 2 * EV_CAP_ROWS
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert m.throttle_pct == 99
    assert [e.t for e in m.timeline] == [float(s) for s in range(3601)]
    caps = [msg for _, msg in m.log if msg.startswith("capping downtime limit")]
    assert len(caps) == len(m.doublings) - 1  # 100 → 200 ms, then every doubling is capped
