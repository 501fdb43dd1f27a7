"""``pvegym whatif`` on the fixtures: the report, the failure loop, the held-out validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pvegym.cli import main
from pvegym.experiments.whatif import BLEND_GRID
from pvegym.policies.patched import PatchedPolicy

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pve-exports"
STRESS_START = 1795167000  # Fri 2026-11-20 09:30 UTC: the stress run in the fixture's day series
STRESS_END = 1795174200  # 11:30 UTC


def _whatif(out: Path, fixture: str) -> dict[str, Any]:
    code = main(["whatif", str(FIXTURES / fixture), "--out", str(out), "--window", "day"])
    assert code == 0
    return json.loads((out / "whatif.json").read_text())


@pytest.fixture(scope="module")
def pve9(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("whatif9")
    return out, _whatif(out, "pve9-field")


def _moves(doc: dict[str, Any], label: str) -> list[dict[str, Any]]:
    (run,) = [p for p in doc["policies"] if p["label"] == label]
    return run["moves"]


def test_report_states_window_and_resolution_first(pve9: tuple[Path, dict[str, Any]]) -> None:
    out, doc = pve9
    head = (out / "report.md").read_text().splitlines()[:6]
    assert head[2].startswith(
        "**Window:** Thu 2026-11-19 12:00:00 UTC → Fri 2026-11-20 12:00:00 UTC (24 h)"
    )
    assert "one row every 60 s (AVERAGE)" in head[3]
    assert [p["label"] for p in doc["policies"]] == ["noop", "upstream", "patched", "guest-centric"]
    for label in ("noop", "upstream", "patched", "guest-centric"):
        assert (out / "plots" / f"timeline-{label}.png").stat().st_size > 10_000
    assert (out / "plots" / "model-vs-reality.png").is_file()
    report = (out / "report.md").read_text()
    assert "## Recommendation" in report and "**Recommendation:" in report
    assert "## How far to trust it: model vs reality (held out)" in report


def test_upstream_retries_the_cdrom_guest_and_patched_backs_off(
    pve9: tuple[Path, dict[str, Any]],
) -> None:
    """The field report's failure loop, found in the operator's own cluster: the stress VM with
    a local CD-ROM is upstream's best move, every attempt fails after the precheck, and upstream
    re-issues it about every 40 s (the hold of 3 rounds + the LRM + the round in which the CRM
    sees the failure, docs/model.md) for as long as the stress lasts; patched backs off 60 s, 120 s,
    … (patch 1)."""
    _, doc = pve9
    start = doc["import"]["window"]["start"]
    up = _moves(doc, "upstream")
    assert {(m["guest"], m["source"], m["target"], m["outcome"]) for m in up} == {
        ("vm:101", "pve-ams-01", "pve-ams-02", "failed")
    }
    assert {m["reason"] for m in up} == {"local resource"}
    t = np.array([m["t"] for m in up]) + start
    gaps = np.diff(t)
    assert 30 <= np.median(gaps) <= 50
    # it keeps trying for the whole stress run (two hold windows of slack at each end)
    assert t[0] - STRESS_START <= 60 and STRESS_END - t[-1] <= 60
    assert len(up) >= 0.8 * (STRESS_END - STRESS_START) / 50

    cfg = PatchedPolicy.Config()
    pt = _moves(doc, "patched")
    assert (
        pt and {m["guest"] for m in pt} == {"vm:101"} and {m["outcome"] for m in pt} == {"failed"}
    )
    tp = np.array([m["t"] for m in pt])
    for k, gap in enumerate(np.diff(tp), start=1):  # after the k-th failure: base × factor^(k−1)
        assert gap >= min(cfg.backoff_base_s * cfg.backoff_factor ** (k - 1), cfg.backoff_cap_s)
    assert len(pt) < len(up) / 10
    # guest-centric checks migratability before scoring: it never tries the CD-ROM guest
    assert all(m["guest"] != "vm:101" for m in _moves(doc, "guest-centric"))
    # the real cluster's task log shows the same loop, and the report puts them side by side
    failed = doc["import"]["failed_migrations"]
    assert failed and {m["sid"] for m in failed} == {"vm:101"}


def test_held_out_validation_beats_the_naive_prediction(pve9: tuple[Path, dict[str, Any]]) -> None:
    _, doc = pve9
    v = doc["validation"]
    assert v["fit_rows"] == 960 and v["rows"] == 1440  # fitted on 2/3 of the window
    nodes = {n["node"]: n for n in v["nodes"]}
    assert set(nodes) == {"pve-ams-01", "pve-ams-02", "pve-ams-03"}
    assert np.isfinite(v["cpu_mae_pp"])
    # the stress run is in the held-out part: only a model that adds the guests' measured load to
    # the fitted host load follows it; each node's own fit-part mean cannot
    stressed = nodes["pve-ams-01"]
    assert stressed["cpu_mae_pp"] < stressed["cpu_naive_mae_pp"] / 5
    # PVE 9 records PSI: the model's pressure is compared with it, the blend fitted on the fit part
    assert all(n["psi_cpu_mae_pp"] is not None for n in nodes.values())
    assert v["cpu_blend"] in BLEND_GRID and v["default_cpu_blend"] == 0.2


def test_pve8_export_replays_without_psi(tmp_path: Path) -> None:
    doc = _whatif(tmp_path, "pve8-groups")
    assert doc["import"]["rrd_format"] == "pve2"
    assert doc["import"]["window"]["resolution_s"] == 1800
    assert all(n["psi_cpu_mae_pp"] is None for n in doc["validation"]["nodes"])
    report = (tmp_path / "report.md").read_text()
    assert "records no pressure (PVE 8.4.1, pve2 format): not compared" in report
    # the legacy VM with the host's CD-ROM drive can never move; upstream in static mode tries
    up = _moves(doc, "upstream")
    assert all(m["outcome"] == "failed" for m in up if m["guest"] == "vm:203")


def test_a_study_adds_its_tuned_constants(tmp_path: Path) -> None:
    study = tmp_path / "study"
    study.mkdir()
    params = {"threshold": 0.2, "backoff_base_s": 120.0}
    (study / "best_params.json").write_text(
        json.dumps(
            {
                "best": {"policy": {"name": "patched", "params": params}},
                "objectives": [
                    {"name": "cost", "weights": {"guest_stall_s": 1.0, "moves_failed": 500.0}}
                ],
            }
        )
    )
    out = tmp_path / "w"
    code = main(
        [
            "whatif",
            str(FIXTURES / "pve9-field"),
            "--out",
            str(out),
            "--window",
            "1h",
            "--study",
            str(study),
        ]
    )
    assert code == 0
    doc = json.loads((out / "whatif.json").read_text())
    tuned = [p for p in doc["policies"] if p["label"] == "patched-tuned"]
    assert tuned and tuned[0]["params"] == params
    assert doc["cost"]["weights"] == {"guest_stall_s": 1.0, "moves_failed": 500.0}


def test_the_replay_uses_the_fitted_blend_and_pressure_is_reported_apart(
    pve9: tuple[Path, dict[str, Any]],
) -> None:
    """What the export calibrates goes into the replay (the scenario written and run carries the
    fitted ``psi.cpu_blend``), and the error while a node was under pressure is reported apart
    from the whole held-out part: the fixture's stress run is there, the rest is idle."""
    from pvegym.experiments.whatif import PRESSURE_PCT
    from pvegym.sim import catalog

    out, doc = pve9
    v = doc["validation"]
    scn = catalog.resolve(str(out / "scenario.toml")).scenario
    assert scn.psi.cpu_blend == v["cpu_blend"] == doc["import"]["calibration"]["psi.cpu_blend"]
    nodes = {n["node"]: n for n in v["nodes"]}
    stressed = nodes["pve-ams-01"]
    # the stress run Fri 09:30–11:30 is 120 one-minute rows of the held-out part
    assert stressed["pressure_rows"] == (STRESS_END - STRESS_START) // 60
    assert nodes["pve-ams-03"]["pressure_rows"] == 0  # the node in maintenance idles
    # the whole held-out average hides the error during the stress
    assert stressed["pressure_psi_mae_pp"] > 2 * stressed["psi_cpu_fitted_mae_pp"]
    report = (out / "report.md").read_text()
    assert (
        f"During pressure (held-out rows with the node's recorded PSI cpu some ≥ {PRESSURE_PCT:g}"
        in report
    )
    assert f"| pve-ams-01 | {stressed['pressure_rows']} |" in report
    assert "No guest is HA-managed" not in report  # eight are
