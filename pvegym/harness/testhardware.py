"""The regression tests' event loop: ``PVE::HA::Sim::TestHardware`` (pve-ha-manager 5.2.0) and the
``pve-ha-tester`` script around it.

See :mod:`pvegym.harness.hardware` for the timing. The run starts with ``hardware: starting
simulation`` at t=0 and ends with ``hardware: exit simulation - done`` (or ``err … exit simulation -
<error>`` when upstream's harness dies).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pvegym.harness.hardware import MAX_SIM_TIME, Hardware, NodeDaemons, SimulationError
from pvegym.harness.sim_env import SimEnv
from pvegym.sim.ha.lrm import LRM
from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.scheduler import SchedulerError

_DELAY = re.compile(r"delay\s+(\d+)\s*")
_SKIP_ROUND = re.compile(r"skip-round\s+(lrm|crm)(?:\s+(\d+))?\s*")

#: loops between two batches of the cmdlist
LOOPS_PER_BATCH = 5
#: seconds after the last command at which the simulation ends
END_AFTER_S = 500


class TestHardware(Hardware):
    """The hardware plus the loop that runs every node's daemons and the command batches."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        files: dict[str, str],
        cmdlist: list[list[str]],
        balancer_factory: Callable[[SimEnv], Any] | None = None,
        env_class: type[SimEnv] = SimEnv,
    ) -> None:
        base = Hardware.from_files(files)
        super().__init__(files=base.files, service_config=base.service_config)
        self.log_entries = base.log_entries
        self.cmdlist = [list(batch) for batch in cmdlist]
        self.loop_count = 0
        self.cur_time = 0
        for node in sorted(self.read_hardware_status_nolock()):
            self.nodes[node] = NodeDaemons(
                crm_env=env_class(node, self, "crm", balancer_factory),
                lrm_env=env_class(node, self, "lrm", balancer_factory),
            )

    def simulate(self) -> None:
        """``pve-ha-tester``: log the start, run, log how it ended."""
        self.log("info", "starting simulation")
        try:
            self.run()
        except (PerlDie, SchedulerError) as err:
            self.log("err", f"exit simulation - {err}\n ")
        else:
            self.log("info", "exit simulation - done")

    def run(self) -> None:
        last_command_time: float = 0
        next_cmd_at: float = 0
        skip_service_round: dict[str, int] = {}

        while True:
            starttime = self.get_time()
            nodes = sorted(self.nodes)
            looptime = max(20, len(nodes) * 2)  # twice the node count
            if looptime >= 60:
                raise SimulationError(
                    "unable to simulate so many nodes. You need to increase watchdog/lock timeouts."
                )

            first_loop = True
            for node in nodes:
                d = self.nodes[node]
                self._crm_round(node, d, skip_service_round, first_loop)
                self._lrm_round(node, d, skip_service_round, first_loop)
                for n in nodes:
                    if not self.watchdog_check(n):
                        self.sim_hardware_cmd(f"power {n} off", "watchdog")
                        self.log("info", f"server '{n}' stopped by poweroff (watchdog)")
                        self.nodes[n].crm = None
                        self.nodes[n].lrm = None
                first_loop = False

            for what in ("crm", "lrm"):
                if skip_service_round.get(what):
                    skip_service_round[what] -= 1

            if self.cur_time - starttime < looptime:
                self.cur_time = starttime + looptime
            if self.cur_time > MAX_SIM_TIME:
                raise SimulationError(
                    f"simulation exceeded maximum time ({MAX_SIM_TIME}) - force end"
                )

            for node in nodes:  # forced time update
                self.nodes[node].lrm_env.loop_start_hook()
                self.nodes[node].crm_env.loop_start_hook()

            if self.cur_time < next_cmd_at:
                continue

            if self.loop_count % LOOPS_PER_BATCH == 0:  # apply new commands every 5 loops
                batch = self.cmdlist.pop(0) if self.cmdlist else None
                if batch is None and self.cur_time - last_command_time > END_AFTER_S:
                    return  # end the simulation 500 s after the last command
                for cmd in batch or []:
                    last_command_time = self.cur_time
                    if m := _DELAY.fullmatch(cmd):
                        self.log("info", f"execute {cmd}", "cmdlist")
                        next_cmd_at = self.cur_time + int(m.group(1))
                    elif m := _SKIP_ROUND.fullmatch(cmd):
                        self.log("info", f"execute {cmd}", "cmdlist")
                        what, rounds = m.group(1), int(m.group(2) or 1)
                        skip_service_round[what] = skip_service_round.get(what, 0) + rounds
                    else:
                        self.sim_hardware_cmd(cmd, "cmdlist")

            self.loop_count += 1

    def _crm_round(self, node: str, d: NodeDaemons, skip: dict[str, int], first_loop: bool) -> None:
        crm = d.crm
        if crm is None:
            return
        exit_crm = False
        if not skip.get("crm"):
            exit_crm = not crm.do_one_iteration()
        elif first_loop:
            self.log("info", "skipping CRM round", "run-loop")
        nodetime = d.crm_env.get_time()
        if nodetime > self.cur_time:
            self.cur_time = nodetime
        if not exit_crm:
            return
        d.crm_env.log("info", "exit (loop end)")
        d.crm = None
        shutdown = self._shutdown_target(node)
        if shutdown == "reboot":
            self.sim_hardware_cmd(f"power {node} off", "reboot")
            self.sim_hardware_cmd(f"power {node} on", "reboot")
        elif shutdown == "shutdown":
            self.sim_hardware_cmd(f"power {node} off", "shutdown")
        elif not d.crm_stop:
            raise SimulationError("unexpected CRM exit - not implemented")
        d.crm_stop = False

    def _lrm_round(self, node: str, d: NodeDaemons, skip: dict[str, int], first_loop: bool) -> None:
        lrm = d.lrm
        if lrm is None:
            return
        exit_lrm = False
        if not skip.get("lrm"):
            exit_lrm = not lrm.do_one_iteration()
        elif first_loop:
            self.log("info", "skipping LRM round", "run-loop")
        nodetime = d.lrm_env.get_time()
        if nodetime > self.cur_time:
            self.cur_time = nodetime
        if not exit_lrm:
            return
        d.lrm_env.log("info", "exit (loop end)")
        d.lrm = None
        shutdown = self._shutdown_target(node)
        if d.lrm_restart:
            if shutdown:
                raise SimulationError("lrm restart during shutdown - not implemented")
            d.lrm_restart = False
            d.lrm = LRM(d.lrm_env, self.lrm_process)
        elif shutdown in ("reboot", "shutdown"):
            # exit the LRM before the CRM to reflect real world behaviour
            self.sim_hardware_cmd(f"crm {node} stop", shutdown)
        else:
            raise SimulationError("unexpected LRM exit - not implemented")

    def _shutdown_target(self, node: str) -> str:
        cstatus = self.read_hardware_status_nolock()
        nstatus = cstatus.get(node)
        if nstatus is None:
            raise SimulationError(f"no node status for node '{node}'")
        return str(nstatus.get("shutdown") or "")
