"""The Cluster Resource Manager daemon: ``PVE::HA::CRM`` (pve-ha-manager 5.2.0, ``src/PVE/HA/CRM.pm``).

Every node runs one; the one holding the cluster-wide ``ha_manager_lock`` is the *master* and runs
the :class:`~pvegym.sim.ha.manager.Manager` once per iteration (about 10 s). States:

* ``wait_for_quorum`` — not quorate (or nothing to do): waiting;
* ``master`` — quorate and holding the manager lock (its watchdog armed unless HA is disarmed);
* ``lost_manager_lock`` — lost the lock (the watchdog will fire unless it is released);
* ``slave`` — quorate, but another node is master.

A master with no configured service for :data:`MAX_ACTIVE_IDLE_ROUNDS` rounds releases the lock and
its watchdog and goes back to ``wait_for_quorum``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.manager import Manager
from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.scheduler import SchedulerError
from pvegym.sim.ha.tools import QUIET_SERIAL_KEY, count_fenced_services

VALID_STATES = {
    "wait_for_quorum": "cluster is not quorate, waiting",
    "master": "quorate, and we got the ha_manager lock",
    "lost_manager_lock": "we lost the ha_manager lock (watchdog active)",
    "slave": "quorate, but we do not own the ha_manager lock",
}

#: ~10 s per active round: 15 min without a service before going idle (30 rounds longer than the
#: LRM waits, so that an LRM never waits for an idle CRM)
MAX_ACTIVE_IDLE_ROUNDS = 90

#: seconds a master works per round (``sleep_until($startime + $max_time)``)
ROUND_TIME = 10


class MasterRound(Protocol):
    """What the daemon calls of its master's round: the port's :class:`Manager`, or (not
    upstream's: the model's engine stack, :mod:`pvegym.sim.engine_stack`) the compiled engine's."""

    def manage(self) -> None: ...
    def is_fully_disarmed(self) -> bool: ...
    def cleanup(self) -> None: ...


