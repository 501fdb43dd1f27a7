"""What the import of real PVE exports got wrong (issue 33, items 4 and 5), each on a fixture that
reproduces it: the units of the crs thresholds, PVE 7's 70-row hour, the version's name,
containers without a CPU limit, guests created inside the window, nodes their guests exceed."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pvegym.pve_export.cluster import read_export
from pvegym.pve_export.to_scenario import build_import
from pvegym.sim import catalog
from tests.conftest import RunCli

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "pve-exports"
PVE9 = FIXTURES / "pve9-field"
PVE8 = FIXTURES / "pve8-groups"
PVE7 = FIXTURES / "pve7-nonha"
CT200_RRD = "nodes/pve7-b/lxc/200/rrddata-day-AVERAGE.json.gz"


# ------------------------------------------------------------------------------------------ units
def _edited(
    tmp_path: Path,
    crs: dict[str, Any],
    cluster_pkg: str | None,
    manager: str = "9.1.13",
) -> Path:
    """A copy of pve9-field with ``crs`` merged into its options, pve-manager ``manager`` and
    libpve-cluster-perl/pve-cluster ``cluster_pkg`` on every node (None: no versions.json, as
    exports made before the script recorded them)."""
    copy = tmp_path / "edited"
    shutil.copytree(PVE9, copy)
    opts = json.loads((copy / "cluster/options.json").read_text())
    opts["crs"].update(crs)
    (copy / "cluster/options.json").write_text(json.dumps(opts))
    ver = json.loads((copy / "version.json").read_text())
    ver["version"] = manager
    (copy / "version.json").write_text(json.dumps(ver))
    for f in copy.glob("nodes/*/versions.json"):
        if cluster_pkg is None:
            f.unlink()
            continue
        pkgs = json.loads(f.read_text())
        for p in pkgs:
            if p["Package"] in ("pve-cluster", "libpve-cluster-perl"):
                p["Version"] = p["OldVersion"] = cluster_pkg
            if p["Package"] == "pve-manager":
                p["Version"] = p["OldVersion"] = manager
        f.write_text(json.dumps(pkgs))
    return copy


def _upstream(export: Path, units: str | None = None) -> dict[str, Any]:
    imp = build_import(read_export(export, units), "1h")
    return imp.policy_params.get("upstream", {})


def test_the_fixture_proves_percent_by_libpve_cluster_perl() -> None:
    crs = read_export(PVE9).crs
    assert crs.percent_units and crs.units_why == "libpve-cluster-perl 9.1.6 on pve-ams-01"
    up = _upstream(PVE9)
    assert (up["threshold"], up["margin"]) == (0.3, 0.1)  # 30 and 10 percent


@pytest.mark.parametrize(
    ("crs", "pkg", "manager", "want"),
    [
        # before libpve-cluster-perl 9.1.5 the schema is a fraction (no maximum): 1 is 100 %,
        # whatever an operator meant (pve-cluster d8b4d02); the issue read it as 1 % — the
        # source wins
        ({"ha-auto-rebalance-threshold": 1, "ha-auto-rebalance-margin": 1}, "9.1.4", "9.1.13",
         (1.0, 1.0)),
        ({"ha-auto-rebalance-threshold": 0.3, "ha-auto-rebalance-margin": 0.1}, "9.1.4", "9.1.13",
         (0.3, 0.1)),
        # since 9.1.5 a leftover 0.3 is 0.3 %: d8b4d02's message says such a threshold "will
        # trigger near-continuously" — the replay reads it as the HA manager does
        ({"ha-auto-rebalance-threshold": 0.3, "ha-auto-rebalance-margin": 0.1}, "9.1.5", "9.2.5",
         (0.003, 0.001)),
        # no versions.json, but a pve-manager that depends on libpve-cluster-perl >= 9.1.5
        ({"ha-auto-rebalance-threshold": 20}, None, "9.1.14", (0.2, 0.1)),
        # no versions.json, an older pve-manager, but a value only the fraction schema allows
        ({"ha-auto-rebalance-threshold": 150}, None, "9.1.13", (150.0, 10.0)),
    ],
)  # fmt: skip
def test_units_are_what_the_export_proves(
    tmp_path: Path,
    crs: dict[str, Any],
    pkg: str | None,
    manager: str,
    want: tuple[float, float],
) -> None:
    up = _upstream(_edited(tmp_path, crs, pkg, manager))
    assert (up["threshold"], up["margin"]) == pytest.approx(want)


def test_a_leftover_fraction_on_the_percent_schema_is_said(tmp_path: Path) -> None:
    crs = {"ha-auto-rebalance-threshold": 0.3, "ha-auto-rebalance-margin": 0.1}
    imp = build_import(read_export(_edited(tmp_path, crs, "9.1.6", "9.2.5")), "1h")
    assert any("0.3 read as 0.3 %" in n.text for n in imp.notes)


def test_the_crm_masters_versions_decide_a_mixed_cluster(cli: RunCli, tmp_path: Path) -> None:
    """Mid-upgrade, pve-ams-02 still has libpve-cluster-perl 9.1.4: the CRM master (pve-ams-01,
    9.1.6) reads datacenter.cfg for the balancer, so its version decides; without a known
    master the nodes disagree and the import asks."""
    export = _edited(tmp_path, {}, "9.1.6", "9.2.5")
    f = export / "nodes/pve-ams-02/versions.json"
    pkgs = json.loads(f.read_text())
    for p in pkgs:
        if p["Package"] in ("pve-cluster", "libpve-cluster-perl"):
            p["Version"] = p["OldVersion"] = "9.1.4"
    f.write_text(json.dumps(pkgs))
    crs = read_export(export).crs
    assert crs.percent_units and crs.units_why == "libpve-cluster-perl 9.1.6 on pve-ams-01"
    ms = export / "cluster/ha/manager_status.json"
    doc = json.loads(ms.read_text())
    del doc["manager_status"]["master_node"]
    ms.write_text(json.dumps(doc))
    code, _, err = cli("import", str(export), "--out", str(tmp_path / "x.toml"), "--window", "1h")
    assert code == 2 and "the nodes disagree" in err and "--crs-units" in err


def test_units_the_export_cannot_prove_stop_the_import(cli: RunCli, tmp_path: Path) -> None:
    export = _edited(tmp_path, {"ha-auto-rebalance-threshold": 30}, None, "9.1.13")
    code, _, err = cli("import", str(export), "--out", str(tmp_path / "x.toml"), "--window", "1h")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cluster/options.json crs.ha-auto-rebalance-threshold" in err
    assert "--crs-units percent|fraction" in err
    # the flag states it
    assert _upstream(export, "percent")["threshold"] == 0.3
    assert _upstream(export, "fraction")["threshold"] == 30.0


def test_the_flag_cannot_contradict_the_export(cli: RunCli, tmp_path: Path) -> None:
    code, _, err = cli("whatif", str(PVE9), "--out", str(tmp_path / "w"), "--crs-units", "fraction")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--crs-units" in err and "proves percent" in err


# ------------------------------------------------------------------------------------------ PVE 7
def test_pve7_and_8_hour_series_have_70_rows() -> None:
    """PVE 7's and 8's create_rrd_data answers every timeframe with 70 rows (pve-cluster before
    1a483ba): the hour window is 70 minutes."""
    for fixture in (PVE7, PVE8):
        w = build_import(read_export(fixture), "hour").window
        assert (w.step, w.n, w.duration) == (60, 70, 4200), fixture.name


def test_the_version_is_named_as_exported(cli: RunCli, tmp_path: Path) -> None:
    code, out, err = cli("import", str(PVE7), "--out", str(tmp_path / "s.toml"), "--window", "day")
    assert code == 0, err
    assert "PVE 8" not in out
    assert "imported PVE 7.4-17 (pve2 RRD format)" in out
    assert "PVE 7.4-17's pve2 RRD format has no memhost" in out


def test_a_container_without_a_cpu_limit(cli: RunCli, tmp_path: Path) -> None:
    """ct:200 has no cores: the API's maxcpu is the host's 72 CPUs. PVE's static usage counts
    ``cpulimit || cores`` (0: the whole node), its dynamic usage the measured cores: the import
    writes maxcpu 0 (no CPU limit), which the scenario validates and the model counts so."""
    imp = build_import(read_export(PVE7), "day")
    ct = next(g for g in imp.scenario["guests"] if g["sid"] == "ct:200")
    assert ct["maxcpu"] == 0
    note = next(n for n in imp.notes if n.subject == "ct:200" and "no cores or cpulimit" in n.text)
    assert "maxcpu 0 (no CPU limit)" in note.text and "node's 72 CPUs" in note.text
    out = tmp_path / "s.toml"
    code, _, err = cli("import", str(PVE7), "--out", str(out), "--window", "day")
    assert code == 0, err
    scn = catalog.resolve(str(out)).scenario  # the written scenario validates and loads
    assert next(g for g in scn.guests if g.sid == "ct:200").maxcpu == 0
    # its load is the measured cores, not a fraction of 72 taken as a core count
    tr = imp.traces["guest-ct-200"]
    assert tr.cpu_capacity == 72.0
    rrd = json.loads(gzip.decompress((PVE7 / CT200_RRD).read_bytes()))
    w = imp.window  # a row stamped t covers (t - step, t]: the window's rows end in (start, end]
    rows = [r for r in rrd if w.start < r["time"] <= w.start + w.n * w.step]
    assert len(rows) == w.n
    cores = [r["cpu"] * r["maxcpu"] for r in rows]  # the RRD's fraction of its own maxcpu (72)
    # the trace keeps cores / capacity: equal up to float64 division and multiplication
    assert tr.cpu * tr.cpu_capacity == pytest.approx(cores, rel=1e-12)
    # with a cpulimit (and still no cores) it is sized by it, not by the API's maxcpu
    copy = tmp_path / "p7"
    shutil.copytree(PVE7, copy)
    cfg = copy / "nodes/pve7-b/lxc/200/config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "cpulimit": "4"}))
    limited = build_import(read_export(copy), "day")
    ct = next(g for g in limited.scenario["guests"] if g["sid"] == "ct:200")
    assert ct["maxcpu"] == 4


def test_no_load_before_a_guests_first_row() -> None:
    """vm:102 was created on Thu 19 at 18:00 UTC: its RRD rows before are empty; they are not
    back-filled from its first value."""
    imp = build_import(read_export(PVE7), "day")
    tr = imp.traces["guest-vm-102"]
    first = (1795111200 - imp.window.start) // imp.window.step  # 18:00 UTC
    assert np.all(tr.cpu[:first] == 0.0) and np.all(tr.mem[:first] == 0.0)
    assert np.all(tr.cpu[first:] > 0.0)
    assert any(n.subject == "vm:102" and "not back-filled" in n.text for n in imp.notes), imp.notes
    assert not any(n.subject == "vm:102" and "interpolated" in n.text for n in imp.notes)


def test_a_node_its_guests_exceed_in_every_row() -> None:
    imp = build_import(read_export(PVE7), "day")
    (cpu,) = [e for e in imp.excess if e.what == "cpu"]
    assert cpu.node == "pve7-a" and cpu.every_row and cpu.unit == "cores"
    assert not any(e.every_row for e in build_import(read_export(PVE9), "day").excess)
