"""``upstream``: Proxmox VE's automatic CRS load balancer (pve-ha-manager 5.2.0), exactly.

Every rule cites its upstream source (pve-ha-manager 5.2.0, ``src/PVE/HA/``; ``docs/model.md``):

* ``Manager::load_balance`` (``Manager.pm`` L217–272): return early while any motion is queued or
  running (counter untouched, L225); ``imbalance <= threshold`` resets the hold counter; otherwise
  the counter counts consecutive rounds and, on reaching ``hold_duration``, is reset and one attempt
  is made — even when it produces no move.
* candidates (``get_active_stationary_resource_bundles`` L138–178,
  ``get_resource_migration_candidates`` L182–215): positive resource-affinity bundles led by their
  alphabetically first started member, targets = the leader's highest-priority online node-affinity
  nodes, minus nodes of strict-negative partners, minus its own node. A guest whose HA resource
  has ``auto-rebalance`` off, or that is in a positive group with one, is never a candidate
  (``view.guest_auto_rebalance``; upstream after 5.2.0, ``test_resource_bundles.pl``).
* the usage model (``Usage.pm``): ``dynamic`` = node stats as sampled (pvestatd) and guests' ``{cpu, mem}``;
  ``static`` = ``StartedResourceAggregator`` (configured sizes of every placed resource).
* scoring via :mod:`pvegym.sim.crs` (bruteforce or TOPSIS) and the relative margin check.
* the log line ``auto rebalance - migrate vm:X to nodeY (expected change for imbalance from
  A to B)`` (``relocate`` for containers).

**Mode.** ``Config.mode`` is ``None`` by default: the policy follows ``view.mode`` (the CRS mode the
HA manager re-reads from ``datacenter.cfg`` every round, ``Manager.pm`` L99–125). Set it to
``"dynamic"``/``"static"`` to force one. Any other view mode (``basic``) makes the balancer idle (L224).

**Extending.** The field report's patched balancers subclass this class and override small hooks:
:meth:`observe` (every round, even when blocked: read ``view.results`` for outcome tracking),
:meth:`node_stats` (what node load is), :meth:`guest_stats` (what a move transfers, e.g. memhost),
:meth:`imbalance`, :meth:`should_consider` (a gate before an attempt), :meth:`candidates` /
:meth:`filter_candidates` (e.g. backoff), :meth:`select` (scoring) and :meth:`accept` (margin,
dead band). The hot path is vectorised over guests and candidates; the only Python loops run over
rules (affinity groups, node-affinity rules), not over all guests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.policies import kernels
from pvegym.sim import crs
from pvegym.sim.affinity import node_affinity_mask, positive_groups, rebalance_movable
from pvegym.sim.view import (
    MIGRATE,
    RELOCATE,
    STARTED,
    ClusterView,
    Motion,
    NodeAffinityRule,
    Rules,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
#: the dtypes as objects, for the ``np.asarray`` calls of every round (``node_stats``,
#: ``imbalance``): NumPy takes a dtype object passed positionally in ~80 ns, a keyword scalar
#: type in ~130 ns — the same conversion
F64, I64, BOOL = np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_)

#: States whose service counts on its current node (``Usage.pm`` ``get_used_service_nodes``,
#: L43–55). ``migrate``/``relocate`` also count on the target, ``request_start_balance`` only
#: on its target (swapped into "current", ``Static.pm`` L85–88 / ``Dynamic.pm`` L80–83).
CURRENT_STATES = frozenset(
    {STARTED, "request_stop", "fence", "freeze", "error", "recovery", MIGRATE, RELOCATE}
)
_TARGET_STATES = frozenset({MIGRATE, RELOCATE, "request_start_balance"})


def quantity(default: float, unit: str) -> Any:
    """A policy constant with a unit (``"duration"``: seconds, ``"rate"``: bytes/s): a plain
    number is in that unit, a string carries its own (``make_policy`` parses it)."""
    return field(default=default, metadata={"unit": unit})


def check_non_negative(where: str, value: Any) -> None:
    """A policy constant must be a finite number >= 0 (not a bool): else a :class:`ConfigError`
    at ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(where, f"must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(where, f"must be a finite number >= 0, got {value!r}")


def in_states(states: Sequence[str], allowed: frozenset[str]) -> BoolArray:
    """Which ``states`` are in ``allowed``: a set lookup per guest (``np.isin`` on strings sorts
    object arrays, ~20× dearer at cluster sizes)."""
    return np.array([st in allowed for st in states], dtype=bool).reshape(len(states))


def nan_to_zero(values: Any) -> FloatArray:
    """A float64 copy with missing samples (NaN) as 0: PVE2.pm counts a guest without an RRD entry
    as 0 (L588–610). Telemetry is finite or NaN, never ±inf."""
    x = np.asarray(values, dtype=np.float64)
    return np.where(np.isnan(x), 0.0, x)


METHODS = ("bruteforce", "topsis")
MODES = ("dynamic", "static")


@dataclass(frozen=True, slots=True)
class Candidates:
    """Candidate bundle moves, struct of arrays, ordered by (leader sid, target node name).

    ``leader`` is the guest index of the bundle's leader, ``source``/``target`` node indices,
    ``cpu`` (cores) and ``mem`` (bytes) the bundle's summed stats a move transfers (``Manager.pm``
    ``decompose_compact_migration_candidates``). ``members`` maps a leader with partners to all its
    bundle's guest indices (sorted by sid).
    """

    leader: IntArray
    source: IntArray
    target: IntArray
    cpu: FloatArray
    mem: FloatArray
    members: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.leader.shape[0])

    def select(self, keep: BoolArray | IntArray) -> Candidates:
        """The candidates where ``keep`` (a mask or an index array) holds, order preserved."""
        return Candidates(
            self.leader[keep],
            self.source[keep],
            self.target[keep],
            self.cpu[keep],
            self.mem[keep],
            self.members,
        )

    @staticmethod
    def empty() -> Candidates:
        z = np.zeros(0, dtype=np.int64)
        f = np.zeros(0, dtype=np.float64)
        return Candidates(z, z.copy(), z.copy(), f, f.copy())


