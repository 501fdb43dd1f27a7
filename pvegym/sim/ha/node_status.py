"""The CRM's view of the nodes: ``PVE::HA::NodeStatus`` (pve-ha-manager 5.2.0, ``NodeStatus.pm``).

Node states: ``online`` (member of the quorate partition), ``maintenance`` (member, but its LRM is
in maintenance mode), ``unknown`` (not in the quorate partition, possibly still running), ``fence``
(must be fenced before its services are recovered) and ``gone`` (vanished from the member list).

Fencing is acknowledged when the master gets the node's LRM agent lock: the lock can only be
taken once the node's own LRM stopped renewing it, i.e. its watchdog expired and reset the node
(or it released the lock cleanly).
"""

from __future__ import annotations

from typing import Any

from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.perl import PerlDie

#: seconds a node must be offline before its services are fenced (NodeStatus.pm ``$fence_delay``)
FENCE_DELAY = 60

#: seconds a ``gone`` node stays in the status before it is deleted (NodeStatus.pm ``update``)
GONE_DELETE_DELAY = 3600

VALID_NODE_STATES = frozenset({"online", "maintenance", "unknown", "fence", "gone"})


class NodeStatus:
    """``$ns``: node name → state, plus the last time each node was seen online (in memory)."""

    def __init__(self, haenv: HAEnv, status: dict[str, str]) -> None:
        self.haenv = haenv
        self.status = status
        self.last_online: dict[str, float] = {}

    def get_node_state(self, node: str) -> str:
        return self.status.get(node, "unknown")

    def node_is_operational(self, node: str) -> bool:
        return self.node_is_online(node) or self.get_node_state(node) == "maintenance"

    def node_is_online(self, node: str) -> bool:
        return self.get_node_state(node) == "online"

    def node_is_offline_delayed(self, node: str, delay: float = FENCE_DELAY) -> bool:
        """Offline for at least ``delay`` s; the first call for a node only starts the clock."""
        if self.get_node_state(node) == "online":
            return False
        last_online = self.last_online.get(node)
        ctime = self.haenv.get_time()
        if last_online is None:
            self.last_online[node] = ctime
            return False
        return (ctime - last_online) >= delay

    def list_nodes(self) -> list[str]:
        return sorted(self.status)

    def list_online_nodes(self) -> list[str]:
        return [n for n in sorted(self.status) if self.status[n] == "online"]

    def check_for_changed_nodelist(self, node_info: dict[str, Any]) -> bool:
        if any(node not in self.status for node in node_info):
            return True
        return any(node not in node_info for node in self.status)

    def _delete_node(self, node: str) -> None:
        if self.get_node_state(node) != "gone":
            return
        self.last_online.pop(node, None)
        self.status.pop(node, None)
        self.haenv.log("notice", f"deleting gone node '{node}', not a cluster member anymore.")

    def _set_node_state(self, node: str, state: str) -> None:
        if state not in VALID_NODE_STATES:
            raise PerlDie(f"unknown node state '{state}'")
        last_state = self.get_node_state(node)
        if state == last_state:
            return
        self.status[node] = state
        self.haenv.log("info", f"node '{node}': state changed from '{last_state}' => '{state}'\n")

    def update(self, node_info: dict[str, Any], lrm_modes: dict[str, str]) -> None:
        """Node states from the cluster membership (``node_info``) and the LRMs' modes."""
        haenv = self.haenv
        for node in sorted(node_info):
            d = node_info[node]
            lrm_mode = lrm_modes.get(node, "unknown")
            if not d.get("online"):
                continue
            # record last time the node was online (required to implement fence delay)
            self.last_online[node] = haenv.get_time()
            state = self.get_node_state(node)
            if state == "online":
                if lrm_mode == "maintenance":
                    self._set_node_state(node, "maintenance")
            elif state in ("unknown", "gone"):
                self._set_node_state(node, "online")
            elif state == "fence":
                pass  # do nothing, wait until fenced
            elif state == "maintenance":
                if lrm_mode != "maintenance":
                    self._set_node_state(node, "online")
            else:
                raise PerlDie(f"detected unknown node state '{state}")

        for node in sorted(self.status):
            d = node_info.get(node)
            if d and d.get("online"):
                continue
            # node is not inside quorate partition, possibly not active
            state = self.get_node_state(node)
            if state == "online":
                self._set_node_state(node, "unknown")
            elif state == "maintenance":
                if lrm_modes.get(node, "unknown") != "maintenance":
                    self._set_node_state(node, "unknown")
            elif state == "unknown":
                # node isn't in the member list anymore, deleted from the cluster?
                if d is None:
                    self._set_node_state(node, "gone")
            elif state == "fence":
                pass  # do nothing, wait until fenced
            elif state == "gone":
                if self.node_is_offline_delayed(node, GONE_DELETE_DELAY):
                    self._delete_node(node)
            else:
                raise PerlDie(f"detected unknown node state '{state}")

    def _send_fence_state_email(self, subject_prefix: str, subject: str, node: str) -> None:
        """The fencing notification (NodeStatus.pm ``$send_fence_state_email``)."""
        status = self.haenv.read_manager_status()
        node_status = status.get("node_status") or {}
        service_status = status.get("service_status") or {}
        template_data: dict[str, Any] = {
            "fence-status": subject,
            "fence-prefix": subject_prefix,
            "is-success": subject_prefix == "SUCCEED",
            "failed-node": node,
            "master-node": status.get("master_node"),
            "fence-timestamp": status.get("timestamp"),
            "nodes": [{"node": k, "status": node_status[k]} for k in sorted(node_status)],
            "resources": [
                {
                    "resource": k,
                    "state": service_status[k].get("state"),
                    "node": service_status[k].get("node"),
                    "running": service_status[k].get("running"),
                }
                for k in sorted(service_status)
            ],
        }
        metadata = {"type": "fencing", "hostname": node}
        self.haenv.send_notification("fencing", template_data, metadata)

    def fence_node(self, node: str) -> bool:
        """Start fencing ``node`` (state ``fence``); acknowledged once its agent lock is ours."""
        if self.get_node_state(node) != "fence":
            self._set_node_state(node, "fence")
            self._send_fence_state_email("FENCE", f"Try to fence node '{node}'", node)
        success = self.haenv.get_ha_agent_lock(node)
        if success:
            msg = f"fencing: acknowledged - got agent lock for node '{node}'"
            self.haenv.log("info", msg)
            self._set_node_state(node, "unknown")
            self._send_fence_state_email("SUCCEED", msg, node)
        return success
