"""Episode records replay with exactly the recorded metrics; a tampered record does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pvegym.cli import main
from pvegym.experiments.config import build_policy
from pvegym.experiments.record import (
    EpisodeRecord,
    load_record,
    metric_diff,
    play,
    replay,
    save_record,
)
from pvegym.sim import catalog
from pvegym.sim.simulation import Simulation


def _record(
    scenario: str = "failure-loop", seed: int = 2, duration: float = 600.0
) -> EpisodeRecord:
    overrides = {"migration.qemu_server": "patched"}
    scn = catalog.scenario(scenario, seed, overrides)
    policy = build_policy("upstream", {"threshold": 0.3})
    policy.reset(seed)
    result, motions = play(Simulation(scn, seed), policy.decide, duration)
    return EpisodeRecord(
        scenario=scenario,
        seed=seed,
        duration=duration,
        policy="upstream",
        params={"threshold": 0.3},
        overrides=overrides,
        motions=motions,
        metrics=result["metrics"],
    )


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_saved_record_replays_with_matching_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = _record()
    assert rec.motions, "the failure loop must make the upstream balancer move"
    path = save_record(rec, tmp_path / "rec.json")
    loaded = load_record(path)
    assert loaded.motions == rec.motions
    assert metric_diff(rec.metrics, replay(loaded)) == []
    code, out, _ = _cli(capsys, "replay", str(path))
    assert code == 0
    assert out.startswith("metrics match")


def test_a_record_with_embedded_scenario_data_replays(tmp_path: Path) -> None:
    rec = _record("small", 1000001, 900.0)
    data = catalog.resolve("small", 1000001, rec.overrides).data
    rec.scenario_data = data
    rec.overrides = {}
    assert (
        metric_diff(rec.metrics, replay(load_record(save_record(rec, tmp_path / "r.json")))) == []
    )


def test_a_tampered_record_fails_with_a_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = save_record(_record(), tmp_path / "rec.json")
    doc = json.loads(path.read_text())
    doc["motions"] = doc["motions"][: len(doc["motions"]) // 2]  # drop half of the motions
    path.write_text(json.dumps(doc))
    code, out, _ = _cli(capsys, "replay", str(path))
    assert code == 1
    assert "metrics differ" in out and "moves: recorded" in out

    doc = json.loads(save_record(_record(), tmp_path / "rec2.json").read_text())
    doc["metrics"]["stall_cpu_s"] += 1e-9  # exact comparison: even the last bits count
    (tmp_path / "rec2.json").write_text(json.dumps(doc))
    code, out, _ = _cli(capsys, "replay", str(tmp_path / "rec2.json"))
    assert code == 1 and "stall_cpu_s" in out


def test_a_broken_record_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.json").write_text('{"format": "something else"}')
    code, _, err = _cli(capsys, "replay", str(tmp_path / "bad.json"))
    assert code == 2 and err.count("\n") == 1
