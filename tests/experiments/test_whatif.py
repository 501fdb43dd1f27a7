"""``pvegym whatif`` on the fixtures: the report, the failure loop, the held-out validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pvegym.cli import main
from pvegym.experiments.whatif import BLEND_GRID
from pvegym.experiments.whatif_sweep import DEFAULT, FIT_SEEDS, HELD_SEEDS
from pvegym.policies.patched import PatchedPolicy
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.scenario import PsiModel

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pve-exports"
AGENT = Path(__file__).resolve().parents[2] / "results" / "train-pair-scorer"  # committed model
STRESS_START = 1795167000  # Fri 2026-11-20 09:30 UTC: the stress run in the fixture's day series
STRESS_END = 1795174200  # 11:30 UTC


def _whatif(out: Path, fixture: str, window: str = "day") -> dict[str, Any]:
    if window != "day":
        code = main(["whatif", str(FIXTURES / fixture), "--out", str(out), "--window", window])
        assert code == 0
        return json.loads((out / "whatif.json").read_text())
    code = main(["whatif", str(FIXTURES / fixture), "--out", str(out), "--window", "day"])
    assert code == 0
    return json.loads((out / "whatif.json").read_text())


@pytest.fixture(scope="module")
def pve9(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("whatif9")
    return out, _whatif(out, "pve9-field")


def _moves(doc: dict[str, Any], label: str) -> list[dict[str, Any]]:
    moves: list[dict[str, Any]] = doc["policies"][label]["moves"]
    return moves


def test_report_states_window_and_resolution_first(pve9: tuple[Path, dict[str, Any]]) -> None:
    out, doc = pve9
    head = (out / "report.md").read_text().splitlines()[:6]
    assert head[2].startswith(
        "**Window:** Thu 2026-11-19 12:00:00 UTC → Fri 2026-11-20 12:00:00 UTC (24 h)"
    )
    assert "one row every 60 s (AVERAGE)" in head[3]
    assert set(doc["policies"]) == {"noop", "upstream", "patched", "guest-centric"}
    for label in ("noop", "upstream", "patched", "guest-centric"):
        assert (out / "plots" / f"timeline-{label}.png").stat().st_size > 10_000
    assert (out / "plots" / "model-vs-reality.png").is_file()
    report = (out / "report.md").read_text()
    assert "## How far to trust it: model vs reality (held out)" in report
    # the first section after the header is the recommendation
    sections = [line for line in report.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Recommendation"
    assert sections.index("## What PVE would gain if it had them (not in PVE)") > sections.index(
        "## Fixes you can make"
    )


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
    assert v["cpu_blend"] in BLEND_GRID and v["default_cpu_blend"] == PsiModel().cpu_blend


def test_a_study_and_an_agent_add_their_policies(tmp_path: Path) -> None:
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
            "--agent",
            str(AGENT),
        ]
    )
    assert code == 0
    doc = json.loads((out / "whatif.json").read_text())
    assert doc["policies"]["patched-tuned"]["params"] == params
    # a learned agent is replayed beside them, in the section of what PVE does not have
    assert doc["policies"]["learned:train-pair-scorer"]["policy"] == "learned"
    others = (out / "report.md").read_text().split("## What PVE would gain if it had them")[1]
    assert "| learned:train-pair-scorer | no |" in others.split("\n## ", 1)[0]
    assert (out / "plots" / "timeline-learned-train-pair-scorer.png").is_file()
    # scored by the benchmark's cost, not the study's objective
    assert doc["cost"]["weights"] == BALANCER_COST
    for run in doc["policies"].values():
        assert run["cost"] == pytest.approx(weighted_cost(BALANCER_COST, run["metrics"]))


PVE_OPTIONS = {
    "ha-auto-rebalance",
    "ha-auto-rebalance-threshold",
    "ha-auto-rebalance-hold-duration",
    "ha-auto-rebalance-margin",
    "ha-auto-rebalance-method",
}


def _check_choice(rec: dict[str, Any], sweep: dict[str, Any]) -> None:
    """A concrete choice in PVE 9.2's option names and percent units, consistent with the sweep:
    off when off ties with the cheapest on the fit part, else a tied setting; its held-out gain
    against off has a CI over fresh seeds."""
    opts = rec["options"]
    assert rec["units"] == "percent" and set(opts) <= PVE_OPTIONS
    rows = {r["setting"]: r for r in sweep["settings"]}
    best = min(float(np.mean(r["fit_cost"])) for r in rows.values())
    chosen = rows[sweep["chosen"]]
    assert chosen["tie"] and chosen["options"] == opts
    tied = [r for r in rows.values() if r["tie"]]
    assert min(float(np.mean(r["fit_cost"])) for r in tied) == best  # the tie is the cheapest's
    if rows["off"]["tie"]:
        assert opts == {"ha-auto-rebalance": 0}
    else:
        assert set(opts) == PVE_OPTIONS and opts["ha-auto-rebalance"] == 1
        assert 0 < opts["ha-auto-rebalance-threshold"] <= 100  # percent, not a fraction
        assert 0 < opts["ha-auto-rebalance-margin"] <= 100
    g = rec["held_out"]["gain_vs_off"]
    assert g["n"] == HELD_SEEDS and g["lo"] <= g["mean"] <= g["hi"]
    assert not set(sweep["fit_seeds"]) & set(sweep["held_seeds"])  # fresh seeds
    assert len(sweep["fit_seeds"]) == FIT_SEEDS


def test_recommendation_in_pve_options_before_and_after_the_cdrom_fix(
    pve9: tuple[Path, dict[str, Any]],
) -> None:
    out, doc = pve9
    assert {
        "recommendation",
        "sweep",
        "fixes",
        "after_fixes",
        "policies",
        "hypothetical_ha",
    } <= set(doc)
    assert doc["hypothetical_ha"] is None  # eight guests are HA-managed
    # the units are the import's, proven by the CRM master's libpve-cluster-perl
    assert doc["recommendation"]["units_why"] == "libpve-cluster-perl 9.1.6 on pve-ams-01"
    _check_choice(doc["recommendation"], doc["sweep"])
    after = doc["after_fixes"]
    _check_choice(after["recommendation"], after["sweep"])
    # the cluster's own setting (30 % / 3 / 10 % / bruteforce) is on the sweep, in its units
    assert doc["recommendation"]["current"] == {
        "ha-auto-rebalance": 1,
        "ha-auto-rebalance-threshold": 30,
        "ha-auto-rebalance-hold-duration": 3,
        "ha-auto-rebalance-margin": 10,
        "ha-auto-rebalance-method": "bruteforce",
    }
    assert any(r["setting"] == "0.3/3/0.1/bruteforce" for r in doc["sweep"]["settings"])
    # before the fix upstream retries the CD-ROM guest: every setting that acts fails
    failing = set(doc["sweep"]["churned_or_failed"])
    rows = {r["setting"]: r for r in doc["sweep"]["settings"]}
    for key, row in rows.items():
        if row["metrics"]["moves"]:
            assert key in failing and row["metrics"]["moves_failed"] == row["metrics"]["moves"]
    assert not any(r["metrics"]["moves_failed"] for r in after["sweep"]["settings"])
    report = (out / "report.md").read_text()
    first = report.split("## Recommendation", 1)[1].split("\n## ", 1)[0]
    assert "As it is:" in first and "After the fixes below:" in first
    assert "covers the model's randomness, not the one recorded window" in first


def test_the_cdrom_guest_gets_its_fix_and_the_window_after_it(
    pve9: tuple[Path, dict[str, Any]],
) -> None:
    out, doc = pve9
    fixes = {f["sid"]: f for f in doc["fixes"]}
    cd = fixes["vm:101"]
    assert cd["problem"] == "fails" and "ide2: local cdrom image" in cd["reason"]
    assert "eject the CD-ROM" in cd["fix"] and "qm set 101 --ide2 none,media=cdrom" in cd["fix"]
    assert cd["simulated_as"] == {"guests[0].local_resources": False}
    assert cd["attempts"]["upstream"] == len(_moves(doc, "upstream"))
    assert "vm:108" not in fixes  # stopped: no balancer picks it
    after = doc["after_fixes"]["policies"]
    up = after["upstream"]["moves"]
    assert up and {m["outcome"] for m in up} == {"succeeded"}
    before = doc["policies"]["upstream"]["metrics"]
    assert after["upstream"]["metrics"]["guest_stall_s"] < before["guest_stall_s"]
    assert after["upstream"]["cost"] < doc["policies"]["upstream"]["cost"]
    report = (out / "report.md").read_text()
    assert (
        "### The window after the fixes (simulated: `guests[0].local_resources = false`)" in report
    )


def test_choice_from_a_tie_names_no_winner() -> None:
    from pvegym.experiments.whatif_sweep import OFF, Setting, choose, setting_key, setting_of

    a = Setting(0.3, 3, 0.1, "bruteforce")
    b = Setting(0.5, 12, 0.25, "bruteforce")
    ka, kb = setting_key(a), setting_key(b)
    by = {ka: a, kb: b}
    # off ties with the cheapest: off
    chosen, tie, why = choose({OFF: [10.0, 10.0, 10.0], ka: [10.0, 10.0, 10.0]}, by, None, 0, "t")
    assert chosen is None and set(tie) == {OFF, ka}
    # two settings tie below off: the current one if it ties, else the most conservative, said so
    cost = {OFF: [50.0, 51.0, 52.0], ka: [10.0, 10.0, 10.0], kb: [10.0, 10.0, 10.0]}
    assert choose(cost, by, a, 0, "t")[0] == a
    chosen, tie, why = choose(cost, by, None, 0, "t")
    assert chosen == b and "no winner" in why
    # a clear winner
    cost = {OFF: [50.0, 51.0, 52.0], ka: [10.0, 11.0, 12.0], kb: [30.0, 31.0, 32.0]}
    assert choose(cost, by, None, 0, "t")[:2] == (a, [ka])
    assert setting_of({}) == setting_of(DEFAULT)


def test_bad_workers_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["whatif", str(FIXTURES / "pve9-field"), "--out", str(tmp_path), "--workers", "0"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workers" in err[0]


def test_two_agents_of_one_name_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two agents labelled alike would overwrite each other's results: refused, naming --agent."""
    argv = ["whatif", str(FIXTURES / "pve9-field"), "--out", str(tmp_path), "--window", "1h"]
    code = main([*argv, "--agent", str(AGENT), "--agent", str(AGENT)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--agent" in err[0] and AGENT.name in err[0]


def test_a_guest_moved_back_and_forth_gets_auto_rebalance_off() -> None:
    """A loop (a replay returns the guest to a node it left) is fixed with the per-resource flag;
    a guest with the flag already off, a stopped one or a non-HA one needs no fix."""
    from types import SimpleNamespace

    from pvegym.experiments.whatif_fixes import find_fixes, overrides

    def mv(sid: str, src: str, dst: str) -> dict[str, Any]:
        return {"guest": sid, "source": src, "target": dst, "outcome": "succeeded"}

    scenario = {
        "guests": [
            {"sid": "vm:1"},
            {"sid": "vm:2", "auto_rebalance": False},
            {"sid": "vm:3", "state": "stopped"},
            {"sid": "vm:4", "ha": False},
            {"sid": "vm:5"},
        ]
    }
    loop = [mv(s, "a", "b") for s in ("vm:1", "vm:2", "vm:3", "vm:4")]
    loop += [mv(s, "b", "a") for s in ("vm:1", "vm:2", "vm:3", "vm:4")] + [mv("vm:5", "a", "b")]
    export = SimpleNamespace(guests={}, storages={}, pci_live_capable=None)
    (fix,) = find_fixes(export, scenario, {"upstream": loop})  # type: ignore[arg-type]
    assert fix.sid == "vm:1" and fix.problem == "loops" and "1×" in fix.reason
    assert "ha-manager set vm:1 --auto-rebalance 0" in fix.as_json()["fix"]
    assert overrides([fix]) == {"guests[0].auto_rebalance": False}
    assert fix.attempts == {"upstream": 2}


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
    # the sweep and the replays after the fixes run on that calibrated scenario too: nothing moves
    # under off/noop, whose stall here is the same for every seed (its fit costs are equal), so
    # each equals the policy replay's
    stall = doc["policies"]["noop"]["metrics"]["guest_stall_s"]
    for sweep in (doc["sweep"], doc["after_fixes"]["sweep"]):
        off = next(r for r in sweep["settings"] if r["setting"] == "off")
        assert len(set(off["fit_cost"])) == 1
        assert off["metrics"]["guest_stall_s"] == pytest.approx(stall, rel=1e-12)
    after_noop = doc["after_fixes"]["policies"]["noop"]["metrics"]["guest_stall_s"]
    assert after_noop == pytest.approx(stall, rel=1e-12)  # the fix changes nothing without moves
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