class NodeStatsArrays(NamedTuple):
    """Node stats as the scheduler sees them (all nodes of the view; only online ones are used).
    Read-only. A NamedTuple, not a frozen dataclass: one is built every round, and a frozen
    dataclass's ``__init__`` (``object.__setattr__`` per field) costs several times a tuple's."""

    cpu: FloatArray  # cores
    mem: FloatArray  # bytes
    maxcpu: FloatArray  # cores
    maxmem: FloatArray  # bytes


@dataclass(frozen=True, slots=True)
class _CompiledRules:
    """Rules resolved against the view's guests (cached while rules and sids are unchanged)."""

    groups: tuple[tuple[int, ...], ...]  # positive-affinity groups, members sorted by sid
    grouped: BoolArray  # guest is in some positive group
    negative: dict[int, tuple[int, ...]]  # guest -> strict-negative partners
    node_rules: tuple[tuple[NodeAffinityRule, IntArray], ...]  # rule -> guests it constrains
    sid_rank: IntArray  # rank of each guest's sid in string order


class CandidateError(Exception):
    """A bundle member is missing from the usage (its node is offline): upstream's
    ``decompose_compact_migration_candidates`` fails as a whole (``Manager.pm``), so no motion
    this attempt."""


class UpstreamPolicy:
    """The upstream balancer (``Manager::load_balance``), one decision per CRM round."""

    name = "upstream"

    @dataclass(frozen=True, slots=True)
    class Config:
        """Constants of the balancer; defaults are upstream's (``Manager.pm`` L106–113, fractions).

        * ``threshold``: imbalance that must be *exceeded* (``imb <= threshold`` never triggers).
        * ``hold_duration``: consecutive rounds above the threshold before an attempt (0 ≡ 1).
        * ``margin``: minimum *relative* improvement ``(before − after)/before`` to commit, in [0, 1].
        * ``method``: ``"bruteforce"`` (lowest imbalance after the move) or ``"topsis"``.
        * ``mode``: ``None`` (follow ``view.mode``), ``"dynamic"`` or ``"static"``.
        * ``normalized``: imbalance ``/ sqrt(n−1)`` (crate 2.1, in [0, 1]); upstream's 5.2.0 tests
          expect the raw CV (``False``).
        """

        threshold: float = 0.3
        hold_duration: float = 3
        margin: float = 0.1
        method: str = "bruteforce"
        mode: str | None = None
        normalized: bool = True

        def __post_init__(self) -> None:
            for key in ("threshold", "hold_duration", "margin"):
                check_non_negative(f"upstream.{key}", getattr(self, key))
            if self.margin > 1:
                raise ConfigError(
                    "upstream.margin", f"must be a fraction in [0, 1], got {self.margin!r}"
                )
            if self.method not in METHODS:
                raise ConfigError(
                    "upstream.method",
                    f"unknown method {self.method!r} (allowed: bruteforce, topsis)",
                )
            if self.mode is not None and self.mode not in MODES:
                raise ConfigError(
                    "upstream.mode",
                    f"unknown mode {self.mode!r} (allowed: dynamic, static, or unset)",
                )
            if not isinstance(self.normalized, bool):
                raise ConfigError(
                    "upstream.normalized", f"must be true or false, got {self.normalized!r}"
                )

    def __init__(self, config: Any = None, **params: Any) -> None:
        cls = type(self).Config
        if config is None:
            config = cls(**params)
        elif params:
            known = {f.name for f in fields(cls)}
            merged = {f: getattr(config, f) for f in known}
            merged.update(params)
            config = cls(**merged)
        elif not isinstance(config, cls):
            raise ConfigError(
                "upstream", f"expected {cls.__qualname__}, got {type(config).__name__}"
            )
        self.config = config
        self.sustained = 0  # ``sustained_imbalance_round`` (in memory only, Manager.pm L68–72)
        self.log: list[tuple[float, str]] = []
        self.last_imbalance: float | None = None
        self._rules_key: tuple[Rules, tuple[str, ...]] | None = None
        self._rules: _CompiledRules | None = None
        self._movable_key: tuple[Rules, tuple[str, ...], Any, BoolArray] | None = None
        # per set of states: the last view's guest states and which of them are in the set
        self._state_masks: dict[int, tuple[tuple[str, ...], BoolArray]] = {}

    # ---------------------------------------------------------------- protocol

    def reset(self, seed: int | None = None) -> None:
        """A new episode: the counter is in memory only (reset on CRM failover upstream)."""
        self.sustained = 0
        self.log = []
        self.last_imbalance = None

    def decide(self, view: ClusterView) -> Motion | None:
        """One ``load_balance`` call (``Manager.pm`` L217–272); returns the leader's motion or
        ``None``."""
        self.observe(view)
        if view.motion_active:  # L225: serialised motions; the counter is not touched
            return None
        mode = self.mode(view)
        if mode not in MODES:  # L224: only static/dynamic balance
            return None
        stats = self.node_stats(view)
        imb = self.imbalance(view, stats)
        self.last_imbalance = imb
        cfg = self.config
        if not math.isfinite(imb) or imb <= cfg.threshold:  # NaN telemetry fails open
            self.sustained = 0
            return None
        self.sustained += 1
        if self.sustained < cfg.hold_duration:
            return None
        self.sustained = 0  # reset on every attempt, even if nothing results
        if not self.should_consider(view, imb):
            return None
        try:
            cands = self.filter_candidates(view, self.candidates(view))
        except CandidateError:
            return None
        if len(cands) == 0:
            return None
        best = self.select(view, stats, cands)
        if best is None:
            return None
        i, after = best
        if not self.accept(imb, after):
            return None
        sid = view.sids[int(cands.leader[i])]
        target = view.node_names[int(cands.target[i])]
        task = "migrate" if sid.split(":", 1)[0] == "vm" else "relocate"
        self.log.append(
            (
                view.t,
                f"auto rebalance - {task} {sid} to {target} "
                f"(expected change for imbalance from {imb:.2f} to {after:.2f})",
            )
        )
        return Motion(sid=sid, target=target, imbalance_before=imb, imbalance_after=after)

    # ---------------------------------------------------------------- hooks

    def observe(self, view: ClusterView) -> None:
        """Called first in every round, blocked or not (for outcome tracking). Upstream: nothing."""
        return None

    def mode(self, view: ClusterView) -> str:
        """The CRS mode in force: ``Config.mode`` if set, else the view's (datacenter.cfg)."""
        return self.config.mode if self.config.mode is not None else view.mode

    def node_stats(self, view: ClusterView) -> NodeStatsArrays:
        """Node usage the scheduler sees (``Usage.pm``).

        dynamic: ``IdentityAggregator`` — the pvestatd sample as is (cores busy, bytes used),
        which includes every guest on the node, HA or not;
        static: ``StartedResourceAggregator`` — 0 plus every placed HA resource at its configured
        size (``add_started_resource``: ``maxcpu == 0`` charges the node's ``maxcpu``), counted on
        both nodes while it moves (``pve-rs .../usage.rs``, ``node.rs`` L20–30), plus every running
        non-HA guest at its configured size on its node (``Manager.pm``
        ``recompute_online_node_usage``: "add remaining non-HA resources to online node usage",
        state ``started`` from ``Env/PVE2.pm`` ``get_cluster_service_stats``).
        """
        maxcpu = np.asarray(view.node_maxcpu, F64)
        maxmem = np.asarray(view.node_maxmem, F64)
        if self.mode(view) != "static":
            return NodeStatsArrays(
                np.asarray(view.node_cpu, F64),
                np.asarray(view.node_mem, F64),
                maxcpu,
                maxmem,
            )
        n = len(view.node_names)
        online = np.asarray(view.node_online, dtype=bool)
        node = np.asarray(view.guest_node, dtype=np.int64)
        tgt = np.asarray(view.guest_target, dtype=np.int64)
        gmaxcpu = np.asarray(view.guest_maxcpu, dtype=np.float64)
        gmaxmem = np.asarray(view.guest_maxmem, dtype=np.float64)
        is_current = self.states_in(view, CURRENT_STATES)
        is_target = self.states_in(view, _TARGET_STATES) & (tgt >= 0)
        cpu = np.zeros(n)
        mem = np.zeros(n)
        for mask, where in ((is_current, node), (is_target, tgt)):
            sel = np.flatnonzero(mask)
            if sel.size == 0:
                continue
            nodes_sel = where[sel]
            ok = (nodes_sel >= 0) & online[np.clip(nodes_sel, 0, max(n - 1, 0))]
            sel = sel[ok]
            nodes_sel = nodes_sel[ok]
            add_cpu = np.where(gmaxcpu[sel] == 0, maxcpu[nodes_sel], gmaxcpu[sel])
            cpu += np.bincount(nodes_sel, weights=add_cpu, minlength=n)
            mem += np.bincount(nodes_sel, weights=gmaxmem[sel], minlength=n)
        other = np.asarray(view.other_node, dtype=np.int64)
        if other.size:  # running non-HA guests, on their node if it is online
            ok = online[other]
            onode = other[ok]
            ocpu = np.asarray(view.other_maxcpu, dtype=np.float64)[ok]
            add_cpu = np.where(ocpu == 0, maxcpu[onode], ocpu)
            cpu += np.bincount(onode, weights=add_cpu, minlength=n)
            mem += np.bincount(
                onode, weights=np.asarray(view.other_maxmem, dtype=np.float64)[ok], minlength=n
            )
        return NodeStatsArrays(cpu, mem, maxcpu, maxmem)

    def guest_stats(self, view: ClusterView) -> tuple[FloatArray, FloatArray]:
        """Per-guest ``(cpu cores, mem bytes)`` that a move is assumed to transfer (``Usage.pm``).

        dynamic: the guest's RRD ``cpu``/``mem`` (missing samples count as 0, like guests without an
        RRD entry, PVE2.pm L588–610); static: ``{cpu: maxcpu, mem: maxmem}`` (``pve_static.rs``) —
        note ``maxcpu == 0`` moves 0 cpu although it was charged as the whole node.
        """
        if self.mode(view) == "static":
            return (
                np.asarray(view.guest_maxcpu, dtype=np.float64),
                np.asarray(view.guest_maxmem, dtype=np.float64),
            )
        return self._dynamic_guest_stats(view, use_memhost=False)

    @staticmethod
    def _dynamic_guest_stats(view: ClusterView, use_memhost: bool) -> tuple[FloatArray, FloatArray]:
        """``nan_to_zero`` of the guests' cpu and mem; with ``use_memhost`` memory is ``memhost``
        where it is finite (patch 2). One compiled pass (:func:`pvegym.policies.kernels.guest_stats_dynamic`)."""
        cpu = np.asarray(view.guest_cpu, dtype=np.float64)
        mem = np.asarray(view.guest_mem, dtype=np.float64)
        host = np.asarray(view.guest_memhost, dtype=np.float64) if use_memhost else mem
        out_cpu, out_mem = np.empty(cpu.shape[0]), np.empty(cpu.shape[0])
        kernels.guest_stats_dynamic(cpu, mem, host, use_memhost, out_cpu, out_mem)
        return out_cpu, out_mem

    def imbalance(self, view: ClusterView, stats: NodeStatsArrays) -> float:
        """Imbalance over the online nodes (``calculate_node_imbalance``,
        proxmox-resource-scheduling ``src/scheduler.rs``): the loads of :func:`crs.node_loads` and the folds of :func:`crs.imbalance`, compiled
        (:func:`pvegym.policies.kernels.online_imbalance`)."""
        return float(
            kernels.online_imbalance(
                stats.cpu,
                stats.mem,
                stats.maxcpu,
                stats.maxmem,
                np.asarray(view.node_online, BOOL),
                self.config.normalized,
            )
        )

    def should_consider(self, view: ClusterView, imbalance: float) -> bool:
        """A gate after the hold counter fired (the attempt already counts). Upstream: always."""
        return True

    def filter_candidates(self, view: ClusterView, cands: Candidates) -> Candidates:
        """Drop candidates before scoring (e.g. a backoff table). Upstream: keep all."""
        return cands

    def accept(self, imb_before: float, imb_after: float) -> bool:
        """Relative margin: commit only if ``(before − after)/before >= margin`` (``Manager.pm``
        ``load_balance``, L260-ish)."""
        return (imb_before - imb_after) / imb_before >= self.config.margin

    def select(
        self, view: ClusterView, stats: NodeStatsArrays, cands: Candidates
    ) -> tuple[int, float] | None:
        """The best candidate's index and its (truncated) imbalance after the move
        (proxmox-resource-scheduling ``src/scheduler.rs``, ``src/topsis.rs``).

        Candidates are ordered by (leader sid, target name) and a leader has one source, so the
        first minimum of the truncated bruteforce score is upstream's ``(imbalance, sid, source,
        target)`` winner; TOPSIS takes the first of a stable descending ranking.
        """
        on = np.asarray(view.node_online, dtype=bool)
        idx = np.flatnonzero(on)
        pos = np.full(len(view.node_names), -1, dtype=np.int64)
        pos[idx] = np.arange(idx.size)
        src = pos[cands.source]
        tgt = pos[cands.target]
        if np.any(src < 0) or np.any(tgt < 0):
            return None  # a node left the usage: upstream's call fails as a whole
        cpu, mem = stats.cpu[idx], stats.mem[idx]
        maxcpu, maxmem = stats.maxcpu[idx], stats.maxmem[idx]
        normalized = self.config.normalized
        if self.config.method == "topsis":
            c2, m2 = crs.moved_stats(cpu, mem, src, tgt, cands.cpu, cands.mem)
            try:
                scores = crs.score_alternatives(
                    crs.topsis_criteria(c2, m2, maxcpu, maxmem), crs.PVE_TOPSIS_WEIGHTS
                )
            except crs.TopsisError:
                return None  # upstream logs the error and does nothing
            best = int(np.argsort(-scores, kind="stable")[0])
            loads = crs.node_loads(c2[best], m2[best], maxcpu, maxmem)
            return best, crs.truncate_imbalance(crs.imbalance(loads, normalized))
        # argmin of crs.bruteforce_imbalances, compiled (no candidates × nodes matrices)
        best, after = kernels.bruteforce_best(
            cpu, mem, maxcpu, maxmem, src, tgt, cands.cpu, cands.mem, normalized
        )
        return int(best), float(after)

    # ---------------------------------------------------------------- candidates (Manager.pm)

    def candidates(self, view: ClusterView) -> Candidates:
        """Bundles (``get_active_stationary_resource_bundles``) and their target nodes
        (``get_resource_migration_candidates``), vectorised over guests."""
        rules = self._compiled(view)
        n_nodes = len(view.node_names)
        online = np.asarray(view.node_online, dtype=bool)
        state = np.asarray(view.guest_state, dtype=object)
        started = state == STARTED
        if view.guest_auto_rebalance is not None:  # auto-rebalance off: never a candidate
            started &= self._movable(view)
        moving = (state == MIGRATE) | (state == RELOCATE)
        node = np.asarray(view.guest_node, dtype=np.int64)
        gcpu, gmem = self.guest_stats(view)

        # singletons: every started guest outside positive groups leads its own bundle
        single = np.flatnonzero(started & ~rules.grouped)
        leaders: list[IntArray] = [single]
        lcpu: list[FloatArray] = [gcpu[single]]
        lmem: list[FloatArray] = [gmem[single]]
        extra_l, extra_c, extra_m, members = self._group_bundles(
            rules, started, moving, node, gcpu, gmem
        )
        leaders.append(np.asarray(extra_l, dtype=np.int64))
        lcpu.append(np.asarray(extra_c, dtype=np.float64))
        lmem.append(np.asarray(extra_m, dtype=np.float64))
        leader = np.concatenate(leaders)
        bcpu = np.concatenate(lcpu)
        bmem = np.concatenate(lmem)
        if leader.size == 0:
            return Candidates.empty()
        order = np.argsort(self._sid_rank(view)[leader], kind="stable")
        leader, bcpu, bmem = leader[order], bcpu[order], bmem[order]
        src = node[leader]

        allowed = np.broadcast_to(online, (leader.size, n_nodes)).copy()
        if rules.node_rules:
            row_of = np.full(len(view.sids), -1, dtype=np.int64)
            row_of[leader] = np.arange(leader.size)
            for rule, guests in rules.node_rules:
                rows = row_of[guests]
                rows = rows[rows >= 0]
                if rows.size:
                    allowed[rows] &= self._node_affinity_mask(view, rule, online)
        if rules.negative:
            tgt_all = np.asarray(view.guest_target, dtype=np.int64)
            for r, g in enumerate(leader.tolist()):
                partners = rules.negative.get(g)
                if not partners:
                    continue
                for p in partners:
                    st = state[p]
                    if st in CURRENT_STATES and node[p] >= 0:
                        allowed[r, node[p]] = False
                    if st in _TARGET_STATES and tgt_all[p] >= 0:
                        allowed[r, tgt_all[p]] = False
        allowed[np.arange(leader.size), src] = False

        # Every member of an emitted bundle must be in the usage (its node online,
        # ``get_resource_migration_candidates``).
        has_target = allowed.any(axis=1)
        if np.any(has_target & ~online[src]):
            raise CandidateError
        node_order = self._node_order(view)
        rows, cols = np.nonzero(allowed[:, node_order])
        targets = node_order[cols]
        return Candidates(leader[rows], src[rows], targets, bcpu[rows], bmem[rows], members)

    @staticmethod
    def _group_bundles(
        rules: _CompiledRules,
        started: BoolArray,
        moving: BoolArray,
        node: IntArray,
        gcpu: FloatArray,
        gmem: FloatArray,
    ) -> tuple[list[int], list[float], list[float], dict[int, tuple[int, ...]]]:
        """The bundles of the positive groups (``get_active_stationary_resource_bundles``):
        leaders, summed cpu and memory, and the members of each bundle of more than one guest."""
        members: dict[int, tuple[int, ...]] = {}
        extra_l: list[int] = []
        extra_c: list[float] = []
        extra_m: list[float] = []
        for group in rules.groups:
            if any(moving[g] for g in group):  # a partner is moving: skip the bundle (v2 change)
                continue
            bundle = tuple(g for g in group if started[g])
            if not bundle:
                continue
            if len({int(node[g]) for g in bundle}) > 1:  # rule not enforced yet
                continue
            c = 0.0
            m = 0.0
            for g in bundle:
                c += float(gcpu[g])
                m += float(gmem[g])
            extra_l.append(bundle[0])
            extra_c.append(c)
            extra_m.append(m)
            if len(bundle) > 1:
                members[bundle[0]] = bundle
        return extra_l, extra_c, extra_m, members

    # ---------------------------------------------------------------- helpers

    def states_in(self, view: ClusterView, allowed: frozenset[str]) -> BoolArray:
        """:func:`in_states` of the view's guest states, remembered while they do not change
        (most rounds): a comparison of the state tuples instead of a set lookup per guest."""
        states = view.guest_state
        hit = self._state_masks.get(id(allowed))
        if hit is not None and (hit[0] is states or hit[0] == states):
            return hit[1]
        mask = in_states(states, allowed)
        mask.flags.writeable = False
        self._state_masks[id(allowed)] = (states, mask)
        return mask

    @staticmethod
    def _node_affinity_mask(
        view: ClusterView, rule: NodeAffinityRule, online: BoolArray
    ) -> BoolArray:
        """``get_node_affinity``: the rule's highest-priority online nodes (``Manager.pm``)."""
        return node_affinity_mask(rule, view.node_names, online)

    def _movable(self, view: ClusterView) -> BoolArray:
        """:func:`~pvegym.sim.affinity.rebalance_movable` of the view, remembered while its
        rules, guests and flags are the same objects (the simulation's are, all episode)."""
        flags = view.guest_auto_rebalance
        key = self._movable_key
        if key is not None and key[0] is view.rules and key[1] is view.sids and key[2] is flags:
            return key[3]
        movable = rebalance_movable(view.rules, view.sids, flags)
        assert movable is not None
        self._movable_key = (view.rules, view.sids, flags, movable)
        return movable

    def _sid_rank(self, view: ClusterView) -> IntArray:
        return self._compiled(view).sid_rank

    @staticmethod
    def _node_order(view: ClusterView) -> IntArray:
        return np.asarray(
            sorted(range(len(view.node_names)), key=view.node_names.__getitem__), dtype=np.int64
        )

    def _compiled(self, view: ClusterView) -> _CompiledRules:
        key = (view.rules, view.sids)
        if self._rules is not None and self._rules_key is not None:
            old_rules, old_sids = self._rules_key
            if (old_rules is view.rules or old_rules == view.rules) and (
                old_sids is view.sids or old_sids == view.sids
            ):
                return self._rules
        self._rules = compile_rules(view.rules, view.sids)
        self._rules_key = key
        return self._rules


