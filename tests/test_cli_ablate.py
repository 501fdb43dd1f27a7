"""``pvegym ablate`` on 2 seeds and one scenario: the table, the JSON rows and the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvegym.cli import main


def test_ablate_two_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ablation.md"
    code = main(["ablate", "--seeds", "2", "--scenario", "failure-loop", "--out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "| failure-loop | upstream |" in text and "| failure-loop | patched |" in text
    assert "patched −p1 (outcome_tracking)" in text
    assert out.read_text().startswith("# pvegym ablate --seeds 2")
    assert main(["ablate", "--seeds", "2", "--scenario", "failure-loop", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    by = {r["policy"]: r for r in rows}
    assert by["upstream"]["target_holds"] and by["patched"]["target_holds"]
    assert by["upstream"]["means"]["moves_failed"] >= 20
    assert by["patched"]["means"]["moves_failed"] <= 6


def test_ablate_rejects_zero_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ablate", "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err
