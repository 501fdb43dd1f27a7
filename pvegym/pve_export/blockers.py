"""What makes the HA manager's migration of a guest fail, read from the guest's config.

The HA manager moves a VM with ``qm migrate --online --with-local-disks --force``
(pve-ha-manager ``Resources/PVEVM.pm``) and a container by shutdown + offline migration
(``Resources/PVECT.pm``). qemu-server refuses a *running* VM before any data moves when
(``QemuMigrate.pm`` ``prepare`` and ``scan_local_volumes``, ``QemuMigrate/Helpers.pm``
``check_local_resources``, qemu-server 9.2.6):

* it uses local devices: ``hostpciN`` (unless mapped with ``live-migration-capable``), ``usbN``
  (unless ``spice``; a mapped USB device still blocks a live migration), ``serialN`` (unless
  ``socket``), ``parallelN``, ``virtiofsN``, ``ivshmem``, the old ``hostpci``/``hostusb`` and, on a
  running VM, ``amd-sev``/``intel-tdx`` — ``force`` only helps offline ("can't migrate VM which uses
  local devices");
* it has a CD-ROM on a non-shared storage ("local cdrom image") or a physical drive
  (``cdrom``: "can't migrate local cdrom drive") — the field report's failure loop;
* a volume is a host path (``/dev/…``) not marked ``shared=1`` ("local file/device").

Local disks on non-shared storages do *not* block: ``--with-local-disks`` mirrors them to the
target (the disk's size crosses the network, which pvegym's migration model does not include —
reported as a note). A container is refused for a bind or device mount point not marked
``shared=1`` (pve-container ``LXC/Migrate.pm`` ``prepare``: "cannot migrate local … mount point");
its local volumes are copied offline; ``devN`` passthrough is not checked there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pvegym.units import GiB

#: config keys that hold a VM volume (``PVE::QemuServer::Drive``)
_VM_DRIVE = re.compile(r"^(ide|sata|scsi|virtio)\d+$|^(efidisk|tpmstate)0$|^unused\d+$")
_CT_VOLUME = re.compile(r"^rootfs$|^mp\d+$|^unused\d+$")
_DEVICE_KEYS = re.compile(r"^(usb|hostpci|serial|parallel|virtiofs)\d+$")
_CLOUDINIT = re.compile(r"vm-\d+-cloudinit")
_MACHINE_VERSION = re.compile(r"-(\d+)\.(\d+)")


@dataclass
class Migratability:
    """``blockers``: (config key, qemu-server's/pve-container's reason) — any makes every
    migration fail after the precheck. ``notes``: what does not block but pvegym does not model
    (local disks copied, devices pve-container does not check). ``local_disk_bytes``: the size of
    the local volumes a migration would copy."""

    blockers: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    local_disk_bytes: float = 0.0


def property_string(text: str) -> tuple[str, dict[str, str]]:
    """``"local:iso/x.iso,media=cdrom"`` → ``("local:iso/x.iso", {"media": "cdrom"})``; the first
    item without ``=`` (or ``file=``/``volume=``) is the volume."""
    volume = ""
    opts: dict[str, str] = {}
    for item in str(text).split(","):
        key, sep, value = item.partition("=")
        if not sep:
            volume = volume or item.strip()
        elif key.strip() in ("file", "volume"):
            volume = value.strip()
        else:
            opts[key.strip()] = value.strip()
    return volume, opts


def parse_size(text: str) -> float:
    """A PVE disk size (``32G``, ``512M``, ``4T``, bytes without a suffix) in bytes; 0 if absent
    or unreadable (only used for the traffic note)."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)", text.strip())
    if not m:
        return 0.0
    return float(m.group(1)) * 1024.0 ** " KMGT".index(m.group(2) or " ")


def _storage_of(volume: str) -> str | None:
    return volume.split(":", 1)[0] if ":" in volume else None


def vm_migratability(
    config: dict[str, str],
    shared: dict[str, bool],
    pci_live_capable: dict[str, bool] | None,
) -> Migratability:
    """Blockers of an online migration of a running VM with ``config`` (the API's ``config``
    answer: key → string). ``shared``: storage id → shared; ``pci_live_capable``: PCI mapping id →
    ``live-migration-capable`` (``None``: the mappings were not exported)."""
    out = Migratability()
    for key in sorted(config):
        value = str(config[key])
        if _VM_DRIVE.match(key):
            _vm_volume(key, value, shared, out)
        elif key in ("hostusb", "hostpci", "ivshmem", "amd-sev", "intel-tdx"):
            out.blockers.append((key, "can't migrate VM which uses local devices"))
        elif _DEVICE_KEYS.match(key):
            _vm_device(key, value, pci_live_capable, out)
    vga = property_string(config.get("vga", ""))[1]
    if vga.get("clipboard") == "vnc":
        m = _MACHINE_VERSION.search(str(config.get("machine", "")))
        if m and (int(m.group(1)), int(m.group(2))) < (10, 1):
            out.blockers.append(("vga", "clipboard=vnc needs machine version ≥ 10.1"))
        elif not m:
            out.notes.append(
                "vga clipboard=vnc: live migration fails if the running machine version is "
                "older than 10.1 (not pinned in the config: not checked)"
            )
    if config.get("lock"):
        out.notes.append(f"config locked ({config['lock']}) at export: migrations fail while it is")
    return out