def compile_rules(rules: Rules, sids: tuple[str, ...]) -> _CompiledRules:
    """Resolve rules against the guests, as upstream's rule canonicalisation does [I]:

    * positive resource-affinity rules sharing a resource are merged (transitively) into groups;
    * a negative rule touching a positive group keeps every group member apart from the rule's
      other resources (``infer-implicit-negative-resource-affinity-rules``);
    * a guest without a node-affinity rule inherits one from a member of its positive group
      (``infer-node-affinity-for-positive-resource-affinity-rules``); otherwise a guest's first rule.

    Resources not among ``sids`` are ignored.
    """
    index = {s: i for i, s in enumerate(sids)}
    groups = tuple(tuple(grp) for grp in positive_groups(rules, sids))
    group_of: dict[int, tuple[int, ...]] = {g: grp for grp in groups for g in grp}
    grouped = np.zeros(len(sids), dtype=bool)
    for grp in groups:
        grouped[list(grp)] = True

    negative: dict[int, set[int]] = {}
    for r in rules.resource_affinity:
        if r.positive:
            continue
        members = [index[s] for s in r.resources if s in index]
        for a in members:
            others = {b for b in members if b != a}
            for a2 in group_of.get(a, (a,)):
                negative.setdefault(a2, set()).update(
                    o for o in others if o not in group_of.get(a2, ())
                )
    neg = {g: tuple(sorted(p, key=sids.__getitem__)) for g, p in negative.items() if p}

    rule_of: dict[int, NodeAffinityRule] = {}
    for rule in rules.node_affinity:
        for s in rule.resources:
            i = index.get(s)
            if i is not None and i not in rule_of:
                rule_of[i] = rule
    for grp in groups:
        inherited = next((rule_of[g] for g in grp if g in rule_of), None)
        if inherited is not None:
            for g in grp:
                rule_of.setdefault(g, inherited)
    per_rule: dict[int, tuple[NodeAffinityRule, list[int]]] = {}
    for g, rule in rule_of.items():
        per_rule.setdefault(id(rule), (rule, []))[1].append(g)
    node_rules = tuple((rule, np.asarray(gs, dtype=np.int64)) for rule, gs in per_rule.values())
    order = sorted(range(len(sids)), key=sids.__getitem__)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return _CompiledRules(groups, grouped, neg, node_rules, rank)
