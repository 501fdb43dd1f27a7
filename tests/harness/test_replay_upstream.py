"""Replay every upstream regression directory and compare with its ``log.expect`` (MODEL §5)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import pvegym.cli
from policies.upstream import UpstreamPolicy
from pvegym.harness import read_testdir, replay, replay_dir

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-tests"
DIRS = sorted(p for p in DATA.iterdir() if p.is_dir() and p.name.startswith("test-"))
LINE = re.compile(
    r"^info\s+(\d+)\s+\S+/crm: auto rebalance - (?:migrate|relocate) (\S+) to (\S+) "
    r"\(expected change for imbalance from ([\d.]+) to ([\d.]+)\)$"
)


def expected(d: Path) -> list[tuple[int, str, str, str, str]]:
    out = []
    for raw in (d / "log.expect").read_text().splitlines():
        m = LINE.match(raw)
        if m:
            t, sid, target, a, b = m.groups()
            out.append((int(t), sid, target, a, b))
    return out


def test_all_directories_present():
    assert len(DIRS) >= 12


@pytest.mark.parametrize("d", DIRS, ids=[d.name for d in DIRS])
def test_replay_matches_log_expect(d: Path):
    result = replay_dir(d)
    got = [
        (x.t, x.sid, x.target, f"{x.imbalance_before:.2f}", f"{x.imbalance_after:.2f}")
        for x in result.decisions
    ]
    assert got == expected(d)
    lines = (d / "log.expect").read_text().splitlines()
    # every log line the replay prints is verbatim in log.expect, and the run ends where upstream's did
    assert {line.format() for line in result.log} <= set(lines)
    assert lines[-1].endswith("hardware: exit simulation - done")
    assert int(lines[-1].split()[1]) == result.end_time


def _copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


def test_unseen_topsis3(tmp_path: Path):
    """Upstream's test-crs-dynamic-auto-rebalance-topsis3 (not in the fixtures): §9.2."""
    d = _copy(tmp_path, "test-crs-dynamic-auto-rebalance3")
    cfg = {"crs": {"ha": "dynamic", "ha-auto-rebalance": 1, "ha-auto-rebalance-method": "topsis"}}
    (d / "datacenter.cfg").write_text(json.dumps(cfg))
    got = [
        (x.t, x.sid, x.target, f"{x.imbalance_before:.2f}", f"{x.imbalance_after:.2f}")
        for x in replay_dir(d).decisions
    ]
    assert got == [
        (160, "vm:105", "node2", "0.85", "0.42"),
        (240, "vm:103", "node3", "0.81", "0.43"),
        (320, "vm:105", "node1", "0.43", "0.24"),
    ]


def test_unseen_constrained4(tmp_path: Path):
    """Upstream's test-crs-dynamic-constrained-auto-rebalance4 built from §9.3."""
    d = tmp_path / "c4"
    d.mkdir()
    gib = 1 << 30
    (d / "cmdlist").write_text(json.dumps([["power node1 on", "power node2 on", "power node3 on"]]))
    hw = {
        n: {"power": "off", "network": "off", "maxcpu": 24, "maxmem": 48 * gib}
        for n in ("node1", "node2", "node3")
    }
    (d / "hardware_status").write_text(json.dumps(hw))
    (d / "manager_status").write_text("{}")
    place = {"vm:101": "node1", "vm:102": "node1", "vm:103": "node2", "vm:104": "node3"}
    (d / "service_config").write_text(
        json.dumps({s: {"node": n, "state": "started"} for s, n in place.items()})
    )
    dyn = {
        "vm:101": {"cpu": 0.9, "mem": 4 * gib},
        "vm:102": {"cpu": 2.4, "mem": 2621440000},
        "vm:103": {"cpu": 0, "mem": 0},
        "vm:104": {"cpu": 1.0, "mem": gib},
    }
    (d / "dynamic_service_stats").write_text(json.dumps(dyn))
    (d / "static_service_stats").write_text(
        json.dumps({s: {"maxcpu": 4, "maxmem": 8 * gib} for s in place})
    )
    (d / "datacenter.cfg").write_text(
        json.dumps({"crs": {"ha": "dynamic", "ha-auto-rebalance": 1}})
    )
    (d / "rules_config").write_text(
        "resource-affinity: vms-stay-apart1\n\tresources vm:101,vm:103\n\taffinity negative\n\n"
        "resource-affinity: vms-stay-apart2\n\tresources vm:102,vm:103\n\taffinity negative\n"
    )
    got = [
        (x.t, x.sid, x.target, f"{x.imbalance_before:.2f}", f"{x.imbalance_after:.2f}")
        for x in replay_dir(d).decisions
    ]
    assert got == [
        (80, "vm:101", "node3", "1.04", "0.72"),
        (160, "vm:104", "node2", "0.72", "0.33"),
    ]


