"""Bad or partial exports: one line naming the file and the field, exit code 2, never a traceback.

Each case damages a copy of the PVE 8 fixture (the smallest) in one way an export can arrive
damaged: a file missing, a wrong JSON type, a field missing, a series of an unknown node, …
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RunCli

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "pve-exports" / "pve8-groups"
NODE = "nodes/pve8-a"
VM = f"{NODE}/qemu/201"


def _edit(rel: str, fn: Callable[[Any], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        p = root / rel
        if p.suffix == ".gz":
            p.write_bytes(
                gzip.compress(json.dumps(fn(json.loads(gzip.decompress(p.read_bytes())))).encode())
            )
        else:
            p.write_text(json.dumps(fn(json.loads(p.read_text()))))

    return apply


def _remove(rel: str) -> Callable[[Path], None]:
    return lambda root: (root / rel).unlink()


def _write(rel: str, data: bytes) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)

    return apply


def _symlink_out(rel: str, target: str) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).symlink_to(target)

    return apply


def _set_item(
    key: str, value: Any, where: Callable[[dict[str, Any]], bool]
) -> Callable[[Any], Any]:
    def fn(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for item in items:
            if where(item):
                if value is _DELETE:
                    del item[key]
                else:
                    item[key] = value
        return items

    return fn


_DELETE = object()
_first_node = lambda r: r.get("id") == "node/pve8-a"  # noqa: E731
_vm201 = lambda r: r.get("vmid") == 201  # noqa: E731


def _row(i: int, key: str, value: Any) -> Callable[[Any], Any]:
    def fn(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rows[i][key] = value
        return rows

    return fn


CASES: list[tuple[str, Callable[[Path], None], str, str]] = [
    # (case, damage, file, field + message)
    (
        "a file that links out of the export",
        _symlink_out("cluster/options.json", "/etc/hostname"),
        "cluster/options.json",
        "is a symlink out of the export",
    ),
    (
        "missing resources",
        _remove("cluster/resources.json"),
        "cluster/resources.json",
        "is missing from the export",
    ),
    (
        "resources not a list",
        _edit("cluster/resources.json", lambda d: {"data": d}),
        "cluster/resources.json",
        "must be a JSON list, not an object",
    ),
    (
        "resources not JSON",
        _write("cluster/resources.json", b"[{"),
        "cluster/resources.json",
        "not valid JSON",
    ),
    (
        "node without name",
        _edit("cluster/resources.json", _set_item("node", _DELETE, _first_node)),
        "cluster/resources.json",
        "].node: is missing",
    ),
    (
        "guest maxmem a word",
        _edit("cluster/resources.json", _set_item("maxmem", "lots", _vm201)),
        "cluster/resources.json",
        "].maxmem: must be a number, not 'lots'",
    ),
    (
        "guest on an unknown node",
        _edit("cluster/resources.json", _set_item("node", "pve8-z", _vm201)),
        "cluster/resources.json",
        "qemu/201.node: unknown node 'pve8-z'",
    ),
    (
        "guest listed twice",
        _edit("cluster/resources.json", lambda d: [*d, next(x for x in d if x.get("vmid") == 201)]),
        "cluster/resources.json",
        "listed twice",
    ),
    (
        "series of a node not in the resources",
        _write("nodes/pve8-ghost/rrddata-day-AVERAGE.json.gz", gzip.compress(b"[]")),
        "nodes/pve8-ghost/rrddata-day-AVERAGE.json",
        "node 'pve8-ghost', which is not in cluster/resources.json",
    ),
    (
        "series of a guest not in the resources",
        _write(f"{NODE}/qemu/999/rrddata-day-AVERAGE.json.gz", gzip.compress(b"[]")),
        f"{NODE}/qemu/999/rrddata-day-AVERAGE.json",
        "guest '999'",
    ),
    (
        "series not a list",
        _edit(f"{NODE}/rrddata-day-AVERAGE.json.gz", lambda d: {"rows": d}),
        f"{NODE}/rrddata-day-AVERAGE.json.gz",
        "must be a JSON list",
    ),
    (
        "series value a word",
        _edit(f"{NODE}/rrddata-day-AVERAGE.json.gz", _row(3, "cpu", "busy")),
        f"{NODE}/rrddata-day-AVERAGE.json.gz",
        "[3].cpu: must be a number",
    ),
    (
        "series row without time",
        _edit(f"{VM}/rrddata-day-AVERAGE.json.gz", _row(5, "time", None)),
        f"{VM}/rrddata-day-AVERAGE.json.gz",
        "[5].time: is missing",
    ),
    (
        "series rows out of order",
        _edit(f"{NODE}/rrddata-day-AVERAGE.json.gz", lambda d: [d[1], d[0], *d[2:]]),
        f"{NODE}/rrddata-day-AVERAGE.json.gz",
        "[1].time",
    ),
    (
        "series at the wrong resolution",
        _edit(
            f"{NODE}/rrddata-day-AVERAGE.json.gz",
            lambda d: [{**r, "time": r["time"] // 1800 * 60} for r in d],
        ),
        f"{NODE}/rrddata-day-AVERAGE.json.gz",
        "rows are not 1800 s apart",
    ),
    (
        "series not gzip",
        _write(f"{NODE}/rrddata-day-MAX.json.gz", b"not gzip"),
        f"{NODE}/rrddata-day-MAX.json.gz",
        "not valid gzip",
    ),
    (
        "running guest without its series",
        _remove(f"{VM}/rrddata-day-AVERAGE.json.gz"),
        f"{VM}/rrddata-day-AVERAGE.json",
        "is missing (vm:201 has no day series)",
    ),
    (
        "guest config missing",
        _remove(f"{VM}/config.json"),
        f"{VM}/config.json",
        "is missing from the export",
    ),
    (
        "node status without cpus",
        _edit(f"{NODE}/status.json", lambda d: {**d, "cpuinfo": {}}),
        f"{NODE}/status.json",
        "cpuinfo.cpus: is missing",
    ),
    (
        "node status missing",
        _remove(f"{NODE}/status.json"),
        f"{NODE}/status.json",
        "is missing from the export",
    ),
    ("export.json missing", _remove("export.json"), "export.json", "is missing from the export"),
    (
        "export of another format",
        _edit("export.json", lambda d: {**d, "format": "other/2"}),
        "export.json",
        "format: 'other/2' is not a known export format",
    ),
    (
        "version not a version",
        _edit("version.json", lambda d: {**d, "version": "latest"}),
        "version.json",
        "version: 'latest' is not a pve-manager version",
    ),
    (
        "crs mode unknown",
        _edit("cluster/options.json", lambda d: {**d, "crs": {"ha": "fancy"}}),
        "cluster/options.json",
        "crs.ha: 'fancy' is not basic, static or dynamic",
    ),
    (
        "HA resource of an unknown guest",
        _edit("cluster/ha/resources.json", lambda d: [*d, {"sid": "vm:999", "state": "started"}]),
        "cluster/ha/resources.json",
        "sid: HA resource 'vm:999' is not a guest",
    ),
    (
        "HA state unknown",
        _edit("cluster/ha/resources.json", lambda d: [{**d[0], "state": "sleeping"}, *d[1:]]),
        "cluster/ha/resources.json",
        "[0].state: 'sleeping' is not an HA state",
    ),
    (
        "HA group unknown",
        _edit("cluster/ha/resources.json", lambda d: [{**d[0], "group": "nowhere"}, *d[1:]]),
        "cluster/ha/resources.json",
        "group: unknown group 'nowhere'",
    ),
    (
        "group with an unknown node",
        _edit("cluster/ha/groups.json", lambda d: [{**d[0], "nodes": "pve8-z:1"}, *d[1:]]),
        "cluster/ha/groups.json",
        "[0].nodes: unknown node 'pve8-z'",
    ),
    (
        "task with a bad id",
        _edit(f"{NODE}/tasks.json", lambda d: [{"type": "qmigrate", "id": "x", "starttime": 1}]),
        f"{NODE}/tasks.json",
        "[0].id: 'x' is not a guest id",
    ),
]


@pytest.mark.parametrize(("case", "damage", "file", "what"), CASES, ids=[c[0] for c in CASES])
def test_malformed_export_is_one_line_naming_file_and_field(
    cli: RunCli,
    tmp_path: Path,
    case: str,
    damage: Callable[[Path], None],
    file: str,
    what: str,
) -> None:
    export = tmp_path / "export"
    shutil.copytree(FIXTURE, export)
    damage(export)
    code, out, err = cli(
        "import", str(export), "--out", str(tmp_path / "s.toml"), "--window", "day"
    )
    assert code == 2, (case, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("pvegym import: error: ")
    assert file in lines[0] and what in lines[0], lines[0]
    assert not (tmp_path / "s.toml").exists()


def test_rules_with_unknown_resources_or_nodes(cli: RunCli, tmp_path: Path) -> None:
    export = tmp_path / "e"
    shutil.copytree(FIXTURE.parent / "pve9-field", export)
    for rule, what in (
        (
            {
                "rule": "r",
                "type": "resource-affinity",
                "affinity": "negative",
                "resources": "vm:101,vm:999",
            },
            "'vm:999' is not an HA resource",
        ),
        (
            {"rule": "r", "type": "node-affinity", "nodes": "pve-ams-09", "resources": "vm:101"},
            "unknown node 'pve-ams-09'",
        ),
        (
            {
                "rule": "r",
                "type": "resource-affinity",
                "affinity": "sideways",
                "resources": "vm:101",
            },
            "'sideways' is not positive or negative",
        ),
        (
            {"rule": "r", "type": "location", "resources": "vm:101"},
            "'location' is not node-affinity",
        ),
    ):
        (export / "cluster/ha/rules.json").write_text(json.dumps([rule]))
        code, _, err = cli("import", str(export), "--out", str(tmp_path / "s.toml"))
        assert code == 2 and "cluster/ha/rules.json [0]" in err and what in err, err


def test_a_missing_export_and_a_bad_out(cli: RunCli, tmp_path: Path) -> None:
    code, _, err = cli("import", str(tmp_path / "nope"), "--out", str(tmp_path / "s.toml"))
    assert code == 2 and "no such export directory or tarball" in err
    (tmp_path / "bad.tar.gz").write_bytes(b"not a tarball")
    code, _, err = cli("import", str(tmp_path / "bad.tar.gz"), "--out", str(tmp_path / "s.toml"))
    assert code == 2 and "is not a directory or a tarball" in err
    code, _, err = cli("import", str(FIXTURE), "--out", str(tmp_path / "s.json"))
    assert code == 2 and "--out" in err and ".toml" in err
