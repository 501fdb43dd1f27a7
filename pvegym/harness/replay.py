"""Replay of an upstream test directory in upstream's harness timing, with the upstream balancer.

A small discrete-event model of ``src/PVE/HA/Sim/TestHardware.pm`` (``run``), the CRM round of
``Manager::manage`` and the simulated LRM, just deep enough for the balancer
(``reference/pve-ha-manager.md`` §1, §3, §7, §8.1, §11):

* one loop = ``max(20, 2·#nodes)`` s; per loop, nodes in sorted order run their CRM (only the
  master manages) then their LRM. Loop 0 is at t=0; the command batch is applied at the *end* of
  every 5th counted loop (batch 0 at t=20, then 120, 220, …), so the next CRM round sees it;
  ``delay N`` suspends counting until ``t >= now + N``; the run ends at the first batch slot with no
  batch left that is more than 500 s after the last command (``exit`` at 620 for one batch).
* a node's CRM and LRM exist only after a ``power <node> on`` that changed its power (as upstream);
  nodes are online when powered with network and the cluster is quorate (> half online).
* CRM round (master): add new services (``request_start``), take queued manual commands
  (``queue_resource_motion``, before the balancer), run the balancer, then the state machine
  (``request_start → started``; ``started`` + cmd → ``migrate``/``relocate``; a finished LRM motion
  → ``started`` on the target).
* LRM (per node): starts ``started`` services it hosts, executes a queued motion (the service leaves
  the source's running set and the config moves to the target; the target LRM starts it in its next
  round). So a motion issued at round *t* blocks the balancer at *t+20* and counts on the target
  from *t+40* (dynamic mode), as in §11.
* dynamic node stats = Σ dynamic stats of the services each node's LRM reports running
  (``Hardware.pm`` L1270–1310); the static aggregator is computed by the policy from the states.

Not modelled (an error, never silent): fencing/recovery and CRM failover (powering off a node that
hosts HA services or the master), rebalance-on-start, and the simulator commands listed in
:data:`pvegym.harness.testdir.UNSUPPORTED_COMMANDS`. The log time of a CRM line is the loop time
(exact when the master is the first node, as in every upstream directory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from policies.upstream import UpstreamPolicy, compile_rules
from pvegym.errors import ConfigError
from pvegym.harness.testdir import (
    DEFAULT_SERVICE_CPU,
    DEFAULT_SERVICE_MAXCPU,
    DEFAULT_SERVICE_MAXMEM,
    DEFAULT_SERVICE_MEM,
    MIB,
    Command,
    LogLine,
    ServiceConfig,
    TestDir,
    read_testdir,
)
from pvegym.sim.view import MOTION_STATES, ClusterView, Motion

MAX_SIM_TIME = 10000  # TestHardware.pm $max_sim_time
_PLACED_CURRENT = frozenset(
    {"started", "request_stop", "fence", "freeze", "error", "recovery", "migrate", "relocate"}
)


@dataclass(slots=True)
class _Service:
    """One HA service in the CRM's service status (``$ss``)."""

    sid: str
    state: str
    node: str
    target: str | None = None
    cmd: tuple[str, str] | None = None
    lrm_done: bool = False  # the LRM finished the queued motion (result seen next CRM round)


@dataclass(slots=True)
class Decision:
    t: int
    sid: str
    target: str
    imbalance_before: float
    imbalance_after: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "sid": self.sid,
            "target": self.target,
            "imbalance_before": self.imbalance_before,
            "imbalance_after": self.imbalance_after,
        }


@dataclass(slots=True)
class ReplayResult:
    decisions: list[Decision]
    log: list[LogLine]
    end_time: int
    warnings: list[str] = field(default_factory=list)


