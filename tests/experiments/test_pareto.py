"""The Pareto view of a run: dominance by the registry's direction, the front, the files."""

from __future__ import annotations

import json
from pathlib import Path

from pvegym.experiments import pareto
from pvegym.experiments.report import read_metrics_csv
from pvegym.experiments.stats import Estimate


def _pt(name: str, stall: float, moves: float, agent: bool = False) -> pareto.Point:
    return pareto.Point(
        name,
        agent,
        {
            "guest_stall_s": Estimate(stall, stall, stall, 1),
            "moves": Estimate(moves, moves, moves, 1),
        },
    )


def test_front_keeps_exactly_the_non_dominated_points() -> None:
    axes = ("moves", "guest_stall_s")
    noop = _pt("noop", 100.0, 0.0)
    good = _pt("good", 40.0, 2.0)
    busy = _pt("busy", 40.0, 5.0)  # same stall as good with more moves: dominated
    best = _pt("best", 10.0, 9.0)
    worse = _pt("worse", 120.0, 1.0)  # more stall than noop and more moves: dominated
    assert pareto.dominated(busy, good, axes) and not pareto.dominated(good, busy, axes)
    assert not pareto.dominated(good, good, axes)  # equal is not better
    got = pareto.front([noop, good, busy, best, worse], axes)
    assert [p.policy for p in got] == ["noop", "good", "best"]  # ordered by moves


def test_write_draws_every_scenario_from_the_run_files(tmp_path: Path) -> None:
    rows = ["scenario,policy,seed,guest_stall_s,moves,migration_bytes"]
    data = {  # policy: (stall, moves, bytes) per seed
        "noop": [(100.0, 0, 0.0), (110.0, 0, 0.0)],
        "patched": [(60.0, 1, 2.0e9), (70.0, 1, 2.0e9)],
        "agent": [(30.0, 3, 1.0e9), (34.0, 3, 1.0e9)],
        "wasteful": [(90.0, 5, 9.0e9), (95.0, 6, 9.0e9)],
    }
    for sc in ("small", "idle-night"):
        for pol, vals in data.items():
            for seed, (s, m, b) in enumerate(vals):
                rows.append(f"{sc},{pol},{seed},{s!r},{m},{b!r}")
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    policies = [
        {"name": "noop", "label": "", "params": {}},
        {"name": "patched", "label": "", "params": {}},
        {"name": "learned", "label": "agent", "params": {}},
        {"name": "upstream", "label": "wasteful", "params": {}},
    ]
    manifest = {"config": {"name": "t", "policies": policies, "report": {"bootstrap_seed": 0}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    written = pareto.write(tmp_path)
    assert {p.name for p in written} == {"pareto-small.png", "pareto-idle-night.png", "pareto.md"}
    assert all(p.stat().st_size > 0 for p in written)
    md = (tmp_path / "pareto.md").read_text()
    lines = {ln.split("|")[1].strip(): ln for ln in md.splitlines() if ln.startswith("| ")}
    # vs moves: noop (0 moves), patched (1), agent (3) form the front; vs bytes patched is
    # dominated by the agent (less stall, fewer bytes); wasteful is on neither front
    assert lines["noop"].rstrip(" |").endswith("● | ●")
    assert lines["patched"].count("●") == 1
    assert lines["agent"].count("●") == 2
    assert "●" not in lines["wasteful"]
    pts = pareto.points(
        read_metrics_csv(tmp_path / "metrics.csv"),
        "small",
        {"agent": "learned"},
        ("guest_stall_s", "moves"),
    )
    assert [p.agent for p in pts] == [False, False, True, False]
    assert pts[2].est["guest_stall_s"].mean == 32.0
