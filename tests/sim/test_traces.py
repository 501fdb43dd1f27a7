"""The ``trace`` workload component: interpolation, scaling, looping, offsets, caching, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pvegym.cli import main
from pvegym.errors import ConfigError
from pvegym.sim.trace_source import scenario_base
from pvegym.sim.workload import TRACE_ROOT, WorkloadBank, load_trace, parse_signal
from pvegym.units import GiB
from tests.sim.conftest import trace_scenario


def _values(spec: dict, times: list[float], unit: str | None = None) -> list[float]:
    with scenario_base(spec.get("trace_dir") or None):  # as if a scenario file lived there
        signal = parse_signal(spec, "s", unit)
    bank = WorkloadBank([signal], np.random.default_rng(0))
    return [float(bank.sample(t, 10.0)[0]) for t in times]


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    (tmp_path / "planetlab").mkdir()
    (tmp_path / "planetlab" / "vm").write_text("10\n30\n50\n90\n")
    (tmp_path / "bitbrains").mkdir()
    (tmp_path / "bitbrains" / "7.csv").write_text(
        "# id=7 interval_s=300 cpu_count=4 cpu_capacity_mhz=10400 mem_capacity_kb=1048576\n"
        "cpu_mhz,mem_kb\n5200,524288\n10400,262144\n"
    )
    return tmp_path


def test_linear_interpolation_between_samples_and_scale_in_cores(traces: Path) -> None:
    spec = {"type": "trace", "source": "planetlab/vm", "scale": 2, "trace_dir": str(traces)}
    # percent / 100 × 2 vCPUs, samples every 300 s, linear in between
    got = _values({**spec, "loop": False}, [0, 150, 300, 450, 600, 750])
    assert got == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0, 1.4])


def test_looping_wraps_from_the_last_sample_into_the_first(traces: Path) -> None:
    spec = {"type": "trace", "source": "planetlab/vm", "scale": 1, "trace_dir": str(traces)}
    # period 4 × 300 s; between the last (90 %) and the next first (10 %) the mean is 50 %
    assert _values(spec, [1050, 1200, 1350, 2400 + 150]) == pytest.approx([0.5, 0.1, 0.2, 0.2])
    # without loop the series holds its last value
    assert _values({**spec, "loop": False}, [1050, 5000]) == pytest.approx([0.9, 0.9])


def test_offset_shifts_the_series_and_accepts_durations(traces: Path) -> None:
    spec = {"type": "trace", "source": "planetlab/vm", "scale": 1, "trace_dir": str(traces)}
    assert _values({**spec, "offset": "5m"}, [0, 150]) == pytest.approx([0.3, 0.4])
    assert _values({**spec, "offset": -300, "loop": False}, [0, 300]) == pytest.approx([0.1, 0.1])


def test_bitbrains_mhz_to_cores_and_memory_to_bytes(traces: Path) -> None:
    base = {"type": "trace", "source": "bitbrains/7", "trace_dir": str(traces), "loop": False}
    # 5,200 of 10,400 MHz on a 4-core VM = 2 cores (default scale: the traced VM's cores)
    assert _values(base, [0, 150]) == pytest.approx([2.0, 3.0])
    assert _values({**base, "scale": 8}, [0]) == pytest.approx([4.0])
    # 512 of 1,024 MiB provisioned; default scale = its provisioned bytes, or a size
    assert _values({**base, "field": "mem"}, [0], "size") == pytest.approx([0.5 * GiB])
    assert _values({**base, "field": "mem", "scale": "8GiB"}, [300], "size") == pytest.approx(
        [2 * GiB]
    )


def test_bundled_traces_replay_and_are_read_once() -> None:
    name = sorted(p.name for p in (TRACE_ROOT / "planetlab").iterdir() if p.name[0].isdigit())[0]
    first = int((TRACE_ROOT / "planetlab" / name).read_text().split()[0])
    spec = {"type": "trace", "source": f"planetlab/{name}", "scale": 4}
    assert _values(spec, [0]) == pytest.approx([first / 100 * 4])
    assert load_trace(f"planetlab/{name}") is load_trace(f"planetlab/{name}")  # cached
    mem = _values({"type": "trace", "source": "bitbrains/single-vm", "field": "mem"}, [0], "size")
    assert 0 < mem[0] <= 2 * GiB  # a 2 GiB VM
    assert load_trace("bitbrains/116").values.size == 7 * 288


def _scenario(tmp_path: Path, traces: Path, source: str, field: str = "cpu") -> Path:
    return trace_scenario(tmp_path / "scn.toml", source, traces, field=field, scale=2)


def _simulate(capsys: pytest.CaptureFixture[str], scn: Path) -> tuple[int, str]:
    code = main(["simulate", "--scenario", str(scn), "--json"])
    return code, capsys.readouterr().err


def test_a_trace_scenario_simulates(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _simulate(capsys, _scenario(tmp_path, traces, "planetlab/vm"))
    assert code == 0, err


@pytest.mark.parametrize(
    ("content", "where", "what"),
    [
        (None, "planetlab/missing", "no such trace file"),
        ("", "planetlab/bad:1", "empty trace"),
        ("12\n15\nabc\n", "planetlab/bad:3", "not a CPU percentage"),
        ("12\n150\n", "planetlab/bad:2", "outside 0–100"),
    ],
)
def test_bad_trace_files_are_one_line_errors_naming_file_and_line(
    tmp_path: Path,
    traces: Path,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    where: str,
    what: str,
) -> None:
    name = "missing" if content is None else "bad"
    if content is not None:
        (traces / "planetlab" / "bad").write_text(content)
    code, err = _simulate(capsys, _scenario(tmp_path, traces, f"planetlab/{name}"))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "guests[0].cpu[0].source" in lines[0]
    assert where in lines[0] and what in lines[0]


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("cpu_mhz\n1\n", ":1", "metadata"),
        (
            "# interval_s=300 cpu_count=1 cpu_capacity_mhz=2600 mem_capacity_kb=1\ncpu_mhz\n1\nx\n",
            ":4",
            "not a number",
        ),
        (
            "# interval_s=300 cpu_count=1 cpu_capacity_mhz=2600 mem_capacity_kb=1\ncpu_mhz\n",
            ":3",
            "no samples",
        ),
    ],
)
def test_bad_bitbrains_files(
    tmp_path: Path,
    traces: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    line: str,
    what: str,
) -> None:
    (traces / "bitbrains" / "9.csv").write_text(text)
    code, err = _simulate(capsys, _scenario(tmp_path, traces, "bitbrains/9"))
    assert code == 2
    assert f"bitbrains/9.csv{line}" in err and what in err
    assert len(err.strip().splitlines()) == 1


def test_memory_of_a_cpu_only_trace_and_a_bad_source_are_errors(
    tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _simulate(capsys, _scenario(tmp_path, traces, "planetlab/vm", field="mem"))
    assert code == 2 and "no memory series" in err
    code, err = _simulate(capsys, _scenario(tmp_path, traces, "azure/vm"))
    assert code == 2 and "not a trace source" in err


# ------------------------------------------------------------------------------------- rrd traces
RRD_HEAD = (
    "# pvegym-rrd interval_s=60 cpu_capacity=4 mem_capacity=1073741824 timeframe=day cf=AVERAGE"
)


@pytest.fixture
def rrd(tmp_path: Path) -> Path:
    (tmp_path / "rrd").mkdir()
    (tmp_path / "rrd" / "vm.csv").write_text(
        f"{RRD_HEAD}\ntime,cpu,mem\n1000,0.25,0.5\n1060,0.5,0.25\n1120,0.75,0.125\n"
    )
    return tmp_path


def test_rrd_traces_replay_cores_and_bytes(rrd: Path) -> None:
    """``pvegym import``'s series: fractions of the capacities, default scale = the capacity;
    rows are interval averages replayed at the interval's middle (offset −step/2)."""
    base = {"type": "trace", "source": "rrd/vm", "trace_dir": str(rrd), "loop": False}
    assert _values(base, [0, 30, 60, 120, 500]) == pytest.approx([1.0, 1.5, 2.0, 3.0, 3.0])
    assert _values({**base, "field": "mem"}, [0, 60], "size") == pytest.approx(
        [0.5 * GiB, 0.25 * GiB]
    )
    assert _values({**base, "offset": -30}, [30, 90]) == pytest.approx([1.0, 2.0])


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("time,cpu,mem\n1,0,0\n", ":1", "pvegym-rrd"),
        ("# pvegym-rrd interval_s=60 cpu_capacity=4\ntime,cpu,mem\n", ":1", "mem_capacity"),
        (f"{RRD_HEAD}\ncpu,mem\n", ":2", "header"),
        (f"{RRD_HEAD}\ntime,cpu,mem\n0,1,1\n90,1,1\n", ":4", "is not 60 s after"),
        (f"{RRD_HEAD}\ntime,cpu,mem\n0,1,1\n60,-1,1\n", ":4", "finite number ≥ 0"),
        (f"{RRD_HEAD}\ntime,cpu,mem\n0,1\n", ":3", "columns"),
        (f"{RRD_HEAD}\ntime,cpu,mem\n", ":3", "no samples"),
    ],
)
def test_bad_rrd_traces(tmp_path: Path, text: str, line: str, what: str) -> None:
    (tmp_path / "rrd").mkdir()
    (tmp_path / "rrd" / "x.csv").write_text(text)
    with pytest.raises(ConfigError) as err, scenario_base(tmp_path):
        load_trace("rrd/x", "cpu", str(tmp_path), "guests[0].cpu[0].source")
    assert f"rrd/x.csv{line}" in str(err.value) and what in str(err.value)
    assert str(err.value).startswith("guests[0].cpu[0].source: ")


