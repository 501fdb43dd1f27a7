"""A run's files are trusted only when they check out: a zero-byte, truncated, edited or foreign
cell file is recomputed (with a warning), temporary files of killed writers are cleaned, every
write is fsynced; labels and output names never write outside the run's directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pvegym.errors import ConfigError
from pvegym.experiments import record
from pvegym.experiments.cells import cell_path, trace_path
from pvegym.experiments.config import load_experiment
from pvegym.experiments.runner import plan, run_experiment, unique_cells
from tests.conftest import tiny_experiment

EXP = tiny_experiment("files", timeline_seeds=1)


def _exp(tmp_path: Path, text: str = EXP) -> Any:
    path = tmp_path / "e.toml"
    path.write_text(text)
    return load_experiment(path)


def _zero(p: Path) -> None:
    p.write_bytes(b"")


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[:40])


def _foreign(p: Path) -> None:
    doc = json.loads(p.read_text())
    doc["config"]["seed"] = 99
    p.write_text(json.dumps(doc))


def _no_metric(p: Path) -> None:
    doc = json.loads(p.read_text())
    del doc["metrics"]["moves"]
    p.write_text(json.dumps(doc))


@pytest.mark.parametrize("damage", [_zero, _truncate, _foreign, _no_metric])
def test_a_damaged_cell_is_recomputed_with_a_warning(
    tmp_path: Path, damage: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = _exp(tmp_path)
    out = tmp_path / "out"
    run_experiment(exp, out, progress=False)
    good = (out / "metrics.csv").read_bytes()
    cells = unique_cells(plan(exp))
    victim = cell_path(out / "cells", cells[1].key)
    damage(victim)
    capsys.readouterr()
    stats = run_experiment(exp, out, progress=False)
    assert (stats.computed, stats.cached) == (1, len(cells) - 1)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{victim}" in err and "recomputing" in err
    assert (out / "metrics.csv").read_bytes() == good


def test_a_damaged_trace_is_recomputed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exp = _exp(tmp_path)
    out = tmp_path / "out"
    run_experiment(exp, out, progress=False)
    cell = unique_cells(plan(exp))[0]
    assert cell.trace
    trace_path(out / "cells", cell.key).write_bytes(b"PK\x03\x04garbage")
    assert run_experiment(exp, out, progress=False).computed == 1
    assert "trace unreadable" in capsys.readouterr().err


def test_stale_temporary_files_are_cleaned_and_live_ones_kept(tmp_path: Path) -> None:
    exp = _exp(tmp_path)
    out = tmp_path / "out"
    run_experiment(exp, out, progress=False)
    dead = out / "cells" / ".abc.json.999999999.tmp"  # no such process
    live = out / "records" / ".x.json.1.tmp"  # pid 1 runs
    stray = out / ".manifest.json.999999998.tmp"
    for p in (dead, live, stray):
        p.write_text("{")
    run_experiment(exp, out, progress=False)
    assert not dead.exists() and not stray.exists()
    assert live.exists()


def test_writes_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    record.write_json_atomic(tmp_path / "a" / "x.json", {"v": 1})
    assert len(synced) == 2  # the file, then its directory
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"v": 1}
    assert not list((tmp_path / "a").glob(".*.tmp"))


@pytest.mark.parametrize(
    ("where", "value", "words"),
    [
        ("scenario", "..", "starts with a dot"),
        ("policy", "..", "starts with a dot"),
        ("policy", "a/../../b", "path separator"),
        ("scenario", "/etc", "path separator"),
        ("policy", "ok\\u0000", "NUL byte"),
        ("scenario", "x" * 300, "longer than 255 bytes"),
    ],
)
def test_labels_that_would_leave_the_run_directory_are_refused(
    tmp_path: Path, where: str, value: str, words: str, cli: Any
) -> None:
    text = EXP.replace('name = "failure-loop"', f'name = "failure-loop"\nlabel = "{value}"')
    if where == "policy":
        text = EXP.replace('name = "upstream"', f'name = "upstream"\nlabel = "{value}"')
    (tmp_path / "e.toml").write_text(text)
    code, _out, err = cli("run", str(tmp_path / "e.toml"), "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and words in err
    assert ("scenarios[" if where == "scenario" else "policies[") in err and ".label" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('output = "ok\\u0000"', "NUL byte"),
        (f'output = "{"o" * 300}"', "longer than 255 bytes"),
        ('output = "../up"', "path separator"),
        ('output = ".."', "starts with a dot"),
    ],
)
def test_output_names_are_one_directory(tmp_path: Path, text: str, words: str, cli: Any) -> None:
    (tmp_path / "e.toml").write_text(EXP.replace('name = "files"', f'name = "files"\n{text}'))
    code, _out, err = cli("run", str(tmp_path / "e.toml"))
    assert code == 2 and err.count("\n") == 1 and "output" in err and words in err


def test_out_flag_must_be_a_usable_directory(tmp_path: Path, cli: Any) -> None:
    (tmp_path / "e.toml").write_text(EXP)
    (tmp_path / "file").write_text("")
    for out, words in (
        (str(tmp_path / "a\x00b"), "NUL"),
        (str(tmp_path / ("d" * 300)), "longer than 255 bytes"),
        (str(tmp_path / "file"), "not a directory"),
    ):
        code, _o, err = cli("run", str(tmp_path / "e.toml"), "--out", out)
        assert code == 2 and err.count("\n") == 1 and "--out" in err and words in err, err


def test_labels_that_share_a_file_name_are_refused(tmp_path: Path) -> None:
    text = EXP.replace('name = "noop"', 'name = "noop"\nlabel = "a b"').replace(
        'name = "upstream"', 'name = "upstream"\nlabel = "a_b"'
    )
    (tmp_path / "e.toml").write_text(text)
    with pytest.raises(ConfigError, match=r"policies\[1\].*as a file name"):
        load_experiment(tmp_path / "e.toml")
