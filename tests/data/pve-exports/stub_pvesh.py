#!/usr/bin/env python3
"""A stand-in for ``pvesh`` (tests only): answers ``pvesh get PATH --output-format json`` from an
export fixture, as the real API would — with everything the export script must *not* copy
planted back in: descriptions and notes, comments, cloud-init passwords and SSH keys, IP
configurations and networks, MAC addresses, tags, user names, a proxy password, and fields the
allow-list drops.

``PVESH_FIXTURE`` names the fixture directory; ``PVESH_LOG`` (optional) collects every call
(one line each) so a test can check the script only ever calls ``get``. :data:`SECRETS` is the
list of planted strings a test looks for in the export.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

#: every planted secret: none of these may appear anywhere in an export
SECRETS = (
    "hunter2-cipassword",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedSshKeyForTheExportTest",
    "Notes: root password is swordfish",
    "ip=10.11.12.13/24,gw=10.11.12.1",
    "10.11.12.13",
    "BC:24:11:5E:C2:E7",
    "bc:24:11:5e:c2:e7",
    "192.168.77.5",
    "10.20.30.0/24",
    "proxyuser:proxypass",
    "admin@example.invalid",
    "alice@pve",
    "secret-tag",
    "datacenter notes: backup key is in the safe",
    "ha comment: call bob",
    "rule comment: keep apart",
    "group comment: legacy",
    "smbios-uuid-4f1c2b7e",
    "nameserver-192.168.77.53",
    "SECRETSERIAL",
    "secret-mountpoint",
    "planted-hostname",
    "planted-name-not-from-resources",
)


def fail(msg: str, code: int = 2) -> None:
    print(msg, file=sys.stderr)
    sys.exit(code)


def load(root: Path, rel: str) -> Any:
    p = root / rel
    if p.is_file():
        return json.loads(p.read_text())
    gz = root / (rel + ".gz")
    if gz.is_file():
        return json.loads(gzip.decompress(gz.read_bytes()))
    fail(f"No 'get' handler defined for '{rel}'")
    return None


def guest_dir(root: Path, kind: str, vmid: str) -> Path | None:
    for p in (root / "nodes").glob(f"*/{kind}/{vmid}"):
        return p
    return None


def answer(root: Path, path: str, opts: dict[str, str]) -> Any:
    parts = path.strip("/").split("/")
    if path == "/version":
        return load(root, "version.json")
    if path == "/cluster/resources":
        res = load(root, "cluster/resources.json")
        for r in res:
            if r["type"] in ("qemu", "lxc"):
                r.update(tags="prod;secret-tag", netin=1234, netout=4321, diskread=5, diskwrite=6)
            if r["type"] == "node":
                r.update(level="c", **{"cgroup-mode": 2})
        res.append({"id": "/pool/secret-pool", "pool": "secret-pool", "type": "pool"})
        res.append({"id": "sdn/x/localnetwork", "sdn": "localnetwork", "type": "sdn", "node": "x"})
        return res
    if path == "/cluster/options":
        opts_doc = load(root, "cluster/options.json")
        opts_doc.update(
            description="datacenter notes: backup key is in the safe",
            http_proxy="http://proxyuser:proxypass@192.168.77.5:3128",
            email_from="admin@example.invalid",
            mac_prefix="BC:24:11",
            keyboard="en-us",
        )
        opts_doc.setdefault("migration", {})["network"] = "10.20.30.0/24"
        return opts_doc
    if path == "/cluster/ha/resources":
        return [
            {**r, "comment": "ha comment: call bob", "digest": "abc"}
            for r in load(root, "cluster/ha/resources.json")
        ]
    if path == "/cluster/ha/rules":
        return [
            {**r, "comment": "rule comment: keep apart", "digest": "abc"}
            for r in load(root, "cluster/ha/rules.json")
        ]
    if path == "/cluster/ha/groups":
        return [
            {**r, "comment": "group comment: legacy", "digest": "abc"}
            for r in load(root, "cluster/ha/groups.json")
        ]
    if path == "/cluster/ha/status/manager_status":
        return load(root, "cluster/ha/manager_status.json")
    if path == "/cluster/mapping/pci":
        return [{**m, "description": "Notes: root password is swordfish",
                 "map": ["id=10de:2204,node=x,path=0000:41:00.0"]} for m in load(root, "cluster/mapping/pci.json")]  # fmt: skip
    if parts[0] == "nodes" and len(parts) == 3 and parts[2] == "status":
        st = load(root, f"nodes/{parts[1]}/status.json")
        st["dns"] = {"dns1": "192.168.77.53", "search": "example.invalid"}
        st["current-kernel"] = {"machine": "x86_64", "release": "6.14.11-4-pve"}
        return st
    if parts[0] == "nodes" and len(parts) == 4 and parts[2:] == ["apt", "versions"]:
        # pve-manager API2/APT.pm versions: every important package, with fields the export drops
        pkgs = load(root, f"nodes/{parts[1]}/versions.json")
        extra = {"Package": "qemu-server", "Version": "9.0.0", "OldVersion": "9.0.0"}
        planted = {"Title": "planted-name-not-from-resources", "Origin": "Proxmox",
                   "Description": "Notes: root password is swordfish", "Section": "admin"}  # fmt: skip
        return [{**p, **planted} for p in [*pkgs, extra]]
    if parts[0] == "nodes" and len(parts) == 3 and parts[2] == "tasks":
        tasks = load(root, f"nodes/{parts[1]}/tasks.json")
        want = opts.get("typefilter")
        out = []
        for t in tasks:
            if want and t["type"] != want:
                continue
            if int(opts.get("since", 0)) > t["starttime"]:
                continue
            status = t.get("status")
            if status == "error":
                status = "can't migrate VM which uses local devices: ssh 10.11.12.13 failed"
            out.append(
                {
                    **t,
                    "status": status,
                    "user": "alice@pve",
                    "pid": 4242,
                    "pstart": 77,
                    "upid": f"UPID:{t['node']}:00001092:0000004D:{t['starttime']:08X}:{t['type']}:{t['id']}:alice@pve:",
                }
            )
        out.append(
            {
                "type": "vzdump",
                "id": "",
                "node": parts[1],
                "starttime": 1,
                "user": "alice@pve",
                "status": "OK",
            }
        )
        return [t for t in out if not want or t["type"] == want]
    if parts[0] == "nodes" and parts[-1] == "rrddata":
        tf, cf = opts.get("timeframe"), opts.get("cf", "AVERAGE")
        if len(parts) == 3:
            rows = load(root, f"nodes/{parts[1]}/rrddata-{tf}-{cf}.json")
        else:
            d = guest_dir(root, parts[2], parts[3])
            if d is None:
                fail(
                    f"Configuration file 'nodes/{parts[1]}/{parts[2]}/{parts[3]}.conf' does not exist"
                )
            rows = load(d, f"rrddata-{tf}-{cf}.json")
        # the RRD API returns numbers only; a string here checks the export's allow-list
        rows[0]["comment"] = "Notes: root password is swordfish"
        return rows
    if parts[0] == "nodes" and parts[-1] == "config" and len(parts) == 5:
        d = guest_dir(root, parts[2], parts[3])
        if d is None:
            fail(f"Configuration file 'nodes/{parts[1]}/{parts[2]}/{parts[3]}.conf' does not exist")
        cfg = load(d, "config.json")
        cfg.update(
            description="Notes: root password is swordfish",
            tags="secret-tag",
            digest="0123456789abcdef",
        )
        if parts[2] == "qemu":
            cfg.update(
                name="planted-name-not-from-resources",
                cipassword="hunter2-cipassword",
                ciuser="root",
                sshkeys="ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPlantedSshKeyForTheExportTest",
                ipconfig0="ip=10.11.12.13/24,gw=10.11.12.1",
                nameserver="nameserver-192.168.77.53",
                net0="virtio=BC:24:11:5E:C2:E7,bridge=vmbr0,firewall=1",
                smbios1="uuid=smbios-uuid-4f1c2b7e",
                scsihw="virtio-scsi-single",
                boot="order=scsi0;ide2;net0",
                agent="1",
            )
            for key, value in list(cfg.items()):  # options the allow-list drops from drives
                if key.startswith("scsi") and key[4:].isdigit():
                    cfg[key] = value + ",iothread=1,discard=on,serial=SECRETSERIAL"
        else:
            cfg.update(
                hostname="planted-hostname",
                net0="name=eth0,bridge=vmbr0,hwaddr=bc:24:11:5e:c2:e7,ip=192.168.77.5/24",
            )
            if "mp0" in cfg:
                cfg["mp0"] += ",mp=/var/lib/secret-mountpoint"
        return cfg
    fail(f"No 'get' handler defined for '{path}'")
    return None


def main(argv: list[str]) -> None:
    log = os.environ.get("PVESH_LOG")
    if log:
        with open(log, "a") as f:
            f.write(" ".join(argv) + "\n")
    if not argv or argv[0] != "get":
        fail(f"stub pvesh: only 'get' is served, not {argv[:1]}")
    path = argv[1]
    opts: dict[str, str] = {}
    rest = argv[2:]
    while rest:
        key = rest.pop(0)
        if not key.startswith("--") or not rest:
            fail(f"stub pvesh: bad option {key}")
        opts[key[2:]] = rest.pop(0)
    if opts.get("output-format") != "json":
        fail("stub pvesh: --output-format json expected")
    root = Path(os.environ["PVESH_FIXTURE"])
    print(json.dumps(answer(root, path, opts)))


if __name__ == "__main__":
    main(sys.argv[1:])
