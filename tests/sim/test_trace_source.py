"""Traces are read only from the bundled set, beside the scenario file or from a --trace-dir:
no ``..``, no absolute path elsewhere, no symlink out, no device or FIFO, bounded size — and a
refusal never quotes the file it refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pvegym.errors import ConfigError
from pvegym.limits import MAX_TRACE_BYTES
from pvegym.sim.trace_source import ENV, resolve_trace_source, scenario_base
from tests.sim.conftest import trace_scenario


@pytest.fixture(autouse=True)
def _no_user_roots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "")  # and whatever a test adds is undone after it


def _scenario(tmp_path: Path, source: str, trace_dir: str = "traces") -> Path:
    (tmp_path / "traces" / "planetlab").mkdir(parents=True, exist_ok=True)
    (tmp_path / "traces" / "planetlab" / "vm").write_text("10\n20\n")
    return trace_scenario(tmp_path / "scn.toml", source, trace_dir)


def _refused(cli: Any, *argv: str) -> str:
    code, _out, err = cli("simulate", *argv, "--json")
    assert code == 2, err
    assert err.count("\n") == 1
    assert "root:" not in err  # nothing of /etc/passwd is echoed
    return err


def test_beside_the_scenario_file_is_allowed(tmp_path: Path, cli: Any) -> None:
    code, _out, err = cli("simulate", "--scenario", str(_scenario(tmp_path, "planetlab/vm")))
    assert code == 0, err


@pytest.mark.parametrize(
    ("source", "trace_dir", "words"),
    [
        ("planetlab/../../../../etc/passwd", "", "not a trace name"),
        ("bitbrains/../../../../../dev/zero", "", "not a trace name"),
        ("planetlab/passwd", "/etc", "outside the scenario file's directory"),
        ("planetlab/zero", "/dev", "outside the scenario file's directory"),
        ("planetlab/vm", "../x", "may not contain '..'"),
        ("planetlab/vm", "traces/../../..", "may not contain '..'"),
        ("planetlab/vm", "nowhere", "no trace directory"),
    ],
)
def test_escapes_are_refused(
    tmp_path: Path, cli: Any, source: str, trace_dir: str, words: str
) -> None:
    err = _refused(cli, "--scenario", str(_scenario(tmp_path, source, trace_dir)))
    assert words in err and "guests[0].cpu[0]" in err


def test_a_symlink_out_of_the_trace_directory_is_refused(tmp_path: Path, cli: Any) -> None:
    scn = _scenario(tmp_path, "planetlab/link")
    (tmp_path / "traces" / "planetlab" / "link").symlink_to("/etc/passwd")
    assert "leads outside its trace directory" in _refused(cli, "--scenario", str(scn))
    inside = tmp_path / "traces" / "planetlab" / "alias"
    inside.symlink_to(tmp_path / "traces" / "planetlab" / "vm")  # a link that stays inside: fine
    code, _o, err = cli("simulate", "--scenario", str(_scenario(tmp_path, "planetlab/alias")))
    assert code == 0, err


@pytest.mark.parametrize("what", ["fifo", "dir", "big"])
def test_only_regular_files_of_bounded_size_are_read(tmp_path: Path, cli: Any, what: str) -> None:
    scn = _scenario(tmp_path, "planetlab/x")
    target = tmp_path / "traces" / "planetlab" / "x"
    if what == "fifo":
        os.mkfifo(target)  # reading it would block forever
    elif what == "dir":
        target.mkdir()
    else:
        with target.open("wb") as fh:
            fh.truncate(MAX_TRACE_BYTES + 1)  # sparse
    err = _refused(cli, "--scenario", str(scn))
    assert ("not a regular file" in err) if what != "big" else ("bytes (at most" in err)


def test_a_named_scenario_gets_relative_traces_only_from_a_trace_dir(
    tmp_path: Path, cli: Any
) -> None:
    _scenario(tmp_path, "planetlab/vm")
    trace = '{type="trace", source="planetlab/vm", trace_dir="traces"}'
    argv = ("--scenario", "failure-loop", "--duration", "1m", "--set", f"nodes[0].base_cpu={trace}")
    assert "no file to be beside" in _refused(cli, *argv)
    code, _o, err = cli("simulate", *argv, "--trace-dir", str(tmp_path))
    assert code == 0, err
    code, _o, err = cli("simulate", *argv, "--trace-dir", str(tmp_path / "nope"))
    assert code == 2 and "--trace-dir" in err and "not a directory" in err


def test_resolver_api_for_other_readers(tmp_path: Path) -> None:
    _scenario(tmp_path, "planetlab/vm")
    tf = resolve_trace_source("planetlab/vm", "traces", base=tmp_path)
    assert tf.file == (tmp_path / "traces" / "planetlab" / "vm").resolve()
    assert tf.format == "planetlab"
    with scenario_base(tmp_path):
        assert resolve_trace_source("planetlab/vm", "traces").file == tf.file
    with pytest.raises(ConfigError, match="no file to be beside"):
        resolve_trace_source("planetlab/vm", "traces")
    bundled = resolve_trace_source("bitbrains/116")
    assert bundled.file.name == "116.csv"
