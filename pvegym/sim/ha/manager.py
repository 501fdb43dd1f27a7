"""The active CRM's work: ``PVE::HA::Manager`` (pve-ha-manager 5.2.0, ``src/PVE/HA/Manager.pm``).

One :meth:`Manager.manage` call is one CRM round of the master: node states from the membership
and the LRMs' modes, new and stale services, the node usage for placement, the rules, queued CRM
commands, the balancer, then the service state machine (repeated until no state changes) and
fencing, and finally the manager status is written for the LRMs.

Service states: ``request_start``, ``started``, ``request_stop``, ``stopped``, ``migrate``,
``relocate``, ``request_start_balance`` (rebalance on start), ``fence``, ``recovery``,
``freeze``, ``error``; ``ignored``/``disabled`` are requested states of the service config.

The balancer (``load_balance``) is pluggable: upstream's is built in, pvegym's are policies that
answer a :class:`~pvegym.sim.view.ClusterView` with at most one
:class:`~pvegym.sim.view.Motion` (the environment gives a fresh one to every new Manager,
:meth:`~pvegym.sim.ha.env.HAEnv.new_balancer`; upstream's is :class:`pvegym.policies.upstream.UpstreamPolicy`).

Hash order: where upstream iterates a Perl hash without sorting and the order can show in the log
(removing stale services), this port iterates in sorted order.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable
from typing import Any

from pvegym.sim.ha.balancer_view import cluster_view
from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.groups import migrate_groups_to_resources, migrate_groups_to_rules
from pvegym.sim.ha.node_status import NodeStatus
from pvegym.sim.ha.perl import PerlDie, numify, to_str, truthy
from pvegym.sim.ha.rules import CompiledRules, Rules
from pvegym.sim.ha.rules_node_affinity import get_node_affinity
from pvegym.sim.ha.rules_resource_affinity import (
    apply_negative_resource_affinity,
    apply_positive_resource_affinity,
    get_affinitive_resources,
    get_resource_affinity,
    is_allowed_on_node,
)
from pvegym.sim.ha.scheduler import SchedulerError
from pvegym.sim.ha.tools import (
    ERROR,
    EWRONG_NODE,
    IGNORED,
    QUIET_SERIAL_KEY,
    SUCCESS,
    count_active_services,
    frozen,
    has_min_version,
)
from pvegym.sim.ha.usage import BasicUsage, DynamicUsage, StaticUsage, Usage
from pvegym.sim.view import Balancer

VALID_SERVICE_STATES = frozenset(
    {
        "stopped",
        "request_stop",
        "request_start",
        "request_start_balance",
        "started",
        "fence",
        "recovery",
        "migrate",
        "relocate",
        "freeze",
        "error",
    }
)

#: rounds to wait until the next HA groups migration try (``try_persistent_group_migration``)
GROUP_MIGRATION_COOLDOWN_ROUNDS = 6

#: ``$assert_cluster_can_migrate_ha_groups``: minimum pve-manager version with HA rules
HA_RULES_MINVERSION = "9.0.0~16"

#: locks safe to remove from a service recovered after fencing (``$fence_recovery_cleanup``)
REMOVABLE_LOCKS = (
    "backup",
    "mounted",
    "migrate",
    "clone",
    "rollback",
    "snapshot",
    "snapshot-delete",
    "suspending",
    "suspended",
)

_uid_counter = itertools.count(1)

_serials = itertools.count(1)


def compute_new_uuid(state: str) -> str:
    """A fresh, unique id for a service's current request: the LRM reports results by it.

    Upstream hashes state, pid, time and a process-wide counter; only uniqueness matters.
    """
    return f"{state}:{next(_uid_counter)}"


def _allowed_nodes_and_partners(
    compiled_rules: CompiledRules,
    online_node_usage: Usage,
    sid: str,
    ss: dict[str, dict[str, Any]],
    node_preference: str,
) -> tuple[dict[str, int], dict[str, int], dict[str, int], dict[str, int]] | None:
    """The first steps of ``select_service_node``: ``(allowed nodes, preferred nodes, together,
    separate)`` of ``sid`` among the online nodes, or ``None`` when no node is preferred."""
    node_affinity = compiled_rules["node-affinity"]
    resource_affinity = compiled_rules["resource-affinity"]
    online_nodes = online_node_usage.online_nodes()
    if (
        node_preference != "try-next"
        and node_affinity.get(sid) is None
        and not resource_affinity["positive"].get(sid)
        and not resource_affinity["negative"].get(sid)
    ):
        # Not upstream's structure (same result): a service without rules may run on every
        # online node, and no partner narrows that down, so the shared hash of the online nodes
        # serves as allowed and preferred nodes unmodified (nothing in select_service_node pops
        # from it without try-next, and the affinity steps are no-ops without partners)
        if not online_nodes:
            return None
        return online_nodes, online_nodes, {}, {}
    # a fresh hash, as upstream's: get_node_affinity may return it, and try-next pops from it
    online_nodes = dict(online_nodes)
    allowed_nodes, pri_nodes = get_node_affinity(node_affinity, sid, online_nodes)
    if not pri_nodes:
        return None
    together, separate = get_resource_affinity(resource_affinity, sid, ss, online_nodes)
    return allowed_nodes, pri_nodes, together, separate


def select_service_node(
    compiled_rules: CompiledRules,
    online_node_usage: Usage,
    sid: str,
    service_conf: dict[str, Any],
    ss: dict[str, dict[str, Any]],
    node_preference: str,
) -> str | None:
    """The best node for ``sid`` (``Manager.pm select_service_node``).

    ``node_preference``: ``none`` (stay on the current node if possible), ``best-score`` (the
    best-scored node) or ``try-next`` (the best-scored node after the current one, skipping nodes
    where the service failed).
    """
    if node_preference not in ("none", "best-score", "try-next"):
        raise PerlDie(f"'{node_preference}' is not a valid node_preference for select_service_node")
    sd = ss[sid]
    current_node: str = sd["node"]
    tried_nodes = sd.get("failed_nodes")
    maintenance_fallback = sd.get("maintenance_node")

    nodes_and_partners = _allowed_nodes_and_partners(
        compiled_rules, online_node_usage, sid, ss, node_preference
    )
    if nodes_and_partners is None:
        return None
    allowed_nodes, pri_nodes, together, separate = nodes_and_partners

    # stay on current node if possible (avoids random migrations)
    if (
        node_preference == "none"
        and not truthy(service_conf.get("failback"))
        and current_node in allowed_nodes
        and allowed_nodes[current_node]
        and is_allowed_on_node(together, separate, current_node)
    ):
        return current_node

    # try to avoid nodes where the service failed already if we want to relocate
    if node_preference == "try-next":
        for node in tried_nodes or []:
            pri_nodes.pop(node, None)

    if separate:  # (both are no-ops without partners)
        apply_negative_resource_affinity(separate, pri_nodes)
    if together:
        apply_positive_resource_affinity(together, pri_nodes)

    if maintenance_fallback is not None and pri_nodes.get(maintenance_fallback):
        return maintenance_fallback

    if node_preference == "none" and pri_nodes.get(current_node):
        return current_node

    online_node_usage.score_calls += 1
    scores = online_node_usage.score_nodes_to_start_service(sid, current_node)
    nodes = sorted(pri_nodes, key=lambda n: (scores.get(n, 0.0), n))

    found = None
    for i in range(len(nodes) - 1, -1, -1):
        if nodes[i] == current_node:
            found = i

    if not nodes:
        return None
    if node_preference == "try-next" and found is not None and found < len(nodes) - 1:
        return nodes[found + 1]
    return nodes[0]


class Manager:
    """The CRM master's state: node status ``ns``, service status ``ss``, manager status ``ms``."""

    def __init__(self, haenv: HAEnv) -> None:
        self.haenv = haenv
        self.crs_scheduler: str | None = None
        self.rebalance_on_request_start = False
        self.auto_rebalance: dict[str, Any] = {}
        self.last_rules_digest: str | None = ""
        self.last_groups_digest: str | None = ""
        self.last_services_digest: str | None = ""
        # rounds the imbalance threshold was exceeded: kept by the balancer (in memory only, not
        # persisted across a CRM failover)
        self.group_migration_round = 3  # wait a little bit
        self.compiled_rules: CompiledRules | None = None
        self.groups: Any = None
        self._usage: Usage | None = None
        # steady state: the token of the last settled round and its LRM results and modes
        self._quiet_token: Hashable | None = None
        self._quiet_lrm: tuple[dict[str, dict[str, Any]], dict[str, str]] = ({}, {})
        self.all_lrms_disarmed = False
        self.balancer: Balancer | None = haenv.new_balancer()
        if self.balancer is not None:
            self.balancer.reset()

        old_ms = haenv.read_manager_status()
        # we only copy the state part of the manager which cannot be auto generated
        self.ns = NodeStatus(haenv, old_ms.get("node_status") or {})
        self.ss: dict[str, dict[str, Any]] = old_ms.get("service_status") or {}
        self.ms: dict[str, Any] = {"master_node": haenv.nodename()}
        # a node in (manual) maintenance mode stays that way on a change of the active master
        if old_ms.get("node_request") is not None:
            self.ms["node_request"] = old_ms["node_request"]
        # preserve disarm state across CRM master changes
        if old_ms.get("disarm") is not None:
            self.ms["disarm"] = old_ms["disarm"]

        self.update_crs_scheduler_mode()  # initial set, we update it once every loop

    # ------------------------------------------------------------------ configuration

    def update_crs_scheduler_mode(self) -> None:
        haenv = self.haenv
        crs_cfg = haenv.get_datacenter_settings().get("crs") or {}

        def defined_or(key: str, default: Any) -> Any:
            v = crs_cfg.get(key)
            return default if v is None else v

        self.rebalance_on_request_start = truthy(crs_cfg.get("ha-rebalance-on-start"))
        self.auto_rebalance = {
            "enable": truthy(crs_cfg.get("ha-auto-rebalance")),
            "threshold": defined_or("ha-auto-rebalance-threshold", 0.3),
            "method": defined_or("ha-auto-rebalance-method", "bruteforce"),
            "hold_duration": defined_or("ha-auto-rebalance-hold-duration", 3),
            "margin": defined_or("ha-auto-rebalance-margin", 0.1),
        }
        old_mode = self.crs_scheduler
        new_mode = crs_cfg.get("ha") if truthy(crs_cfg.get("ha")) else "basic"
        if old_mode is None:
            if new_mode != "basic":
                haenv.log("info", f"using scheduler mode '{new_mode}'")
        elif new_mode == old_mode:
            return  # nothing to do
        else:
            haenv.log("info", f"switching scheduler mode from '{old_mode}' to '{new_mode}'")
        self.crs_scheduler = new_mode

    # ------------------------------------------------------------------ the balancer

    def load_balance(self) -> None:
        """``Manager::load_balance``: ask the balancer; queue the motion it answers."""
        if not self.auto_rebalance.get("enable"):
            return
        balancer = self.balancer
        if balancer is None:
            return
        view = self.haenv.balancer_view(self)
        if view is None:
            view = cluster_view(
                self.haenv.get_time(),
                tuple(self.ns.list_nodes()),
                self.online_node_usage,
                self.ss,
                self.compiled_rules,
                self.any_resource_motion_queued_or_running(),
                self.crs_scheduler or "basic",
            )
        motion = balancer.decide(view)
        if motion is None:
            return
        sid, target = motion.sid, motion.target
        _, typ, _ = self.haenv.parse_sid(sid)
        task = "migrate" if typ == "vm" else "relocate"
        cmd = f"{task} {sid} {target}"
        before = float(motion.imbalance_before or 0.0)
        after = float(motion.imbalance_after or 0.0)
        change = f"expected change for imbalance from {before:.2f} to {after:.2f}"
        self.haenv.log("info", f"auto rebalance - {task} {sid} to {target} ({change})")
        self.queue_resource_motion(cmd, task, sid, target)

    # ------------------------------------------------------------------ status

    def cleanup(self) -> None:
        pass

    def flush_master_status(self) -> None:
        ms = self.ms
        ms["node_status"] = self.ns.status
        ms["service_status"] = self.ss
        ms["timestamp"] = self.haenv.get_time()
        self.haenv.write_manager_status(ms)

    def recompute_online_node_usage(self) -> None:
        haenv = self.haenv
        online_nodes = self.ns.list_online_nodes()
        service_stats: dict[str, dict[str, Any]] = {}
        online_node_usage: Usage | None = None
        mode = self.crs_scheduler
        if mode:
            if mode in ("static", "dynamic"):
                try:
                    if mode == "static":
                        service_stats = haenv.get_static_service_stats()
                        scheduler: Usage = StaticUsage(haenv, service_stats)
                    else:
                        service_stats = haenv.get_dynamic_service_stats()
                        scheduler = DynamicUsage(haenv, service_stats)
                    for node in online_nodes:
                        scheduler.add_node(node)
                    online_node_usage = scheduler
                except (PerlDie, SchedulerError) as err:
                    haenv.log(
                        "warning",
                        f"fallback to 'basic' scheduler mode, init for '{mode}' failed - {err}",
                    )
            elif mode != "basic":
                haenv.log("warning", f"got unknown scheduler mode '{mode}', using 'basic'")

        # fallback to the basic algorithm in any case
        if online_node_usage is None:
            service_stats = haenv.get_basic_service_stats()
            online_node_usage = BasicUsage(haenv)
            for node in online_nodes:
                online_node_usage.add_node(node)

        for sid in sorted(self.ss):
            online_node_usage.add_service_usage(sid, self.ss[sid])

        # add remaining non-HA resources to online node usage
        for sid in sorted(service_stats):
            if sid in self.ss:
                continue
            st = service_stats[sid]
            # the migration target is not known for non-HA resources
            sd: dict[str, Any] = {k: st[k] for k in ("node", "state", "running") if k in st}
            online_node_usage.add_service_usage(sid, sd)

        self._usage = online_node_usage

    @property
    def online_node_usage(self) -> Usage:
        """The round's node usage; built on first use in a quiet round."""
        if self._usage is None:
            self.recompute_online_node_usage()
            assert self._usage is not None
        return self._usage

    def change_service_state(self, sid: str, new_state: str, **params: Any) -> None:
        """``$change_service_state``: a new state (and params such as node, target), a new uid,
        the usage updated, the change logged."""
        sd = self.ss.get(sid)
        if sd is None:
            raise PerlDie(f"no such service '{sid}")
        old_state = sd.get("state")
        old_node = sd.get("node")
        old_failed_nodes = sd.get("failed_nodes")
        old_maintenance_node = sd.get("maintenance_node")
        if old_state == new_state:
            raise PerlDie("no state change")
        if new_state not in VALID_SERVICE_STATES:
            raise PerlDie(f"invalid CRM service state '{new_state}'")
        sd.clear()
        sd["state"] = new_state
        sd["node"] = old_node
        if old_failed_nodes is not None:
            sd["failed_nodes"] = old_failed_nodes
        if old_maintenance_node is not None:
            sd["maintenance_node"] = old_maintenance_node
        text_state = ""
        for k in sorted(params):
            v = params[k]
            if text_state:
                text_state += ", "
            text_state += f"{k} = {to_str(v)}"
            sd[k] = v
        self.online_node_usage.remove_service_usage(sid)
        self.online_node_usage.add_service_usage(sid, sd)
        sd["uid"] = compute_new_uuid(new_state)
        if text_state:
            text_state = f"  ({text_state})"
        self.haenv.log(
            "info",
            f"service '{sid}': state changed from '{old_state}' to '{new_state}'{text_state}",
        )

    def fence_recovery_cleanup(self, sid: str, fenced_node: str) -> None:
        """Remove locks that would block the start of a service recovered after fencing."""
        haenv = self.haenv
        _, typ, name = haenv.parse_sid(sid)
        plugin = haenv.resource_plugin(typ)
        if plugin is None:  # should not happen
            raise PerlDie(f"unknown resource type '{typ}'")
        removed = plugin.remove_locks(haenv, name, list(REMOVABLE_LOCKS), fenced_node)
        if removed:
            haenv.log(
                "warning",
                f"removed leftover lock '{removed}' from recovered service '{sid}' to allow its start.",
            )

    def read_lrm_status(self) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """The LRM results (uid → result) and modes of all known nodes."""
        results: dict[str, dict[str, Any]] = {}
        modes: dict[str, str] = {}
        for node in self.ns.list_nodes():
            lrm_status = self.haenv.read_lrm_status(node)
            modes[node] = lrm_status.get("mode") or "active"
            for uid, res in (lrm_status.get("results") or {}).items():
                if uid in results:  # should not happen
                    continue
                results[uid] = res
        return results, modes

    # ------------------------------------------------------------------ commands

    def queue_resource_motion(self, cmd: str, task: str, sid: str, target: str) -> None:
        """Queue ``task`` for ``sid`` and its positive-affinity partners, unless a negative-affinity
        partner is on (or moving to) ``target``."""
        haenv, ss = self.haenv, self.ss
        assert self.compiled_rules is not None
        resource_affinity = self.compiled_rules["resource-affinity"]
        together, separate = get_affinitive_resources(resource_affinity, sid)

        for csid in sorted(separate):
            csd = ss.get(csid)
            if csd is None:
                continue
            if csd.get("state") == "ignored":
                continue
            if csd.get("node") and csd["node"] != target:
                continue
            if csd.get("target") and csd["target"] != target:
                continue
            haenv.log(
                "err",
                f"crm command '{cmd}' error - service '{csid}' on node '{target}' in"
                f" negative affinity with service '{sid}'",
            )
            return  # one negative resource affinity is enough to not execute migration

        haenv.log("info", f"got crm command: {cmd}")
        ss[sid]["cmd"] = [task, target]

        to_migrate = []
        for csid in sorted(together):
            csd = ss.get(csid)
            if csd is None:
                continue
            if csd.get("state") == "ignored":
                continue
            if csd.get("node") and csd["node"] == target:
                continue
            if csd.get("target") and csd["target"] == target:
                continue
            to_migrate.append(csid)
        for csid in to_migrate:
            haenv.log(
                "info",
                f"crm command '{cmd}' - {task} service '{csid}' to node '{target}'"
                f" (service '{csid}' in positive affinity with service '{sid}')",
            )
            ss[csid]["cmd"] = [task, target]

    def any_resource_motion_queued_or_running(self) -> bool:
        for sd in self.ss.values():
            state = sd.get("state")
            if state in ("migrate", "relocate"):
                return True
            cmd = sd.get("cmd")
            if cmd is not None and cmd and cmd[0] in ("migrate", "relocate"):
                return True
        return False

    _RE_MOTION = re.compile(r"(migrate|relocate)\s+(\S+)\s+(\S+)")
    _RE_STOP = re.compile(r"stop\s+(\S+)\s+(\S+)")
    _RE_ENABLE_MAINT = re.compile(r"enable-node-maintenance\s+(\S+)")
    _RE_DISABLE_MAINT = re.compile(r"disable-node-maintenance\s+(\S+)")
    _RE_DISARM = re.compile(r"disarm-ha\s+(freeze|ignore)")

    def update_crm_commands(self) -> None:
        """Read the queued CRM commands and apply them to the manager status."""
        haenv, ms, ns, ss = self.haenv, self.ms, self.ns, self.ss
        cmdlist = haenv.read_crm_commands()
        for cmd in cmdlist.split("\n"):
            if m := self._RE_MOTION.fullmatch(cmd):
                task, sid, node = m.groups()
                sd = ss.get(sid)
                if sd:
                    if not ns.node_is_online(node):
                        haenv.log("err", f"crm command error - node not online: {cmd}")
                    elif node == sd.get("node"):
                        haenv.log(
                            "info", f"ignore crm command - service already on target node: {cmd}"
                        )
                    else:
                        self.queue_resource_motion(cmd, task, sid, node)
                else:
                    haenv.log("err", f"crm command error - no such service: {cmd}")
            elif m := self._RE_STOP.fullmatch(cmd):
                sid, timeout = m.groups()
                if ss.get(sid):
                    haenv.log("info", f"got crm command: {cmd}")
                    ss[sid]["cmd"] = ["stop", timeout]
                else:
                    haenv.log("err", f"crm command error - no such service: {cmd}")
            elif m := self._RE_ENABLE_MAINT.fullmatch(cmd):
                self._crm_enable_maintenance(cmd, m.group(1))
            elif m := self._RE_DISABLE_MAINT.fullmatch(cmd):
                node = m.group(1)
                state = ns.get_node_state(node)
                if state != "maintenance":
                    haenv.log(
                        "warn",
                        f"clearing maintenance of node {node} requested, but it's in state {state}",
                    )
                # gets flushed out at the end of the CRM loop
                ms.setdefault("node_request", {}).setdefault(node, {}).pop("maintenance", None)
            elif m := self._RE_DISARM.fullmatch(cmd):
                self._crm_disarm(m.group(1))
            elif cmd == "arm-ha":
                self._crm_arm()
            elif cmd:
                haenv.log("err", f"unable to parse crm command: {cmd}")

    def _crm_enable_maintenance(self, cmd: str, node: str) -> None:
        """``enable-node-maintenance NODE``: request maintenance of an online node."""
        haenv, ms, ns = self.haenv, self.ms, self.ns
        state = ns.get_node_state(node)
        if ms.get("disarm"):
            haenv.log(
                "warn",
                f"ignoring maintenance command for node {node} - HA stack is disarmed",
            )
        elif state == "online":
            ms.setdefault("node_request", {}).setdefault(node, {})["maintenance"] = 1
        elif state == "maintenance":
            haenv.log(
                "info",
                f"ignoring crm command - node {node} is already in maintenance state",
            )
        else:
            haenv.log("err", f"crm command error - node not online: {cmd}")

    def _crm_disarm(self, mode: str) -> None:
        """``disarm-ha MODE``: start disarming the HA stack (``freeze`` or ``ignore``)."""
        haenv, ms, ss = self.haenv, self.ms, self.ss
        if ms.get("disarm"):
            haenv.log(
                "notice",
                "ignoring disarm-ha command - already in disarm state"
                f" ({ms['disarm'].get('state')})",
            )
        else:
            haenv.log("info", f"got crm command: disarm-ha {mode}")
            if mode == "ignore":
                for sid in sorted(ss):
                    haenv.log("info", f"disarm: suspending HA tracking for service '{sid}'")
            ms["disarm"] = {"mode": mode, "state": "disarming"}

    def _crm_arm(self) -> None:
        """``arm-ha``: arm the HA stack again, taking over the nodes changed while ignored."""
        haenv, ms, ss = self.haenv, self.ms, self.ss
        if ms.get("disarm"):
            haenv.log("info", "got crm command: arm-ha")
            # recheck node info after ignore mode, as services may have been manually
            # migrated while HA tracking was suspended
            if ms["disarm"].get("mode") == "ignore":
                sc, _ = haenv.read_service_config()
                for sid in sorted(ss):
                    cd = sc.get(sid)
                    if not cd:
                        continue
                    if cd.get("node") == ss[sid].get("node"):
                        continue
                    haenv.log(
                        "info",
                        f"service '{sid}': updating node '{ss[sid].get('node')}'"
                        f" => '{cd.get('node')}' (changed while disarmed)",
                    )
                    ss[sid]["node"] = cd.get("node")
            del ms["disarm"]
        else:
            haenv.log("notice", "ignoring arm-ha command - HA stack is not disarmed")

    # ------------------------------------------------------------------ HA groups migration

    def _have_groups_been_migrated(self) -> bool:
        groups = self.haenv.read_group_config()
        if not groups:
            return True
        return len(groups.get("ids") or {}) < 1

    @staticmethod
    def _is_lrm_active_or_idle(ss: dict[str, Any], node: str, lrm_state: str) -> bool:
        active_count = count_active_services(ss, node)
        if lrm_state == "active":
            return True
        return lrm_state == "wait_for_agent_lock" and not active_count

    def _assert_cluster_can_migrate_ha_groups(self) -> None:
        haenv, ns, ss = self.haenv, self.ns, self.ss
        if not haenv.quorate():
            raise PerlDie("cluster is not quorate")
        nodelist = ns.list_nodes()
        if not nodelist:
            raise PerlDie("node list is empty")
        for node in nodelist:
            if not node:
                raise PerlDie("node with empty name")
            node_status = ns.get_node_state(node)
            haenv.log("notice", f"ha groups migration: node '{node}' is in state '{node_status}'")
            if node_status != "online":
                raise PerlDie(f"node '{node}' is not online")
            lrm = haenv.read_lrm_status(node)
            lrm_state, lrm_mode = lrm.get("state"), lrm.get("mode")
            if not lrm_state or not lrm_mode:
                raise PerlDie(f"could not retrieve state for lrm '{node}'")
            haenv.log(
                "notice",
                f"ha groups migration: lrm '{node}' is in state '{lrm_state}' and mode '{lrm_mode}'",
            )
            if not self._is_lrm_active_or_idle(ss, node, lrm_state):
                raise PerlDie(f"lrm '{node}' is not in state 'active' or 'idle'")
            if lrm_mode != "active":
                raise PerlDie(f"lrm '{node}' is not in mode 'active'")
            node_version = haenv.get_node_version(node)
            if not node_version:
                raise PerlDie(f"could not retrieve version from node '{node}'")
            haenv.log("notice", f"ha groups migration: node '{node}' has version '{node_version}'")
            if not has_min_version(node_version, HA_RULES_MINVERSION):
                raise PerlDie(
                    f"node '{node}' needs at least pve-manager version '{HA_RULES_MINVERSION}'"
                )

    def _migrate_group_persistently(self) -> bool:
        haenv = self.haenv
        try:
            self._assert_cluster_can_migrate_ha_groups()
            resources, _ = haenv.read_service_config()
            groups = haenv.read_group_config()
            rules_cfg = haenv.read_rules_config()
            # write changes to rules config whenever possible so users can modify migrated rules
            migrate_groups_to_rules(rules_cfg, groups, resources)
            haenv.write_rules_config(rules_cfg)
            haenv.log("notice", "ha groups migration: migration to rules config successful")

            migrate_groups_to_resources(groups, resources)
            changes: dict[str, dict[str, Any]] = {}
            for sid in sorted(resources):
                # prevent unnecessary updates for HA resources that do not change
                if resources[sid].get("group") is None:
                    continue
                changes[sid] = {"param": {}, "delete": "group"}
                if not truthy(resources[sid].get("failback")):
                    changes[sid]["param"]["failback"] = 0
            haenv.update_service_config(changes)
            haenv.log("notice", "ha groups migration: migration to resources config successful")

            haenv.delete_group_config()
            haenv.log("notice", "ha groups migration: group config deletion successful")
        except PerlDie as err:
            haenv.log("err", f"abort ha groups migration: {err}")
            return False
        return True

    def try_persistent_group_migration(self) -> None:
        haenv = self.haenv
        if self._have_groups_been_migrated():
            return
        self.group_migration_round -= 1
        if self.group_migration_round > 0:
            return
        self.group_migration_round = GROUP_MIGRATION_COOLDOWN_ROUNDS
        haenv.log("notice", "start ha group migration...")
        if self._migrate_group_persistently():
            haenv.log("notice", "ha groups migration successful")
        else:
            haenv.log("err", "ha groups migration failed")
            rounds = GROUP_MIGRATION_COOLDOWN_ROUNDS
            haenv.log(
                "notice", f"retry ha groups migration in {rounds} rounds (~ {rounds * 10} seconds)"
            )

    # ------------------------------------------------------------------ disarm

    def handle_disarm(
        self, disarm: dict[str, Any], ss: dict[str, dict[str, Any]], lrm_modes: dict[str, str]
    ) -> dict[str, int] | None:
        """Progress a requested disarm; ``None`` when handled (skip the state machine), else the
        services in a transient state the state machine must still resolve."""
        haenv, ns = self.haenv, self.ns
        mode = disarm.get("mode")
        if mode not in ("freeze", "ignore"):
            haenv.log("err", f"unknown disarm-mode '{mode}', ignoring")
            return None

        deferred: dict[str, int] = {}
        for sid in sorted(ss):
            state = ss[sid].get("state")
            if state in ("fence", "recovery"):
                haenv.log("warn", f"deferring disarm - service '{sid}' is in '{state}' state")
                deferred[sid] = 1
            elif state in ("migrate", "relocate"):
                haenv.log("info", f"deferring disarm - service '{sid}' is in '{state}' state")
                deferred[sid] = 1
        if deferred:
            return deferred

        # prune stale runtime data (failed_nodes, cmd, target, ...) so the state machine starts
        # fresh on re-arm; preserve maintenance_node for correct return behavior
        keep = {"state", "node", "uid", "maintenance_node"}
        if mode == "freeze":
            for sid in sorted(ss):
                sd = ss[sid]
                state = sd.get("state")
                if state == "freeze":
                    continue
                if state in (
                    "started",
                    "stopped",
                    "request_stop",
                    "request_start",
                    "request_start_balance",
                ):
                    haenv.log("info", f"disarm: freezing service '{sid}' (was '{state}')")
                    for k in [k for k in sd if k not in keep]:
                        del sd[k]
                    sd["state"] = "freeze"
                    sd["uid"] = compute_new_uuid("freeze")
        else:
            # keep $ss intact; the disarm flag makes the service loops skip these services
            for sid in sorted(ss):
                sd = ss[sid]
                for k in [k for k in sd if k not in keep]:
                    del sd[k]

        # check if all online LRMs have entered disarm mode
        all_disarmed = all(lrm_modes.get(n, "unknown") == "disarm" for n in ns.list_online_nodes())
        if all_disarmed and disarm.get("state") != "disarmed":
            haenv.log("info", "all LRMs disarmed, HA stack is now fully disarmed")
            disarm["state"] = "disarmed"
        # once disarmed, stay disarmed - a returning node's LRM will catch up within one cycle
        self.all_lrms_disarmed = disarm.get("state") == "disarmed"
        self.flush_master_status()
        return None

    def is_fully_disarmed(self) -> bool:
        return self.all_lrms_disarmed

    # ------------------------------------------------------------------ the round

    def manage(self) -> None:
        """One CRM round (``Manager::manage``).

        **Steady state.** When the environment gives a :meth:`~HAEnv.quiescence_token` equal to
        that of a *settled* round (one that changed no service, node or manager state, logged
        nothing, had every node online and every service on a known node, and placed no service by
        score), this round is *quiet*: the steps that are pure functions of those unchanged inputs
        and state — reading the LRM results, the service, group and rules configs, adding and
        removing services, rebuilding the usage, and the service state machine — would redo exactly
        what the settled round did, which was nothing, so they are skipped. Everything else runs as
        always: node status bookkeeping, the CRS settings, the CRM commands, the balancer, the
        manager status. If the balancer moves a service, the round continues on the full path.
        The usage is then built on first use (:attr:`online_node_usage`).
        """
        haenv, ms, ns, ss = self.haenv, self.ms, self.ns, self.ss
        token = haenv.quiescence_token()
        quiet = token is not None and token == self._quiet_token
        logs0 = haenv.log_count
        before = None
        if quiet:
            self._usage = None  # this round's usage: built on first use
        else:
            self._quiet_token = None
            self._set_serial(token)
            if token is not None:
                before = self._state_snapshot()

        node_info, _ = haenv.get_node_info()
        has_changed_nodelist = ns.check_for_changed_nodelist(node_info)
        if quiet:
            lrm_results, lrm_modes = self._quiet_lrm
        else:
            lrm_results, lrm_modes = self.read_lrm_status()

        ns.update(node_info, lrm_modes)

        if not ns.node_is_operational(haenv.nodename()):
            haenv.log("info", "master seems offline")
            return

        self.update_crs_scheduler_mode()
        self.try_persistent_group_migration()

        sc: dict[str, dict[str, Any]] = {}
        if not quiet:
            sc = self._read_services_and_rules(has_changed_nodelist)

        self.update_crm_commands()

        deferred: dict[str, int] | None = None
        disarm = ms.get("disarm")
        if disarm:
            deferred = self.handle_disarm(disarm, ss, lrm_modes)
            if not deferred:
                return  # disarm active and progressing, skip normal service state machine
            # disarm deferred - fall through but only process services in transient states
        else:
            # no new migrations while a disarm is pending or deferred
            self.load_balance()

        if quiet:
            if haenv.log_count == logs0:
                self.flush_master_status()
                return  # the state machine would change nothing: the settled round's result
            # the balancer queued a motion: the rest of the round runs on the full path
            self._quiet_token = None
            self._set_serial(token)
            lrm_results, lrm_modes = self.read_lrm_status()
            sc, _ = haenv.read_service_config()
            migrate_groups_to_resources(self.groups, sc)

        self._state_machine(sc, lrm_results, lrm_modes, deferred)

        if before is not None and self._settled(before, logs0):
            self._quiet_token = token
            self._quiet_lrm = (lrm_results, lrm_modes)
        self.flush_master_status()

    def _read_services_and_rules(self, has_changed_nodelist: bool) -> dict[str, dict[str, Any]]:
        """The service config (with new and stale services applied to the service status), the
        round's node usage and the compiled rules (recompiled when anything they depend on
        changed); returns the service config."""
        haenv, ms, ns, ss = self.haenv, self.ms, self.ns, self.ss
        sc, services_digest = haenv.read_service_config()
        self.groups = haenv.read_group_config()  # update

        # skip service add/remove when disarmed - handle_disarm manages service status
        if not ms.get("disarm"):
            for sid in sorted(sc):
                if sid in ss:
                    continue  # already there
                cd = sc[sid]
                if cd.get("state") == "ignored":
                    continue
                haenv.log("info", f"adding new service '{sid}' on node '{cd.get('node')}'")
                # assume we are running to avoid relocate running service at add
                state = "request_start" if cd.get("state") == "started" else "request_stop"
                ss[sid] = {
                    "state": state,
                    "node": cd.get("node"),
                    "uid": compute_new_uuid("started"),
                }
            # remove stale or ignored services from manager state (upstream: hash order)
            for sid in sorted(ss):
                if sid in sc and sc[sid].get("state") != "ignored":
                    continue
                reason = "ignored state requested" if sid in sc else "no config"
                haenv.log("info", f"removing stale service '{sid}' ({reason})")
                del ss[sid]

        self.recompute_online_node_usage()

        new_rules = haenv.read_rules_config()
        migrate_groups_to_resources(self.groups, sc)

        if (
            self.compiled_rules is None
            or has_changed_nodelist
            or new_rules.get("digest") != self.last_rules_digest
            or self.groups.get("digest") != self.last_groups_digest
            or (services_digest and services_digest != self.last_services_digest)
        ):
            migrate_groups_to_rules(new_rules, self.groups, sc)
            nodes = ns.list_nodes()
            for msg in Rules.transform(new_rules, nodes):
                haenv.log("info", msg)
            self.compiled_rules = Rules.compile(new_rules, nodes)
            self.last_rules_digest = new_rules.get("digest")
            self.last_groups_digest = self.groups.get("digest")
            self.last_services_digest = services_digest
        return sc

    def _state_machine(
        self,
        sc: dict[str, dict[str, Any]],
        lrm_results: dict[str, dict[str, Any]],
        lrm_modes: dict[str, str],
        deferred: dict[str, int] | None,
    ) -> None:
        """The service state machine, repeated until no state changes, with fencing."""
        ss = self.ss
        self.all_lrms_disarmed = False

        while True:
            repeat = False
            for sid in sorted(ss):
                if deferred and sid not in deferred:
                    continue
                if self._next_service_state(sid, sc, lrm_results, lrm_modes):
                    repeat = True

            if self._handle_fencing():
                repeat = True

            if not repeat:
                break

    def _next_service_state(
        self,
        sid: str,
        sc: dict[str, dict[str, Any]],
        lrm_results: dict[str, dict[str, Any]],
        lrm_modes: dict[str, str],
    ) -> bool:
        """One service's step of :meth:`_state_machine`; whether its state changed."""
        ss = self.ss
        sd = ss[sid]
        cd = sc.get(sid) or {"state": "disabled"}
        uid = sd.get("uid")
        lrm_res = lrm_results.get(uid) if uid else None
        last_state = sd.get("state")

        if last_state == "stopped":
            self.next_state_stopped(sid, cd, sd, lrm_res)
        elif last_state == "started":
            self.next_state_started(sid, cd, sd, lrm_res)
        elif last_state == "request_start":
            self.next_state_request_start(sid, cd, sd, lrm_res)
        elif last_state in ("migrate", "relocate", "request_start_balance"):
            self.next_state_migrate_relocate(sid, cd, sd, lrm_res)
        elif last_state == "fence":
            pass  # do nothing here - wait until fenced
        elif last_state == "recovery":
            self.next_state_recovery(sid, cd, sd, lrm_res)
        elif last_state == "request_stop":
            self.next_state_request_stop(sid, cd, sd, lrm_res)
        elif last_state == "freeze":
            lrm_mode = lrm_modes.get(sd["node"]) if sd.get("node") else None
            if lrm_mode == "active":  # unfreeze if active again
                state = "started" if cd.get("state") == "started" else "request_stop"
                self.change_service_state(sid, state)
        elif last_state == "error":
            self.next_state_error(sid, cd, sd, lrm_res)
        else:
            raise PerlDie(f"unknown service state '{last_state}'")

        lrm_mode = lrm_modes.get(sd["node"]) if sd.get("node") else None
        if lrm_mode == "restart" and sd.get("state") in (
            "started",
            "stopped",
            "request_stop",
        ):
            self.change_service_state(sid, "freeze")

        return sd.get("state") != last_state

    def _handle_fencing(self) -> bool:
        """Fence the nodes of services in 'fence' state, recover their services; whether any
        state changed (the state machine repeats then)."""
        haenv, ns, ss = self.haenv, self.ns, self.ss
        repeat = False
        fenced_nodes: dict[str, bool] = {}
        for sid in sorted(ss):
            service_state = ss[sid].get("state")
            service_node = ss[sid].get("node")
            if service_state != "fence":
                continue
            assert service_node is not None
            if service_node not in fenced_nodes:
                fenced_nodes[service_node] = ns.fence_node(service_node)
            if not fenced_nodes[service_node]:
                continue
            # node fence was successful - recover service
            self.change_service_state(sid, "recovery")
            repeat = True  # for faster recovery execution

        # a node without services in 'fence' state (e.g. removed manually by the admin) must
        # not be stuck in the 'fence' node state
        for node in sorted(n for n in ns.status if n not in fenced_nodes):
            if ns.get_node_state(node) != "fence":
                continue
            haenv.log(
                "notice",
                f"node '{node}' in fence state but no services to-fence! admin interference?!",
            )
            if ns.fence_node(node):
                repeat = True
        return repeat

    # ------------------------------------------------------------------ steady state

    def _set_serial(self, token: Hashable | None) -> None:
        """A new serial for the manager status: the LRMs' memos of it are stale. Written only
        where the environment supports steady state (``token`` is not ``None``)."""
        if token is None:
            self.ms.pop(QUIET_SERIAL_KEY, None)
        else:
            self.ms[QUIET_SERIAL_KEY] = next(_serials)

    def _state_snapshot(self) -> Any:
        """Everything a round may change in the Manager (but the nodes' last online times)."""
        ms = self.ms
        # the uids are left out: every round gives each started service whose start the LRM
        # confirmed a new one, so that its LRM checks again that it runs (next_state_started);
        # a quiet round skips that check, which the quiescence token makes redundant
        ss = self.ss
        services = tuple([(sid, frozen(ss[sid], "uid")) for sid in sorted(ss)])
        return (
            services,
            frozen(self.ns.status),
            frozen(ms.get("node_request")),
            frozen(ms.get("disarm")),
            self.crs_scheduler,
            self.group_migration_round,
            self.last_rules_digest,
            self.last_groups_digest,
            self.last_services_digest,
        )

    def _settled(self, before: Any, logs0: int) -> bool:
        """The round changed nothing and its outcome depends on neither time nor scores."""
        ns, ms = self.ns, self.ms
        if self.haenv.log_count != logs0 or ms.get("disarm"):
            return False
        # the clock: fencing and the deletion of gone nodes wait on it, and so does every service
        # on a node that is not online (node_is_offline_delayed)
        if any(state in ("fence", "gone") for state in ns.status.values()):
            return False
        online = ns.status
        for sd in self.ss.values():
            if online.get(str(sd.get("node"))) != "online":
                return False
            target = sd.get("target")
            if target is not None and online.get(target) != "online":
                return False
        if self._usage is not None and self._usage.score_calls:
            return False  # a placement by score: scores follow the usage statistics
        return self._state_snapshot() == before

    # ------------------------------------------------------------------ next states
    # $cd: service configuration data (read only); $sd: service status data (read only).
    # Use change_service_state() to alter the state.

    def next_state_request_stop(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        if lrm_res:
            exit_code = lrm_res.get("exit_code")
            if exit_code == SUCCESS:
                self.change_service_state(sid, "stopped")
                return
            self.haenv.log("err", f"service '{sid}' stop failed (exit code {exit_code})")
            self.change_service_state(sid, "error")  # fixme: what state?
            return
        if self.ns.node_is_offline_delayed(sd["node"]):
            self.change_service_state(sid, "fence")

    def next_state_migrate_relocate(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        haenv = self.haenv
        if lrm_res:
            exit_code = lrm_res.get("exit_code")
            req_state = "started" if cd.get("state") == "started" else "request_stop"
            if exit_code == SUCCESS:
                self.change_service_state(sid, req_state, node=sd.get("target"))
                return
            if exit_code == EWRONG_NODE:
                haenv.log(
                    "err", f"service '{sid}' - migration failed: service registered on wrong node!"
                )
                self.change_service_state(sid, "error")
            elif exit_code == IGNORED:
                haenv.log(
                    "info",
                    f"service '{sid}' - rebalance-on-start request ignored - service already running",
                )
                self.change_service_state(sid, req_state, node=sd.get("node"))
            else:
                haenv.log("err", f"service '{sid}' - migration failed (exit code {exit_code})")
                self.change_service_state(sid, req_state, node=sd.get("node"))
                return
        if self.ns.node_is_offline_delayed(sd["node"]):
            self.change_service_state(sid, "fence")

    def next_state_stopped(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        haenv, ns = self.haenv, self.ns
        if sd.get("node") != cd.get("node"):
            # this can happen if we fence a node with active migrations
            # hack: modify $sd (normally this should be considered read-only)
            haenv.log(
                "info", f"fixup service '{sid}' location ({sd.get('node')} => {cd.get('node')})"
            )
            sd["node"] = cd.get("node")

        if sd.get("cmd"):
            cmd = sd["cmd"].pop(0)
            if cmd in ("migrate", "relocate"):
                target = sd["cmd"].pop(0) if sd["cmd"] else None
                if not ns.node_is_online(to_str(target)):
                    haenv.log(
                        "err",
                        f"ignore service '{sid}' {cmd} request - node '{to_str(target)}' not online",
                    )
                elif sd.get("node") == target:
                    haenv.log(
                        "info",
                        f"ignore service '{sid}' {cmd} request - service already on node '{target}'",
                    )
                else:
                    self.change_service_state(sid, cmd, node=sd.get("node"), target=target)
                    return
            elif cmd == "stop":
                haenv.log("info", f"ignore service '{sid}' {cmd} request - service already stopped")
            else:
                haenv.log("err", f"unknown command '{cmd}' for service '{sid}'")
            sd.pop("cmd", None)

        state = cd.get("state")
        if state == "disabled":
            # NOTE: do nothing here, the stop state is an exception as we do not process the LRM
            # result here, thus the LRM always tries to stop the service (protection for the case
            # no CRM is active)
            return
        if (
            ns.node_is_offline_delayed(sd["node"])
            and ns.get_node_state(sd["node"]) != "maintenance"
        ):
            self.change_service_state(sid, "fence")
            return
        if state == "stopped":
            # almost the same as 'disabled' state but the service will also get recovered
            return
        if state == "started":
            # simply mark it started, if it's on the wrong node next_state_started will fix that
            self.change_service_state(sid, "request_start", node=sd.get("node"))
            return
        haenv.log("err", f"service '{sid}' - unknown state '{state}' in service configuration")

    def next_state_request_start(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        haenv = self.haenv
        current_node = sd.get("node")
        if self.rebalance_on_request_start:
            assert self.compiled_rules is not None
            selected = select_service_node(
                self.compiled_rules, self.online_node_usage, sid, cd, self.ss, "best-score"
            )
            select_text = "new" if selected != current_node else "current"
            haenv.log(
                "info",
                f"service {sid}: re-balance selected {select_text} node {selected or ''} for startup",
            )
            if selected != current_node:
                self.change_service_state(
                    sid, "request_start_balance", node=current_node, target=selected
                )
                return
        self.change_service_state(sid, "started", node=current_node)

    def record_service_failed_on_node(self, sid: str, node: str) -> None:
        self.ss[sid].setdefault("failed_nodes", []).append(node)

    def next_state_started(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        haenv, ns = self.haenv, self.ns

        if not ns.node_is_online(sd["node"]):
            if ns.node_is_offline_delayed(sd["node"]):
                self.change_service_state(sid, "fence")
            if ns.get_node_state(sd["node"]) != "maintenance":
                return
            # save current node as fallback for when it comes out of maintenance
            sd["maintenance_node"] = sd["node"]

        state = cd.get("state")
        if state in ("disabled", "stopped"):
            self.change_service_state(sid, "request_stop")
            return

        if state != "started":
            haenv.log("err", f"service '{sid}' - unknown state '{state}' in service configuration")
            return

        if sd.get("cmd"):
            self._started_command(sid, sd)
            return

        select_node_preference = "none"
        if lrm_res:
            preference = self._started_lrm_result(sid, cd, sd, lrm_res)
            if preference is None:
                return
            select_node_preference = preference

        assert self.compiled_rules is not None
        node = select_service_node(
            self.compiled_rules, self.online_node_usage, sid, cd, self.ss, select_node_preference
        )

        self._started_place(sid, cd, sd, lrm_res, node, select_node_preference)

    def _started_command(self, sid: str, sd: dict[str, Any]) -> None:
        """A started service's queued CRM command: migrate, relocate or stop."""
        haenv, ns = self.haenv, self.ns
        cmd = sd["cmd"].pop(0)
        if cmd in ("migrate", "relocate"):
            target = sd["cmd"].pop(0) if sd["cmd"] else None
            if not ns.node_is_online(to_str(target)):
                haenv.log(
                    "err",
                    f"ignore service '{sid}' {cmd} request - node '{to_str(target)}' not online",
                )
            elif sd.get("node") == target:
                haenv.log(
                    "info",
                    f"ignore service '{sid}' {cmd} request - service already on node '{target}'",
                )
            else:
                haenv.log("info", f"{cmd} service '{sid}' to node '{target}'")
                self.change_service_state(sid, cmd, node=sd.get("node"), target=target)
        elif cmd == "stop":
            timeout = sd["cmd"].pop(0) if sd["cmd"] else None
            if numify(timeout) == 0:
                haenv.log("info", f"request immediate service hard-stop for service '{sid}'")
            else:
                haenv.log(
                    "info",
                    f"request graceful stop with timeout '{to_str(timeout)}' for service '{sid}'",
                )
            self.change_service_state(sid, "request_stop", timeout=timeout)
            haenv.update_service_config({sid: {"param": {"state": "stopped"}}})
        else:
            haenv.log("err", f"unknown command '{cmd}' for service '{sid}'")
        sd.pop("cmd", None)

    def _started_lrm_result(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any]
    ) -> str | None:
        """The LRM's result for a started service: the node preference for the next selection
        (``none`` or ``try-next``, the relocate policy), or None when it entered the error state."""
        haenv = self.haenv
        select_node_preference = "none"
        ec = lrm_res.get("exit_code")
        if ec == SUCCESS:
            if sd.get("failed_nodes") is not None:
                haenv.log(
                    "info",
                    f"relocation policy successful for '{sid}' on node '{sd['node']}',"
                    f" failed nodes: {', '.join(sd['failed_nodes'])}",
                )
            sd.pop("failed_nodes", None)
            # store flag to indicate successful start - only valid while state == 'started'
            sd["running"] = 1
        elif ec in (ERROR, EWRONG_NODE):
            sd.pop("running", None)
            # apply our relocate policy if we got ERROR from the LRM
            self.record_service_failed_on_node(sid, sd["node"])
            if len(sd["failed_nodes"]) <= numify(cd.get("max_relocate")):
                # tell select_service_node to relocate if possible
                select_node_preference = "try-next"
                haenv.log(
                    "warning",
                    f"starting service {sid} on node '{sd['node']}' failed, relocating service.",
                )
            else:
                haenv.log(
                    "err",
                    f"recovery policy for service {sid} failed, entering error state."
                    f" Failed nodes: {', '.join(sd['failed_nodes'])}",
                )
                self.change_service_state(sid, "error")
                return None
        else:
            self.record_service_failed_on_node(sid, sd["node"])
            haenv.log("err", f"service '{sid}' got unrecoverable error (exit code {ec})")
            # we have no safe way out (yet) for other errors
            self.change_service_state(sid, "error")
            return None
        return select_node_preference

    def _started_place(
        self,
        sid: str,
        cd: dict[str, Any],
        sd: dict[str, Any],
        lrm_res: dict[str, Any] | None,
        node: str | None,
        select_node_preference: str,
    ) -> None:
        """Move a started service to the node selected for it, or keep it (and restart it if it
        went down)."""
        haenv, ns = self.haenv, self.ns
        if node and sd.get("node") != node:
            fallback = sd.get("maintenance_node")
            if fallback is not None:
                if node == fallback:
                    haenv.log(
                        "info",
                        f"moving service '{sid}' back to '{fallback}', node came back from maintenance.",
                    )
                    del sd["maintenance_node"]
                elif sd.get("node") != fallback:
                    haenv.log(
                        "info", f"dropping maintenance fallback node '{fallback}' for '{sid}'"
                    )
                    del sd["maintenance_node"]
            if cd.get("type") == "vm":
                haenv.log("info", f"migrate service '{sid}' to node '{node}' (running)")
                self.change_service_state(sid, "migrate", node=sd.get("node"), target=node)
            else:
                haenv.log("info", f"relocate service '{sid}' to node '{node}'")
                self.change_service_state(sid, "relocate", node=sd.get("node"), target=node)
        else:
            if select_node_preference == "try-next" and node is None:
                haenv.log(
                    "warning",
                    f"Start Error Recovery: Tried all available nodes for service '{sid}', retry"
                    f" start on current node. Tried nodes: {', '.join(sd.get('failed_nodes') or [])}",
                )
            if (
                sd.get("maintenance_node")
                and sd.get("node") == sd["maintenance_node"]
                and ns.get_node_state(sd["node"]) == "online"
            ):
                # the maintenance node was never left since it was set (e.g. the whole cluster
                # shut down at once with the 'migrate' policy): it is the current node again
                haenv.log(
                    "info",
                    f"service '{sid}': clearing stale maintenance node "
                    f"'{sd['maintenance_node']}' setting (is current node)",
                )
                del sd["maintenance_node"]
            # ensure service gets started again if it went unexpected down
            # but ensure also no LRM result gets lost
            if lrm_res is not None:
                sd["uid"] = compute_new_uuid(str(sd.get("state")))

    def next_state_error(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        if cd.get("state") == "disabled":
            # clean up on error recovery
            sd.pop("failed_nodes", None)
            self.change_service_state(sid, "stopped")

    def next_state_recovery(
        self, sid: str, cd: dict[str, Any], sd: dict[str, Any], lrm_res: dict[str, Any] | None
    ) -> None:
        """After a node was fenced: recover the service to a new node."""
        haenv = self.haenv
        if sd.get("state") != "recovery":  # should not happen
            haenv.log(
                "err",
                f"cannot recover service '{sid}' from fencing, wrong state '{sd.get('state')}'",
            )
            return
        fenced_node = sd.get("node")  # for logging purpose
        assert self.compiled_rules is not None
        recovery_node = select_service_node(
            self.compiled_rules, self.online_node_usage, sid, cd, self.ss, "best-score"
        )
        if recovery_node:
            msg = f"recover service '{sid}' from fenced node '{fenced_node}' to node '{recovery_node}'"
            if recovery_node == fenced_node:
                # can happen if restricted groups and the node came up again OK
                msg = f"recover service '{sid}' to previous failed and fenced node '{fenced_node}' again"
            haenv.log("info", msg)
            self.fence_recovery_cleanup(sid, str(fenced_node))
            haenv.steal_service(sid, sd["node"], recovery_node)
            # NOTE: $sd *is normally read-only*, fencing is the exception
            cd["node"] = sd["node"] = recovery_node
            new_state = "started" if cd.get("state") == "started" else "request_stop"
            self.change_service_state(sid, new_state, node=recovery_node)
        else:
            # no possible node found, cannot recover - but retry later, as we always try to make
            # it available
            haenv.log(
                "err",
                f"recovering service '{sid}' from fenced node '{fenced_node}' failed, no recovery node found",
            )
            if cd.get("state") == "disabled":
                # allow getting a service out of recovery manually if an admin disables it.
                sd.pop("failed_nodes", None)  # clean up on recovery to stopped
                self.change_service_state(sid, "stopped")  # must NOT go through request_stop
