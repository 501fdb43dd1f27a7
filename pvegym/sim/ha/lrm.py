"""The Local Resource Manager daemon: ``PVE::HA::LRM`` (pve-ha-manager 5.2.0, ``src/PVE/HA/LRM.pm``).

Every node runs one. It holds the node's agent lock (``ha_agent_<node>_lock``) while it has
services to run, armed with the node's watchdog: a node that loses quorum stops renewing both, its
watchdog resets it, and the master may then take the lock — the fencing acknowledgement. States:

* ``wait_for_agent_lock`` — idle (no active service, or HA disarmed);
* ``active`` — holding the lock: runs the commands the manager status asks for;
* ``maintenance`` — holding the lock until every service has moved away;
* ``lost_agent_lock`` — lost the lock (quorum): the watchdog will fire unless it comes back.

Modes (reported to the CRM): ``active``, ``maintenance`` (requested, or shutdown policy
``migrate``), ``restart`` (freeze services: reboot under ``conditional``/``freeze``, LRM restart),
``shutdown`` (stop services: ``failover``, or shutdown under ``conditional``) and ``disarm``.

Service commands (start, stop, migrate, relocate) run as *workers*: up to ``max_workers`` at once,
each an asynchronous job of the environment (:meth:`~pvegym.sim.ha.env.HAEnv.fork_worker`), or in
place when ``max_workers`` is 0 (upstream's regression tests). A failed start is retried
``max_restart`` times on the node before the CRM is told (it then relocates, ``max_relocate``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.perl import PerlDie, numify, to_str, truthy
from pvegym.sim.ha.resources import Job, ResourcePlugin, await_result, run_in_place
from pvegym.sim.ha.tools import (
    ERROR,
    ETRY_AGAIN,
    EUNKNOWN_COMMAND,
    EUNKNOWN_SERVICE,
    EUNKNOWN_SERVICE_TYPE,
    EWRONG_NODE,
    IGNORED,
    QUIET_SERIAL_KEY,
    SUCCESS,
    count_active_services,
    count_fenced_services,
    frozen,
)

VALID_STATES = {
    "wait_for_agent_lock": "waiting for agent lock",
    "active": "got agent_lock",
    "maintenance": "going into maintenance",
    "lost_agent_lock": "lost agent_lock",
}

#: ~10 s per active round: 10 min without a service before going idle (``$max_active_idle_rounds``)
MAX_ACTIVE_IDLE_ROUNDS = 60

#: seconds an active LRM round works (``sleep_until($startime + $max_time)``)
ROUND_TIME = 10

#: seconds ``run_workers`` keeps polling its workers within one round
WORKER_POLL_TIME = 8


@dataclass(slots=True)
class LRMProcess:
    """State upstream keeps per LRM *process* (a file-level variable of ``LRM.pm``).

    Upstream's regression harness runs every node's LRM in one Perl process, so they share it; a
    real node (and pvegym's cluster model) has one per node.
    """

    wrote_lrm_status_at_startup: bool = False


class LRM:
    """One node's LRM daemon."""

    def __init__(self, haenv: HAEnv, process: LRMProcess | None = None) -> None:
        self.haenv = haenv
        self.process = process if process is not None else LRMProcess()
        self.status: dict[str, Any] = {"state": "startup"}
        self.workers: dict[str, dict[str, Any]] = {}
        self.results: dict[str, dict[str, Any]] = {}
        self.restart_tries: dict[str, int] = {}
        self.shutdown_request: float = 0  # time of the request (Perl: 0 = none)
        self.shutdown_errors = 0
        # mode can be: active, reboot, shutdown, restart, maintenance, disarm
        self.mode = "active"
        self.cluster_state_update = False
        self.active_idle_rounds = 0
        self.service_status: dict[str, dict[str, Any]] = {}
        self.node_status = "unknown"
        self.ha_agent_wd: str | None = None
        # steady state: the Manager's serial of the manager status read last, the values derived
        # from it, and the (token, serial) of the last manage_resources that changed nothing
        self._ms_serial: Any = None
        self._memo: dict[str, tuple[Any, Any]] = {}
        self._quiet_manage_key: Any = None
        self.set_local_status({"state": "wait_for_agent_lock"})

    # ------------------------------------------------------------------ requests

    def request_shutdown(self) -> None:
        """``shutdown_request``: the node shuts down or reboots, or the LRM restarts."""
        if self.shutdown_request:
            return  # already in shutdown mode
        haenv = self.haenv
        nodename = haenv.nodename()
        shutdown, reboot = haenv.is_node_shutdown()
        dc_cfg = haenv.get_datacenter_settings()
        shutdown_policy = (dc_cfg.get("ha") or {}).get("shutdown_policy")
        if shutdown_policy is None:
            shutdown_policy = "conditional"
        if shutdown:  # don't log this on service restart, only on node shutdown
            haenv.log("info", f"got shutdown request with shutdown policy '{shutdown_policy}'")

        freeze_all, maintenance = self._shutdown_policy_effect(shutdown_policy, reboot)

        if maintenance:
            # the manager marks us unavailable and migrates all services away; the same "can we
            # exit" clause as a normal shutdown applies: no running service on this node
            pass
        elif shutdown:
            # *always* queue stop jobs for all services if the node shuts down, independent if
            # it's a reboot or a poweroff, else we may corrupt services or hinder node shutdown
            for sid, sd in self.service_status.items():
                if not sd.get("node") or sd["node"] != nodename:
                    continue
                # Note: use undef uid to mark shutdown/stop jobs
                self.queue_resource_command(sid, None, "request_stop")

        self._enter_shutdown_mode(shutdown, reboot, shutdown_policy, freeze_all, maintenance)

        self.shutdown_request = haenv.get_time()
        try:
            if not self.update_lrm_status():
                raise PerlDie("not quorate?")
        except PerlDie as err:
            haenv.log("err", f"unable to update lrm status file - {err}")

    def _shutdown_policy_effect(self, shutdown_policy: str, reboot: bool) -> tuple[bool, bool]:
        """``(freeze_all, maintenance)`` of a datacenter ``shutdown_policy`` (LRM.pm ``shutdown_request``)."""
        haenv = self.haenv
        freeze_all = False
        maintenance = False
        if shutdown_policy == "conditional":
            freeze_all = reboot
        elif shutdown_policy == "freeze":
            freeze_all = True
        elif shutdown_policy == "failover":
            freeze_all = False
        elif shutdown_policy == "migrate":
            maintenance = True
        else:
            haenv.log(
                "err", f"unknown shutdown policy '{shutdown_policy}', fall back to conditional"
            )
            freeze_all = reboot
        return freeze_all, maintenance

    def _enter_shutdown_mode(
        self,
        shutdown: bool,
        reboot: bool,
        shutdown_policy: str,
        freeze_all: bool,
        maintenance: bool,
    ) -> None:
        """Log the shutdown and set :attr:`mode`: maintenance, restart (freeze) or shutdown."""
        haenv = self.haenv
        if shutdown:
            shutdown_type = "reboot" if reboot else "shutdown"
            if self.is_maintenance_requested():
                if maintenance:
                    haenv.log(
                        "info",
                        f"{shutdown_type} LRM, ignore maintenance policy, already in maintenance mode",
                    )
                else:
                    haenv.log(
                        "info",
                        f"{shutdown_type} LRM, ignore {shutdown_policy} policy as manual"
                        " maintenance mode is enabled",
                    )
            elif maintenance:
                haenv.log(
                    "info",
                    f"{shutdown_type} LRM, doing maintenance, removing this node from active list",
                )
                self.mode = "maintenance"
            elif freeze_all:
                haenv.log("info", f"{shutdown_type} LRM, stop and freeze all services")
                self.mode = "restart"
            else:
                haenv.log("info", "shutdown LRM, stop all services")
                self.mode = "shutdown"
        elif self.is_maintenance_requested():
            # sic: upstream's level string spans a line break (LRM.pm L133-134)
            haenv.log(
                "\n\t    info",
                "Restarting LRM in maintenance mode may be delayed until all services are moved",
            )
        else:
            haenv.log("info", "restart LRM, freeze all services")
            self.mode = "restart"

    # ------------------------------------------------------------------ status

    def get_local_status(self) -> dict[str, Any]:
        return self.status

    def set_local_status(self, new: dict[str, Any]) -> None:
        if new["state"] not in VALID_STATES:
            raise PerlDie(f"invalid state '{new['state']}'")
        old = self.status
        # important: only update if really changed
        if old["state"] == new["state"]:
            return
        self.haenv.log("info", f"status change {old['state']} => {new['state']}")
        new["state_change_time"] = self.haenv.get_time()
        self.status = new

    def update_lrm_status(self) -> bool:
        haenv = self.haenv
        if not haenv.quorate():
            return False
        lrm_status = {
            "state": self.status["state"],
            "mode": self.mode,
            "results": self.results,
            "timestamp": haenv.get_time(),
        }
        try:
            haenv.write_lrm_status(lrm_status)
        except PerlDie as err:
            haenv.log("err", f"unable to write lrm status file - {err}")
            return False
        return True

    def update_service_status(self) -> bool:
        haenv = self.haenv
        try:
            ms = haenv.read_manager_status()
        except PerlDie as err:
            haenv.log("err", f"updating service status from manager failed: {err}")
            return False
        self.service_status = ms.get("service_status") or {}
        self._ms_serial = ms.get(QUIET_SERIAL_KEY)
        nodename = haenv.nodename()
        self.node_status = (ms.get("node_status") or {}).get(nodename) or "unknown"
        # FIXME (upstream): method name is a bit confusing for doing this
        if not self.shutdown_request:
            request = (ms.get("node_request") or {}).get(nodename) or {}
            if request.get("maintenance"):
                self.mode = "maintenance"
            elif ms.get("disarm"):
                self.mode = "disarm"
            elif self.mode in ("maintenance", "disarm"):
                self.mode = "active"
        return True

    def get_protected_ha_agent_lock(self) -> bool:
        haenv = self.haenv
        count = 0
        starttime = haenv.get_time()
        while True:
            if haenv.get_ha_agent_lock():
                if self.ha_agent_wd:
                    haenv.watchdog_update(self.ha_agent_wd)
                else:
                    self.ha_agent_wd = haenv.watchdog_open()
                return True
            count += 1
            if count > 5:  # try max 5 times
                break
            if haenv.get_time() - starttime > 5:  # for max 5 seconds
                break
            haenv.sleep(1)
        return False

    def _memoized(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, reused while the manager status carries the same serial (steady
        state): the functions memoized are pure functions of the manager status."""
        serial = self._ms_serial
        if serial is None:
            return compute()
        hit = self._memo.get(name)
        if hit is not None and hit[0] == serial:
            return hit[1]
        value = compute()
        self._memo[name] = (serial, value)
        return value

    def has_configured_service_on_local_node(self) -> bool:
        """Any service with this node as its node, whatever its requested state."""
        nodename = self.haenv.nodename()

        def compute() -> bool:
            return any(
                sd.get("node") and sd["node"] == nodename for sd in self.service_status.values()
            )

        return bool(self._memoized("configured", compute))

    def is_fence_requested(self) -> bool:
        nodename = self.haenv.nodename()

        def compute() -> bool:
            fenced = count_fenced_services(self.service_status, nodename)
            return bool(fenced) or self.node_status == "fence"

        return bool(self._memoized("fence", compute))

    def is_maintenance_requested(self) -> bool:
        """Shutdown maintenance or a manual request."""
        return self.mode == "maintenance"

    def active_service_count(self) -> int:
        nodename = self.haenv.nodename()
        return int(
            self._memoized("active", lambda: count_active_services(self.service_status, nodename))
        )

    # ------------------------------------------------------------------ the loop

    def do_one_iteration(self) -> bool:
        """One iteration; ``False`` when the daemon exits."""
        haenv = self.haenv
        haenv.loop_start_hook()
        self.cluster_state_update = haenv.cluster_state_update()
        res = self.work()
        haenv.loop_end_hook()
        return res

    def _give_up_watchdog_protection(self) -> None:
        """Disable self-fencing: only with no active service (graceful shutdown, all frozen)."""
        if self.ha_agent_wd:
            self.haenv.watchdog_close(self.ha_agent_wd)
            self.ha_agent_wd = None  # only delete after close!

    def work(self) -> bool:
        """One round of the LRM: its state changes first, then that state's work (LRM.pm ``work``).

        Returns False when the LRM exits.
        """
        haenv = self.haenv

        if not self.process.wrote_lrm_status_at_startup:
            if self.update_lrm_status():
                self.process.wrote_lrm_status_at_startup = True
            else:
                haenv.sleep(5)
                return not self.shutdown_request

        state = self.status["state"]
        self.update_service_status()
        fence_request = self.is_fence_requested()

        self._change_state(state, fence_request)
        return self._do_work(self.status["state"])

    def _change_state(self, state: str, fence_request: bool) -> None:
        """The first half of LRM.pm ``work``: "do state changes first"."""
        haenv = self.haenv
        if state == "wait_for_agent_lock":
            service_count = self.active_service_count()
            if self.mode == "disarm":
                pass  # stay idle while disarmed, don't acquire lock
            elif (
                not fence_request
                and service_count
                and haenv.quorate()
                and self.get_protected_ha_agent_lock()
            ):
                self.set_local_status({"state": "active"})
        elif state == "lost_agent_lock":
            if not fence_request and haenv.quorate() and self.get_protected_ha_agent_lock():
                self.set_local_status({"state": "active"})
        elif state == "active":
            self._change_state_active(fence_request)
        elif state == "maintenance":
            self._change_state_maintenance(fence_request)

    def _change_state_active(self, fence_request: bool) -> None:
        """State changes of an active LRM: fenced, lost lock, maintenance, disarmed or idle."""
        haenv = self.haenv
        if fence_request:
            haenv.log("err", "node needs to be fenced - releasing agent_lock\n")
            self.set_local_status({"state": "lost_agent_lock"})
        elif not self.get_protected_ha_agent_lock():
            self.set_local_status({"state": "lost_agent_lock"})
        elif self.is_maintenance_requested():
            self.set_local_status({"state": "maintenance"})
        elif self.mode == "disarm" and not self.run_workers():
            haenv.log("info", "HA disarm requested, releasing agent lock and watchdog")
            # safety: disarm requested, no fence request and no running workers: idle is safe
            haenv.release_ha_agent_lock()
            self._give_up_watchdog_protection()
            self.set_local_status({"state": "wait_for_agent_lock"})
        elif not self.has_configured_service_on_local_node() and not self.run_workers():
            # no active service configured for this node and all (old) workers are done
            self.active_idle_rounds += 1
            if self.active_idle_rounds > MAX_ACTIVE_IDLE_ROUNDS:
                haenv.log(
                    "info",
                    f"node had no service configured for {MAX_ACTIVE_IDLE_ROUNDS} rounds,"
                    " going idle.\n",
                )
                # safety: no active service & no running worker for quite some time -> OK
                haenv.release_ha_agent_lock()
                self._give_up_watchdog_protection()
                self.set_local_status({"state": "wait_for_agent_lock"})
                self.active_idle_rounds = 0
        elif self.active_idle_rounds:
            self.active_idle_rounds = 0

    def _change_state_maintenance(self, fence_request: bool) -> None:
        """State changes in maintenance: fenced, disarmed, still draining, or active again."""
        haenv = self.haenv
        if fence_request:
            haenv.log(
                "err",
                "node needs to be fenced during maintenance mode - releasing agent_lock\n",
            )
            self.set_local_status({"state": "lost_agent_lock"})
        elif self.mode == "disarm" and not self.active_service_count() and not self.run_workers():
            # disarm takes priority - release lock and watchdog, go idle
            haenv.log(
                "info",
                "HA disarm requested during maintenance, releasing agent lock and watchdog",
            )
            # safety: no active services and no running workers, so safe to go idle.
            haenv.release_ha_agent_lock()
            self._give_up_watchdog_protection()
            self.set_local_status({"state": "wait_for_agent_lock"})
        elif self.active_service_count() or self.run_workers():
            # keep the lock and watchdog as long as not all services cleared the node
            if not self.get_protected_ha_agent_lock():
                self.set_local_status({"state": "lost_agent_lock"})
        elif not self.is_maintenance_requested():
            # empty && no maintenance mode && not exited -> need to switch active again
            if self.get_protected_ha_agent_lock():
                self.set_local_status({"state": "active"})
            else:
                self.set_local_status({"state": "lost_agent_lock"})

    def _do_work(self, state: str) -> bool:
        """The second half of LRM.pm ``work``: "do work" in the state just reached."""
        haenv = self.haenv
        if state == "wait_for_agent_lock":
            if self.shutdown_request:
                return False
            self.update_lrm_status()
            haenv.sleep(5)
        elif state == "active":
            starttime = haenv.get_time()
            shutdown = False
            try:
                shutdown = self._active_round()
            except PerlDie as err:
                haenv.log("err", f"got unexpected error - {err}")
            self.update_lrm_status()
            if shutdown:
                return False
            haenv.sleep_until(starttime + ROUND_TIME)
        elif state == "lost_agent_lock":
            return self._work_lost_agent_lock()
        elif state == "maintenance":
            return self._work_maintenance()
        else:
            raise PerlDie(f"got unexpected status '{state}'")
        return True

    def _work_lost_agent_lock(self) -> bool:
        """The lost-lock round: exit on a shutdown request when that is safe, else wait."""
        haenv = self.haenv
        # NOTE: watchdog is active and will trigger soon! so we hope to get the lock back soon!
        if self.shutdown_request:
            service_count = self.active_service_count()
            if service_count > 0:
                haenv.log(
                    "err",
                    "got shutdown request in state 'lost_agent_lock' - "
                    f"detected {service_count} running services",
                )
                if self.mode == "restart":
                    state_mt = self.status.get("state_change_time", 0)
                    # watchdog should have already triggered; in restart mode with infinite
                    # stop timeout -> exit now, we do not touch services: relatively safe
                    if haenv.get_time() - state_mt > 90:
                        haenv.log(
                            "err",
                            "lost agent lock and restart request for over 90 seconds - giving up!",
                        )
                        return False
            else:
                # safety: all services are stopped, so we can close the watchdog
                self._give_up_watchdog_protection()
                return False
        haenv.sleep(5)
        return True

    def _work_maintenance(self) -> bool:
        """The maintenance round: keep managing until every active service moved away."""
        haenv = self.haenv
        starttime = haenv.get_time()
        if not self.update_service_status():
            return False  # sic: upstream's bare ``return`` ends the LRM
        # wait until all active services moved away
        service_count = self.active_service_count()
        exit_lrm = False
        if service_count == 0 and self.run_workers() == 0:
            # safety: going into maintenance and all active services got moved -> OK
            self._give_up_watchdog_protection()
            if self.shutdown_request:
                exit_lrm = True
            # maintenance mode with no or only frozen services anymore, release the lock
            haenv.release_ha_agent_lock()
        if not exit_lrm:
            self.manage_resources()
        self.update_lrm_status()
        if exit_lrm:
            return False
        haenv.sleep_until(starttime + 5)
        return True

    def _active_round(self) -> bool:
        """The work of an active round (upstream's ``eval`` block); ``True`` to shut down."""
        haenv = self.haenv
        # if we could not get the current service status there's no point in doing anything
        if not self.update_service_status():
            return False
        if self.shutdown_request:
            if self.mode == "restart":
                # catch exited workers to update service state
                workers = self.run_workers()
                service_count = self.active_service_count()
                if service_count == 0 and workers == 0:
                    # safety: no active services or workers -> OK
                    self._give_up_watchdog_protection()
                    # restart with no or frozen services, release the lock
                    haenv.release_ha_agent_lock()
                    return True
            elif self.run_workers() == 0:
                if self.shutdown_errors == 0:
                    # safety: no active services and LRM shutdown -> OK
                    self._give_up_watchdog_protection()
                    # shutdown with all services stopped thus release the lock
                    haenv.release_ha_agent_lock()
                return True
            return False
        if not self.cluster_state_update:
            # update failed but we could still renew our lock (cfs restart?), safely skip
            # manage and expect to update just fine next round
            haenv.log("notice", "temporary inconsistent cluster state (cfs restart?), skip round")
            return False
        self.manage_resources()
        return False

    # ------------------------------------------------------------------ workers

    def run_workers(self) -> int:
        """Start queued jobs (up to ``max_workers`` at once) and collect finished ones, for at most
        :data:`WORKER_POLL_TIME` s; the number of jobs still queued or running."""
        haenv = self.haenv
        starttime = haenv.get_time()
        # number of workers to start, if 0 we exec the command directly without forking
        max_workers = haenv.get_max_workers()
        sc, _ = haenv.read_service_config()
        workers = self.workers

        while haenv.get_time() - starttime <= WORKER_POLL_TIME:
            count = self.check_active_workers()
            # every queued job is scheduled eventually: the most often seen first
            queued = sorted(
                (sid for sid in workers if not workers[sid].get("pid")),
                key=lambda s: (-workers[s]["start_tries"], s),
            )
            for sid in queued:
                w = workers.get(sid)
                if w is None:
                    continue
                w["start_tries"] += 1
                if max_workers > 0 and count >= max_workers:
                    continue
                job = self._worker_job(sid, sc.get(sid), w["state"], w.get("params"))
                if max_workers > 0:
                    handle = haenv.fork_worker(job)
                    if handle is None:
                        haenv.log("err", "forking worker failed")
                        count = 0
                        break  # abort, try later
                    count += 1
                    w["pid"] = handle
                else:
                    res = run_in_place(job)
                    status = -1 if res == -1 else (res << 8 if res > 0 else res)
                    if w.get("uid") is not None:
                        self.resource_command_finished(sid, w["uid"], status)
                    else:
                        self.stop_command_finished(sid, status)
            if not count:
                break
            haenv.sleep(1)
        return len(self.workers)

    def _worker_job(
        self,
        sid: str,
        service_config: dict[str, Any] | None,
        cmd: str,
        params: dict[str, Any] | None,
    ) -> Job[int]:
        """A worker: the resource agent's exit code; a die is logged and exits -1 (upstream's
        forked worker exits ``POSIX::_exit(-1)``, the in-place call returns -1)."""
        try:
            return (yield from self.exec_resource_agent(sid, service_config, cmd, params))
        except PerlDie as err:
            self.haenv.log("err", str(err))
            return -1

    def manage_resources(self) -> int:
        """Queue the command the manager status asks for every service on this node, run them.

        Steady state: with the same :meth:`~HAEnv.quiescence_token` and manager status serial as
        a call that queued, logged and changed nothing (its ``stopped`` jobs reported what they
        had reported before), and no job pending, a call would do that again: it is skipped.
        """
        haenv = self.haenv
        token = haenv.quiescence_token()
        key = None if token is None or self._ms_serial is None else (token, self._ms_serial)
        if key is not None and key == self._quiet_manage_key and not self.workers:
            return 0
        self._quiet_manage_key = None
        logs0 = haenv.log_count
        before = (frozen(self.results), dict(self.restart_tries)) if key is not None else None
        idle_before = not self.workers
        res = self._manage_resources()
        if (
            before is not None
            and idle_before
            and not self.workers
            and haenv.log_count == logs0
            and before == (frozen(self.results), self.restart_tries)
        ):
            self._quiet_manage_key = key
        return res

    def _manage_resources(self) -> int:
        nodename = self.haenv.nodename()
        ss = self.service_status
        for sid in list(self.restart_tries):
            if sid not in ss:
                del self.restart_tries[sid]
        for sid, sd in ss.items():
            if not sd.get("node") or not sd.get("uid"):
                continue
            if sd["node"] != nodename:
                continue
            request_state = sd.get("state")
            if request_state is None:
                continue
            # recovery: let the master first recover it; freeze: nothing to do; request_start:
            # intermediate step for an optional better node selection on stop -> start
            if request_state in ("recovery", "freeze", "request_start"):
                continue
            self.queue_resource_command(
                sid,
                sd["uid"],
                request_state,
                {"target": sd.get("target"), "timeout": sd.get("timeout")},
            )
        return self.run_workers()

    def queue_resource_command(
        self, sid: str, uid: str | None, state: str, params: dict[str, Any] | None = None
    ) -> None:
        # do not queue the exact same command twice: the first may fail and the CRM not yet
        # process it while a second try starts (race). 'stopped' is the exception: its result is
        # not processed by the CRM and it must always run (even with no active CRM)
        if state != "stopped" and uid and uid in self.results:
            return
        w = self.workers.get(sid)
        if w is not None:
            if w.get("pid"):
                return  # already started
            # else, delete and overwrite queue entry with new command
            del self.workers[sid]
        self.workers[sid] = {"sid": sid, "uid": uid, "state": state, "start_tries": 0}
        if params:
            self.workers[sid]["params"] = params

    def check_active_workers(self) -> int:
        """Collect finished workers; the number still running."""
        count = 0
        for sid in list(self.workers):
            w = self.workers.get(sid)
            if w is None:
                continue
            pid = w.get("pid")
            if not pid:
                continue
            status = self.haenv.waitpid(pid)
            if status is not None:
                if w.get("uid") is not None:
                    self.resource_command_finished(sid, w["uid"], status)
                else:
                    self.stop_command_finished(sid, status)
            else:
                count += 1  # still active
        return count

    def _exit_code(self, sid: str, status: int) -> int:
        haenv = self.haenv
        if status == -1:
            haenv.log("err", f"resource agent {sid} finished - failed to execute")
            return -1
        sig = status & 127
        if sig:
            haenv.log("err", f"resource agent {sid} finished - got signal {sig}")
            return -1
        return status >> 8

    def stop_command_finished(self, sid: str, status: int) -> None:
        w = self.workers.pop(sid, None)
        if w is None:
            return  # should not happen
        if self._exit_code(sid, status) != 0:
            self.shutdown_errors += 1

    def resource_command_finished(self, sid: str, uid: str, status: int) -> None:
        w = self.workers.pop(sid, None)
        if w is None:
            return  # should not happen
        exit_code = self._exit_code(sid, status)
        exit_code = self.handle_service_exitcode(sid, w["state"], exit_code)
        if exit_code == ETRY_AGAIN:
            return  # tell nobody, simply retry
        self.results[uid] = {"sid": w["sid"], "state": w["state"], "exit_code": exit_code}
        # keep only the results of uids the manager still knows (a pure function of the manager
        # status: memoized on its serial, one set per status rather than one per finished job)
        valid_uids = self._memoized(
            "valid_uids",
            lambda: {sd["uid"] for sd in self.service_status.values() if sd.get("uid")},
        )
        self.results = {k: v for k, v in self.results.items() if k in valid_uids}

    def handle_service_exitcode(self, sid: str, cmd: str, exit_code: int) -> int:
        """Whether the LRM retries a failed start (restart policy) or tells the CRM."""
        haenv = self.haenv
        tries = self.restart_tries
        sc, _ = haenv.read_service_config()
        max_restart: Any = 0
        cd = sc.get(sid)
        if cd:
            max_restart = cd.get("max_restart")
        if cmd == "started":
            if exit_code == SUCCESS:
                tries[sid] = 0
                return exit_code
            if exit_code == ERROR:
                tries.setdefault(sid, 0)
                if tries[sid] >= numify(max_restart):
                    haenv.log(
                        "err",
                        f"unable to start service {sid} on local node after {tries[sid]} retries",
                    )
                    tries[sid] = 0
                    return ERROR
                tries[sid] += 1
                haenv.log(
                    "warning", f"restart policy: retry number {tries[sid]} for service '{sid}'"
                )
                # tell CRM that we retry the start
                return ETRY_AGAIN
        return exit_code

    def exec_resource_agent(
        self,
        sid: str,
        service_config: dict[str, Any] | None,
        cmd: str,
        params: dict[str, Any] | None,
    ) -> Job[int]:
        """Run one command through the service type's plugin; its exit code."""
        haenv = self.haenv
        nodename = haenv.nodename()
        _, service_type, service_name = haenv.parse_sid(sid)
        plugin = haenv.resource_plugin(service_type)
        if plugin is None:
            haenv.log("err", f"service type '{service_type}' not implemented")
            return EUNKNOWN_SERVICE_TYPE
        if not service_config:
            haenv.log("err", f"missing resource configuration for '{sid}'")
            return EUNKNOWN_SERVICE
        # process error state early
        if cmd == "error":
            haenv.log(
                "err",
                f"service {sid} is in an error state and needs manual intervention."
                " Look up 'ERROR RECOVERY' in the documentation.",
            )
            return SUCCESS  # error always succeeds
        if service_config.get("node") != nodename:
            haenv.log("err", f"service '{sid}' not on this node")
            return EWRONG_NODE

        ident = service_name
        params = params or {}
        running = plugin.check_running(haenv, ident)

        if cmd == "started":
            if running:
                return SUCCESS
            haenv.log("info", f"starting service {sid}")
            yield from await_result(plugin.start(haenv, ident))
            if plugin.check_running(haenv, ident):
                haenv.log("info", f"service status {sid} started")
                return SUCCESS
            haenv.log("warning", f"unable to start service {sid}")
            return ERROR

        if cmd in ("request_stop", "stopped"):
            if not running:
                return SUCCESS
            timeout = params.get("timeout")
            if timeout is not None:
                haenv.log("info", f"stopping service {sid} (timeout={to_str(timeout)})")
            else:
                haenv.log("info", f"stopping service {sid}")
            yield from await_result(plugin.shutdown(haenv, ident, timeout))
            if not plugin.check_running(haenv, ident):
                haenv.log("info", f"service status {sid} stopped")
                return SUCCESS
            haenv.log("info", f"unable to stop service {sid} (still running)")
            return ERROR

        if cmd in ("migrate", "relocate", "request_start_balance"):
            return (
                yield from self._move_service(
                    plugin, sid, ident, cmd, service_config, params, running
                )
            )

        haenv.log("err", f"implement me (cmd '{cmd}')")
        return EUNKNOWN_COMMAND

    def _move_service(
        self,
        plugin: ResourcePlugin,
        sid: str,
        ident: str,
        cmd: str,
        service_config: dict[str, Any],
        params: dict[str, Any],
        running: bool,
    ) -> Job[int]:
        """:meth:`exec_resource_agent`'s moves; ``running``: the guest runs on this node."""
        haenv = self.haenv
        target = params.get("target")
        if target is None:
            raise PerlDie(f"{cmd} '{sid}' failed - missing target")
        if service_config.get("node") == target:
            return SUCCESS  # already there
        if cmd == "request_start_balance" and running:
            haenv.log("info", f"ignoring rebalance-on-start for service {sid} - already running")
            return IGNORED
        online = cmd == "migrate"
        res = yield from await_result(plugin.migrate(haenv, ident, target, online))
        # something went wrong if service is still on this node
        if not truthy(res):
            haenv.log("err", f"service {sid} not moved (migration error)")
            return ERROR
        return SUCCESS
