"""``pvegym migrate`` through ``pvegym.cli.main`` (docs/cli.md)."""

from __future__ import annotations

import json

import pytest

from pvegym import cli

BASE = ["migrate", "--memory", "24GiB", "--bandwidth", "430MiB/s", "--dirty-rate", "680MiB/s"]


def test_json_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*BASE, "--duration", "150s", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in (
        "outcome",
        "duration_s",
        "passes",
        "transferred_bytes",
        "downtime_limit_ms",
        "downtime_ms",
        "max_throttle_pct",
        "timeline",
    ):
        assert key in doc
    assert doc["outcome"] == "running"
    assert doc["downtime_limit_ms"] == 800
    assert len(doc["timeline"]) == 151
    assert set(doc["timeline"][0]) == {
        "t",
        "transferred_bytes",
        "remaining_bytes",
        "throttle_pct",
        "downtime_limit_ms",
    }


def test_human_patched(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*BASE, "--throttle-sensitivity", "0", "--qemu-server", "patched"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "outcome:          aborted" in out
    assert "escalating the auto-converge cpu throttling" in out


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--bandwidth", "0MiB/s"], "--bandwidth"),
        (["--memory=-4GiB"], "--memory"),
        (["--throttle-sensitivity", "1.5"], "--throttle-sensitivity"),
        (["--dirty-rate", "680furlongs/s"], "--dirty-rate"),
        (["--memory", "24GB/s"], "--memory"),
        (["--wws", "48GiB"], "--wws"),
        (["--downtime-limit", "0ms"], "--downtime-limit"),
        (["--qemu-server", "maybe"], "--qemu-server"),
        (["--duration", "10 parsecs"], "--duration"),
    ],
)
def test_bad_input(extra: list[str], flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([*BASE, *extra]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert flag in lines[0]
    assert "Traceback" not in captured.err
