"""``pvegym import`` on the committed fixtures: what the scenario holds, what it says it lacks."""

from __future__ import annotations

import json
import tarfile
import tomllib
from pathlib import Path

import numpy as np
import pytest

from pvegym.pve_export.cluster import read_export
from pvegym.pve_export.to_scenario import build_import
from pvegym.sim import catalog
from tests.conftest import RunCli

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pve-exports"
PVE9 = FIXTURES / "pve9-field"
PVE8 = FIXTURES / "pve8-groups"


def _import(cli: RunCli, export: Path, out: Path, *args: str) -> tuple[str, dict]:
    code, stdout, err = cli("import", str(export), "--out", str(out), *args)
    assert code == 0, err
    return stdout, tomllib.loads(out.read_text())


def test_pve9_cluster_as_a_scenario(cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "field.toml"
    stdout, data = _import(cli, PVE9, out, "--window", "day")
    scn = catalog.resolve(str(out)).scenario  # the written file loads through the scenario lookup
    nodes = {n.name: n for n in scn.nodes}
    guests = {g.sid: g for g in scn.guests}
    assert set(nodes) == {"pve-ams-01", "pve-ams-02", "pve-ams-03"}
    assert nodes["pve-ams-01"].maxcpu == 32 and nodes["pve-ams-01"].maxmem == 128 * 2**30
    # the node in maintenance: offline for the HA manager's scheduler, and said so
    assert not nodes["pve-ams-03"].online and nodes["pve-ams-01"].online
    assert "pve-ams-03: in maintenance" in stdout
    # the field report's failure-loop guest, recognised from its config
    assert guests["vm:101"].local_resources
    assert "vm:101: migration blocked (ide2: local cdrom image)" in stdout
    assert guests["vm:108"].local_resources and guests["vm:108"].state == "stopped"
    assert not guests["vm:106"].ha  # the non-HA guest
    assert all(g.ha for s, g in guests.items() if s != "vm:106")
    assert guests["ct:200"].kind == "ct"
    rules = {r.name: r for r in scn.resource_affinity}
    assert rules["web-together"].affinity == "positive"
    assert set(rules["db-apart"].resources) == {"vm:104", "vm:105"}
    assert rules["db-apart"].affinity == "negative"
    (na,) = scn.node_affinity  # the disabled rule is dropped, and said so
    assert na.name == "mon-prefers-02" and na.nodes == {"pve-ams-02": 2, "pve-ams-01": 1}
    assert "rule gpu-on-02: disabled" in stdout
    assert scn.crs_mode == "dynamic"
    assert scn.duration == 86400
    # window and resolution are recorded in the scenario and beside it
    head = out.read_text().split("\n\n", 1)[0]
    assert "# window: 2026-11-19 12:00 UTC – 2026-11-20 12:00 UTC (24 h)" in head
    assert "the day series at 60 s resolution" in head
    meta = json.loads((tmp_path / "field.import.json").read_text())
    assert meta["window"]["resolution_s"] == 60 and meta["window"]["rows"] == 1440
    assert meta["pve_version"] == "9.2.5" and meta["rrd_format"] == "pve9"
    # what the schema lacks is listed, never guessed silently
    dropped = {(n["subject"], n["kind"]) for n in meta["notes"]}
    for subject in ("vm:104", "vm:102", "pve-ams-01", "vm:107"):  # hugepages, balloon, KSM, disk
        assert (subject, "dropped") in dropped
    assert ("guests", "assumed") in dropped  # the dirty rate
    assert ("migration", "assumed") in dropped  # no bwlimit: the model's bandwidth
    assert data["guests"][0]["cpu"][0]["trace_dir"] == "field-traces"


def test_host_load_is_the_node_series_minus_its_guests(cli: RunCli, tmp_path: Path) -> None:
    """Rebuilding each node from the written traces gives back the export's node series."""
    out = tmp_path / "s.toml"
    _import(cli, PVE9, out, "--window", "day")
    imp = build_import(read_export(PVE9), "day")
    traces = tmp_path / "s-traces" / "rrd"

    def col(name: str, c: str) -> np.ndarray:
        lines = (traces / f"{name}.csv").read_text().splitlines()
        cap = {
            k: float(v)
            for k, _, v in (x.partition("=") for x in lines[0].split()[2:])
            if k.endswith("capacity")
        }
        j = lines[1].split(",").index(c)
        return np.array([float(x.split(",")[j]) for x in lines[2:]]) * cap[f"{c}_capacity"]

    for j, node in enumerate(imp.reality.node_names):
        cpu = col(f"node-{node}", "cpu")
        mem = col(f"node-{node}", "mem")
        for g in imp.scenario["guests"]:
            if g["node"] == node and isinstance(g["cpu"], list):  # no guest moved in this window
                cpu = cpu + col(f"guest-{g['sid'].replace(':', '-')}", "cpu")
                mem = mem + col(f"guest-{g['sid'].replace(':', '-')}", "mem")
        # 6 significant digits in the trace files
        assert np.allclose(cpu, imp.reality.cpu[:, j], rtol=1e-5, atol=1e-5 * imp.reality.maxcpu[j])
        assert np.allclose(mem, imp.reality.mem[:, j], rtol=1e-5)


def test_a_week_at_the_week_resolution_and_the_operators_migrations(tmp_path: Path) -> None:
    imp = build_import(read_export(PVE9), "week")
    assert (imp.window.timeframe, imp.window.step, imp.window.n) == ("week", 1800, 336)
    # the HA manager's evacuation of the node in maintenance and the operator's hamigrate
    events = {(e["sid"], e["target"]) for e in imp.scenario["events"]}
    assert events == {("ct:200", "pve-ams-02"), ("vm:107", "pve-ams-02")}
    start = {g["sid"]: g["node"] for g in imp.scenario["guests"]}
    assert start["ct:200"] == "pve-ams-03" and start["vm:107"] == "pve-ams-01"
    # the real failure loop (the fixture's balancer was on): listed, not replayed
    assert len(imp.failed) > 100 and {m.sid for m in imp.failed} == {"vm:101"}


def test_a_duration_picks_the_finest_series_that_covers_it() -> None:
    export = read_export(PVE9)
    assert build_import(export, "30m").window.step == 60  # the hour series
    assert build_import(export, "36h").window.step == 1800  # the day series is 24 h only
    pve8 = read_export(PVE8)
    w = build_import(pve8, "20h").window
    assert (w.timeframe, w.step, w.duration) == ("day", 1800, 20 * 3600)


def test_pve8_groups_static_crs_and_bandwidth(cli: RunCli, tmp_path: Path) -> None:
    out = tmp_path / "p8.toml"
    stdout, _ = _import(cli, PVE8, out, "--window", "day")
    scn = catalog.resolve(str(out)).scenario
    guests = {g.sid: g for g in scn.guests}
    assert scn.crs_mode == "static"
    assert scn.migration.bandwidth == 256000 * 1024  # bwlimit migration=256000 KiB/s
    rules = {r.name: r for r in scn.node_affinity}
    # groups become rules as PVE::HA::Groups::migrate_groups_to_rules converts them
    assert rules["ha-group-prefer-a"].nodes == {"pve8-a": 2, "pve8-b": 1}
    assert not rules["ha-group-prefer-a"].strict and rules["ha-group-only-ab"].strict
    assert scn.resource_affinity == ()
    assert guests["vm:203"].local_resources  # the host's CD-ROM drive
    assert guests["ct:300"].local_resources  # a bind mount
    assert all(g.mem_ratio == 1.0 for g in scn.guests)  # PVE 8 records no memhost
    assert "PVE 8.4.1's pve2 RRD format has no memhost" in stdout
    assert "no PSI in the pve2 RRD series" in stdout


def test_a_tarball_imports_like_the_directory(cli: RunCli, tmp_path: Path) -> None:
    tar = tmp_path / "export.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        t.add(PVE8, arcname="pvegym-export-20261120")
    _, from_tar = _import(cli, tar, tmp_path / "a.toml", "--window", "day")
    _, from_dir = _import(cli, PVE8, tmp_path / "b.toml", "--window", "day")
    for d in (from_tar, from_dir):
        d.pop("name")
    assert json.dumps(from_tar).replace("a-traces", "X") == json.dumps(from_dir).replace(
        "b-traces", "X"
    )


@pytest.mark.parametrize(
    ("args", "where", "what"),
    [
        (["--window", "year"], "--window", "is not hour, day, week or a duration"),
        (["--window", "21d"], "--window", "no exported series covers"),
        (["--fit-fraction", "1.5"], "--fit-fraction", "must be in (0, 1)"),
    ],
)
def test_bad_options(cli: RunCli, tmp_path: Path, args: list[str], where: str, what: str) -> None:
    code, _, err = cli("import", str(PVE8), "--out", str(tmp_path / "x.toml"), *args)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert where in err and what in err


def _with_auto_rebalance_off(tmp_path: Path, fixture: Path, sid: str) -> Path:
    """A copy of ``fixture`` whose ``/cluster/ha/resources`` sets ``auto-rebalance: 0`` on
    ``sid`` (as ``ha-manager set <sid> --auto-rebalance 0`` leaves it)."""
    import shutil

    copy = tmp_path / fixture.name
    shutil.copytree(fixture, copy)
    f = copy / "cluster" / "ha" / "resources.json"
    items = json.loads(f.read_text())
    (item,) = [x for x in items if x["sid"] == sid]
    item["auto-rebalance"] = 0
    f.write_text(json.dumps(items, indent=1))
    return copy


@pytest.mark.parametrize(("fixture", "sid"), [(PVE9, "vm:101"), (PVE8, "vm:201")])
def test_auto_rebalance_off_is_imported_whatever_the_version(
    tmp_path: Path, fixture: Path, sid: str
) -> None:
    """The flag is read from the export itself, on a PVE 8.4 export too (its HA manager has no
    such flag, but an export that carries it comes from one that has)."""
    imp = build_import(read_export(_with_auto_rebalance_off(tmp_path, fixture, sid)), "day")
    flags = {g["sid"]: g.get("auto_rebalance", True) for g in imp.scenario["guests"]}
    assert [s for s, on in flags.items() if not on] == [sid]
    assert any(n.subject == sid and "auto-rebalance = 0" in n.text for n in imp.notes)
    plain = build_import(read_export(fixture), "day")
    assert all(g.get("auto_rebalance", True) for g in plain.scenario["guests"])


def test_no_policy_moves_an_auto_rebalance_off_guest(tmp_path: Path) -> None:
    """pve9-field's CD-ROM guest vm:101, upstream's best move all through the stress run, with
    ``auto-rebalance: 0`` in the export: no policy of the replay moves it."""
    from pvegym.policies.registry import make_policy
    from pvegym.pve_export.write import write_import
    from pvegym.sim.simulation import Simulation

    export = _with_auto_rebalance_off(tmp_path, PVE9, "vm:101")
    imp = build_import(read_export(export), "day")
    write_import(imp, tmp_path / "s.toml")
    scn = catalog.resolve(str(tmp_path / "s.toml")).scenario
    for policy in ("upstream", "patched", "guest-centric"):
        moves = Simulation(scn, 0).run(make_policy(policy, **imp.policy_params.get(policy, {})))[
            "moves"
        ]
        assert all(m["guest"] != "vm:101" for m in moves), policy
