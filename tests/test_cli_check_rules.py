"""``pvegym check-rules`` through ``pvegym.cli.main``: the output and the exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvegym import cli

CASES = Path(__file__).resolve().parent / "data" / "upstream-tests" / "rules_cfgs"


def test_prints_upstreams_expect_byte_for_byte(
    capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(CASES.parent)  # upstream runs from src/test: "rules_cfgs/X.cfg"
    case = "rules_cfgs/inconsistent-node-resource-affinity-rules.cfg"
    assert cli.main(["check-rules", case]) == 0
    captured = capsysbinary.readouterr()
    assert captured.out == (CASES.parent / f"{case}.expect").read_bytes()
    assert captured.err == b""


def test_nodes_option_is_the_cluster(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    rules = tmp_path / "rules.cfg"
    rules.write_text("resource-affinity: spread\n\tresources vm:1,vm:2,vm:3\n\taffinity negative\n")
    assert cli.main(["check-rules", str(rules), "--nodes", "a,b,c"]) == 0
    assert b"Drop rule" not in capsysbinary.readouterr().out
    assert cli.main(["check-rules", str(rules), "--nodes", "a,b"]) == 0
    out = capsysbinary.readouterr().out
    assert out.startswith(
        b"--- Log ---\n"
        b"Drop rule 'spread', because rule defines more resources than available nodes.\n"
    )


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return err


def test_unreadable_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.cfg"
    assert cli.main(["check-rules", str(missing)]) == 2
    assert _error(capsys) == (
        f"pvegym check-rules: error: {missing}: cannot read the rules file: "
        "No such file or directory\n"
    )
    assert cli.main(["check-rules", str(tmp_path)]) == 2
    assert "cannot read the rules file" in _error(capsys)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "node-affinity: na\n\tresources vm:1\n\tnodes node1:high\n",
            "line 3 (section 'na') - unable to parse value of 'nodes': invalid format - "
            "value does not look like a valid ha node (and 1 more)",
        ),
        (
            "resource-affinity: ra\n\tresources vm:1,vm:2\n\taffinity sideways\n",
            "line 3 (section 'ra') - unable to parse value of 'affinity': value 'sideways' does "
            "not have a value in the enumeration 'positive, negative' (and 1 more)",
        ),
        (
            "location: loc\n\tresources vm:1\n",
            "line 1 (skip section 'loc'): unsupported type 'location'",
        ),
        (
            "node-affinity: x\n\tresources vm:1\n\tnodes node1\n",
            "line 1 (skip section 'x'): invalid configuration ID 'x'",
        ),
        (
            "node-affinity: na\n\tresources vm:1\n\tnodes node1\n\tweight 3\n",
            "line 4 (section 'na') - unable to parse value of 'weight': unknown property type",
        ),
        ("resources vm:1\n", "line 1 - ignore config line: resources vm:1"),
    ],
)
def test_what_upstream_warns_about_is_exit_2_naming_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    rules = tmp_path / "rules.cfg"
    rules.write_text(text)
    assert cli.main(["check-rules", str(rules)]) == 2
    assert _error(capsys) == f"pvegym check-rules: error: {rules}: {message}\n"
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("nodes", ["", "a,,b", "node1:2", "-a", "a,a"])
def test_bad_nodes_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: str
) -> None:
    rules = tmp_path / "rules.cfg"
    rules.write_text("")
    assert cli.main(["check-rules", str(rules), f"--nodes={nodes}"]) == 2
    assert _error(capsys).startswith("pvegym check-rules: error: --nodes: ")
