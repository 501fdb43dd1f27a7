"""The regression tests' virtual guests: ``PVE::HA::Sim::Resources`` and its ``VirtVM``, ``VirtCT``
and ``VirtFail`` plugins (pve-ha-manager 5.2.0, ``src/PVE/HA/Sim/Resources*.pm``).

A guest "runs" when the node's service status says so; start and stop take 2 s of (unaccounted)
delay, a migration moves the config to the target at once. A lock on the service makes start,
stop and migrate fail. ``VirtFail`` (``fa:<digits>``) encodes failures in its id: ``fa:abcdef`` —
``b`` start tries that fail, ``c`` migrate tries that fail, ``d`` non-zero: stop fails, ``e``
``exists()`` (default 1), ``f`` limit ``b``/``c`` to node *f* (0: all nodes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pvegym.sim.ha.perl import truthy
from pvegym.sim.ha.resources import AgentEnv, ResourcePlugin

if TYPE_CHECKING:
    from pvegym.harness.hardware import Hardware


class SimResource:
    """``Sim/Resources.pm``: what VMs and CTs share."""

    type_name = ""

    def __init__(self, hardware: Hardware) -> None:
        self.hardware = hardware

    def type(self) -> str:
        return self.type_name

    def exists(self, id: str) -> bool:
        return True  # in the virtual cluster every virtual guest exists

    def check_running(self, haenv: AgentEnv, id: str) -> bool:
        ss = self.hardware.read_service_status(haenv.nodename())
        return truthy(ss.get(f"{self.type_name}:{id}"))

    def start(self, haenv: AgentEnv, id: str) -> None:
        sid = f"{self.type_name}:{id}"
        nodename = haenv.nodename()
        ss = self.hardware.read_service_status(nodename)
        lock = self.hardware.service_has_lock(sid)
        if lock:
            haenv.log("err", f"service '{sid}' locked ({lock}), unable to start!")
            return
        haenv.sleep(2)
        ss[sid] = 1
        self.hardware.write_service_status(nodename, ss)

    def shutdown(self, haenv: AgentEnv, id: str, timeout: Any = None) -> None:
        sid = f"{self.type_name}:{id}"
        nodename = haenv.nodename()
        ss = self.hardware.read_service_status(nodename)
        lock = self.hardware.service_has_lock(sid)
        if lock:
            haenv.log("err", f"service '{sid}' locked ({lock}), unable to shutdown!")
            return
        haenv.sleep(2)
        ss[sid] = 0
        self.hardware.write_service_status(nodename, ss)

    def migrate(self, haenv: AgentEnv, id: str, target: str, online: bool) -> bool:
        sid = f"{self.type_name}:{id}"
        nodename = haenv.nodename()
        ss = self.hardware.read_service_status(nodename)
        cmd = "migrate" if online else "relocate"
        haenv.log("info", f"service {sid} - start {cmd} to node '{target}'")
        lock = self.hardware.service_has_lock(sid)
        if lock:
            haenv.log("err", f"service '{sid}' locked ({lock}), unable to {cmd}!")
            return False
        # explicitly shutdown if $online isn't true (relocate)
        if not online and self.check_running(haenv, id):
            haenv.log("info", f"stopping service {sid} (relocate)")
            self.shutdown(haenv, id)
            haenv.log("info", f"service status {sid} stopped")
        else:
            haenv.sleep(2)  # (live) migration time
        self.hardware.change_service_location(sid, nodename, target)
        haenv.log("info", f"service {sid} - end {cmd} to node '{target}'")
        # ensure that the old node doesn't have the service anymore
        ss.pop(sid, None)
        self.hardware.write_service_status(nodename, ss)
        return sid not in ss

    def remove_locks(
        self, haenv: AgentEnv, id: str, locks: list[str], service_node: str
    ) -> str | None:
        sid = f"{self.type_name}:{id}"
        for lock in locks:
            removed = self.hardware.unlock_service(sid, lock)
            if removed:
                return removed
        return None


class VirtVM(SimResource):
    type_name = "vm"


class VirtCT(SimResource):
    type_name = "ct"

    def migrate(self, haenv: AgentEnv, id: str, target: str, online: bool) -> bool:
        ss = self.hardware.read_service_status(haenv.nodename())
        if online and truthy(ss.get(f"ct:{id}")):
            haenv.log("warn", "unable to live migrate running container, fallback to relocate")
            online = False
        return super().migrate(haenv, id, target, online)


_FAIL_ID = re.compile(r"^\d(\d)(\d)(\d)?(\d)?(\d)?")


def decode_fail_id(id: str) -> tuple[int, int, int, int, int]:
    """``(start failures, migrate failures, stop fails, exists, limit to node)`` of a VirtFail id."""
    m = _FAIL_ID.match(id)
    groups = m.groups() if m else (None,) * 5
    start, migrate, stop, exists, limit = groups
    return (
        int(start or 0),
        int(migrate or 0),
        int(stop or 0),
        1 if exists is None else int(exists),
        int(limit or 0),
    )


class VirtFail(SimResource):
    """Resources that fail as their id says; the try counters are shared by all nodes."""

    type_name = "fa"

    def exists(self, id: str) -> bool:
        return bool(decode_fail_id(id)[3])

    def _fails(self, haenv: AgentEnv, what: str, id: str, failures: int, limit: int) -> bool:
        tries = self.hardware.fail_tries[what]
        if limit == 0 or haenv.nodename() == f"node{limit}":
            tries[id] = tries.get(id, 0) + 1
            if failures >= tries[id]:
                return True
        tries[id] = 0  # reset counts
        return False

    def start(self, haenv: AgentEnv, id: str) -> None:
        start_failures, _, _, _, limit = decode_fail_id(id)
        if self._fails(haenv, "start", id, start_failures, limit):
            return
        super().start(haenv, id)

    def shutdown(self, haenv: AgentEnv, id: str, timeout: Any = None) -> None:
        if decode_fail_id(id)[2]:
            return
        super().shutdown(haenv, id, timeout)

    def migrate(self, haenv: AgentEnv, id: str, target: str, online: bool) -> bool:
        _, migrate_failures, _, _, limit = decode_fail_id(id)
        if self._fails(haenv, "migrate", id, migrate_failures, limit):
            return False
        return super().migrate(haenv, id, target, online)


_PLUGINS: dict[str, type[SimResource]] = {"vm": VirtVM, "ct": VirtCT, "fa": VirtFail}


def plugin_for(service_type: str, hardware: Hardware) -> ResourcePlugin | None:
    cls = _PLUGINS.get(service_type)
    return None if cls is None else cls(hardware)
