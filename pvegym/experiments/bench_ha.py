"""What a *full* round of the HA stack costs (``pvegym bench`` key ``ha_round_ratio``).

A full round is what the port of pve-ha-manager (:mod:`pvegym.sim.ha`) does while a motion is
pending, when the steady-state skip (:meth:`~pvegym.sim.ha.env.HAEnv.quiescence_token`) cannot
apply: every node's CRM iteration (the master's :meth:`~pvegym.sim.ha.manager.Manager.manage` —
LRM results, service config, node usage, rules, CRM commands, the service state machine, the
manager status) and every node's LRM iteration (the manager status read back, the agent lock,
``manage_resources``, the worker of the migration polled for 8 s).

**The hardware** is :class:`MemoryHAEnv`, a minimal in-memory :class:`~pvegym.sim.ha.env.HAEnv`
(not upstream's test hardware): the cluster file system keeps the objects written (as the cluster
model's hardware does, :mod:`pvegym.sim.ha_model_env` of the integration), so the figure is the
port's own cost, not the cost of a hardware's JSON round trips. Its quiescence token is the round
number: no round is quiet, and the steady-state bookkeeping runs as with a pending motion on the
cluster model's hardware. The cluster: 4 nodes (``node1``…``node4``), 12 HA VMs
(``vm:101``…``vm:112``, three per node, ``started``), CRS mode ``dynamic`` (the scenario default)
with usage statistics of fixed values, 4 LRM workers, no balancer. ``vm:101`` is migrating to
``node2`` and its worker never finishes: the migration stays pending for every timed round.

``ha_round_us`` is the median µs of one such round (4 CRM + 4 LRM iterations) and
``ha_round_ratio`` its ratio to a ``CartPole-v1`` step, in alternating blocks of CPU time
(:func:`pvegym.experiments.bench.paired_ratio` in CPU time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Hashable
from typing import Any, TextIO

from pvegym.sim.cluster_locks import SimLockEnv
from pvegym.sim.ha.crm import CRM
from pvegym.sim.ha.groups import Groups
from pvegym.sim.ha.lrm import LRM
from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.resources import AgentEnv, Job, ResourcePlugin
from pvegym.sim.ha.rules import Rules

NODES = ("node1", "node2", "node3", "node4")
#: services per node
PER_NODE = 3
#: the migration that stays pending: (sid, target)
PENDING = ("vm:101", "node2")
ROUND_S = 10.0
GIB = 1024**3


class MemoryCFS:
    """The shared state: the cluster file system (objects as written), locks, running guests."""

    def __init__(self) -> None:
        self.manager_status: dict[str, Any] = {}
        self.lrm_status: dict[str, dict[str, Any]] = {}
        self.crm_commands: list[str] = []
        self.locks: dict[str, dict[str, Any]] = {}
        self.service_config: dict[str, dict[str, Any]] = {}
        self.running: dict[str, str] = {}  # sid → node it runs on
        self.round = 0  # the quiescence token (see MemoryHAEnv.quiescence_token)
        for i in range(len(NODES) * PER_NODE):
            sid, node = f"vm:{101 + i}", NODES[i % len(NODES)]
            self.service_config[sid] = {
                "node": node,
                "state": "started",
                "type": "vm",
                "name": str(101 + i),
                "failback": 1,
                "max_restart": 1,
                "max_relocate": 1,
            }
        rules = Rules.parse_config("rules.cfg", "")
        self.rules = rules
        self.groups = Groups.parse_config("groups", "")
        self.datacenter: dict[str, Any] = {"ha": {}, "crs": {"ha": "dynamic"}}


class PendingMigrationVM:
    """The resource agent: starts and stops at once; a migration waits forever."""

    def __init__(self, cfs: MemoryCFS) -> None:
        self.cfs = cfs

    def type(self) -> str:
        return "vm"

    def exists(self, id: str) -> bool:
        return f"vm:{id}" in self.cfs.service_config

    def check_running(self, haenv: AgentEnv, id: str) -> bool:
        return self.cfs.running.get(f"vm:{id}") == haenv.nodename()

    def start(self, haenv: AgentEnv, id: str) -> None:
        self.cfs.running[f"vm:{id}"] = haenv.nodename()

    def shutdown(self, haenv: AgentEnv, id: str, timeout: Any = None) -> None:
        self.cfs.running.pop(f"vm:{id}", None)

    def migrate(self, haenv: AgentEnv, id: str, target: str, online: bool) -> Generator[Any]:
        while True:
            yield None

    def remove_locks(
        self, haenv: AgentEnv, id: str, locks: list[str], service_node: str
    ) -> str | None:
        return None


class MemoryHAEnv(SimLockEnv):
    """One node's environment for one daemon over :class:`MemoryCFS` (see the module doc); its
    locks are the one lock table's (:mod:`pvegym.sim.cluster_locks`) without the quorum check
    (this cluster is always quorate) or the log line."""

    lock_quorum_check = False
    lock_log = False

    def __init__(self, cfs: MemoryCFS, nodename: str, log_id: str) -> None:
        self.cfs = cfs
        self._nodename = nodename
        self.log_id = log_id
        self.cur_time = 0.0
        self.loop_delay = 0.0
        self.lines: list[str] = []
        self._plugin = PendingMigrationVM(cfs)

    def nodename(self) -> str:
        return self._nodename

    def get_time(self) -> float:
        return self.cur_time + self.loop_delay

    def sleep(self, delay: float) -> None:
        self.loop_delay += delay

    def sleep_until(self, end_time: float) -> None:
        now = self.get_time()
        if now < end_time:
            self.loop_delay += end_time - now

    def start_at(self, t: float) -> None:
        self.cur_time, self.loop_delay = t, 0.0

    def write_log(self, level: str, msg: str) -> None:
        if level != "debug" and len(self.lines) < 1000:
            self.lines.append(f"{level} {self.get_time():g} {msg}")

    def quiescence_token(self) -> Hashable | None:
        """The round number: it changes every round, so no round is quiet, while the
        steady-state bookkeeping (the Manager's state snapshots and serial, the LRM's memos) runs
        as on the cluster model's hardware, whose token changes with every pending motion."""
        return self.cfs.round

    def read_manager_status(self) -> dict[str, Any]:
        return self.cfs.manager_status

    def write_manager_status(self, status: dict[str, Any]) -> None:
        self.cfs.manager_status = status

    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        return self.cfs.lrm_status.get(node or self._nodename, {})

    def write_lrm_status(self, status: dict[str, Any]) -> None:
        self.cfs.lrm_status[self._nodename] = status

    def is_node_shutdown(self) -> tuple[bool, bool]:
        return False, False

    def queue_crm_commands(self, cmd: str) -> None:
        self.cfs.crm_commands.append(cmd)

    def any_pending_crm_command(self) -> bool:
        return bool(self.cfs.crm_commands)

    def read_crm_commands(self) -> str:
        cmds, self.cfs.crm_commands = self.cfs.crm_commands, []
        return "\n".join(cmds)

    def read_service_config(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        return self.cfs.service_config, "1"

    def update_service_config(self, changes: dict[str, dict[str, Any]]) -> None:
        for sid, change in changes.items():
            self.cfs.service_config[sid].update(change.get("param") or {})

    def write_service_config(self, conf: dict[str, dict[str, Any]]) -> None:
        self.cfs.service_config = conf

    def read_rules_config(self) -> Any:
        return self.cfs.rules

    def write_rules_config(self, rules: Any) -> None:
        self.cfs.rules = rules

    def read_group_config(self) -> Any:
        return self.cfs.groups

    def delete_group_config(self) -> None:
        raise PerlDie("failed to remove group config: No such file or directory")

    def get_datacenter_settings(self) -> dict[str, Any]:
        return self.cfs.datacenter

    def get_node_info(self) -> tuple[dict[str, dict[str, Any]], bool]:
        return {n: {"online": True} for n in NODES}, True

    def quorate(self) -> bool:
        return True

    def cluster_state_update(self) -> bool:
        return True

    def lock_table(self) -> dict[str, Any]:
        return self.cfs.locks

    def watchdog_open(self) -> str:
        return f"{self._nodename}/{self.log_id}"

    def watchdog_update(self, wfh: str) -> None:
        return None

    def watchdog_close(self, wfh: str) -> None:
        return None

    def get_basic_service_stats(self) -> dict[str, dict[str, Any]]:
        return {
            sid: {
                "node": cd["node"],
                "state": cd["state"],
                "running": cd["state"] == "started",
                "usage": {},
            }
            for sid, cd in self.cfs.service_config.items()
        }

    def get_static_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = self.get_basic_service_stats()
        for i, st in enumerate(stats.values()):
            st["usage"] = {"maxcpu": 2.0 + i % 3, "maxmem": (4 + i % 5) * GIB}
        return stats

    def get_dynamic_service_stats(self) -> dict[str, dict[str, Any]]:
        stats = self.get_static_service_stats()
        for i, st in enumerate(stats.values()):
            st["usage"].update(cpu=0.5 + 0.1 * i, mem=(2 + i % 3) * GIB)
        return stats

    def get_static_node_stats(self) -> dict[str, dict[str, Any]]:
        return {n: {"maxcpu": 32.0, "maxmem": 128 * GIB} for n in NODES}

    def get_dynamic_node_stats(self) -> dict[str, dict[str, Any]]:
        stats = self.get_static_node_stats()
        for i, st in enumerate(stats.values()):
            st.update(cpu=2.0 + i, mem=(10 + 3 * i) * GIB)
        return stats

    def get_node_version(self, node: str) -> str | None:
        return "9.0.0~16"

    def resource_plugin(self, service_type: str) -> ResourcePlugin | None:
        return self._plugin if service_type == "vm" else None

    def steal_service(self, sid: str, current_node: str, new_node: str) -> None:
        self.cfs.service_config[sid]["node"] = new_node

    def fork_worker(self, job: Job[int]) -> Any:
        try:
            next(job)
        except StopIteration as stop:
            return ("done", int(stop.value) << 8)
        return ("running", job)

    def waitpid(self, handle: Any) -> int | None:
        return handle[1] if handle[0] == "done" else None


class HARoundLoop:
    """The daemons of :class:`MemoryCFS`'s cluster, settled with :data:`PENDING` migrating; a
    step is one round: every CRM iteration, then every LRM iteration."""

    def __init__(self) -> None:
        self.cfs = MemoryCFS()
        self.t = 0.0
        self.crms: list[tuple[Any, CRM]] = []
        self.lrms: list[tuple[Any, LRM]] = []
        for node in NODES:
            crm_env = MemoryHAEnv(self.cfs, node, "crm")
            self.crms.append((crm_env, CRM(crm_env)))
            lrm_env = MemoryHAEnv(self.cfs, node, "lrm")
            self.lrms.append((lrm_env, LRM(lrm_env)))
        for _ in range(4):  # master elected, services added and started, LRMs active
            self.round()
        sid, target = PENDING
        self.cfs.crm_commands.append(f"migrate {sid} {target}")
        for _ in range(3):
            self.round()
        ss = self.cfs.manager_status["service_status"]
        if ss[sid]["state"] != "migrate" or not self.lrms[0][1].workers:
            raise RuntimeError(f"bench_ha: {sid} is not migrating: {ss[sid]}")
        for _, lrm in self.lrms:
            if lrm.status["state"] != "active":
                raise RuntimeError(f"bench_ha: an LRM is not active: {lrm.status}")

    def round(self) -> None:
        t = self.t
        self.cfs.round += 1
        for env, crm in self.crms:
            env.start_at(t)
            crm.do_one_iteration()
        for i, (env, lrm) in enumerate(self.lrms):
            env.start_at(t + 1.0 + i)
            lrm.do_one_iteration()
        self.t = t + ROUND_S

    def run(
        self, steps: int, clock: Callable[[], float] = time.perf_counter
    ) -> tuple[float, float]:
        """``(seconds, seconds)`` of ``steps`` rounds by ``clock`` (wall time by default,
        ``time.thread_time`` for this thread's CPU time): the pair
        :func:`pvegym.experiments.bench.paired_ratio` expects (a round has no inner step)."""
        t0 = clock()
        for _ in range(steps):
            self.round()
        s = clock() - t0
        return s, s


def profile_rounds(
    rounds: int, out: TextIO | None = None, top: int = 30, sort: str = "tottime"
) -> None:
    """cProfile of ``rounds`` full rounds (``scripts/profile_ha_round.py``), sorted by ``sort``."""
    import cProfile
    import pstats
    import sys

    loop = HARoundLoop()
    loop.run(20)
    prof = cProfile.Profile()
    prof.enable()
    loop.run(rounds)
    prof.disable()
    stats = pstats.Stats(prof, stream=out or sys.stdout)
    stats.sort_stats(sort).print_stats(top)
