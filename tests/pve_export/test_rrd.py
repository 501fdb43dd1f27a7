"""RRD answers: resolutions of PVE 8 and 9, stitched series, gaps."""

import json

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.pve_export.files import Value
from pvegym.pve_export.rrd import RESOLUTION, fill_gaps, parse_series


def _value(rows: list[dict[str, object]]) -> Value:
    return Value(json.loads(json.dumps(rows)), "nodes/n1/rrddata-day-AVERAGE.json")


def test_resolutions_are_pve_rrd_pms() -> None:
    # pve-cluster src/PVE/RRD.pm: $setup_pve2 and $setup
    assert RESOLUTION["pve2"]["day"] == (1800, 70)
    assert RESOLUTION["pve2"]["week"] == (10800, 70)
    assert RESOLUTION["pve9"]["day"] == (60, 1440)
    assert RESOLUTION["pve9"]["week"] == (1800, 336)


def test_a_series_stitched_from_the_old_format_keeps_its_regular_tail() -> None:
    rows = [{"time": t, "cpu": 0.1} for t in (0, 1800, 3600)]
    rows += [{"time": 3600 + 60 * k, "cpu": 0.2} for k in range(1, 5)]
    s = parse_series(_value(rows), "day", "AVERAGE", 60)
    assert s.head_dropped == 3
    assert s.times.tolist() == [3660, 3720, 3780, 3840]
    assert s.span == (3600, 3840)


def test_missing_fields_are_nan_and_empty_rows_are_gaps() -> None:
    rows = [{"time": 60, "cpu": 0.5, "maxcpu": 4}, {"time": 120, "maxcpu": 4}, {"time": 180}]
    s = parse_series(_value(rows), "day", "AVERAGE", 60)
    assert np.isnan(s.get("cpu")[1:]).all()
    assert s.empty_rows().tolist() == [False, False, True]
    assert not s.has("memhost")


@pytest.mark.parametrize(
    ("rows", "where", "what"),
    [
        ([{"time": 60}], "rrddata-day-AVERAGE.json", "at least two rows"),
        ([{"time": 60}, {"time": 60}], "[1].time", "is not after"),
        ([{"time": 60, "cpu": "x"}, {"time": 120}], "[0].cpu", "must be a number"),
        ([{"time": 60}, {"cpu": 1}], "[1].time", "is missing"),
        ([{"time": 0}, {"time": 1800}], "rrddata-day-AVERAGE.json", "rows are not 60 s apart"),
    ],
)
def test_bad_series_name_the_file_and_field(
    rows: list[dict[str, object]], where: str, what: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_series(_value(rows), "day", "AVERAGE", 60)
    assert where in str(err.value) and what in str(err.value)


def test_fill_gaps_interpolates_and_holds_the_ends() -> None:
    filled, n = fill_gaps(np.array([np.nan, 1.0, np.nan, 3.0, np.nan]))
    assert filled.tolist() == [1.0, 1.0, 2.0, 3.0, 3.0] and n == 3
