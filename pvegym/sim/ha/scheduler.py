"""The CRS scheduler objects the HA Manager scores with: ``PVE::RS::ResourceScheduling::{Static,Dynamic}``.

A port of the Perl bindings (proxmox-perl-rs 0.13.0, ``pve-rs/src/bindings/resource_scheduling/``:
``pve_static.rs``, ``pve_dynamic.rs``, ``resource.rs``, ``usage.rs``) over the crate's cluster
usage (proxmox-resource-scheduling 2.0, ``src/usage.rs``, ``src/resource.rs``). The scoring
arithmetic itself is :mod:`pvegym.sim.crs` (``scheduler.rs``, ``topsis.rs``).

* The cluster usage holds nodes (base stats) and resources (stats, ``Started``/``Starting``, and a
  placement: stationary on one node, or moving between two).
* An *aggregator* turns it into the node stats a scheduler sees: ``identity`` (the node base stats as
  they are: dynamic mode's imbalance and balancing), ``started`` (base + every resource at its
  configured size: static mode) and ``starting-as-started`` (base + every not yet running resource at
  its configured size: dynamic mode's start placement).
* ha-manager 5.2.0 links crate 2.0: the imbalance is the raw coefficient of variation
  (``normalized=False``), which its regression logs print.

Errors are the crate's messages (``anyhow::bail!``), raised as :class:`SchedulerError`.
Iteration follows insertion order where the crate iterates a ``HashMap``/``HashSet``; that order
only changes the last bits of a float sum, below the 15-digit truncation of scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from pvegym.sim import crs

IDENTITY = "identity"
STARTED = "started"
STARTING_AS_STARTED = "starting-as-started"

#: ha-manager 5.2.0's crate (2.0) reports the raw coefficient of variation
NORMALIZED_IMBALANCE = False


class SchedulerError(Exception):
    """An error the crate or its Perl binding returns (``anyhow::Error``)."""


class Resource(NamedTuple):
    """``resource.rs`` ``Resource``: stats, ``running`` (Started) or not (Starting), placement.

    Immutable like the crate's; a named tuple rather than a frozen dataclass because the
    Manager builds one per service every full round, and a frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field) costs several times a tuple's."""

    stats: crs.ResourceStats
    running: bool
    current_node: str
    target_node: str | None = None  # set while moving


def _usize(value: Any, what: str) -> int:
    """serde's ``usize`` from a Perl number: a non-negative integer (a float with a fraction or a
    negative value does not deserialize)."""
    if type(value) is int and value >= 0:  # the common case first (same result)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchedulerError(f"invalid type for {what}: {value!r}, expected usize")
    if value < 0 or value != int(value):
        raise SchedulerError(f"invalid value for {what}: {value!r}, expected usize")
    return int(value)


def _f64(value: Any, what: str) -> float:
    if type(value) is float:  # the common case first (same result)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SchedulerError(f"invalid type for {what}: {value!r}, expected f64")
    return float(value)


class ClusterUsage:
    """``usage.rs`` ``Usage``: nodes with their base stats and assigned resources."""

    def __init__(self) -> None:
        self._nodes: dict[str, crs.NodeStats] = {}
        self._node_resources: dict[str, dict[str, None]] = {}  # ordered set of sids
        self._resources: dict[str, Resource] = {}

    def add_node(self, nodename: str, stats: crs.NodeStats) -> None:
        if nodename in self._nodes:
            raise SchedulerError(f"node '{nodename}' already exists")
        self._nodes[nodename] = stats
        self._node_resources[nodename] = {}

    def remove_node(self, nodename: str) -> None:
        if nodename not in self._nodes:
            return
        del self._nodes[nodename]
        for sid in self._node_resources.pop(nodename):
            r = self._resources.get(sid)
            if r is None:
                continue
            if r.target_node is None:
                if r.current_node == nodename:
                    del self._resources[sid]
            elif r.current_node == nodename:
                self._resources[sid] = Resource(r.stats, r.running, r.target_node)
            elif r.target_node == nodename:
                self._resources[sid] = Resource(r.stats, r.running, r.current_node)

    def list_nodes(self) -> list[str]:
        return list(self._nodes)

    def contains_node(self, nodename: str) -> bool:
        return nodename in self._nodes

    def add_resource(self, sid: str, resource: Resource) -> None:
        if sid in self._resources:
            raise SchedulerError(f"resource '{sid}' already exists")
        current, target = resource.current_node, resource.target_node
        if target is None:
            if current not in self._nodes:
                raise SchedulerError(f"current node for resource '{sid}' does not exist")
            self._node_resources[current][sid] = None
        else:
            if current == target:
                raise SchedulerError(f"resource '{sid}' has the same current and target node")
            if current not in self._nodes or target not in self._nodes:
                raise SchedulerError(f"nodes for resource '{sid}' do not exist")
            self._node_resources[current][sid] = None
            self._node_resources[target][sid] = None
        self._resources[sid] = resource

    def remove_resource(self, sid: str) -> None:
        r = self._resources.pop(sid, None)
        if r is None:
            return
        for node in (r.current_node, r.target_node):
            if node is not None and node in self._node_resources:
                self._node_resources[node].pop(sid, None)

    def get_resource(self, sid: str) -> Resource | None:
        return self._resources.get(sid)

    def aggregate(self, aggregator: str) -> dict[str, crs.NodeStats]:
        """Node stats as ``aggregator`` sees them (``pve-rs .../usage.rs``)."""
        out: dict[str, crs.NodeStats] = {}
        for name, base in self._nodes.items():
            stats = crs.NodeStats(base.cpu, base.maxcpu, base.mem, base.maxmem)
            if aggregator != IDENTITY:
                for sid in self._node_resources[name]:
                    r = self._resources.get(sid)
                    if r is None:
                        continue
                    if aggregator == STARTED or not r.running:
                        stats.add_started_resource(r.stats)
            out[name] = stats
        return out


