"""``pvegym run``: a bad experiment file is one line on stderr naming the key path, exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import RunCli, tiny_experiment, variant

GOOD = tiny_experiment("cli-tiny")


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (('name = "upstream"', 'name = "upstream2"'), "policies[1].name"),
        (("seeds = [0]", "sedes = [0]"), "scenarios[0].sedes"),
        (("seeds = [0]", "seeds = []"), "scenarios[0].seeds"),
        (('name = "failure-loop"', 'name = "no-such-scenario"'), "scenarios[0].name"),
        (
            ('name = "upstream"', 'name = "upstream"\nparams = { margin = 2 }'),
            "policies[1].params.margin",
        ),
        (('metrics = ["moves"]', 'metrics = ["move"]'), "metrics[0]"),
        (("[episode]", "[episod]"), "episod"),
    ],
)
def test_bad_experiment_files_are_one_line_naming_the_key(
    tmp_path: Path, cli: RunCli, change: tuple[str, str], key: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(variant(GOOD, change))
    code, out, err = cli("run", str(path), "--out", str(tmp_path / "out"))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"pvegym run: error: {key}:"), err
    assert not (tmp_path / "out").exists()


def test_missing_file_and_bad_toml_and_bad_workers(tmp_path: Path, cli: RunCli) -> None:
    code, _, err = cli("run", str(tmp_path / "missing.toml"))
    assert code == 2 and err.count("\n") == 1
    (tmp_path / "broken.toml").write_text("name = ")
    code, _, err = cli("run", str(tmp_path / "broken.toml"))
    assert code == 2 and "not valid TOML" in err and err.count("\n") == 1
    (tmp_path / "ok.toml").write_text(GOOD)
    code, _, err = cli("run", str(tmp_path / "ok.toml"), "--workers", "0")
    assert code == 2 and err.startswith("pvegym run: error: --workers")


def test_a_good_run_reports_where_the_summary_is(tmp_path: Path, cli: RunCli) -> None:
    (tmp_path / "ok.toml").write_text(GOOD)
    out_dir = tmp_path / "out"
    code, out, _ = cli("run", str(tmp_path / "ok.toml"), "--out", str(out_dir), "--quiet")
    assert code == 0
    assert f"{out_dir}/summary.md" in out
    assert (out_dir / "metrics.csv").read_text().count("\n") == 3


def test_ctrl_c_is_one_line_and_keeps_finished_cells(tmp_path: Path) -> None:
    # what a terminal does: SIGINT to the whole process group, workers included
    import os
    import signal
    import subprocess
    import sys
    import time

    exp = tmp_path / "long.toml"
    exp.write_text(
        'name = "long"\nmetrics = ["moves"]\n[report]\ntimeline_seeds = 0\n'
        '[[scenarios]]\nname = "small"\nseeds = {start = 1000000, count = 40}\n'
        '[[policies]]\nname = "noop"\n[[policies]]\nname = "upstream"\n'
    )
    cells = tmp_path / "out" / "cells"
    argv = ["run", str(exp), "--out", str(tmp_path / "out"), "--workers", "2", "--quiet"]
    # as from a terminal: a suite started in the background (`cmd &` in a non-interactive shell,
    # nohup) hands its children SIGINT *ignored*, and Python then never raises KeyboardInterrupt —
    # the command would run to its end and exit 0. The child restores what an interactive start
    # gives (Python's handler), then runs `python -m pvegym` exactly.
    terminal_start = (
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'pvegym'; runpy.run_module('pvegym', run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", terminal_start, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(list(cells.glob("*.json"))) < 2:
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert err.strip() == "pvegym: interrupted" and "Traceback" not in err
    done = len(list(cells.glob("*.json")))
    assert 2 <= done < 80  # stopped: the cells running then finished, nothing new started


@pytest.mark.parametrize(
    ("command", "file", "fragment"),
    [
        ("run", "scenarios/reference.toml", "is a scenario file, not an experiment file"),
        ("run", "tune-patched.toml", "is a study file, not an experiment file"),
        ("run", "train-ppo.toml", "is a training file, not an experiment file"),
        ("tune", "field-scenarios.toml", "is an experiment file, not a study file"),
        ("train", "scenarios/minimal.toml", "is a scenario file, not a training file"),
    ],
)
def test_a_file_of_another_kind_names_the_file_and_its_command(
    cli: RunCli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    file: str,
    fragment: str,
) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    path = f"experiments/{file}"
    code, out, err = cli(command, path, "--out", str(tmp_path / "out"))
    assert code == 2 and not out and err.count("\n") == 1
    assert f"{path}: {fragment}" in err, err
    right = {"scenario": "simulate --scenario", "study": "tune", "training": "train"}
    kind = fragment.split()[2]
    assert f"run pvegym {right.get(kind, 'run')} {path}" in err
