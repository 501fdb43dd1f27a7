"""``pvegym whatif`` on a PVE 8.4 export: no ``ha-auto-rebalance``, so the recommendation is a
choice among that version's own ``crs`` options (``ha=basic|static``, ``ha-rebalance-on-start``),
held out against the cluster's current setting; the 9.x sweep is a labelled hypothetical."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvegym.cli import main
from pvegym.experiments.whatif import (
    SCHEDULER_ACTS_ON,
    Recommendation,
    scheduler_events,
)
from pvegym.experiments.whatif_report import _choice_lines
from pvegym.experiments.whatif_sweep import (
    FIT_SEEDS,
    HELD_SEEDS,
    CrsSetting,
    Sweep,
    choose_crs,
    crs_settings,
)

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pve-exports"
PVE9_OPTIONS = {
    "ha-auto-rebalance",
    "ha-auto-rebalance-threshold",
    "ha-auto-rebalance-hold-duration",
    "ha-auto-rebalance-margin",
    "ha-auto-rebalance-method",
}


@pytest.fixture(scope="module")
def pve8(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One what-if of ``pve8-groups`` over 12 h (the day series, 1800 s rows), shared."""
    out = tmp_path_factory.mktemp("whatif8")
    code = main(["whatif", str(FIXTURES / "pve8-groups"), "--out", str(out), "--window", "12h"])
    assert code == 0
    return out, json.loads((out / "whatif.json").read_text())


def _first_section(out: Path) -> str:
    report = (out / "report.md").read_text()
    return report.split("## Recommendation", 1)[1].split("\n## ", 1)[0]


def test_pve8_export_replays_without_psi(pve8: tuple[Path, dict[str, Any]]) -> None:
    out, doc = pve8
    assert doc["import"]["rrd_format"] == "pve2"
    assert doc["import"]["window"]["resolution_s"] == 1800
    assert all(n["psi_cpu_mae_pp"] is None for n in doc["validation"]["nodes"])
    report = (out / "report.md").read_text()
    assert "records no pressure (PVE 8.4.1, pve2 format): not compared" in report
    # the legacy VM with the host's CD-ROM drive can never move; upstream in static mode tries
    up = doc["policies"]["upstream"]["moves"]
    assert all(m["outcome"] == "failed" for m in up if m["guest"] == "vm:203")


def _check_crs(rec: dict[str, Any], sweep: dict[str, Any], current: dict[str, Any]) -> None:
    """A choice among PVE 8.4's crs options, consistent with its sweep, held out against the
    cluster's current setting over fresh seeds."""
    assert rec["pve_version"] == "8.4.1" and rec["units"] is None
    assert rec["current"] == current
    rows = {r["setting"]: r for r in sweep["settings"]}
    # every setting PVE 8.4 has, and nothing else (no ha-auto-rebalance)
    assert {tuple(sorted(r["options"].items())) for r in rows.values()} == {
        (("ha", m), ("ha-rebalance-on-start", s)) for m in ("basic", "static") for s in (0, 1)
    }
    assert rows[sweep["chosen"]]["options"] == rec["options"]
    assert rows[sweep["chosen"]]["tie"]
    # replayed with the scenario's crs_mode (static as such, basic as the import's stand-in)
    assert {r["options"]["ha"]: r["params"]["crs_mode"] for r in rows.values()} == {
        "basic": "dynamic",
        "static": "static",
    }
    # the baseline is the cluster's current setting, the compared one another of the sweep
    assert rec["baseline"] == sweep["baseline"] == rec["held_out"]["baseline"]
    assert rows[sweep["baseline"]]["options"] == current
    assert rec["held_out"]["compared"] in rows and rec["held_out"]["compared"] != rec["baseline"]
    g = rec["held_out"]["gain_vs_off"]
    assert g["n"] == HELD_SEEDS and g["lo"] <= g["mean"] <= g["hi"]
    assert not set(sweep["fit_seeds"]) & set(sweep["held_seeds"])
    assert len(sweep["fit_seeds"]) == FIT_SEEDS
    assert rec["every_setting_ties"] == all(r["tie"] for r in rows.values())
    assert rec["would_matter_on"] == list(SCHEDULER_ACTS_ON)