def test_a_relative_trace_dir_is_beside_the_scenario_file(rrd: Path, tmp_path: Path) -> None:
    """``pvegym import`` writes its traces beside the scenario: a relative ``trace_dir`` is read
    from the file's directory, wherever the command runs."""
    from pvegym.sim import catalog

    (rrd / "traces").mkdir()
    (rrd / "rrd").rename(rrd / "traces" / "rrd")
    trace_scenario(rrd / "s.toml", "rrd/vm", "traces")
    scn = catalog.resolve(str(rrd / "s.toml")).scenario
    assert scn.guests[0].cpu[0].trace_dir == "traces"  # as written: the data stays portable
    assert scn.guests[0].cpu[0].trace_file == str((rrd / "traces" / "rrd" / "vm.csv").resolve())


@pytest.mark.parametrize("trace_dir", ["../elsewhere", "traces/../../x", "link"])
def test_a_trace_dir_may_not_leave_the_scenarios_directory(tmp_path: Path, trace_dir: str) -> None:
    from pvegym.sim import catalog

    inside = tmp_path / "scn"
    inside.mkdir()
    (tmp_path / "outside" / "rrd").mkdir(parents=True)
    (inside / "link").symlink_to(tmp_path / "outside")
    trace_scenario(inside / "s.toml", "rrd/vm", trace_dir)
    with pytest.raises(ConfigError) as err:
        catalog.resolve(str(inside / "s.toml"))
    assert "guests[0].cpu[0].trace_dir" in str(err.value)


def test_trace_names_may_not_climb_or_point_at_devices(tmp_path: Path) -> None:
    (tmp_path / "rrd").mkdir()
    with pytest.raises(ConfigError, match="not a trace name"), scenario_base(tmp_path):
        load_trace("rrd/../../etc/passwd", "cpu", str(tmp_path), "source")
    (tmp_path / "rrd" / "dev.csv").symlink_to("/dev/null")
    with pytest.raises(ConfigError, match="leads outside"), scenario_base(tmp_path):
        load_trace("rrd/dev", "cpu", str(tmp_path), "source")
