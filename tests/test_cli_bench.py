"""``pvegym bench --quick --json`` runs in a few seconds and reports every figure."""

import json

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


def test_bench_quick_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--quick", "--json"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc.keys() >= KEYS
    assert all(doc[k] > 0 for k in KEYS - {"scaling", "scaling_exponent"})
    assert {"nodes", "guests", "step_us"} <= doc["scaling"][0].keys()
    assert len(doc["scaling"]) >= 3
    assert "bench-small" in err  # progress on stderr
