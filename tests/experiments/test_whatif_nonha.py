"""``pvegym whatif`` on exports where no guest is HA-managed (both real ones were): the report
says so first; on more than one node it replays the busiest guests made HA, labelled
hypothetical; on one node nothing can move. A node its guests exceed is flagged at the top."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from pvegym.cli import main
from pvegym.experiments.whatif import HYPOTHETICAL_SHARE

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pve-exports"


def _whatif(out: Path, fixture: str) -> tuple[list[str], dict[str, Any]]:
    assert main(["whatif", str(FIXTURES / fixture), "--out", str(out), "--window", "day"]) == 0
    return (out / "report.md").read_text().splitlines(), json.loads(
        (out / "whatif.json").read_text()
    )


@pytest.fixture(scope="module")
def pve7(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], dict[str, Any]]:
    out = tmp_path_factory.mktemp("whatif7")
    return (out, *_whatif(out, "pve7-nonha"))


def test_no_ha_guest_is_said_under_the_title(pve7: tuple[Path, list[str], dict[str, Any]]) -> None:
    _, lines, _ = pve7
    assert lines[0].startswith("# ") and lines[1] == ""
    assert lines[2].startswith("**No guest is HA-managed**")


def test_the_busiest_guests_made_ha_are_a_labelled_hypothetical(
    pve7: tuple[Path, list[str], dict[str, Any]],
) -> None:
    out, lines, doc = pve7
    hyp = doc["hypothetical_ha"]
    # vm:103 (3 cores busy at peak) and vm:100 (2.5) carry at least half of the guests' CPU
    assert (
        hyp["guests_made_ha"][:2] == ["vm:103", "vm:100"] and hyp["cpu_share"] >= HYPOTHETICAL_SHARE
    )
    assert list(hyp["policies"]) == list(doc["policies"])
    data = tomllib.loads((out / "hypothetical-ha.toml").read_text())
    made = [g["sid"] for g in data["guests"] if g.get("ha", True)]
    assert made == sorted(hyp["guests_made_ha"])
    # the real scenario is untouched: still no HA guest
    real = tomllib.loads((out / "scenario.toml").read_text())
    assert not any(g.get("ha", True) for g in real["guests"])
    # the recommendation is the first section: nothing to decide, with the reason, and the
    # hypothetical replay in it, labelled
    sections = [x for x in lines if x.startswith("## ")]
    assert sections[0] == "## Recommendation"
    start = lines.index("## Recommendation")
    rec = "\n".join(lines[start : lines.index(sections[1])])
    assert doc["recommendation"] is None and doc["sweep"] is None
    assert doc["reason"].startswith("nothing to decide: no guest is HA-managed")
    assert "**Recommendation: nothing to decide.** No guest is HA-managed" in rec
    assert "*Hypothetical*" in rec and "| policy (hypothetical HA) |" in rec
    assert "*Hypothetical*" not in "\n".join(lines[:start])


def test_a_node_its_guests_exceed_is_flagged_at_the_top(
    pve7: tuple[Path, list[str], dict[str, Any]],
) -> None:
    _, lines, _ = pve7
    head = lines[: lines.index("## Recommendation")]
    flags = [x for x in head if x.startswith("**Warning — ")]
    assert len(flags) == 1 and flags[0].startswith("**Warning — pve7-a:** its guests' cpu")
    assert "in every one of the 70 rows" in flags[0]


def test_one_node_nothing_can_move(tmp_path: Path) -> None:
    lines, doc = _whatif(tmp_path, "pve7-single")
    assert lines[2].startswith("**No guest is HA-managed**, and the cluster has 1 online node")
    assert "nothing can move" in lines[2]
    assert doc["hypothetical_ha"] is None and not (tmp_path / "hypothetical-ha.toml").exists()
    assert doc["recommendation"] is None
    assert doc["reason"] == "nothing to decide: the cluster has 1 online node, so no guest can move"
    assert all(p["metrics"]["moves"] == 0 for p in doc["policies"].values())