@dataclass(frozen=True, slots=True)
class CompactMigrationCandidate:
    """``resource.rs`` ``CompactMigrationCandidate``: a bundle's leader, members and targets."""

    leader: str
    resources: tuple[str, ...]
    nodes: tuple[str, ...]


def decompose_compact_migration_candidates(
    usage: ClusterUsage, compact: list[CompactMigrationCandidate]
) -> list[crs.MigrationCandidate]:
    """One candidate per target with the bundle's summed stats; fails as a whole if a member is
    missing, moving or on another node than the leader (``resource.rs``)."""
    out: list[crs.MigrationCandidate] = []
    for cand in compact:
        leader = usage.get_resource(cand.leader)
        if leader is None:
            raise SchedulerError(f"leader '{cand.leader}' is not present in the cluster usage")
        if leader.target_node is not None:
            raise SchedulerError(f"leader '{cand.leader}' is non-stationary")
        if cand.leader not in cand.resources:
            raise SchedulerError(f"leader '{cand.leader}' is not present in the resources list")
        cpu = maxcpu = 0.0
        mem = maxmem = 0.0
        for sid in cand.resources:
            r = usage.get_resource(sid)
            if r is None:
                raise SchedulerError(f"resource '{sid}' is not present in the cluster usage")
            if r.target_node is not None:
                raise SchedulerError(f"resource '{sid}' is non-stationary")
            if r.current_node != leader.current_node:
                raise SchedulerError(f"resource '{sid}' is on other node than leader")
            cpu += r.stats.cpu
            maxcpu += r.stats.maxcpu
            mem += r.stats.mem
            maxmem += r.stats.maxmem
        stats = crs.ResourceStats(cpu, maxcpu, mem, maxmem)
        for target in cand.nodes:
            out.append(
                crs.MigrationCandidate(
                    crs.Migration(cand.leader, leader.current_node, target), stats
                )
            )
    return out


class _Scheduler:
    """What both bindings share; ``_balance_aggregator``/``_start_aggregator`` differ."""

    _balance_aggregator = IDENTITY
    _start_aggregator = IDENTITY

    def __init__(self) -> None:
        self.usage = ClusterUsage()

    def remove_node(self, nodename: str) -> None:
        self.usage.remove_node(nodename)

    def list_nodes(self) -> list[str]:
        return self.usage.list_nodes()

    def contains_node(self, nodename: str) -> bool:
        return self.usage.contains_node(nodename)

    def _resource_stats(self, stats: Any) -> crs.ResourceStats:
        raise NotImplementedError

    def _add(self, sid: str, resource: dict[str, Any]) -> None:
        if not isinstance(resource, dict):
            raise SchedulerError("invalid type: expected a resource hash")
        stats = self._resource_stats(resource.get("stats"))
        current = resource.get("current-node")
        if not isinstance(current, str):
            raise SchedulerError("missing field `current-node`")
        target = resource.get("target-node")
        self.usage.add_resource(
            sid, Resource(stats, bool(resource.get("running")), current, target)
        )

    def remove_resource(self, sid: str) -> None:
        self.usage.remove_resource(sid)

    def node_stats(self, aggregator: str | None = None) -> dict[str, crs.NodeStats]:
        return self.usage.aggregate(aggregator or self._balance_aggregator)

    def calculate_node_imbalance(self) -> float:
        nodes = list(self.node_stats().values())
        return crs.node_imbalance(nodes, NORMALIZED_IMBALANCE)

    def score_best_balancing_migration_candidates(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration]:
        cands = decompose_compact_migration_candidates(self.usage, candidates)
        return crs.score_best_balancing_migrations(
            self.node_stats(), cands, limit, NORMALIZED_IMBALANCE
        )

    def score_best_balancing_migration_candidates_topsis(
        self, candidates: list[CompactMigrationCandidate], limit: int
    ) -> list[crs.ScoredMigration]:
        cands = decompose_compact_migration_candidates(self.usage, candidates)
        try:
            return crs.score_best_balancing_migrations_topsis(
                self.node_stats(), cands, limit, NORMALIZED_IMBALANCE
            )
        except crs.TopsisError as err:
            raise SchedulerError(str(err)) from None

    def _score_nodes_to_start(self, stats: Any) -> list[tuple[str, float]]:
        resource = self._resource_stats(stats)
        try:
            return crs.score_nodes_to_start_resource(
                self.node_stats(self._start_aggregator), resource
            )
        except crs.TopsisError as err:
            raise SchedulerError(str(err)) from None


