"""Replay every upstream regression directory on pvegym's HA stack: the whole log equals ``log.expect``.

Every line counts (level, time, source, message) — CRM and LRM state changes, fencing, recovery,
maintenance, the balancer's ``auto rebalance`` decisions — as upstream's own ``ha-tester.pl``
compares them (``diff -u log.expect log``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import pvegym.cli
from pvegym.harness import first_difference, read_testdir, replay, replay_dir
from pvegym.policies.upstream import UpstreamPolicy

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-tests"
DIRS = sorted(p for p in DATA.iterdir() if p.is_dir() and p.name.startswith("test-"))
LINE = re.compile(
    r"^info\s+(\d+)\s+\S+/crm: auto rebalance - (?:migrate|relocate) (\S+) to (\S+) "
    r"\(expected change for imbalance from ([\d.]+) to ([\d.]+)\)$"
)


def expected_decisions(d: Path) -> list[tuple[int, str, str, str, str]]:
    out = []
    for raw in (d / "log.expect").read_text().splitlines():
        m = LINE.match(raw)
        if m:
            t, sid, target, a, b = m.groups()
            out.append((int(t), sid, target, a, b))
    return out


def decisions(result) -> list[tuple[int, str, str, str, str]]:
    return [
        (int(x.t), x.sid, x.target, f"{x.imbalance_before:.2f}", f"{x.imbalance_after:.2f}")
        for x in result.decisions
    ]


def test_all_directories_present():
    assert len(DIRS) == 110
    assert (DATA / "README.md").exists() and (DATA / "LICENSE-NOTICE").exists()


@pytest.mark.parametrize("d", DIRS, ids=[d.name for d in DIRS])
def test_log_equals_log_expect(d: Path):
    result = replay_dir(d)
    expected = (d / "log.expect").read_text()
    assert first_difference(expected, result.log_text()) is None
    assert result.log_text() == expected
    # the balancer's decisions are the log's auto-rebalance lines, one for one
    assert decisions(result) == expected_decisions(d)


def _copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst)
    for f in dst.iterdir():
        f.chmod(0o644)
    return dst


def test_unseen_topsis3(tmp_path: Path):
    """Upstream's test-crs-dynamic-auto-rebalance-topsis3 (not in the fixtures), upstream ``src/test/``."""
    d = _copy(tmp_path, "test-crs-dynamic-auto-rebalance3")
    cfg = {"crs": {"ha": "dynamic", "ha-auto-rebalance": 1, "ha-auto-rebalance-method": "topsis"}}
    (d / "datacenter.cfg").write_text(json.dumps(cfg))
    assert decisions(replay_dir(d)) == [
        (160, "vm:105", "node2", "0.85", "0.42"),
        (240, "vm:103", "node3", "0.81", "0.43"),
        (320, "vm:105", "node1", "0.43", "0.24"),
    ]


def test_unseen_constrained4(tmp_path: Path):
    """Upstream's test-crs-dynamic-constrained-auto-rebalance4 (not in the fixtures), built from
    Upstream ``src/test/``: two negative rules keep vm:101 and vm:102 off vm:103's node."""
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
    assert decisions(replay_dir(d)) == [
        (80, "vm:101", "node3", "1.04", "0.72"),
        (160, "vm:104", "node2", "0.72", "0.33"),
    ]


