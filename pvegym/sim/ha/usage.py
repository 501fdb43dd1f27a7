"""Node usage for placing services: ``PVE::HA::Usage`` and its ``Basic``, ``Static`` and
``Dynamic`` modes (pve-ha-manager 5.2.0, ``Usage.pm``, ``Usage/{Basic,Static,Dynamic}.pm``).

The Manager rebuilds one usage object per round (``recompute_online_node_usage``) over the online
nodes and updates it on every service state change; it scores the nodes a service may start or be
recovered on (lower is better) and, in ``static``/``dynamic`` mode, feeds the balancer.

* ``basic``: the number of services counted on each node.
* ``static``: every placed service at its configured size (``maxcpu``, ``maxmem``).
* ``dynamic``: the nodes' measured usage; starting services at their configured size.

Errors of the scheduler are logged as upstream logs them and the call falls back as upstream does.
Which nodes a service puts load on is ``get_used_service_nodes`` (``Usage.pm``; ported with the
resource-affinity rules that call it, :mod:`pvegym.sim.ha.rules_resource_affinity`).
"""

from __future__ import annotations

from typing import Any

from pvegym.sim import crs
from pvegym.sim.ha.env import HAEnv
from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.rules_resource_affinity import get_used_service_nodes
from pvegym.sim.ha.scheduler import (
    CompactMigrationCandidate,
    DynamicScheduler,
    SchedulerError,
    StaticScheduler,
)


class Usage:
    """``PVE::HA::Usage``: the interface; subclasses implement the modes."""

    def __init__(self, haenv: HAEnv) -> None:
        self.haenv = haenv
        #: nodes scored for a placement this round (the Manager's steady-state check reads it)
        self.score_calls = 0
        #: ``{node: 1}`` of :meth:`list_nodes`, built on first use after a node was added or
        #: removed (:meth:`online_nodes`)
        self._online_nodes: dict[str, int] | None = None

    def online_nodes(self) -> dict[str, int]:
        """``{node: 1 for node in list_nodes()}``, shared: callers must not modify it.

        Not upstream: ``Usage.pm`` builds this hash for every service it adds
        (``add_service_usage``) and ``select_service_node`` for every placement; the Manager adds
        every service every full round, so it is kept here until :meth:`add_node` or
        :meth:`remove_node` changes the node list (the subclasses call :meth:`_nodes_changed`).
        """
        nodes = self._online_nodes
        if nodes is None:
            nodes = self._online_nodes = dict.fromkeys(self.list_nodes(), 1)
        return nodes

    def _nodes_changed(self) -> None:
        self._online_nodes = None

    def add_node(self, nodename: str) -> None:
        raise NotImplementedError

    def remove_node(self, nodename: str) -> None:
        raise NotImplementedError

    def list_nodes(self) -> list[str]:
        raise NotImplementedError

    def contains_node(self, nodename: str) -> bool:
        raise NotImplementedError

    def add_service(
        self, sid: str, current_node: str | None, target_node: str | None, running: bool
    ) -> None:
        raise NotImplementedError

    def add_service_usage(self, sid: str, sd: dict[str, Any]) -> None:
        """Add ``sid``'s usage to the online nodes its service data ``sd`` puts load on."""
        current, target = get_used_service_nodes(self.online_nodes(), sd)
        # a service does only have the 'running' flag in 'started' state
        state = sd.get("state")
        running = bool(
            (state == "started" and sd.get("running"))
            or (state != "started" and current is not None)
        )
        self.add_service(sid, current, target, running)

    def remove_service_usage(self, sid: str) -> None:
        raise NotImplementedError

    def calculate_node_imbalance(self) -> float:
        raise NotImplementedError

    def score_best_balancing_migrations(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration] | None:
        raise NotImplementedError

    def select_best_balancing_migration(
        self, candidates: list[CompactMigrationCandidate]
    ) -> crs.ScoredMigration | None:
        migrations = self.score_best_balancing_migrations(candidates, 1)
        return migrations[0] if migrations else None

    def score_best_balancing_migrations_topsis(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration] | None:
        raise NotImplementedError

    def select_best_balancing_migration_topsis(
        self, candidates: list[CompactMigrationCandidate]
    ) -> crs.ScoredMigration | None:
        migrations = self.score_best_balancing_migrations_topsis(candidates, 1)
        return migrations[0] if migrations else None

    def score_nodes_to_start_service(
        self, sid: str, current_node: str | None = None
    ) -> dict[str, float]:
        """node → score, lower is better."""
        raise NotImplementedError