def test_normalized_prediction():
    """§10: with the crate 2.1 normalisation, dynamic-auto-rebalance3 stops after two moves."""
    td = read_testdir(DATA / "test-crs-dynamic-auto-rebalance3")
    got = [
        (x.t, x.sid, x.target, f"{x.imbalance_before:.2f}", f"{x.imbalance_after:.2f}")
        for x in replay(td, UpstreamPolicy(normalized=True)).decisions
    ]
    assert got == [
        (160, "vm:105", "node2", "0.60", "0.30"),
        (260, "vm:103", "node1", "0.57", "0.28"),
    ]


def test_manual_migration_blocks_balancer(tmp_path: Path):
    d = _copy(tmp_path, "test-crs-dynamic-auto-rebalance2")
    (d / "cmdlist").write_text(
        json.dumps(
            [
                ["power node1 on", "power node2 on", "power node3 on"],
                ["service vm:104 migrate node3"],
            ]
        )
    )
    result = replay_dir(d)
    # 80: vm:101 -> node2; 120: the manual move is queued and blocks the balancer for two rounds
    assert [(x.t, x.sid, x.target) for x in result.decisions][:1] == [(80, "vm:101", "node2")]
    assert any("got crm command: migrate vm:104 node3" in line.message for line in result.log)
    assert all(x.t != 120 and x.t != 140 for x in result.decisions)


# ------------------------------------------------------------------ bad input -> exit 2


def _cli(monkeypatch, argv: list[str]) -> int:
    # only this command: the CLI imports every sub-command module, some written by others
    monkeypatch.setattr(pvegym.cli, "COMMANDS", ("replay_upstream",))
    return pvegym.cli.main(argv)


def test_cli_json(monkeypatch, capsys):
    d = DATA / "test-crs-dynamic-auto-rebalance2"
    assert _cli(monkeypatch, ["replay-upstream", str(d), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(x["t"], x["sid"], x["target"]) for x in out["decisions"]] == [
        (80, "vm:101", "node2"),
        (160, "vm:102", "node3"),
    ]
    assert set(out["decisions"][0]) == {"t", "sid", "target", "imbalance_before", "imbalance_after"}


def test_cli_text(monkeypatch, capsys):
    d = DATA / "test-crs-dynamic-auto-rebalance2"
    assert _cli(monkeypatch, ["replay-upstream", str(d)]) == 0
    out = capsys.readouterr().out
    assert (
        "info     80    node1/crm: auto rebalance - migrate vm:101 to node2 "
        "(expected change for imbalance from 1.41 to 0.94)"
    ) in out.splitlines()


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("service_config", '{"vm:101": {"node": "node1", ', "service_config"),
        (
            "service_config",
            '{"vm:101": {"node": "node9", "state": "started"}}',
            'service_config["vm:101"].node',
        ),
        ("cmdlist", '[["power node1 on", "crm node1 stop"]]', "cmdlist[0][1]"),
        ("cmdlist", '[["power node1 on", "frobnicate node1"]]', "cmdlist[0][1]"),
        ("datacenter.cfg", '{"crs": {"ha": "fancy"}}', "datacenter.cfg.crs.ha"),
        (
            "rules_config",
            "node-affinity: x\n\tresources vm:101\n\tstrict 1\n",
            "rules_config[x].nodes",
        ),
        (
            "dynamic_service_stats",
            '{"vm:101": {"cpu": "lots"}}',
            'dynamic_service_stats["vm:101"].cpu',
        ),
    ],
)
def test_bad_input_exit_2(
    tmp_path: Path, monkeypatch, capsys, file: str, content: str, needle: str
):
    d = _copy(tmp_path, "test-crs-dynamic-auto-rebalance1")
    (d / file).write_text(content)
    assert _cli(monkeypatch, ["replay-upstream", str(d)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert needle in err


def test_unknown_file_is_reported(tmp_path: Path, monkeypatch, capsys):
    d = _copy(tmp_path, "test-crs-dynamic-auto-rebalance1")
    (d / "surprise").write_text("?")
    assert _cli(monkeypatch, ["replay-upstream", str(d)]) == 0
    assert "surprise: unknown file" in capsys.readouterr().err
