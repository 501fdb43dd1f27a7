"""The HA stack's world: ``PVE::HA::Env`` (pve-ha-manager 5.2.0, ``src/PVE/HA/Env.pm``) as an interface.

The CRM, the Manager and the LRM of :mod:`pvegym.sim.ha` never touch a cluster directly: every
read and write goes through one :class:`HAEnv` per node and daemon (``node1/crm``, ``node1/lrm``).
Upstream has two implementations, the real cluster (``Env/PVE2.pm``) and the simulator
(``Sim/Env.pm``); pvegym has the regression-test hardware (:mod:`pvegym.harness`) and the cluster
model of :mod:`pvegym.sim.simulation`.

The methods are upstream's, grouped:

* **time and log** — ``get_time`` (s), ``sleep``/``sleep_until``, ``loop_start_hook``/
  ``loop_end_hook`` around each daemon iteration, ``log(level, msg)``, ``send_notification``.
* **cluster file system** (``/etc/pve``) — manager status, LRM status per node, CRM command queue,
  service (resource) config, rules and groups config, datacenter settings. Reads return a snapshot
  the caller may modify; a failing file system raises :class:`~pvegym.sim.ha.tools.PerlDie`
  (upstream: ``die "cfs connection refused - not mounted?"``).
* **membership and locks** — ``get_node_info`` (online per node, quorate), ``quorate``,
  ``cluster_state_update``, the manager lock and one agent lock per node (``get_*`` acquires or
  renews; the cluster-wide lock timeout is the environment's).
* **watchdog** — ``watchdog_open``/``update``/``close``; an expired watchdog resets the node.
* **scheduler inputs** — service and node usage stats for the CRS (``get_*_stats``), node versions.
* **resources** — the agent plugin of a service type, ``steal_service`` (recovery after fencing).
* **workers** — ``get_max_workers``; with workers, ``fork_worker``/``waitpid`` run LRM jobs
  asynchronously (:mod:`pvegym.sim.ha.resources`).
* **balancer** — ``new_balancer``: the policy the Manager's ``load_balance`` step asks (upstream's
  is built in; pvegym's are policies, :class:`pvegym.sim.view.Balancer`).

Data passed through the file system is JSON-like (``dict``/``list``/``str``/numbers), as upstream
keeps it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import Any

from pvegym.sim.ha.resources import Job, ResourcePlugin
from pvegym.sim.view import Balancer, ClusterView

#: :meth:`HAEnv.parse_sid`'s results (valid sids only), at most :data:`_PARSED_SIDS_MAX`
_PARSED_SIDS: dict[str, tuple[str, str, str]] = {}
_PARSED_SIDS_MAX = 100_000


class HAEnv(ABC):
    """One node's environment for one daemon (CRM or LRM)."""

    # ------------------------------------------------------------------ identity, time, log
    @abstractmethod
    def nodename(self) -> str: ...

    @abstractmethod
    def get_time(self) -> float:
        """Current time, seconds."""

    @abstractmethod
    def sleep(self, delay: float) -> None: ...

    @abstractmethod
    def sleep_until(self, end_time: float) -> None: ...

    def loop_start_hook(self) -> None:  # noqa: B027 - optional hook
        """Called at the start of every daemon iteration (``do_one_iteration``)."""

    def loop_end_hook(self) -> None:  # noqa: B027 - optional hook
        """Called at the end of every daemon iteration."""

    #: log lines written through :meth:`log` so far (the steady-state check counts them)
    log_count = 0

    def log(self, level: str, msg: str) -> None:
        """Log ``msg`` (:meth:`write_log`) and count it."""
        self.log_count += 1
        self.write_log(level, msg)

    @abstractmethod
    def write_log(self, level: str, msg: str) -> None:
        """``level``: debug, info, notice, warn/warning, err, email …; a trailing newline is
        dropped (Perl ``chomp``)."""

    def quiescence_token(self) -> Hashable | None:
        """A value that changes whenever an input of this daemon's round may have changed, other
        than the time and the *values* of the usage statistics; ``None`` (the default): unknown,
        every round runs in full.

        For the CRM: node membership and quorum, the cluster file system's state, every LRM's mode
        and results, the service, rules, groups and datacenter configs, the CRM command queue, and
        anything that decides whether the usage statistics are complete and valid. For an LRM: node
        membership and quorum, the cluster file system's state, the service config and the running
        state of this node's services (the manager status it reads carries the Manager's own
        serial). With it the Manager and the LRM skip the work of a round whose inputs and state
        are those of a round that changed nothing (see :mod:`pvegym.sim.ha.manager`).
        """
        return None

    def send_notification(
        self, template_name: str, properties: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        """A notification (fencing). Default: none."""
        return None

    # ------------------------------------------------------------------ cluster file system
    @abstractmethod
    def read_manager_status(self) -> dict[str, Any]: ...

    @abstractmethod
    def write_manager_status(self, status: dict[str, Any]) -> None: ...

    @abstractmethod
    def read_lrm_status(self, node: str | None = None) -> dict[str, Any]:
        """The LRM status of ``node`` (default: this node); ``{}`` if it never wrote one."""

    @abstractmethod
    def write_lrm_status(self, status: dict[str, Any]) -> None: ...

    @abstractmethod
    def is_node_shutdown(self) -> tuple[bool, bool]:
        """``(shutdown, reboot)``: is this node shutting down, and is it a reboot."""

    @abstractmethod
    def queue_crm_commands(self, cmd: str) -> None: ...

    @abstractmethod
    def any_pending_crm_command(self) -> bool: ...

    @abstractmethod
    def read_crm_commands(self) -> str:
        """Take all queued CRM commands (one per line) and clear the queue."""

    @abstractmethod
    def read_service_config(self) -> tuple[dict[str, dict[str, Any]], str | None]:
        """``(config, digest)``: sid → ``{node, state, type, failback, max_restart,
        max_relocate, …}`` with upstream's defaults applied; the digest may be ``None``."""

    @abstractmethod
    def update_service_config(self, changes: dict[str, dict[str, Any]]) -> None:
        """``{sid: {"param": {...}, "delete": "k1,k2"}}``."""

    @abstractmethod
    def write_service_config(self, conf: dict[str, dict[str, Any]]) -> None: ...

    @abstractmethod
    def read_rules_config(self) -> Any:
        """The parsed rules (:mod:`pvegym.sim.ha.rules`), with their ``digest``."""

    @abstractmethod
    def write_rules_config(self, rules: Any) -> None: ...

    @abstractmethod
    def read_group_config(self) -> Any:
        """The parsed HA groups (legacy), with their ``digest``."""

    @abstractmethod
    def delete_group_config(self) -> None: ...

    @abstractmethod
    def get_datacenter_settings(self) -> dict[str, Any]:
        """``{"ha": {...}, "crs": {...}}`` (``datacenter.cfg``)."""

    # ------------------------------------------------------------------ membership, locks
    @abstractmethod
    def get_node_info(self) -> tuple[dict[str, dict[str, Any]], bool]:
        """``({node: {"online": bool}}, quorate)``; without quorum no node is online."""

    @abstractmethod
    def quorate(self) -> bool:
        """This node is online and in the quorate partition."""

    @abstractmethod
    def cluster_state_update(self) -> bool:
        """The cluster state (cfs) could be refreshed for this iteration."""

    @abstractmethod
    def get_ha_manager_lock(self) -> bool: ...

    @abstractmethod
    def release_ha_manager_lock(self) -> bool: ...

    @abstractmethod
    def get_ha_agent_lock(self, node: str | None = None) -> bool: ...

    @abstractmethod
    def release_ha_agent_lock(self) -> bool: ...

    # ------------------------------------------------------------------ watchdog
    @abstractmethod
    def watchdog_open(self) -> str: ...

    @abstractmethod
    def watchdog_update(self, wfh: str) -> None: ...

    @abstractmethod
    def watchdog_close(self, wfh: str) -> None: ...

    # ------------------------------------------------------------------ scheduler inputs
    @abstractmethod
    def get_basic_service_stats(self) -> dict[str, dict[str, Any]]: ...

    @abstractmethod
    def get_static_service_stats(self) -> dict[str, dict[str, Any]]: ...

    @abstractmethod
    def get_dynamic_service_stats(self) -> dict[str, dict[str, Any]]: ...

    @abstractmethod
    def get_static_node_stats(self) -> dict[str, dict[str, Any]]: ...

    @abstractmethod
    def get_dynamic_node_stats(self) -> dict[str, dict[str, Any]]: ...

    @abstractmethod
    def get_node_version(self, node: str) -> str | None: ...

    # ------------------------------------------------------------------ resources
    def parse_sid(self, sid: str) -> tuple[str, str, str]:
        """``(sid, type, name)`` of ``type:name`` (``Sim/Env.pm parse_sid``).

        A pure function of ``sid``, so the parsed ids are kept (:data:`_PARSED_SIDS`): the LRM
        parses the sid of every job it runs, and a full round runs one per started service."""
        parsed = _PARSED_SIDS.get(sid)
        if parsed is not None:
            return parsed
        typ, sep, name = sid.rpartition(":")  # Perl's greedy ^(\S+):(\S+)$: the last colon
        if not sep or not typ or not name or any(c.isspace() for c in sid):
            from pvegym.sim.ha.perl import PerlDie

            raise PerlDie(f"unable to parse service id '{sid}'")
        if len(_PARSED_SIDS) < _PARSED_SIDS_MAX:
            _PARSED_SIDS[sid] = (sid, typ, name)
        return sid, typ, name

    @abstractmethod
    def resource_plugin(self, service_type: str) -> ResourcePlugin | None:
        """``PVE::HA::Resources->lookup($type)``."""

    @abstractmethod
    def steal_service(self, sid: str, current_node: str, new_node: str) -> None:
        """Move the service's config to ``new_node`` (only the master, after fencing)."""

    # ------------------------------------------------------------------ workers
    def get_max_workers(self) -> int:
        """LRM workers running at once; 0 runs every job in place (upstream's tests)."""
        return 4

    def fork_worker(self, job: Job[int]) -> Any:
        """Start ``job`` asynchronously; a handle for :meth:`waitpid`, ``None`` if it failed."""
        raise NotImplementedError("this environment runs no LRM workers")

    def waitpid(self, handle: Any) -> int | None:
        """The wait status of a finished worker (``exit_code << 8``, or -1), ``None`` if it still
        runs."""
        raise NotImplementedError("this environment runs no LRM workers")

    # ------------------------------------------------------------------ balancer
    def new_balancer(self) -> Balancer | None:
        """A fresh balancer for a new active Manager (its memory does not survive a CRM
        failover); ``None``: no automatic rebalancing."""
        return None

    def balancer_view(self, manager: Any) -> ClusterView | None:
        """The view the Manager's balancer decides on this round, or ``None`` (the default): the
        Manager builds it from its usage, service status and rules
        (:mod:`pvegym.sim.ha.balancer_view`). An environment with its own telemetry (pvegym's
        cluster model) builds it directly; ``manager`` is the
        :class:`~pvegym.sim.ha.manager.Manager` (``ss``, ``compiled_rules``,
        ``any_resource_motion_queued_or_running()``, ``crs_scheduler``)."""
        return None