def _vm_volume(key: str, value: str, shared: dict[str, bool], out: Migratability) -> None:
    volume, opts = property_string(value)
    cdrom = opts.get("media") == "cdrom"
    if volume in ("", "none"):
        return
    if volume == "cdrom":
        out.blockers.append((key, "can't migrate local cdrom drive"))
        return
    if volume.startswith("/"):
        if opts.get("shared") != "1":
            out.blockers.append((key, "local file/device"))
        return
    storage = _storage_of(volume)
    if storage is None:
        out.notes.append(f"{key}: volume {volume!r} names no storage: not checked")
        return
    if storage not in shared:
        out.notes.append(
            f"{key}: storage {storage!r} is not in cluster/resources.json: assumed local"
        )
    if shared.get(storage, False):
        return
    if cdrom:
        if _CLOUDINIT.search(volume):
            return  # regenerated on the target ("generated" in scan_local_volumes)
        out.blockers.append((key, "local cdrom image"))
        return
    size = parse_size(opts.get("size", ""))
    out.local_disk_bytes += size
    out.notes.append(
        f"{key}: local disk on {storage!r}"
        + (f" ({size / GiB:.0f} GiB)" if size else "")
        + " is copied by --with-local-disks: that traffic is not modelled"
    )


def _vm_device(
    key: str, value: str, pci_live_capable: dict[str, bool] | None, out: Migratability
) -> None:
    volume, opts = property_string(value)
    if key.startswith("serial") and value.strip() == "socket":
        return
    if key.startswith("usb") and (opts.get("host", volume).lower() == "spice"):
        return
    if key.startswith("hostpci") and "mapping" in opts:
        name = opts["mapping"]
        if pci_live_capable is None:
            out.blockers.append((key, f"mapped PCI device {name!r} (mappings not exported)"))
            out.notes.append(
                f"{key}: cluster/mapping/pci.json is missing: mapped device {name!r} assumed "
                "not live-migration-capable"
            )
            return
        if pci_live_capable.get(name, False):
            return
        out.blockers.append((key, "can't live migrate running VM which uses mapped devices"))
        return
    if "mapping" in opts:
        out.blockers.append((key, "can't live migrate running VM which uses mapped devices"))
        return
    out.blockers.append((key, "can't migrate VM which uses local devices"))


def ct_migratability(config: dict[str, str], shared: dict[str, bool]) -> Migratability:
    """Blockers of the HA manager's relocation (shutdown + offline migration) of a container."""
    out = Migratability()
    for key in sorted(config):
        value = str(config[key])
        if _CT_VOLUME.match(key):
            volume, opts = property_string(value)
            if volume.startswith("/"):
                if opts.get("shared") != "1":
                    kind = "device" if volume.startswith("/dev/") else "bind"
                    out.blockers.append((key, f"cannot migrate local {kind} mount point"))
                continue
            storage = _storage_of(volume)
            if storage is not None and not shared.get(storage, False):
                size = parse_size(opts.get("size", ""))
                out.local_disk_bytes += size
                out.notes.append(
                    f"{key}: local volume on {storage!r} is copied while the container is down: "
                    "that time is not modelled"
                )
        elif re.match(r"^dev\d+$", key):
            out.notes.append(f"{key}: device passthrough (pve-container does not check it)")
    if config.get("lock"):
        out.notes.append(f"config locked ({config['lock']}) at export: migrations fail while it is")
    return out


# ------------------------------------------------------------------------------------------ fixes
@dataclass(frozen=True)
class Fix:
    """What the operator can change so a blocked guest stops costing failed migrations.

    ``frees``: after ``fix`` the migration succeeds (the guest's ``local_resources`` becomes
    false in the model); otherwise the fix is the HA resource's ``auto-rebalance: 0`` (the guest
    stays where it is and the balancer stops trying: ``auto_rebalance = false``)."""

    key: str
    reason: str
    fix: str
    frees: bool


def auto_rebalance_off(sid: str) -> str:
    """The per-resource flag's command (pve-manager 9.2.11's ``auto-rebalance``, default on)."""
    return f"set `auto-rebalance: 0` on its HA resource (`ha-manager set {sid} --auto-rebalance 0`)"


def fix_for(sid: str, key: str, reason: str) -> Fix:
    """The fix of one blocker ``(key, reason)`` of :func:`vm_migratability` /
    :func:`ct_migratability`: eject a CD-ROM, move a host-path volume to shared storage, pin a
    machine version; a device that ties the guest to its host can only be kept out of the
    balancer."""
    vmid = sid.split(":", 1)[1]
    if reason in ("local cdrom image", "can't migrate local cdrom drive"):
        return Fix(
            key, reason, f"eject the CD-ROM (`qm set {vmid} --{key} none,media=cdrom`)", True
        )
    if reason == "local file/device":
        return Fix(
            key,
            reason,
            f"move {key} to a shared storage (`qm disk move {vmid} {key} <storage>`), or add "
            "`shared=1` to it if every node sees the same path",
            True,
        )
    if key == "vga":
        return Fix(
            key, reason, f"pin a machine version ≥ 10.1 (`qm set {vmid} --machine …-10.1`)", True
        )
    if "mount point" in reason:
        return Fix(
            key,
            reason,
            f"add `shared=1` to {key} if every node has that path; otherwise "
            + auto_rebalance_off(sid),
            False,
        )
    if "mapped" in reason:
        return Fix(
            key,
            reason,
            "mark the PCI mapping `live-migration-capable` if the device supports it; otherwise "
            + auto_rebalance_off(sid),
            False,
        )
    return Fix(key, reason, f"the device ties it to its node: {auto_rebalance_off(sid)}", False)