class _Replay:
    def __init__(self, td: TestDir, policy: UpstreamPolicy | None) -> None:
        self.td = td
        self.nodes = sorted(td.nodes)
        self.node_index = {n: i for i, n in enumerate(self.nodes)}
        self.power = {n: td.nodes[n].power for n in self.nodes}
        self.network = {n: td.nodes[n].network for n in self.nodes}
        self.daemons = {n: False for n in self.nodes}  # CRM+LRM alive (created on power on)
        self.config: dict[str, ServiceConfig] = dict(td.services)
        self.running: dict[str, bool] = {}  # hardware service_status of the config node
        for node, entries in td.service_status.items():
            for sid, run in entries.items():
                if sid in self.config and self.config[sid].node == node:
                    self.running[sid] = run
        self.static = dict(td.static_stats)
        self.dynamic = dict(td.dynamic_stats)
        self.ss: dict[str, _Service] = {
            sid: _Service(sid, m.state, m.node, m.target, m.cmd)
            for sid, m in td.manager_services.items()
        }
        self.master: str | None = td.master_node
        self.crm_commands: list[tuple[str, str, str]] = []  # (task, sid, node)
        self.rules = compile_rules(td.rules, tuple(sorted(self.config)))
        self.rules_sids: tuple[str, ...] = tuple(sorted(self.config))
        crs = td.crs
        self.policy = policy or UpstreamPolicy(
            threshold=crs.threshold,
            hold_duration=crs.hold_duration,
            margin=crs.margin,
            method=crs.method,
            normalized=False,
        )
        self.policy.reset()
        self.decisions: list[Decision] = []
        self.log: list[LogLine] = []
        self.t = 0

    # -------------------------------------------------------------- infrastructure

    def _log(self, origin: str, msg: str, level: str = "info") -> None:
        self.log.append(LogLine(level, self.t, origin, msg))

    def online_nodes(self) -> set[str]:
        online = {n for n in self.nodes if self.power[n] and self.network[n]}
        if len(online) <= len(self.nodes) // 2:  # not quorate: nobody is online (compute_node_info)
            return set()
        return online

    def _partners(self, sid: str, positive: bool) -> list[str]:
        if self.rules_sids != tuple(sorted(self.config)):
            self.rules_sids = tuple(sorted(self.config))
            self.rules = compile_rules(self.td.rules, self.rules_sids)
        idx = self.rules_sids.index(sid) if sid in self.rules_sids else -1
        if idx < 0:
            return []
        if positive:
            for grp in self.rules.groups:
                if idx in grp:
                    return [self.rules_sids[g] for g in grp if g != idx]
            return []
        return [self.rules_sids[g] for g in self.rules.negative.get(idx, ())]

    # -------------------------------------------------------------- main loop

    def run(self) -> ReplayResult:
        looptime = max(20, 2 * len(self.nodes))
        if looptime >= 60:
            raise ConfigError("hardware_status", "too many nodes for upstream's harness (>= 30)")
        batches = list(self.td.cmdlist)
        loop_count = 0
        last_command_time = 0
        next_cmd_at = 0
        while True:
            self.loop()
            self.t += looptime
            if self.t > MAX_SIM_TIME:
                raise ConfigError("cmdlist", f"simulation exceeds {MAX_SIM_TIME} s")
            if self.t < next_cmd_at:
                continue
            if loop_count % 5 == 0:
                batch = batches.pop(0) if batches else None
                if batch is None and self.t - last_command_time > 500:
                    break
                for cmd in batch or []:
                    last_command_time = self.t
                    if cmd.verb == "delay":
                        next_cmd_at = self.t + int(cmd.args[0])
                    else:
                        self.apply(cmd)
            loop_count += 1
        return ReplayResult(self.decisions, self.log, self.t, list(self.td.warnings))

    def loop(self) -> None:
        online = self.online_nodes()
        if self.master is None or not self.daemons.get(self.master) or self.master not in online:
            alive = [n for n in self.nodes if self.daemons[n] and n in online]
            self.master = alive[0] if alive else None
        for node in self.nodes:
            if node == self.master:
                self.crm_round(online)
            if self.daemons[node]:
                self.lrm_round(node)

    # -------------------------------------------------------------- commands (Hardware.pm)

    def apply(self, cmd: Command) -> None:
        self._log("cmdlist", f"execute {cmd.text}")
        if cmd.verb == "power":
            node = cmd.obj
            if cmd.action == "on":
                if not self.power[node]:
                    self.power[node] = True
                    self.network[node] = True
                    self.daemons[node] = True
                return
            if self.power[node]:
                hosts = sorted(s for s, sd in self.ss.items() if node in (sd.node, sd.target))
                if hosts or node == self.master:
                    why = f"it hosts {', '.join(hosts)}" if hosts else "it is the CRM master"
                    raise ConfigError(
                        cmd.path,
                        f"powering off {node} is not supported: {why} (fencing/failover not modelled)",
                    )
                self.power[node] = False
                self.network[node] = False
                self.daemons[node] = False
            return
        sid, action, args = cmd.obj, cmd.action, cmd.args
        if action == "add":
            if sid in self.config:
                raise ConfigError(cmd.path, f"resource ID '{sid}' already defined")
            state = args[1] if len(args) >= 2 else "started"
            if state == "enabled":
                state = "started"
            self.config[sid] = ServiceConfig(sid, args[0], state)
            self.running[sid] = len(args) == 3 and args[2] == "1"
            return
        if action == "set-static-stats":
            maxcpu, maxmem = self.static.get(sid, (DEFAULT_SERVICE_MAXCPU, DEFAULT_SERVICE_MAXMEM))
            for k, v in zip(args[::2], args[1::2], strict=True):
                if k == "maxcpu":
                    maxcpu = float(v)
                else:
                    maxmem = float(v) * MIB
            self.static[sid] = (maxcpu, maxmem)
            return
        if action == "set-dynamic-stats":
            cpu, mem = self.dynamic.get(sid, (DEFAULT_SERVICE_CPU, DEFAULT_SERVICE_MEM))
            for k, v in zip(args[::2], args[1::2], strict=True):
                if k == "cpu":
                    cpu = float(v)
                else:
                    mem = float(v) * MIB
            self.dynamic[sid] = (cpu, mem)
            return
        if action in ("migrate", "relocate"):
            if sid not in self.config:
                raise ConfigError(cmd.path, f"no such resource '{sid}'")
            self.crm_commands.append((action, sid, args[0]))
            return
        raise ConfigError(cmd.path, f"unsupported command {cmd.text!r}")  # pragma: no cover

    # -------------------------------------------------------------- CRM (Manager::manage)

    def crm_round(self, online: set[str]) -> None:
        origin = f"{self.master}/crm"
        # 3. add new services, drop removed ones
        for sid in sorted(self.config):
            if sid not in self.ss and self.config[sid].state != "ignored":
                cfg = self.config[sid]
                self._log(origin, f"adding new service '{sid}' on node '{cfg.node}'")
                state = "request_start" if cfg.state == "started" else "stopped"
                self.ss[sid] = _Service(sid, state, cfg.node)
        for sid in [s for s in self.ss if s not in self.config]:
            del self.ss[sid]
        # 6. queued manual commands (update_crm_commands), before the balancer
        for task, sid, node in self.crm_commands:
            self._log(origin, f"got crm command: {task} {sid} {node}")
            if sid not in self.ss:
                self._log(origin, f"ignore crm command - service '{sid}' does not exist", "err")
                continue
            self.queue_resource_motion(origin, task, sid, node, log_cmd=False)
        self.crm_commands = []
        # 7. the balancer
        crs = self.td.crs
        if crs.auto_rebalance and crs.ha in ("static", "dynamic"):
            view = self.build_view(online)
            motion = self.policy.decide(view)
            self.log.extend(LogLine("info", self.t, origin, m) for _, m in self._drain_policy_log())
            if motion is not None:
                self.record(origin, motion)
        # 8. state machine
        for sid in sorted(self.ss):
            sd = self.ss[sid]
            if sd.state == "request_start":
                sd.state = "started"
            if sd.state in MOTION_STATES and sd.lrm_done:
                sd.node = sd.target or sd.node
                sd.target = None
                sd.lrm_done = False
                sd.state = "started" if self.config[sid].state == "started" else "stopped"
            if sd.cmd is not None and sd.state in ("started", "stopped"):
                task, target = sd.cmd
                sd.cmd = None
                if target not in online or target == sd.node:
                    continue
                if sd.state == "stopped":  # offline move of a stopped service: config only
                    self.config[sid] = ServiceConfig(sid, target, self.config[sid].state)
                    sd.node = target
                    continue
                sd.state = task
                sd.target = target
                sd.lrm_done = False

    def _drain_policy_log(self) -> list[tuple[float, str]]:
        out = list(self.policy.log)
        self.policy.log.clear()
        return out

    def record(self, origin: str, motion: Motion) -> None:
        task = "migrate" if motion.sid.startswith("vm:") else "relocate"
        if self.queue_resource_motion(origin, task, motion.sid, motion.target, log_cmd=True):
            self.decisions.append(
                Decision(
                    self.t,
                    motion.sid,
                    motion.target,
                    float(motion.imbalance_before or 0.0),
                    float(motion.imbalance_after or 0.0),
                )
            )

    def queue_resource_motion(
        self, origin: str, task: str, sid: str, target: str, log_cmd: bool
    ) -> bool:
        """``Manager::queue_resource_motion`` (L580–624, §7): negative-affinity abort, the command,
        and the same command for every positive partner not already on/going to ``target``."""
        for p in self._partners(sid, positive=False):
            sd = self.ss.get(p)
            if sd is None:
                continue
            where = set()
            if sd.state in _PLACED_CURRENT:
                where.add(sd.node)
            if sd.state in MOTION_STATES and sd.target:
                where.add(sd.target)
            if target in where:
                self._log(
                    origin,
                    f"crm command '{task} {sid} {target}' error - service '{p}' on node '{target}' "
                    f"in negative affinity with service '{sid}'",
                    "err",
                )
                return False
        if log_cmd:
            self._log(origin, f"got crm command: {task} {sid} {target}")
        self.ss[sid].cmd = (task, target)
        for p in self._partners(sid, positive=True):
            sd = self.ss.get(p)
            if sd is None or sd.node == target or sd.target == target:
                continue
            sd.cmd = (task, target)
            self._log(
                origin,
                f"crm command '{task} {sid} {target}' - {task} service '{p}' to node '{target}' "
                f"(service '{p}' in positive affinity with service '{sid}')",
            )
        return True

    # -------------------------------------------------------------- LRM

    def lrm_round(self, node: str) -> None:
        for sid in sorted(self.ss):
            sd = self.ss[sid]
            if sd.node != node:
                continue
            if sd.state in MOTION_STATES and not sd.lrm_done and sd.target:
                # the simulated migrate/relocate: config moves, the source stops reporting it
                self.config[sid] = ServiceConfig(sid, sd.target, self.config[sid].state)
                self.running[sid] = False
                sd.lrm_done = True
            elif (
                sd.state == "started"
                and self.config[sid].node == node
                and not self.running.get(sid)
            ):
                self.running[sid] = True
            elif sd.state in ("stopped", "request_stop") and self.running.get(sid):
                self.running[sid] = False

    # -------------------------------------------------------------- the balancer's view

    def build_view(self, online: set[str]) -> ClusterView:
        n = len(self.nodes)
        maxcpu = np.array([self.td.nodes[x].maxcpu for x in self.nodes], dtype=np.float64)
        maxmem = np.array([self.td.nodes[x].maxmem for x in self.nodes], dtype=np.float64)
        node_cpu = np.zeros(n)
        node_mem = np.zeros(n)
        for sid in sorted(self.config):
            if self.running.get(sid):
                cpu, mem = self.dynamic.get(sid, (DEFAULT_SERVICE_CPU, DEFAULT_SERVICE_MEM))
                i = self.node_index[self.config[sid].node]
                node_cpu[i] += cpu
                node_mem[i] += mem
        sids = tuple(sorted(self.ss))
        g = len(sids)
        stat = [self.static.get(s, (DEFAULT_SERVICE_MAXCPU, DEFAULT_SERVICE_MAXMEM)) for s in sids]
        dyn = [self.dynamic.get(s, (DEFAULT_SERVICE_CPU, DEFAULT_SERVICE_MEM)) for s in sids]
        nan_n = np.full(n, np.nan)
        nan_g = np.full(g, np.nan)
        gmem = np.array([d[1] for d in dyn], dtype=np.float64)
        return ClusterView(
            t=float(self.t),
            node_names=tuple(self.nodes),
            node_online=np.array([x in online for x in self.nodes], dtype=bool),
            node_maxcpu=maxcpu,
            node_maxmem=maxmem,
            node_cpu=node_cpu,
            node_mem=node_mem,
            node_cpu_some=nan_n,
            node_mem_some=nan_n.copy(),
            node_mem_full=nan_n.copy(),
            sids=sids,
            guest_node=np.array([self.node_index[self.ss[s].node] for s in sids], dtype=np.int64),
            guest_target=np.array(
                [self.node_index[t] if (t := self.ss[s].target) else -1 for s in sids],
                dtype=np.int64,
            ),
            guest_state=tuple(self.ss[s].state for s in sids),
            guest_running=np.array([bool(self.running.get(s)) for s in sids], dtype=bool),
            guest_maxcpu=np.array([x[0] for x in stat], dtype=np.float64),
            guest_maxmem=np.array([x[1] for x in stat], dtype=np.float64),
            guest_cpu=np.array([d[0] for d in dyn], dtype=np.float64),
            guest_mem=gmem,
            guest_memhost=gmem.copy(),
            guest_cpu_some=nan_g,
            guest_cpu_full=nan_g.copy(),
            guest_mem_some=nan_g.copy(),
            guest_mem_full=nan_g.copy(),
            guest_migratable=np.ones(g, dtype=bool),
            rules=self.td.rules,
            motion_active=any(
                sd.state in MOTION_STATES or (sd.cmd is not None and sd.cmd[0] in MOTION_STATES)
                for sd in self.ss.values()
            ),
            mode=self.td.crs.ha,
        )


def replay(td: TestDir, policy: UpstreamPolicy | None = None) -> ReplayResult:
    """Replay a parsed directory; ``policy`` defaults to upstream's with the directory's
    ``datacenter.cfg`` constants and the raw CV (``normalized=False``) its ``log.expect`` uses."""
    return _Replay(td, policy).run()


def replay_dir(path: str | Path) -> ReplayResult:
    """Read and replay one upstream test directory."""
    return replay(read_testdir(path))
