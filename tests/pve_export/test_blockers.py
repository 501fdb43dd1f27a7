"""Migration blockers read from guest configs, as qemu-server's and pve-container's checks read
them (``QemuMigrate.pm`` prepare/scan_local_volumes, ``QemuMigrate/Helpers.pm``
check_local_resources, ``LXC/Migrate.pm`` prepare)."""

import pytest

from pvegym.pve_export.blockers import (
    ct_migratability,
    fix_for,
    parse_size,
    property_string,
    vm_migratability,
)

SHARED = {"local": False, "local-zfs": False, "ceph-vm": True, "nfs-iso": True}


@pytest.mark.parametrize(
    ("config", "blocked", "reason"),
    [
        # the field report's failure loop: an ISO on a non-shared storage
        ({"ide2": "local:iso/debian.iso,media=cdrom"}, "ide2", "local cdrom image"),
        ({"ide2": "cdrom,media=cdrom"}, "ide2", "local cdrom drive"),
        ({"sata0": "/dev/disk/by-id/ata-X"}, "sata0", "local file/device"),
        ({"hostpci0": "0000:41:00.0,pcie=1"}, "hostpci0", "local devices"),
        ({"usb0": "host=1050:0407"}, "usb0", "local devices"),
        ({"serial0": "/dev/ttyS0"}, "serial0", "local devices"),
        ({"parallel0": "/dev/parport0"}, "parallel0", "local devices"),
        ({"virtiofs0": "dirid=share"}, "virtiofs0", "local devices"),
        ({"ivshmem": "size=32"}, "ivshmem", "local devices"),
        ({"hostpci0": "mapping=gpu"}, "hostpci0", "mapped devices"),
        ({"usb1": "mapping=yubikey"}, "usb1", "mapped devices"),
        ({"vga": "std,clipboard=vnc", "machine": "pc-q35-9.2+pve1"}, "vga", "10.1"),
    ],
)
def test_vm_blockers(config: dict[str, str], blocked: str, reason: str) -> None:
    mig = vm_migratability(config, SHARED, {"gpu": False})
    assert [k for k, _ in mig.blockers] == [blocked]
    assert reason in mig.blockers[0][1]


@pytest.mark.parametrize(
    "config",
    [
        {"ide2": "none,media=cdrom"},
        {"ide2": "nfs-iso:iso/debian.iso,media=cdrom"},  # shared ISO storage
        {"ide0": "local-zfs:vm-101-cloudinit,media=cdrom"},  # regenerated on the target
        {"scsi0": "ceph-vm:vm-101-disk-0,size=32G"},
        {"usb0": "host=spice"},
        {"serial0": "socket"},
        {"hostpci0": "mapping=vgpu"},  # mapped and live-migration-capable
        {"sata1": "/mnt/shared/disk.raw,shared=1"},
        {"vga": "std,clipboard=vnc", "machine": "pc-q35-10.1+pve1"},
    ],
)
def test_vm_configs_that_migrate(config: dict[str, str]) -> None:
    assert vm_migratability(config, SHARED, {"vgpu": True}).blockers == []


def test_local_disks_do_not_block_but_their_traffic_is_reported() -> None:
    # HA migrates with --with-local-disks (Resources/PVEVM.pm): the disk is mirrored
    mig = vm_migratability({"scsi0": "local-zfs:vm-101-disk-0,size=120G"}, SHARED, {})
    assert mig.blockers == []
    assert mig.local_disk_bytes == 120 * 2**30
    assert "not modelled" in mig.notes[0]


def test_unknown_storage_and_missing_mappings_are_said() -> None:
    mig = vm_migratability({"ide2": "old:iso/x.iso,media=cdrom"}, SHARED, {})
    assert mig.blockers == [("ide2", "local cdrom image")]
    assert "assumed local" in mig.notes[0]
    mig = vm_migratability({"hostpci0": "mapping=gpu"}, SHARED, None)
    assert mig.blockers and "not exported" in mig.blockers[0][1]


@pytest.mark.parametrize(
    ("config", "blocked"),
    [
        ({"mp0": "/srv/cache,mp=/var/cache"}, ["mp0"]),
        ({"mp1": "/dev/sdb1,mp=/data"}, ["mp1"]),
        ({"mp0": "/srv/cache,mp=/var/cache,shared=1"}, []),
        ({"rootfs": "local-zfs:subvol-200-disk-0,size=8G"}, []),  # copied offline
        ({"dev0": "/dev/ttyUSB0"}, []),  # pve-container does not check devices
    ],
)
def test_ct_blockers(config: dict[str, str], blocked: list[str]) -> None:
    assert [k for k, _ in ct_migratability(config, SHARED).blockers] == blocked


def test_property_strings_and_sizes() -> None:
    assert property_string("local:iso/x.iso,media=cdrom") == ("local:iso/x.iso", {"media": "cdrom"})
    assert property_string("file=a:b,size=1G") == ("a:b", {"size": "1G"})
    assert parse_size("32G") == 32 * 2**30
    assert parse_size("512M") == 512 * 2**20
    assert parse_size("4096") == 4096
    assert parse_size("") == 0


@pytest.mark.parametrize(
    ("sid", "config", "fix", "frees"),
    [
        (
            "vm:101",
            {"ide2": "local:iso/x.iso,media=cdrom"},
            "qm set 101 --ide2 none,media=cdrom",
            True,
        ),
        ("vm:102", {"ide2": "cdrom,media=cdrom"}, "eject the CD-ROM", True),
        ("vm:103", {"scsi1": "/dev/sdb"}, "qm disk move 103 scsi1", True),
        ("vm:104", {"hostpci0": "0000:01:00.0"}, "ha-manager set vm:104 --auto-rebalance 0", False),
        ("vm:105", {"usb0": "host=1234:5678"}, "auto-rebalance: 0", False),
    ],
)
def test_each_vm_blocker_has_its_fix(
    sid: str, config: dict[str, str], fix: str, frees: bool
) -> None:
    (blocker,) = vm_migratability(config, SHARED, {}).blockers
    f = fix_for(sid, *blocker)
    assert fix in f.fix and f.frees is frees and f.key == blocker[0]


def test_a_bind_mount_is_kept_out_of_the_balancer() -> None:
    (blocker,) = ct_migratability({"mp0": "/srv/cache,mp=/var/cache"}, SHARED).blockers
    f = fix_for("ct:200", *blocker)
    assert "shared=1" in f.fix and "ha-manager set ct:200 --auto-rebalance 0" in f.fix
    assert not f.frees