def test_normalized_prediction():
    """proxmox-resource-scheduling 2.1: with the crate normalisation, dynamic-auto-rebalance3 stops after two moves."""
    td = read_testdir(DATA / "test-crs-dynamic-auto-rebalance3")
    result = replay(td, lambda env: UpstreamPolicy(normalized=True))
    assert decisions(result) == [
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
    # 80: vm:101 -> node2; 120: the manual move is queued before the balancer and blocks it
    assert [(x.t, x.sid, x.target) for x in result.decisions][:1] == [(80, "vm:101", "node2")]
    assert any(e.message == "got crm command: migrate vm:104 node3" for e in result.log)
    assert all(x.t not in (120, 140) for x in result.decisions)


# ------------------------------------------------------------------ the command line


def _cli(monkeypatch, argv: list[str]) -> int:
    # only this command: the CLI imports every sub-command module, some written by others
    monkeypatch.setattr(pvegym.cli, "COMMANDS", ("replay_upstream",))
    return pvegym.cli.main(argv)


def test_cli_log_is_log_expect(monkeypatch, capsys):
    d = DATA / "test-basic1"
    assert _cli(monkeypatch, ["replay-upstream", str(d), "--log"]) == 0
    assert capsys.readouterr().out == (d / "log.expect").read_text()


def test_cli_json(monkeypatch, capsys):
    d = DATA / "test-crs-dynamic-auto-rebalance2"
    assert _cli(monkeypatch, ["replay-upstream", str(d), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(x["t"], x["sid"], x["target"]) for x in out["decisions"]] == [
        (80, "vm:101", "node2"),
        (160, "vm:102", "node3"),
    ]
    assert set(out["decisions"][0]) == {"t", "sid", "target", "imbalance_before", "imbalance_after"}


def test_cli_says_match(monkeypatch, capsys):
    d = DATA / "test-crs-dynamic-auto-rebalance2"
    assert _cli(monkeypatch, ["replay-upstream", str(d)]) == 0
    assert "log matches log.expect" in capsys.readouterr().out


def test_cli_shows_first_difference(tmp_path: Path, monkeypatch, capsys):
    d = _copy(tmp_path, "test-basic1")
    lines = (d / "log.expect").read_text().splitlines(keepends=True)
    lines[5] = lines[5].replace("node2", "node9")
    (d / "log.expect").write_text("".join(lines))
    assert _cli(monkeypatch, ["replay-upstream", str(d)]) == 1
    out = capsys.readouterr().out
    assert "differs from log.expect at line 6" in out
    assert lines[5].strip() in out


def test_cli_several_directories_counts_the_matches(tmp_path: Path, monkeypatch, capsys):
    """The suite in one command: one line per directory, then the count; exit 1 when any differs."""
    good = DATA / "test-basic1"
    bad = _copy(tmp_path, "test-crs-dynamic-auto-rebalance2")
    (bad / "log.expect").write_text((bad / "log.expect").read_text().replace("node2", "node9"))
    assert _cli(monkeypatch, ["replay-upstream", str(good), str(good)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 of 2 directories match their log.expect"
    assert _cli(monkeypatch, ["replay-upstream", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "test-crs-dynamic-auto-rebalance2: log differs from log.expect" in out
    assert out.splitlines()[-1] == "1 of 2 directories match their log.expect"


@pytest.mark.parametrize("flag", ["--log", "--json"])
def test_cli_log_or_json_of_several_directories_is_exit_2(monkeypatch, capsys, flag: str):
    d = str(DATA / "test-basic1")
    assert _cli(monkeypatch, ["replay-upstream", d, d, flag]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"{flag}: takes one DIR (got 2)" in err


def test_cli_a_bad_directory_among_several_is_exit_2_before_any_replay(
    tmp_path: Path, monkeypatch, capsys
):
    assert (
        _cli(monkeypatch, ["replay-upstream", str(DATA / "test-basic1"), str(tmp_path / "x")]) == 2
    )
    captured = capsys.readouterr()
    assert captured.out == "" and "not a directory" in captured.err
    # an error inside one of several directories names that directory
    broken = _copy(tmp_path, "test-basic1")
    (broken / "cmdlist").unlink()
    assert _cli(monkeypatch, ["replay-upstream", str(DATA / "test-basic1"), str(broken)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"{broken}/cmdlist: missing" in err


def test_cli_a_directory_without_log_expect_is_not_counted_as_a_match(
    tmp_path: Path, monkeypatch, capsys
):
    bare = _copy(tmp_path, "test-basic1")
    (bare / "log.expect").unlink()
    assert _cli(monkeypatch, ["replay-upstream", str(DATA / "test-basic1"), str(bare)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "1 of 1 directories match their log.expect (1 without a log.expect)"


# ------------------------------------------------------------------ bad input -> exit 2


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("service_config", '{"vm:101": {"node": "node1", ', "service_config"),
        (
            "service_config",
            '{"vm:101": {"node": "node9", "state": "started"}}',
            'service_config["vm:101"].node',
        ),
        ("cmdlist", '[["power node1 on", "crm node1 frobnicate"]]', "cmdlist[0][1]"),
        ("cmdlist", '[["power node1 on", "frobnicate node1"]]', "cmdlist[0][1]"),
        ("cmdlist", '[["power node7 on"]]', "cmdlist[0][0]"),
        ("cmdlist", '[["service vm:101 set-dynamic-stats cpu lots"]]', "cmdlist[0][0]"),
        ("datacenter.cfg", '{"crs": {"ha": 3}}', "datacenter.cfg.crs.ha"),
        ("datacenter.cfg", '{"crs": {"ha-auto-rebalance-treshold": 0.2}}', "treshold"),
        ("datacenter.cfg", '{"ha": {"shutdown_policy": ["panic"]}}', "datacenter.cfg.ha"),
        (
            "dynamic_service_stats",
            '{"vm:101": {"cpu": "lots"}}',
            'dynamic_service_stats["vm:101"].cpu',
        ),
        ("surprise", "?", "surprise"),
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


def test_a_symlink_out_of_the_test_directory_is_refused_unread(tmp_path: Path, monkeypatch, capsys):
    """Found by the long fuzz run: ``log.expect -> /etc/passwd`` was followed and the parse
    error quoted its first line. Now the link is refused by name (exit 2, one line), unread."""
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:SECRET-LINE\n")
    d = _copy(tmp_path, "test-crs-dynamic-auto-rebalance1")
    (d / "log.expect").unlink()
    (d / "log.expect").symlink_to(secret)
    assert _cli(monkeypatch, ["replay-upstream", str(d), "--json"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "log.expect" in err and "symbolic link out of the test directory" in err
    assert "SECRET" not in err
    # a link that stays inside the directory is an ordinary file
    (d / "log.expect").unlink()
    (d / "log.expect").symlink_to(d / "README")
    _cli(monkeypatch, ["replay-upstream", str(d), "--json"])
    assert "symbolic link" not in capsys.readouterr().err


def test_replay_runs_the_model_layers_ha_manager(monkeypatch, capsys):
    """One implementation: ``pvegym replay-upstream`` goes through the model layer's round entry
    points (``Manager.manage``, ``LRM.do_one_iteration``) — the harness adds only hardware."""
    from pvegym.sim.ha.lrm import LRM
    from pvegym.sim.ha.manager import Manager

    calls = {"manage": 0, "lrm": 0}
    manage, lrm = Manager.manage, LRM.do_one_iteration

    def counted_manage(self):
        calls["manage"] += 1
        return manage(self)

    def counted_lrm(self):
        calls["lrm"] += 1
        return lrm(self)

    monkeypatch.setattr(Manager, "manage", counted_manage)
    monkeypatch.setattr(LRM, "do_one_iteration", counted_lrm)
    d = DATA / "test-crs-dynamic-auto-rebalance2"
    assert _cli(monkeypatch, ["replay-upstream", str(d), "--log"]) == 0
    assert "auto rebalance - migrate vm:101 to node2" in capsys.readouterr().out
    # 30 CRM rounds of the master (t = 20 ... 600) and 3 LRMs per loop
    assert calls["manage"] == 30
    assert calls["lrm"] == 3 * 30


def test_unknown_modes_are_handled_as_upstream_does(tmp_path: Path):
    """An unknown scheduler mode and shutdown policy are not errors upstream: the Manager logs
    "got unknown scheduler mode 'fancy', using 'basic'" every round, the LRM "unknown shutdown
    policy 'panic', fall back to conditional"."""
    d = _copy(tmp_path, "test-shutdown-policy1")
    (d / "datacenter.cfg").write_text(
        '{"crs": {"ha": "fancy"}, "ha": {"shutdown_policy": "panic"}}'
    )
    messages = [e.message for e in replay_dir(d).log]
    assert "using scheduler mode 'fancy'" in messages
    assert "got unknown scheduler mode 'fancy', using 'basic'" in messages
    assert "unknown shutdown policy 'panic', fall back to conditional" in messages