class BasicUsage(Usage):
    """``Usage/Basic.pm``: a node's score is the number of services counted on it."""

    def __init__(self, haenv: HAEnv) -> None:
        super().__init__(haenv)
        self.nodes: dict[str, dict[str, int]] = {}

    def add_node(self, nodename: str) -> None:
        self.nodes[nodename] = {}
        self._nodes_changed()

    def remove_node(self, nodename: str) -> None:
        self.nodes.pop(nodename, None)
        self._nodes_changed()

    def list_nodes(self) -> list[str]:
        return list(self.nodes)

    def contains_node(self, nodename: str) -> bool:
        return nodename in self.nodes

    def _add_service_usage_to_node(self, nodename: str, sid: str) -> None:
        if self.contains_node(nodename):
            self.nodes[nodename][sid] = 1
        else:
            self.haenv.log(
                "warning",
                f"unable to add service '{sid}' usage to node '{nodename}' - node not in usage hash",
            )

    def add_service(
        self, sid: str, current_node: str | None, target_node: str | None, running: bool
    ) -> None:
        if current_node is not None:
            self._add_service_usage_to_node(current_node, sid)
        if target_node is not None:
            self._add_service_usage_to_node(target_node, sid)

    def remove_service_usage(self, sid: str) -> None:
        for services in self.nodes.values():
            services.pop(sid, None)

    def calculate_node_imbalance(self) -> float:
        return 0.0

    def score_best_balancing_migrations(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration] | None:
        return []

    def score_best_balancing_migrations_topsis(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration] | None:
        return []

    def score_nodes_to_start_service(
        self, sid: str, current_node: str | None = None
    ) -> dict[str, float]:
        return {node: float(len(services)) for node, services in self.nodes.items()}


class _SchedulerUsage(Usage):
    """What ``Static.pm`` and ``Dynamic.pm`` share: a scheduler object and the service stats."""

    mode = ""
    scheduler: StaticScheduler | DynamicScheduler

    def __init__(
        self,
        haenv: HAEnv,
        service_stats: dict[str, dict[str, Any]],
        node_stats: dict[str, dict[str, Any]],
    ) -> None:
        super().__init__(haenv)
        self.node_stats = node_stats
        self.service_stats = service_stats

    def remove_node(self, nodename: str) -> None:
        self.scheduler.remove_node(nodename)
        self._nodes_changed()

    def list_nodes(self) -> list[str]:
        return self.scheduler.list_nodes()

    def contains_node(self, nodename: str) -> bool:
        return self.scheduler.contains_node(nodename)

    def get_service_usage(self, sid: str) -> dict[str, Any]:
        usage = (self.service_stats.get(sid) or {}).get("usage")
        if usage is None:
            raise PerlDie(f"did not get {self.mode} service usage information for '{sid}'")
        return usage

    def _check_node_stats(self, nodename: str) -> dict[str, Any]:
        stats = self.node_stats.get(nodename)
        if not stats:
            raise PerlDie(f"did not get {self.mode} node usage information for '{nodename}'")
        if stats.get("maxcpu") is None:
            raise PerlDie(f"{self.mode} node usage information for '{nodename}' missing cpu count")
        if stats.get("maxmem") is None:
            raise PerlDie(f"{self.mode} node usage information for '{nodename}' missing memory")
        return stats

    def add_service(
        self, sid: str, current_node: str | None, target_node: str | None, running: bool
    ) -> None:
        # do not add services which do not put any usage on the nodes
        if current_node is None and target_node is None:
            return
        # the scheduler expects a current node: a lone target counts as current
        if current_node is None:
            current_node, target_node = target_node, None
        try:
            service = {
                "stats": self.get_service_usage(sid),
                "running": running,
                "current-node": current_node,
                "target-node": target_node,
            }
            self._scheduler_add(sid, service)
        except (PerlDie, SchedulerError) as err:
            self.haenv.log("warning", f"unable to add service '{sid}' - {err}")

    def _scheduler_add(self, sid: str, service: dict[str, Any]) -> None:
        raise NotImplementedError

    def calculate_node_imbalance(self) -> float:
        return self.scheduler.calculate_node_imbalance()

    def score_best_balancing_migrations(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration] | None:
        try:
            return self.scheduler.score_best_balancing_migration_candidates(candidates, limit)
        except SchedulerError as err:
            self.haenv.log("warning", f"unable to score best balancing migration - {err}")
            return None

    def score_best_balancing_migrations_topsis(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration] | None:
        try:
            return self.scheduler.score_best_balancing_migration_candidates_topsis(
                candidates, limit
            )
        except SchedulerError as err:
            self.haenv.log("warning", f"unable to score best balancing migration - {err}")
            return None


