"""``scripts/pve-export.sh`` against a stub ``pvesh`` that serves a fixture and plants secrets.

The stub (``tests/data/pve-exports/stub_pvesh.py``) answers like the PVE API, with descriptions,
notes, comments, cloud-init passwords and SSH keys, IP configurations, MAC addresses, tags and
user names planted in. None of them may reach the export; with ``--anonymize`` none of the
cluster's names and guest ids may either — and what the script writes must still import.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from pvegym.pve_export.cluster import read_export
from pvegym.pve_export.to_scenario import build_import

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "pve-export.sh"
FIXTURES = ROOT / "tests" / "data" / "pve-exports"
sys.path.insert(0, str(FIXTURES))
from stub_pvesh import SECRETS  # noqa: E402

IPV4 = re.compile(rb"\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b")
MAC = re.compile(rb"\b[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}\b")


def export(tmp: Path, fixture: str, *args: str) -> tuple[Path, list[str]]:
    """Run the script with the stub as ``pvesh``; the export directory and the stub's call log."""
    stub = tmp / "pvesh"
    # -I -S: the stub needs the standard library only; skipping site-packages keeps its ~150
    # invocations per export cheap
    stub.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S {FIXTURES / "stub_pvesh.py"} "$@"\n')
    stub.chmod(0o755)
    log = tmp / "pvesh.log"
    out = tmp / "export"
    env = {
        **os.environ,
        "PVESH": str(stub),
        "PVESH_FIXTURE": str(FIXTURES / fixture),
        "PVESH_LOG": str(log),
        "PVE_EXPORT_ALLOW_NON_ROOT": "1",
    }
    # --since 0: the fixture's tasks are older than the default 9 days before *now*
    run = subprocess.run(
        ["bash", str(SCRIPT), "--out", str(out), "--since", "0", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    return out, log.read_text().splitlines()


def files(root: Path) -> dict[str, bytes]:
    """Every file of an export (gzip decompressed), by relative path."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            out[p.relative_to(root).as_posix()] = (
                gzip.decompress(data) if p.suffix == ".gz" else data
            )
    return out


def tokens(root: Path) -> set[str]:
    """Every path component and every word of every JSON key and string value."""
    out: set[str] = set()

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                out.update(re.split(r"[,:=/;\s]+", str(k)))
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, str):
            out.update(re.split(r"[,:=/;\s]+", x))
            out.add(x)

    for rel, data in files(root).items():
        out.update(rel.removesuffix(".gz").split("/"))
        walk(json.loads(data))
    return out


@pytest.fixture(scope="module")
def pve9(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    return export(tmp_path_factory.mktemp("plain"), "pve9-field")


@pytest.fixture(scope="module")
def pve9_anon(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    return export(tmp_path_factory.mktemp("anon"), "pve9-field", "--anonymize")


def _no_secrets(root: Path) -> None:
    for rel, data in files(root).items():
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret!r} in {rel}"
        assert not IPV4.search(data), f"an IP address in {rel}: {IPV4.search(data)}"
        assert not MAC.search(data), f"a MAC address in {rel}"


def test_no_secret_reaches_the_export(pve9: tuple[Path, list[str]]) -> None:
    root, log = pve9
    _no_secrets(root)
    # read-only: every call is a `pvesh get … --output-format json`
    assert log and all(line.startswith("get /") and "--output-format json" in line for line in log)


def test_the_export_is_the_fixture_again(pve9: tuple[Path, list[str]]) -> None:
    """The fixtures are what the script writes: exporting the stub's answers gives them back."""
    root, _ = pve9
    fixture = FIXTURES / "pve9-field"
    got, want = files(root), files(fixture)
    assert set(got) == set(want)
    for rel in sorted(want):
        if rel == "export.json":
            continue
        assert json.loads(got[rel]) == json.loads(want[rel]), rel
    meta = json.loads(got["export.json"])
    assert meta["format"] == "pvegym-pve-export/1" and meta["anonymized"] is False
    assert [m["path"] for m in meta["missing"]] == ["/cluster/ha/groups"]


def test_anonymized_export_has_no_names_or_ids_and_imports(
    pve9_anon: tuple[Path, list[str]],
) -> None:
    root, _ = pve9_anon
    _no_secrets(root)
    fixture = FIXTURES / "pve9-field"
    resources = json.loads((fixture / "cluster/resources.json").read_text())
    rules = json.loads((fixture / "cluster/ha/rules.json").read_text())
    names = {r["node"] for r in resources if r["type"] == "node"}
    names |= {r["name"] for r in resources if r["type"] in ("qemu", "lxc")}
    names |= {r["storage"] for r in resources if r["type"] == "storage"}
    names |= {r["rule"] for r in rules}
    names.add("debian-13.0.0-amd64-netinst.iso")  # an ISO file name is a name too
    words = tokens(root)
    assert not names & words, names & words
    vmids = {str(r["vmid"]) for r in resources if r["type"] in ("qemu", "lxc")}
    anon_res = json.loads((root / "cluster/resources.json").read_text())
    new_ids = {str(r["vmid"]) for r in anon_res if r["type"] in ("qemu", "lxc")}
    assert len(new_ids) == len(vmids) and not new_ids & vmids
    sids = {f"vm:{v}" for v in vmids} | {f"ct:{v}" for v in vmids}
    assert not sids & words
    # guest ids in task lists and directory names are mapped too
    task_ids = {t["id"] for p in root.glob("nodes/*/tasks.json") for t in json.loads(p.read_text())}
    assert task_ids and not task_ids & vmids
    dirs = {p.name for p in root.glob("nodes/*/*/*") if p.is_dir()}
    assert dirs == new_ids
    # the same cluster, under other names
    plain = build_import(read_export(fixture), "day")
    anon = build_import(read_export(root), "day")
    assert len(anon.scenario["guests"]) == len(plain.scenario["guests"])
    assert [len(anon.scenario[k]) for k in ("nodes", "node_affinity", "resource_affinity")] == [
        len(plain.scenario[k]) for k in ("nodes", "node_affinity", "resource_affinity")
    ]
    blocked = lambda imp: sorted(g.get("local_resources", False) for g in imp.scenario["guests"])  # noqa: E731
    assert blocked(anon) == blocked(plain)
    assert anon.window == plain.window


def test_pve8_groups_anonymized_and_tarred(tmp_path: Path) -> None:
    root, _ = export(tmp_path, "pve8-groups", "--anonymize", "--tar")
    tar = root.with_name(root.name + ".tar.gz")
    assert tar.is_file() and not root.exists()
    with tarfile.open(tar) as t:
        t.extractall(tmp_path / "x", filter="data")
    extracted = tmp_path / "x" / root.name
    _no_secrets(extracted)
    words = tokens(extracted)
    assert not {"pve8-a", "pve8-b", "pve8-c", "prefer-a", "only-ab", "app-01", "nfs-vm"} & words
    imp = build_import(read_export(tar), "day")
    assert {r["name"] for r in imp.scenario["node_affinity"]} == {
        "ha-group-group1",
        "ha-group-group2",
    }


def test_unknown_options_and_an_existing_out(tmp_path: Path) -> None:
    env = {**os.environ, "PVE_EXPORT_ALLOW_NON_ROOT": "1", "PVESH": "/bin/false"}
    run = subprocess.run(
        ["bash", str(SCRIPT), "--frobnicate"], env=env, capture_output=True, text=True
    )
    assert run.returncode == 2 and "unknown option" in run.stderr
    run = subprocess.run(
        ["bash", str(SCRIPT), "--out", str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert run.returncode == 2 and "exists" in run.stderr