def test_pve8_recommends_its_own_crs_options_with_a_ci(pve8: tuple[Path, dict[str, Any]]) -> None:
    out, doc = pve8
    current = {"ha": "static", "ha-rebalance-on-start": 1}  # cluster/options.json of the export
    assert doc["reason"] is None
    _check_crs(doc["recommendation"], doc["sweep"], current)
    after = doc["after_fixes"]
    _check_crs(after["recommendation"], after["sweep"], current)
    # nothing in the window starts or recovers a guest: every setting ties, the current one is
    # kept, its CI against the others contains 0, and the report says so with the events
    # that would make it matter
    rec = doc["recommendation"]
    assert rec["scheduler_events"] == [] and rec["every_setting_ties"]
    assert rec["options"] == current
    g = rec["held_out"]["gain_vs_off"]
    assert g["lo"] <= 0.0 <= g["hi"]
    assert "nothing in the window starts or recovers a guest" in rec["why"]
    first = _first_section(out)
    assert first.index(
        "keep `crs: ha=static,ha-rebalance-on-start=1` — no setting of this version changes "
        "this window's cost"
    ) < first.index("*Hypothetical upgrade*")
    assert "against the current `crs: ha=static,ha-rebalance-on-start=1` gains **" in first
    assert "a node failure" in first and "a start of a stopped HA guest" in first
    assert "covers the model's randomness, not the one recorded window" in first
    # ha-auto-rebalance appears only in the labelled hypothetical upgrade
    head = first.split("*Hypothetical upgrade*", 1)[0]
    assert "ha-auto-rebalance-threshold" not in head and "switch `ha-auto-rebalance`" not in head
    assert "After the fixes below: keep `crs: ha=static" in first


def test_pve8_keeps_the_9x_sweep_as_a_labelled_hypothetical(
    pve8: tuple[Path, dict[str, Any]],
) -> None:
    out, doc = pve8
    up = doc["hypothetical_upgrade"]
    assert "ha-auto-rebalance" in up["hypothetical"]
    assert set(up["would_choose"]) <= PVE9_OPTIONS
    sweep = up["sweep"]
    assert sweep["baseline"] == "off" and sweep["held_out_gain_vs_off"]["n"] == HELD_SEEDS
    assert any(r["setting"] == "off" for r in sweep["settings"])
    report = (out / "report.md").read_text()
    assert "### hypothetical upgrade to PVE ≥ 9.1 (`ha-auto-rebalance`, percent units)" in report
    # it is not run twice: not after the fixes
    assert "hypothetical_upgrade" not in doc["after_fixes"]


def test_crs_options_by_release() -> None:
    """pve-cluster's ``$crs_format``: ``ha`` from PVE 7.3 (pve-cluster 7.2-3), the
    ``ha-rebalance-on-start`` flag from 7.4 (7.3-3); PVE 8.4 (pve-cluster 8.1.0) has both."""
    assert [s.key for s in crs_settings((8, 4, 1))] == [
        "basic/0",
        "basic/1",
        "static/0",
        "static/1",
    ]
    assert [s.key for s in crs_settings((7, 3))] == ["basic/0", "static/0"]
    assert crs_settings((7, 2, 7)) == []
    s = CrsSetting("static", True)
    assert s.pve(False) == {"ha": "static", "ha-rebalance-on-start": 1}
    assert s.params == {"crs_mode": "static"}


def test_crs_choice_keeps_the_current_setting_unless_another_is_cheaper() -> None:
    by = {s.key: s for s in crs_settings((8, 4))}
    cur = by["static/1"]
    same = {k: [10.0, 10.0, 10.0] for k in by}
    chosen, tie, why = choose_crs(same, by, cur, 0, "t")
    assert chosen == cur and set(tie) == set(by) and why.startswith("every setting")
    # a setting clearly cheaper than the current one wins
    cost = {k: [50.0, 51.0, 52.0] for k in by}
    cost["basic/1"] = [10.0, 11.0, 12.0]
    chosen, tie, why = choose_crs(cost, by, cur, 0, "t")
    assert chosen == by["basic/1"] and tie == ["basic/1"]
    # two tie below the current one: no winner named, the one closest to PVE's defaults shown
    cost["basic/0"] = [10.0, 11.0, 12.0]
    chosen, tie, why = choose_crs(cost, by, cur, 0, "t")
    assert chosen == by["basic/0"] and "no winner" in why


def test_a_pve8_change_is_said_and_events_are_named() -> None:
    """Where a setting beats the current one, the report says to change it; the window's events
    that make the scheduler act are named (:func:`scheduler_events`)."""
    by = {s.key: s for s in crs_settings((8, 4))}
    cur, alt = by["static/1"], by["basic/0"]
    cost = {k: [50.0, 51.0, 52.0] for k in by}
    cost["basic/0"] = [10.0, 11.0, 12.0]
    chosen, tie, why = choose_crs(cost, by, cur, 0, "t")
    sw = Sweep(list(by.values()), cur, [0, 1, 2], [3, 4], cost, {}, chosen, tie, why, alt, None,
               baseline=cur.key)  # fmt: skip
    events = scheduler_events(
        {"events": [{"t": 600.0, "type": "power-off", "node": "n2"}, {"t": 9.0, "sid": "vm:1"}]}
    )
    assert events == ["power-off n2 at 600 s"]
    rec = Recommendation(
        "8.4.1", False, True, "", 3, None, None, sw, scheduler_events=tuple(events)
    )
    text = "\n".join(_choice_lines(rec, "static", "Recommendation"))
    assert (
        "**Recommendation: change to `crs: ha=basic,ha-rebalance-on-start=0`** (the cluster runs "
        "`crs: ha=static,ha-rebalance-on-start=1`)" in text
    )
    assert "the scheduler acts on: power-off n2 at 600 s" in text
