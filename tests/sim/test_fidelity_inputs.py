"""The scenario inputs issue 17 added are validated like every other: one error naming the key
path and what is allowed (the reliability stream's convention)."""

import pytest

from pvegym.errors import ConfigError
from pvegym.sim import catalog


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("guests[0].xbzrle_delta=0", "guests[0].xbzrle_delta: must be > 0,"),
        ("guests[0].xbzrle_delta=1.5", "guests[0].xbzrle_delta: must be ≤ 1,"),
        ("guests[0].ksm_shareable=1", "guests[0].ksm_shareable: must be < 1,"),
        ("guests[0].shares=-1", "guests[0].shares: must be ≥ 0"),
        ("guests[0].balloon_min=64GiB", "guests[0].balloon_min: the balloon minimum cannot"),
        ("guests[0].hugepages=3", "guests[0].hugepages: must be true or false"),
        ("nodes[0].swap=-1GiB", "nodes[0].swap: must be ≥ 0 B, not -1 GiB"),
        ("memory.ballooning_target_pct=0", "memory.ballooning_target_pct: must be > 0,"),
        ("memory.ksm=maybe", "memory.ksm: must be true or false"),
        ("memory.ksm_npages_min=2000", "memory.ksm_npages_min: must not exceed ksm_npages_max"),
        ("telemetry.timing=late", "telemetry.timing: 'late' is not allowed (allowed: phased"),
        ("telemetry.mode=avg", "telemetry.mode: 'avg' is not allowed (allowed: point, rrd)"),
        ("telemetry.first_sample_zero=2", "telemetry.first_sample_zero: must be true or false"),
        ("migration.xbzrle=yes", "migration.xbzrle: must be true or false"),
        ("migration.dirty_fault_us=-1", "migration.dirty_fault_us: must be ≥ 0,"),
        ("migration.cpu_source_cores=-1", "migration.cpu_source_cores: must be ≥ 0,"),
        ("migration.cpu_target_cores=-1", "migration.cpu_target_cores: must be ≥ 0,"),
    ],
)
def test_new_inputs_fail_with_their_key_path(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        catalog.resolve("idle-night", overrides=catalog.parse_overrides([override]))
    assert err.value.path == "set"
    assert str(err.value).startswith(f"set: idle-night: {message}")
    assert "\n" not in str(err.value)
