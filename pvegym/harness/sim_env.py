"""One node's view of the simulated hardware: ``PVE::HA::Sim::Env`` + ``PVE::HA::Sim::TestEnv``.

A port of pve-ha-manager 5.2.0's ``src/PVE/HA/Sim/Env.pm`` (file system, locks, quorum, watchdog
and stats through :class:`~pvegym.harness.hardware.Hardware`) and ``src/PVE/HA/Sim/TestEnv.pm``
(the regression tests' clock: an iteration starts at the hardware time and ends one second later;
``sleep`` only accumulates a delay that ends the run if it exceeds 300 s; no worker processes).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pvegym.harness.hardware import Hardware, LogEntry, SimulationError, chomp
from pvegym.harness.sim_resources import plugin_for
from pvegym.sim.cluster_locks import SimLockEnv
from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.resources import ResourcePlugin
from pvegym.sim.view import Balancer

MAX_LOOP_DELAY = 300  # s (TestEnv.pm ``loop_end_hook``)

_SID = re.compile(r"(\S+):(\S+)")


class SimEnv(SimLockEnv):
    """``Sim/Env.pm`` with ``TestEnv.pm``'s clock, log and workers; the locks are the one lock
    table's (:mod:`pvegym.sim.cluster_locks`), kept in the hardware's ``cluster_locks`` file."""

    def __init__(
        self,
        nodename: str,
        hardware: Hardware,
        log_id: str,
        balancer_factory: Callable[[SimEnv], Balancer | None] | None = None,
    ) -> None:
        self._nodename = nodename
        self.hardware = hardware
        self.log_id = log_id
        self.cur_time: float = 0
        self.loop_delay: float = 0
        self.balancer_factory = balancer_factory

    # ------------------------------------------------------------------ identity, time, log
    def nodename(self) -> str:
        return self._nodename

    def get_time(self) -> float:
        return self.cur_time

    def sleep(self, delay: float) -> None:
        self.loop_delay += delay

    def sleep_until(self, end_time: float) -> None:
        cur_time = self.cur_time + self.loop_delay
        if cur_time >= end_time:
            return
        self.loop_delay += end_time - cur_time

    def loop_start_hook(self) -> None:
        self.loop_delay = 0
        starttime = self.hardware.get_time()
        if starttime < self.cur_time:
            raise SimulationError("strange start time")
        self.cur_time = starttime

    def loop_end_hook(self) -> None:
        delay = self.loop_delay
        self.loop_delay = 0
        if delay > MAX_LOOP_DELAY:
            raise SimulationError(f"loop took too long ({delay:g} seconds)")
        self.cur_time += 1  # easier for simulation

    def write_log(self, level: str, msg: str) -> None:
        """``TestEnv::log``: debug is dropped, the level cut to 4 characters."""
        if level == "debug":
            return
        self.hardware.log_entries.append(
            LogEntry(level[:4], self.get_time(), f"{self._nodename}/{self.log_id}", chomp(msg))
        )

    def send_notification(
        self, template_name: str, properties: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        """Only the subject ``{{fence-prefix}}: {{fence-status}}`` is logged (level ``email``)."""
        subject = f"{properties.get('fence-prefix')}: {properties.get('fence-status')}"
        self.log("email", subject)

    # ------------------------------------------------------------------ cluster file system
    def _assert_cfs_can_rw(self, emsg: str = "cfs connection refused - not mounted?") -> None:
        if not self.hardware.get_cfs_state(self._nodename, "rw"):
            raise PerlDie(emsg)

    def read_manager_status(self) -> dict[str, Any]:
        self._assert_cfs_can_rw()
        return self.hardware.read_json("manager_status", {})

    def write_manager_status(self, status: dict[str, Any]) -> None:
        self._assert_cfs_can_rw()
        self.hardware.write_json("manager_status", status)

    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        node = self._nodename if node is None else node
        self._assert_cfs_can_rw()
        return self.hardware.read_lrm_status(node)

    def write_lrm_status(self, status: dict[str, Any]) -> None:
        self._assert_cfs_can_rw()
        self.hardware.write_lrm_status(self._nodename, status)

    def is_node_shutdown(self) -> tuple[bool, bool]:
        cstatus = self.hardware.read_hardware_status_nolock()
        ns = cstatus.get(self._nodename)
        if ns is None:
            raise SimulationError(f"undefined node status for node '{self._nodename}'")
        target = ns.get("shutdown")
        if not target:
            return False, False
        if target == "shutdown":
            return True, False
        if target == "reboot":
            return True, True
        raise SimulationError(f"unknown shutdown target '{target}'")

    def queue_crm_commands(self, cmd: str) -> None:
        self._assert_cfs_can_rw()
        self.hardware.queue_crm_commands_nolock(cmd)

    def any_pending_crm_command(self) -> bool:
        self._assert_cfs_can_rw()
        return self.hardware.any_pending_crm_command()

    def read_crm_commands(self) -> str:
        self._assert_cfs_can_rw()
        return self.hardware.read_crm_commands()

    def read_service_config(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        self._assert_cfs_can_rw()
        return self.hardware.read_service_config(), None

    def update_service_config(self, changes: dict[str, dict[str, Any]]) -> None:
        self.hardware.update_service_config(changes)

    def write_service_config(self, conf: dict[str, dict[str, Any]]) -> None:
        self._assert_cfs_can_rw()
        self.hardware.write_service_config(conf)

    def read_rules_config(self) -> Any:
        self._assert_cfs_can_rw()
        return self.hardware.read_rules_config()

    def write_rules_config(self, rules: Any) -> None:
        self._assert_cfs_can_rw()
        self.hardware.write_rules_config(rules)

    def read_group_config(self) -> Any:
        self._assert_cfs_can_rw()
        return self.hardware.read_group_config()

    def delete_group_config(self) -> None:
        self._assert_cfs_can_rw()
        self.hardware.delete_group_config()

    def get_datacenter_settings(self) -> dict[str, Any]:
        dc = self.hardware.read_datacenter_conf()
        ha = dc.get("ha")
        crs = dc.get("crs")
        return {"ha": {} if ha is None else ha, "crs": {} if crs is None else crs}

    # ------------------------------------------------------------------ membership, locks
    def get_node_info(self) -> tuple[dict[str, dict[str, Any]], bool]:
        return self.hardware.get_node_info()

    def quorate(self) -> bool:
        node_info, quorate = self.hardware.get_node_info()
        if not (node_info.get(self._nodename) or {}).get("online"):
            return False
        return quorate

    def cluster_state_update(self) -> bool:
        return self.hardware.get_cfs_state(self._nodename, "update")

    def lock_table(self) -> dict[str, Any]:
        table: dict[str, Any] = self.hardware.read_json("cluster_locks", {})
        return table

    def lock_table_written(self, table: dict[str, Any]) -> None:
        self.hardware.write_json("cluster_locks", table)

    def get_ha_manager_lock(self) -> bool:
        """The one table's lock, then a second of the loop's delay (the tests' clock)."""
        res = super().get_ha_manager_lock()
        self.loop_delay += 1
        return res

    def get_ha_agent_lock(self, node: str | None = None) -> bool:
        """The one table's lock, then a second of the loop's delay (the tests' clock)."""
        res = super().get_ha_agent_lock(node)
        self.loop_delay += 1
        return res

    # ------------------------------------------------------------------ watchdog
    def watchdog_open(self) -> str:
        return self.hardware.watchdog_open(self._nodename)

    def watchdog_update(self, wfh: str) -> None:
        self.hardware.watchdog_update(wfh)

    def watchdog_close(self, wfh: str) -> None:
        self.hardware.watchdog_close(wfh)

    # ------------------------------------------------------------------ scheduler inputs
    def get_basic_service_stats(self) -> dict[str, dict[str, Any]]:
        return self.hardware.get_basic_service_stats()

    def get_static_service_stats(self) -> dict[str, dict[str, Any]]:
        return self.hardware.get_static_service_stats()

    def get_dynamic_service_stats(self) -> dict[str, dict[str, Any]]:
        return self.hardware.get_dynamic_service_stats()

    def get_static_node_stats(self) -> dict[str, dict[str, Any]]:
        return self.hardware.get_static_node_stats()

    def get_dynamic_node_stats(self) -> dict[str, dict[str, Any]]:
        return self.hardware.get_dynamic_node_stats()

    def get_node_version(self, node: str) -> str | None:
        return self.hardware.get_node_version(node)

    # ------------------------------------------------------------------ resources
    def parse_sid(self, sid: str) -> tuple[str, str, str]:
        m = _SID.fullmatch(sid)
        if not m:
            raise PerlDie(f"unable to parse service id '{sid}'")
        return sid, m.group(1), m.group(2)

    def resource_plugin(self, service_type: str) -> ResourcePlugin | None:
        return plugin_for(service_type, self.hardware)

    def steal_service(self, sid: str, current_node: str, new_node: str) -> None:
        self._assert_cfs_can_rw()
        self.hardware.change_service_location(sid, current_node, new_node)

    # ------------------------------------------------------------------ workers, balancer
    def get_max_workers(self) -> int:
        """0: the regression tests do not fork, jobs run in place."""
        return 0

    def new_balancer(self) -> Balancer | None:
        return None if self.balancer_factory is None else self.balancer_factory(self)
