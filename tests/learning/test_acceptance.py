"""Acceptance figures from a metrics table: paired wins, CI, ratios, zero sums."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pvegym.learning.acceptance import main, paired, ratios, read_rows, zero_sums

FIELDS = [
    "scenario",
    "policy",
    "seed",
    "guest_stall_s",
    "downtime_s",
    "cpu_shortfall_core_s",
    "migration_bytes",
    "moves_failed",
    "oscillations",
    "churn_moves",
]


def _write(path: Path) -> Path:
    rows = []
    for seed, (mine, ref) in enumerate([(5.0, 10.0), (7.0, 10.0), (10.0, 10.0), (12.0, 10.0)]):
        rows.append(["small", "agent", seed, mine, 1.0, 2.0, 3.0, 0, 0, 0])
        rows.append(["small", "ref", seed, ref, 2.0, 2.0, 2.0, 0, 0, 0])
    rows.append(["failure-loop", "agent", 0, 1.0, 0.0, 0.0, 0.0, 1, 0, 2])
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(FIELDS)
        w.writerows(rows)
    return path


def test_paired_wins_difference_and_ci(tmp_path: Path) -> None:
    rows = read_rows(_write(tmp_path / "m.csv"))
    p = paired(rows, "small", "agent", "ref", "guest_stall_s")
    assert (p["wins"], p["losses"], p["ties"], p["n"]) == (2, 1, 1, 4)
    assert p["mean_diff"] == pytest.approx(-1.5)
    lo, hi = p["ci"]
    assert -5.0 <= lo < -1.5 < hi <= 2.0
    assert ratios(rows, "small", "agent", "ref") == {
        "downtime_s": 0.5,
        "cpu_shortfall_core_s": 1.0,
        "migration_bytes": 1.5,
    }
    sums = zero_sums(rows, "agent")
    assert sums["failure-loop"] == {"moves_failed": 1.0, "oscillations": 0.0, "churn_moves": 2.0}
    assert sums["small"]["moves_failed"] == 0.0


def test_cli_prints_the_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "m.csv")
    assert main([str(path), "--policy", "agent", "--reference", "ref"]) == 0
    out = capsys.readouterr().out
    assert "| ref | 2 | 1 | 1 |" in out and "| **all** | **1** | **0** | **2** |" in out