class CRM:
    """One node's CRM daemon. ``new_manager`` makes the master's round when the daemon becomes
    master (upstream: ``PVE::HA::Manager->new``; the default)."""

    def __init__(self, haenv: HAEnv, new_manager: Callable[[HAEnv], MasterRound] = Manager) -> None:
        self.haenv = haenv
        self.new_manager = new_manager
        self.manager: MasterRound | None = None
        self.status: dict[str, Any] = {"state": "startup"}
        self.cluster_state_update = False
        self.active_idle_rounds = 0
        self.shutdown_request = False
        self.disarmed = False
        self.ha_manager_wd: str | None = None
        self._fenced_memo: tuple[Any, int] = (None, 0)
        self.set_local_status({"state": "wait_for_quorum"})

    def request_shutdown(self) -> None:
        """``shutdown_request``: finish the current round, then exit."""
        if not self.shutdown_request:
            self.haenv.log("info", "server received shutdown request")
        self.shutdown_request = True

    def get_local_status(self) -> dict[str, Any]:
        return self.status

    def set_local_status(self, new: dict[str, Any]) -> None:
        if new["state"] not in VALID_STATES:
            raise PerlDie(f"invalid state '{new['state']}'")
        haenv = self.haenv
        old = self.status
        # important: only update if really changed
        if old["state"] == new["state"]:
            return
        haenv.log("info", f"status change {old['state']} => {new['state']}")
        new["state_change_time"] = haenv.get_time()
        self.status = new
        if new["state"] == "master":
            self.manager = self.new_manager(haenv)
        elif self.manager is not None:
            self.manager.cleanup()
            self.manager = None

    def get_protected_ha_manager_lock(self) -> bool:
        haenv = self.haenv
        count = 0
        starttime = haenv.get_time()
        while True:
            if haenv.get_ha_manager_lock():
                if self.ha_manager_wd:
                    haenv.watchdog_update(self.ha_manager_wd)
                elif not self.disarmed:
                    # check on-disk disarm state to avoid briefly opening a watchdog when taking
                    # over as new master while the stack is already fully disarmed
                    try:
                        ms: dict[str, Any] | None = haenv.read_manager_status()
                    except PerlDie:
                        ms = None
                    if ms and ms.get("disarm") and ms["disarm"].get("state") == "disarmed":
                        haenv.log("info", "taking over as disarmed master, skipping watchdog")
                        self.disarmed = True
                    else:
                        self.ha_manager_wd = haenv.watchdog_open()
                return True
            count += 1
            if count > 5:  # try max 5 times
                break
            if haenv.get_time() - starttime > 5:  # for max 5 seconds
                break
            haenv.sleep(1)
        return False

    def _give_up_watchdog_protection(self) -> None:
        """Disable the CRM's self-fencing: safe, since the CRM runs no service itself, as long as
        it does not touch the manager state any more (leaves the ``master`` state)."""
        if self.ha_manager_wd:
            self.haenv.watchdog_close(self.ha_manager_wd)
            self.ha_manager_wd = None  # only delete after close!

    def _get_manager_status_guarded(self) -> dict[str, Any] | None:
        try:
            return self.haenv.read_manager_status()
        except PerlDie as err:
            self.haenv.log("err", f"could not read manager status: {err}")
            return None

    def is_cluster_and_ha_healthy(self, manager_status: dict[str, Any] | None) -> bool:
        haenv = self.haenv
        if not haenv.quorate():
            return False
        # we may not do any active work with an inconsistent cluster state
        if not self.cluster_state_update:
            return False
        if manager_status is None:
            return False
        # there might be services to fence even if service config is completely empty
        return not self._count_fenced_services(manager_status)

    def _count_fenced_services(self, manager_status: dict[str, Any]) -> int:
        """Services on this node to fence; memoized on the manager status's serial (steady
        state, :data:`~pvegym.sim.ha.tools.QUIET_SERIAL_KEY`)."""
        serial = manager_status.get(QUIET_SERIAL_KEY)
        if serial is not None and self._fenced_memo[0] == serial:
            return self._fenced_memo[1]
        ss = manager_status.get("service_status") or {}
        count = count_fenced_services(ss, self.haenv.nodename())
        self._fenced_memo = (serial, count)
        return count

    def can_get_active(self, allow_no_service: bool = False) -> bool:
        """Quorate, no pending fence job, and something to do (services configured, …)."""
        haenv = self.haenv
        manager_status = self._get_manager_status_guarded()
        if not self.is_cluster_and_ha_healthy(manager_status):
            return False
        assert manager_status is not None
        if not allow_no_service:
            try:
                conf, _ = haenv.read_service_config()
            except PerlDie as err:
                haenv.log("err", f"could not read service config: {err}")
                return False
            if not conf:
                active_master_node = manager_status.get("master_node")
                node_status = manager_status.get("node_status") or {}
                if (
                    not active_master_node
                    or node_status.get(active_master_node) != "online"
                    or active_master_node == haenv.nodename()
                ):
                    node_request = manager_status.get("node_request") or {}
                    for node in node_status:
                        if node_status[node] != "maintenance":
                            continue
                        if not (node_request.get(node) or {}).get("maintenance"):
                            return True
                    if haenv.any_pending_crm_command():
                        return True  # process pending CRM commands
                    if manager_status.get("service_status"):
                        return True  # need to get active to clean up stale service status entries
                    if manager_status.get("disarm"):
                        return True  # stay active while HA stack is disarmed
                # no services, no node in maintenance mode, and no crm cmds -> can stay idle
                return False
        return True

    def allowed_to_get_idle(self) -> bool:
        """Quorate and no configured service (debounced by the caller over many rounds)."""
        haenv = self.haenv
        manager_status = self._get_manager_status_guarded()
        if not self.is_cluster_and_ha_healthy(manager_status):
            return False
        assert manager_status is not None
        # don't go idle while HA stack is disarmed - need to stay active to process arm-ha
        if manager_status.get("disarm"):
            return False
        try:
            conf, _ = haenv.read_service_config()
        except PerlDie as err:
            haenv.log("err", f"could not read service config: {err}")
            return False
        if not conf:
            # don't go idle while there are stale service status entries to clean up
            return not manager_status.get("service_status")
        return False

    def do_one_iteration(self) -> bool:
        """One iteration; ``False`` when the daemon exits."""
        haenv = self.haenv
        haenv.loop_start_hook()
        self.cluster_state_update = haenv.cluster_state_update()
        res = self.work()
        haenv.loop_end_hook()
        return res

    def work(self) -> bool:
        """One round of the CRM: its state changes first, then that state's work (CRM.pm ``work``).

        Returns False when the CRM shuts down.
        """
        self._change_state()
        return self._do_work(self.status["state"])

    def _change_state(self) -> None:
        """The first half of CRM.pm ``work``: "do state changes first"."""
        haenv = self.haenv
        state = self.status["state"]
        if state == "wait_for_quorum":
            if self.can_get_active():
                if self.get_protected_ha_manager_lock():
                    self.set_local_status({"state": "master"})
                else:
                    self.set_local_status({"state": "slave"})
        elif state == "slave":
            if self.can_get_active():
                if self.get_protected_ha_manager_lock():
                    self.set_local_status({"state": "master"})
            else:
                self.set_local_status({"state": "wait_for_quorum"})
        elif state == "lost_manager_lock":
            if self.can_get_active(True) and self.get_protected_ha_manager_lock():
                self.set_local_status({"state": "master"})
        elif state == "master":
            if not self.get_protected_ha_manager_lock():
                self.set_local_status({"state": "lost_manager_lock"})
            elif self.allowed_to_get_idle():
                self.active_idle_rounds += 1
                if self.active_idle_rounds > MAX_ACTIVE_IDLE_ROUNDS:
                    self.active_idle_rounds = 0
                    haenv.log(
                        "info",
                        f"cluster had no service configured for {MAX_ACTIVE_IDLE_ROUNDS} rounds,"
                        " going idle.\n",
                    )
                    haenv.release_ha_manager_lock()
                    # safety: transition into wait_for_quorum and do not touch manager state
                    self._give_up_watchdog_protection()
                    self.set_local_status({"state": "wait_for_quorum"})
            elif self.active_idle_rounds:
                self.active_idle_rounds = 0

    def _do_work(self, state: str) -> bool:
        """The second half of CRM.pm ``work``: "do work" in the state just reached."""
        haenv = self.haenv
        if state == "wait_for_quorum":
            if self.shutdown_request:
                return False
            haenv.sleep(5)
        elif state == "master":
            return self._work_as_master()
        elif state == "lost_manager_lock":
            # safety: not touching manager state in this or next FSM state
            self._give_up_watchdog_protection()
            if self.shutdown_request:
                return False
            self.set_local_status({"state": "wait_for_quorum"})
        elif state == "slave":
            if self.shutdown_request:
                return False
            # wait until we get master
        else:
            raise PerlDie(f"got unexpected status '{state}'")
        return True

    def _work_as_master(self) -> bool:
        """The master's round: manage the cluster, or release the lock on a shutdown request."""
        haenv = self.haenv
        manager = self.manager
        if manager is None:
            raise PerlDie("no manager")
        starttime = haenv.get_time()
        shutdown = False
        try:
            if self.shutdown_request:
                # safety: service gets shutdown and thus won't change manager state again.
                self._give_up_watchdog_protection()
                # release the manager lock, so another CRM slave can get it and continue to
                # work without waiting for the lock timeout
                haenv.log("info", "voluntary release CRM lock")
                if not haenv.release_ha_manager_lock():
                    haenv.log("notice", "CRM lock release failed, let the lock timeout")
                shutdown = True
            elif not self.cluster_state_update:
                # update failed but we could still renew our lock (cfs restart?), safely
                # skip manage and expect to update just fine next round
                haenv.log(
                    "notice", "temporary inconsistent cluster state (cfs restart?), skip round"
                )
            else:
                manager.manage()
                if manager.is_fully_disarmed():
                    if not self.disarmed:
                        haenv.log("info", "HA stack fully disarmed, releasing CRM watchdog")
                        self._give_up_watchdog_protection()
                        self.disarmed = True
                elif self.disarmed:
                    haenv.log("info", "re-arming HA stack")
                    self.disarmed = False
                    # watchdog will be re-opened by get_protected_ha_manager_lock next round
        except (PerlDie, SchedulerError) as err:
            haenv.log("err", f"got unexpected error - {err}")
        if shutdown:
            return False
        haenv.sleep_until(starttime + ROUND_TIME)
        return True
