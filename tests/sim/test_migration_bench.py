"""Benchmark: one 10 s CRM round of an active, seed-like migration (100 ms polling, 5 s syncs)."""

from __future__ import annotations

import copy

import pytest

from pvegym.sim.migration import Migration, MigrationParams
from pvegym.units import GiB, MiB


@pytest.mark.benchmark(group="migration")
def test_advance_one_round(benchmark) -> None:  # type: ignore[no-untyped-def]
    # as the cluster model runs it: no per-second timeline
    base = Migration(
        MigrationParams(memory=24 * GiB, bandwidth=430 * MiB, dirty_rate=680 * MiB),
        record_timeline=False,
    )
    base.advance(70.0)  # after pass 1: throttling, timer syncs, fast polls
    assert base.outcome == "running"

    def setup() -> tuple[tuple[Migration], dict[str, object]]:
        return (copy.deepcopy(base),), {}

    def one_round(m: Migration) -> None:
        m.advance(10.0)

    benchmark.pedantic(one_round, setup=setup, rounds=200)
