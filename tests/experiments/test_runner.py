"""The runner: byte-identical reruns, workers don't matter, resume after a crash, every output file,
and the traced loop it uses is exactly ``Simulation.run``."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pvegym.experiments import runner
from pvegym.experiments.cells import Cell
from pvegym.experiments.config import (
    Experiment,
    build_policy,
    load_experiment,
)
from pvegym.experiments.record import load_record
from pvegym.experiments.runner import evaluate_cell, plan, run_experiment, unique_cells
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.simulation import Simulation
from tests.conftest import TWO_SCENARIOS_TWO_SEEDS, tiny_experiment

TINY = tiny_experiment(
    "tiny",
    metrics=("moves", "moves_failed", "stall_cpu_s"),
    duration="2m",
    bootstrap_resamples=200,
    scenarios=TWO_SCENARIOS_TWO_SEEDS,
)
Evaluated = tuple[dict[str, Any], dict[str, np.ndarray] | None]
N_CELLS = 8  # 2 scenarios × 2 seeds × 2 policies


@pytest.fixture
def tiny(tmp_path: Path) -> Experiment:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return load_experiment(path)


def test_rerun_and_workers_give_byte_identical_reports(tiny: Experiment, tmp_path: Path) -> None:
    a = run_experiment(tiny, tmp_path / "a", workers=1, progress=False)
    b = run_experiment(tiny, tmp_path / "b", workers=1, progress=False)
    c = run_experiment(tiny, tmp_path / "c", workers=2, progress=False)
    assert a.computed == b.computed == c.computed == N_CELLS
    for name in ("metrics.csv", "summary.md"):
        first = (tmp_path / "a" / name).read_bytes()
        assert first == (tmp_path / "b" / name).read_bytes(), name
        assert first == (tmp_path / "c" / name).read_bytes(), name
    again = run_experiment(tiny, tmp_path / "a", workers=1, progress=False)
    assert (again.computed, again.cached) == (0, N_CELLS)
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == first_csv(tmp_path / "b")


def first_csv(out: Path) -> bytes:
    return (out / "metrics.csv").read_bytes()


def test_an_interrupted_run_resumes_without_recomputing(
    tiny: Experiment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated: list[str] = []
    real = runner.evaluate_cell

    def crash_after_three(cell: Cell) -> Evaluated:
        if len(evaluated) == 3:
            raise KeyboardInterrupt  # as if the machine went away mid-run
        evaluated.append(cell.key)
        return real(cell)

    monkeypatch.setattr(runner, "evaluate_cell", crash_after_three)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(tiny, tmp_path / "out", workers=1, progress=False)
    finished = sorted(p.stem for p in (tmp_path / "out" / "cells").glob("*.json"))
    assert finished == sorted(evaluated)
    assert not list((tmp_path / "out" / "cells").glob(".*tmp"))  # no half-written files

    resumed: list[str] = []

    def count(cell: Cell) -> Evaluated:
        resumed.append(cell.key)
        return real(cell)

    monkeypatch.setattr(runner, "evaluate_cell", count)
    stats = run_experiment(tiny, tmp_path / "out", workers=1, progress=False)
    assert (stats.computed, stats.cached) == (N_CELLS - 3, 3)
    assert not set(resumed) & set(evaluated)
    monkeypatch.setattr(runner, "evaluate_cell", real)
    run_experiment(tiny, tmp_path / "clean", workers=1, progress=False)
    assert first_csv(tmp_path / "out") == first_csv(tmp_path / "clean")


def test_every_output_file_is_written(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.replace("timeline_seeds = 0", "timeline_seeds = 1"))
    exp = load_experiment(path)
    out = tmp_path / "out"
    run_experiment(exp, out, workers=1, progress=False, command=["pvegym", "run", str(path)])

    with (out / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == N_CELLS
    assert list(rows[0]) == ["scenario", "policy", "seed", *METRIC_KEYS]
    assert [(r["scenario"], r["policy"], r["seed"]) for r in rows[:3]] == [
        ("failure-loop", "noop", "0"),
        ("failure-loop", "upstream", "0"),
        ("failure-loop", "noop", "1"),
    ]
    summary = (out / "summary.md").read_text()
    assert "## failure-loop" in summary and "upstream vs noop" in summary

    manifest = json.loads((out / "manifest.json").read_text())
    for key in (
        "config",
        "config_sha256",
        "seeds",
        "git_commit",
        "python",
        "packages",
        "pvegym_version",
        "metrics_csv_sha256",
    ):
        assert key in manifest, key
    assert manifest["config_sha256"] == exp.config_hash()
    assert manifest["seeds"] == {"failure-loop": [0, 1], "small": [1000000, 1000001]}
    # what is particular to this run is in the untracked sidecar, not in the manifest
    run = json.loads((out / "run.json").read_text())
    for key in ("started", "finished", "wall_s", "command", "cpu", "platform"):
        assert key in run and key not in manifest, key
    assert run["command"] == ["pvegym", "run", str(path)]

    plots = out / "plots"
    assert (plots / "compare-failure-loop.png").stat().st_size > 10_000
    assert (plots / "compare-small.png").is_file()
    for pol in ("noop", "upstream"):
        assert (plots / "timelines" / "failure-loop" / f"{pol}-seed0.png").is_file()
        assert (plots / "timelines" / "small" / f"{pol}-seed1000000.png").is_file()
    assert len(list((out / "records").rglob("seed-*.json"))) == N_CELLS

    # the manifest reruns the same config: same cells, nothing to compute
    rerun = load_experiment(out / "manifest.json")
    assert rerun == exp
    assert run_experiment(rerun, out, progress=False).computed == 0


def _tiny_run(tmp_path: Path) -> tuple[Experiment, Path]:
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "out"
    exp = load_experiment(path)
    run_experiment(exp, out, progress=False)
    return exp, out


def test_a_rerun_that_reproduces_the_results_leaves_every_file_as_it_was(tmp_path: Path) -> None:
    # as after a commit that changed no result: the committed files name older code
    exp, out = _tiny_run(tmp_path)
    manifest, record = out / "manifest.json", next((out / "records").rglob("seed-*.json"))
    for f in (manifest, record):
        doc = json.loads(f.read_text())
        # older code; the record as files made before the key was renamed (``model_sha256``)
        del doc["code_sha256"]
        doc["code_sha256" if f == manifest else "model_sha256"] = "0" * 64
        if f == manifest:
            doc["git_commit"] = "an older commit"
        f.write_text(json.dumps(doc, sort_keys=True, indent=1) + "\n")
    assert load_record(record).code_sha256 == "0" * 64  # an old record's fingerprint is read
    before = {f: f.read_bytes() for f in out.rglob("*") if f.is_file() and "cells" not in f.parts}
    run_experiment(exp, out, progress=False, fresh=True)  # recomputed: the same bits
    after = {f: f.read_bytes() for f in before}
    changed = [str(f.relative_to(out)) for f in before if before[f] != after[f]]
    assert changed == ["run.json"]
    assert json.loads((out / "run.json").read_text())["manifest_unchanged"] is True

    # a result that changes rewrites the manifest with the code that produced it
    doc = json.loads(manifest.read_text())
    doc["metrics_csv_sha256"] = "stale"
    manifest.write_text(json.dumps(doc))
    run_experiment(exp, out, progress=False)
    assert json.loads(manifest.read_text())["git_commit"] != "an older commit"


def test_identical_policy_entries_share_one_cell(tmp_path: Path) -> None:
    path = tmp_path / "twice.toml"
    path.write_text(TINY + '[[policies]]\nname = "noop"\nlabel = "noop-again"\n')
    rows = plan(load_experiment(path))
    assert len(rows) == 12
    assert len(unique_cells(rows)) == N_CELLS


@pytest.mark.parametrize(
    ("scenario", "seed", "policy", "duration"),
    [
        ("failure-loop", 3, "upstream", 600.0),
        ("dominant-oscillation", 1, "upstream", 900.0),
        ("dominant-oscillation", 1, "patched", 900.0),
        ("nonconverging-migration", 0, "patched", 600.0),
        ("small", 1000004, "upstream", 900.0),
    ],
)
def test_traced_loop_equals_simulation_run(
    scenario: str, seed: int, policy: str, duration: float
) -> None:
    config = {
        "scenario": scenario,
        "seed": seed,
        "overrides": {},
        "duration": duration,
        "policy": policy,
        "params": {},
    }
    doc, trace = evaluate_cell(Cell("k", config, trace=True))
    scn = catalog.scenario(scenario, seed)
    expected = Simulation(scn, seed).run(build_policy(policy, {}), duration)
    assert doc["metrics"] == expected["metrics"]
    assert doc["moves"] == expected["moves"]
    assert trace is not None and trace["t"].shape == (round(duration / scn.round_s),)
    assert trace["imbalance"].mean() == pytest.approx(expected["metrics"]["imbalance_mean"])


def test_report_only_rewrites_the_summary_from_metrics_csv_alone(tmp_path: Path) -> None:
    from pvegym.experiments.runner import rerender

    exp, out = _tiny_run(tmp_path)
    written = (out / "summary.md").read_bytes()
    shutil.rmtree(out / "cells")  # as in a clone: the cells are not committed
    (out / "summary.md").unlink()
    rerender(exp, out)
    assert (out / "summary.md").read_bytes() == written