class StaticUsage(_SchedulerUsage):
    """``Usage/Static.pm``: configured sizes (``maxcpu``, ``maxmem``) of every placed service."""

    mode = "static"
    scheduler: StaticScheduler

    def __init__(self, haenv: HAEnv, service_stats: dict[str, dict[str, Any]]) -> None:
        try:
            node_stats = haenv.get_static_node_stats()
        except PerlDie as err:
            raise PerlDie(f"did not get static node usage information - {err}") from None
        super().__init__(haenv, service_stats, node_stats)
        self.scheduler = StaticScheduler()
        # services on each node: the fallback if scoring fails (never filled upstream either)
        self.node_services: dict[str, dict[str, int]] = {}

    def add_node(self, nodename: str) -> None:
        self.node_services[nodename] = {}
        stats = self._check_node_stats(nodename)
        try:
            self.scheduler.add_node(nodename, int(stats["maxcpu"]), int(stats["maxmem"]))
        except SchedulerError as err:
            raise PerlDie(
                f"initializing static node usage for '{nodename}' failed - {err}"
            ) from None
        finally:
            self._nodes_changed()

    def remove_node(self, nodename: str) -> None:
        self.node_services.pop(nodename, None)
        super().remove_node(nodename)  # (and _nodes_changed)

    def _scheduler_add(self, sid: str, service: dict[str, Any]) -> None:
        self.scheduler.add_service(sid, service)

    def remove_service_usage(self, sid: str) -> None:
        for services in self.node_services.values():
            services.pop(sid, None)
        self.scheduler.remove_resource(sid)

    def score_nodes_to_start_service(
        self, sid: str, current_node: str | None = None
    ) -> dict[str, float]:
        try:
            scores = self.scheduler.score_nodes_to_start_service(self.get_service_usage(sid))
        except (PerlDie, SchedulerError) as err:
            self.haenv.log(
                "err",
                f"unable to score nodes according to static usage for service '{sid}' - {err}",
            )
            return {n: float(len(s)) for n, s in self.node_services.items()}
        # minus the value: a lower score is better for the callers
        return {node: -score for node, score in scores}


class DynamicUsage(_SchedulerUsage):
    """``Usage/Dynamic.pm``: the nodes' measured usage; starting services at configured size."""

    mode = "dynamic"
    scheduler: DynamicScheduler

    def __init__(self, haenv: HAEnv, service_stats: dict[str, dict[str, Any]]) -> None:
        try:
            node_stats = haenv.get_dynamic_node_stats()
        except PerlDie as err:
            raise PerlDie(f"did not get dynamic node usage information - {err}") from None
        super().__init__(haenv, service_stats, node_stats)
        self.scheduler = DynamicScheduler()

    def add_node(self, nodename: str) -> None:
        stats = self._check_node_stats(nodename)
        try:
            self.scheduler.add_node(nodename, stats)
        except SchedulerError as err:
            raise PerlDie(
                f"initializing dynamic node usage for '{nodename}' failed - {err}"
            ) from None
        finally:
            self._nodes_changed()

    def _scheduler_add(self, sid: str, service: dict[str, Any]) -> None:
        self.scheduler.add_resource(sid, service)

    def remove_service_usage(self, sid: str) -> None:
        self.scheduler.remove_resource(sid)

    def score_nodes_to_start_service(
        self, sid: str, current_node: str | None = None
    ) -> dict[str, float]:
        try:
            scores = self.scheduler.score_nodes_to_start_resource(self.get_service_usage(sid))
        except (PerlDie, SchedulerError) as err:
            self.haenv.log(
                "err",
                f"unable to score nodes according to dynamic usage for service '{sid}' - {err}",
            )
            # upstream then dereferences the undefined score list and dies
            raise PerlDie(f"Can't use an undefined value as an ARRAY reference ({err})") from None
        return {node: -score for node, score in scores}