class StaticScheduler(_Scheduler):
    """``PVE::RS::ResourceScheduling::Static``: node base stats are 0; every resource counts at its
    configured size (``StartedResourceAggregator``) for balancing and start placement."""

    _balance_aggregator = STARTED
    _start_aggregator = STARTED

    def add_node(self, nodename: str, maxcpu: int, maxmem: int) -> None:
        self.usage.add_node(nodename, crs.NodeStats(0.0, float(maxcpu), 0.0, float(maxmem)))

    def _resource_stats(self, stats: Any) -> crs.ResourceStats:
        """``StaticResourceStats`` → ``{cpu: maxcpu, maxcpu, mem: maxmem, maxmem}``."""
        if not isinstance(stats, dict):
            raise SchedulerError("invalid type: expected static resource stats")
        for key in ("maxcpu", "maxmem"):
            if key not in stats:
                raise SchedulerError(f"missing field `{key}`")
        maxcpu = _f64(stats["maxcpu"], "maxcpu")
        maxmem = float(_usize(stats["maxmem"], "maxmem"))
        return crs.ResourceStats(maxcpu, maxcpu, maxmem, maxmem)

    def add_service(self, sid: str, service: dict[str, Any]) -> None:
        self._add(sid, service)

    def remove_service_usage(self, sid: str) -> None:
        self.usage.remove_resource(sid)

    def score_nodes_to_start_service(self, stats: Any) -> list[tuple[str, float]]:
        return self._score_nodes_to_start(stats)


class DynamicScheduler(_Scheduler):
    """``PVE::RS::ResourceScheduling::Dynamic``: node base stats are the nodes' measured usage
    (``IdentityAggregator`` for balancing); start placement adds the not yet running resources at
    their configured size (``StartingAsStartedResourceAggregator``)."""

    _balance_aggregator = IDENTITY
    _start_aggregator = STARTING_AS_STARTED

    def add_node(self, nodename: str, stats: dict[str, Any]) -> None:
        for key in ("cpu", "maxcpu", "mem", "maxmem"):
            if key not in stats:
                raise SchedulerError(f"missing field `{key}`")
        self.usage.add_node(
            nodename,
            crs.NodeStats(
                _f64(stats["cpu"], "cpu"),
                float(_usize(stats["maxcpu"], "maxcpu")),
                float(_usize(stats["mem"], "mem")),
                float(_usize(stats["maxmem"], "maxmem")),
            ),
        )

    def _resource_stats(self, stats: Any) -> crs.ResourceStats:
        if not isinstance(stats, dict):
            raise SchedulerError("invalid type: expected dynamic resource stats")
        for key in ("cpu", "maxcpu", "mem", "maxmem"):
            if key not in stats:
                raise SchedulerError(f"missing field `{key}`")
        return crs.ResourceStats(
            _f64(stats["cpu"], "cpu"),
            _f64(stats["maxcpu"], "maxcpu"),
            float(_usize(stats["mem"], "mem")),
            float(_usize(stats["maxmem"], "maxmem")),
        )

    def add_resource(self, sid: str, resource: dict[str, Any]) -> None:
        self._add(sid, resource)

    def score_nodes_to_start_resource(self, stats: Any) -> list[tuple[str, float]]:
        return self._score_nodes_to_start(stats)
