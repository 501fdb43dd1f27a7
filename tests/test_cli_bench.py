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
    "day_patched_ratio",
    "day_guest_centric_ratio",
    "scaling_exponent",
    "scaling",
    "vector_small_n64_ratio",
    "vector_small_n64_sync_ratio",
    "vec_wait_share_maskable_ppo",
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
    heuristics = {"noop", "upstream", "patched", "guest-centric"}
    for key in ("day_s", "day_ratio", "day_decide_us"):
        assert doc[key].keys() == heuristics and all(v > 0 for v in doc[key].values()), key
    assert doc["day_patched_ratio"] == doc["day_ratio"]["patched"]
    assert doc["day_guest_centric_ratio"] == doc["day_ratio"]["guest-centric"]
    assert doc["day_patched_s"] == doc["day_s"]["patched"]
    assert [(r["scenario"], r["n"]) for r in doc["vector"]] == [
        ("bench-small", 8),
        ("bench-small", 64),
        ("bench-large", 2),  # quick: no N = 8 of bench-large
    ]
    assert "vector_large_n8_ratio" not in doc
    assert all(r["step_us"] > 0 and r["sync_ratio"] > 0 for r in doc["vector"])
    assert 0 < doc["vec_wait_share_maskable_ppo"] < 1
    assert doc["vec_wait"]["maskable_ppo"]["n_envs"] == 2  # the train file's
    assert "bench-small" in err  # progress on stderr


def test_bench_only_ha_round(capsys: pytest.CaptureFixture[str]) -> None:
    """``--only ha-round`` measures the full HA round alone, paired with CartPole."""
    assert main(["bench", "--only", "ha-round", "--quick", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"ha_round_us", "ha_round_ratio", "cartpole_step_us", "provenance"} <= doc.keys()
    assert doc["ha_round_us"] > 0 and doc["ha_round_ratio"] > 0
    assert doc["cartpole_step_us"] == doc["ha_round_cartpole_step_us"]


@pytest.mark.parametrize("stack", ["full", "model"])
def test_bench_only_ha_round_rejects_ha_stack(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only ha-round`` measures the full stack's round: ``--ha-stack`` would be ignored, so
    the combination is refused in one line (exit 2) before any measuring."""
    assert main(["bench", "--only", "ha-round", "--ha-stack", stack, "--quick", "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and "--ha-stack" in err[0] and "ha-round" in err[0]
