"""``pvegym bench --quick --json`` runs in a few seconds and reports every figure."""

import json
from pathlib import Path

import pytest

from pvegym.cli import main

KEYS = {
    "cartpole_step_us",
    "small_step_us",
    "large_step_us",
    "small_ratio",
    "large_ratio",
    "day_patched_s",
    "scaling_exponent",
    "scaling",
}


def test_bench_quick_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "bench" / "bench.json"
    assert main(["bench", "--quick", "--json", "--out", str(target)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert json.loads(target.read_text()) == doc  # the same document, with its provenance
    assert {"commit", "versions", "cpus"} <= doc["provenance"].keys()
    assert doc.keys() >= KEYS
    assert all(doc[k] > 0 for k in KEYS - {"scaling", "scaling_exponent"})
    assert {"nodes", "guests", "step_us"} <= doc["scaling"][0].keys()
    assert [r["guests"] for r in doc["scaling"]] == [10, 100, 500]  # the quick sizes
    assert doc["day_policy"] == "patched" and doc["quick"] and doc["day_extrapolated"]
    assert "bench-small" in err  # progress on stderr
