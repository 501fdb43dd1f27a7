"""HA rules and groups for the engine: compiled once per change outside the kernel, applied inside.

**Outside the kernel** (plain Python, once per config or node-list change):
:func:`compile_rules` does what the Manager does before it places anything — the groups' in-memory
migration (``Groups.pm`` ``migrate_groups_to_rules``/``migrate_groups_to_resources``: one
node-affinity rule ``ha-group-<id>`` per used group, ``restricted`` → strict, ``nofailback`` → the
services' ``failback``), ``Rules.pm`` ``transform`` (the feasibility checks of
``Rules/NodeAffinity.pm``, ``Rules/ResourceAffinity.pm`` and ``Rules.pm``, each infeasible rule
dropped with upstream's "Drop rule" line; merged connected positive rules, implicit negative
rules, node-affinity rules extended to whole positive sets) and ``compile`` — into arrays:
``prio[s, n]`` (node ``n``'s priority in ``s``'s node-affinity rule, a non-strict rule's other
nodes at −1, :data:`~pvegym.sim.engine.codes.NA_OUT` where not allowed) and ``pair[s, s2]``
(positive/negative partner bits). :class:`RulesHost` keeps one cluster's compile in the pending
slot of the kernel's arrays, recompiling when the config or the node list the port would compile
with changes.

**Inside the kernel** (numba): :func:`activate_rules` takes the pending compile over exactly when
the port recompiles (no rules yet, a changed node list, a changed config; only while the master is
operational) and logs its drop lines; :func:`select_service_node` is ``Manager.pm``
``select_service_node`` with node affinity (``get_node_affinity``) and resource affinity
(``get_resource_affinity``, ``apply_negative_resource_affinity``,
``apply_positive_resource_affinity``) and the CRS scores of :mod:`pvegym.sim.engine.crs`;
:func:`queue_resource_motion` refuses a motion onto a negative partner's node and queues the
positive partners with it.

The port (:mod:`pvegym.sim.ha.rules`, :mod:`pvegym.sim.ha.groups`) is the specification; this module
does not import it. Codes and layout: :mod:`pvegym.sim.engine.codes` (the last section).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from pvegym.sim.engine import codes as k
from pvegym.sim.engine import crs as ecrs
from pvegym.sim.engine import events as ev
from pvegym.sim.engine.codes import (
    CMD_MIGRATE,
    CMD_RELOCATE,
    CRS_BASIC,
    F_CMD,
    F_CMD_ARG,
    F_FAILBACK,
    F_FAILED,
    F_MAINT_NODE,
    F_N_FAILED,
    F_NODE,
    F_STATE,
    F_TARGET,
    FN_SCORE,
    HA_RULES_MINVERSION,
    LRM_STATE_ACTIVE,
    LRM_STATE_NONE,
    LRM_STATE_WAIT,
    MODE_ACTIVE,
    N_COUNT,
    N_MODE,
    N_ORDER,
    N_PRI,
    N_RS_FIELDS,
    N_STATE,
    N_USAGE,
    NA_OUT,
    NODE_VERSIONS,
    NONE,
    NS_ABSENT,
    NS_ONLINE,
    PAIR_NEGATIVE,
    PAIR_POSITIVE,
    Q_MIGRATE,
    RK_ACTIVATED,
    RK_COMPILED,
    RK_CONFIG_CHANGED,
    RK_CRS_MODE,
    RK_GROUP_ROUND,
    RK_GROUPS_MIGRATED,
    RK_HAS_GROUPS,
    RK_MODE_LOGGED,
    RK_N_DROPS,
    RK_N_FAILBACK,
    RK_N_FALLBACK,
    RK_N_NOT_BASIC,
    RK_N_SCORED,
    RK_N_STRICT,
    RK_QUORATE,
    RN_ALLOWED,
    RN_LRM_STATE,
    RN_SEPARATE,
    RN_TOGETHER,
    RN_VERSION,
    RS_HAS_NA,
    RS_HAS_RA,
    RULES_ACTIVE,
    RULES_PENDING,
    SS_ABSENT,
    SS_ERROR,
    SS_FREEZE,
    SS_MIGRATE,
    SS_RELOCATE,
    SS_REQUEST_START,
    SS_REQUEST_START_BALANCE,
    SS_STOPPED,
    US_FAILBACK_MIGRATED,
    US_GROUPED,
)

#: node preferences of ``select_service_node`` (as :mod:`pvegym.sim.engine.crm`)
PREF_NONE = 0
PREF_BEST_SCORE = 1
PREF_TRY_NEXT = 2

#: rounds between two tries of the persistent groups migration, and before the first
#: (``Manager.pm``: ``$group_migration_cooldown``, ``group_migration_round => 3``)
GROUP_MIGRATION_COOLDOWN_ROUNDS = 6
GROUP_MIGRATION_FIRST_ROUND = 3


def has_min_version(version: str, minimum: str) -> bool:
    """``Tools.pm`` ``has_min_version`` for ``major.minor.patch[~rev]`` (a missing rev of
    ``version`` passes)."""

    def parts(v: str) -> tuple[int, int, int, int | None]:
        base, _, rev = v.partition("~")
        a, b, c = (int(x) for x in base.split("."))
        return a, b, c, int(rev) if rev else None

    v, m = parts(version), parts(minimum)
    if v[:3] != m[:3]:
        return v[:3] > m[:3]
    return v[3] is None or v[3] >= (m[3] or 0)


VERSION_OK = tuple(1 if has_min_version(v, HA_RULES_MINVERSION) else 0 for v in NODE_VERSIONS)

# ---------------------------------------------------------------------------- the config


@dataclass(frozen=True)
class NodeAffinityRule:
    """A ``node-affinity`` rule: ``nodes`` as ``(node, priority)`` (higher preferred)."""

    id: str
    resources: tuple[str, ...]
    nodes: tuple[tuple[str, int], ...]
    strict: bool = False
    disabled: bool = False


@dataclass(frozen=True)
class ResourceAffinityRule:
    """A ``resource-affinity`` rule: ``positive`` keeps the resources together, else apart."""

    id: str
    resources: tuple[str, ...]
    positive: bool
    disabled: bool = False


@dataclass(frozen=True)
class Group:
    """An HA group (``groups.cfg``): ``nodes`` as ``(node, priority)``."""

    id: str
    nodes: tuple[tuple[str, int], ...]
    restricted: bool = False
    nofailback: bool = False


Rule = NodeAffinityRule | ResourceAffinityRule


@dataclass(frozen=True)
class RulesConfig:
    """The rules (in the file's order), the groups and each grouped service's group."""

    rules: tuple[Rule, ...] = ()
    groups: tuple[Group, ...] = ()
    service_groups: tuple[tuple[str, str], ...] = ()  # (sid, group id)

    def validate(self) -> None:
        """Unique rule ids (with the groups' ``ha-group-<id>``), known groups, priorities ≥ 0."""
        ids = [r.id for r in self.rules]
        gids = [g.id for g in self.groups]
        if len(set(ids)) != len(ids) or len(set(gids)) != len(gids):
            raise ValueError("rules config: rule and group ids must be unique")
        for sid, gid in self.service_groups:
            if gid not in gids:
                raise ValueError(f"rules config: service {sid}: no group {gid!r}")
            if f"ha-group-{gid}" in ids:
                raise ValueError(f"rules config: rule id ha-group-{gid} is the group's")
        for r in (*self.rules, *self.groups):
            if isinstance(r, ResourceAffinityRule):
                continue
            for node, prio in r.nodes:
                if not 0 <= prio < 2**62:
                    raise ValueError(f"rules config: {r.id}: node {node} priority {prio}")


# ---------------------------------------------------------------------------- transform, compile

_R = dict[str, Any]  # a rule as the transform handles it (the port's hash)

_MSG_SINGLE_REF = "resource '{}' is already used in another node affinity rule"
_MSG_LT2 = "rule is ineffective as there are less than two resources"
_MSG_NEG_COUNT = "rule defines more resources than available nodes"
_MSG_POS_NEG = "rule shares two or more resources with a negative resource affinity rule"
_MSG_NEG_POS = "rule shares two or more resources with a positive resource affinity rule"
_MSG_NA_MULTI = (
    "resources are in a resource affinity rule and cannot be in"
    " a node affinity rule with multiple priorities"
)
_MSG_RA_MULTI = "resources are in node affinity rules with multiple priorities"
_MSG_POS_MULTI_NA = "resources are in multiple node affinity rules"
_MSG_NA_POS = (
    "at least one resource is in a positive resource affinity"
    " rule and there are other resources in at least one"
    " other node affinity rule already"
)
_MSG_NEG_NA = "two or more resources are restricted to less nodes than available to the resources"
_MSG_NA_NEG = (
    "at least one resource is in a negative resource affinity"
    " rule and this rule would restrict these to less nodes"
    " than available to the resources"
)


def _disjoint_sets(rules: Mapping[str, _R]) -> list[tuple[list[str], dict[str, int]]]:
    """``find_disjoint_rules_resource_sets``: one pass by each rule's lowest resource id (ties by
    rule id), a rule joining the first set it overlaps."""
    lowest = {rid: min(r["resources"], default="") for rid, r in rules.items()}
    out: list[tuple[list[str], dict[str, int]]] = []
    for rid in sorted(sorted(rules), key=lowest.__getitem__):
        res = rules[rid]["resources"]
        for ids, union in out:
            if any(s in union for s in res):
                ids.append(rid)
                union.update(dict.fromkeys(res, 1))
                break
        else:
            out.append(([rid], dict.fromkeys(res, 1)))
    return out


def _args(rules: Mapping[str, _R]) -> tuple[dict[str, _R], dict[str, _R], dict[str, _R]]:
    """(node-affinity, positive, negative) rules; the config holds enabled rules only."""
    na = {i: r for i, r in rules.items() if r["type"] == "na"}
    pos = {i: r for i, r in rules.items() if r["type"] == "ra" and r["positive"]}
    neg = {i: r for i, r in rules.items() if r["type"] == "ra" and not r["positive"]}
    return na, pos, neg


def _errors(rules: Mapping[str, _R], nodes: Sequence[str]) -> dict[str, list[str]]:
    """``Rules::check_feasibility``: rule id → messages, in the checks' registration order."""
    errors: dict[str, list[str]] = {}

    def add(rid: str, msg: str) -> None:
        errors.setdefault(rid, []).append(msg)

    na, pos, neg = _args(rules)
    ra = {**pos, **neg}
    # NodeAffinity: a resource in two rules
    refs: dict[str, list[str]] = {}
    for rid, r in na.items():
        for sid in r["resources"]:
            refs.setdefault(sid, []).append(rid)
    for rid, sid in sorted((rid, sid) for sid, ids in refs.items() if len(ids) >= 2 for rid in ids):
        add(rid, _MSG_SINGLE_REF.format(sid))
    # ResourceAffinity
    for rid in sorted(i for i, r in ra.items() if len(r["resources"]) < 2):
        add(rid, _MSG_LT2)
    for rid in sorted(i for i, r in neg.items() if len(r["resources"]) > len(nodes)):
        add(rid, _MSG_NEG_COUNT)
    conflicts: list[tuple[str, str]] = []
    for ids, union in _disjoint_sets(pos):
        for nid, r in neg.items():
            if sum(1 for s in union if s in r["resources"]) < 2:
                continue
            conflicts.append(("negative", nid))
            conflicts.extend(("positive", i) for i in ids)
    for kind, rid in sorted(conflicts):
        add(rid, _MSG_POS_NEG if kind == "positive" else _MSG_NEG_POS)
    # global: a resource-affinity rule with a multi-priority node-affinity rule
    conflicts = []
    for rid, r in ra.items():
        multi = False
        paired: list[str] = []
        for nid, n in na.items():
            if not any(s in n["resources"] for s in r["resources"]):
                continue
            multi = multi or len(set(n["nodes"].values())) > 1
            paired.append(nid)
        if multi:
            conflicts.append(("resource-affinity", rid))
            conflicts.extend(("node-affinity", i) for i in paired)
    for kind, rid in sorted(conflicts):
        add(rid, _MSG_RA_MULTI if kind == "resource-affinity" else _MSG_NA_MULTI)
    # global: a positive set in two node-affinity rules
    conflicts = []
    for ids, union in _disjoint_sets(pos):
        paired = [nid for nid, n in na.items() if any(s in n["resources"] for s in union)]
        if len(paired) > 1:
            conflicts.extend(("positive", i) for i in ids)
            conflicts.extend(("node-affinity", i) for i in paired)
    for kind, rid in sorted(conflicts):
        add(rid, _MSG_POS_MULTI_NA if kind == "positive" else _MSG_NA_POS)
    # global: negative partners bound to fewer nodes than they are
    conflicts = []
    for rid, r in neg.items():
        allowed: set[str] = set()
        located: set[str] = set()
        paired = []
        for nid, n in na.items():
            common = [s for s in r["resources"] if s in n["resources"]]
            if not common:
                continue
            located.update(common)
            allowed.update(n["nodes"])
            paired.append(nid)
        if len(allowed) < len(located):
            conflicts.append(("negative", rid))
            conflicts.extend(("node-affinity", i) for i in paired)
    for kind, rid in sorted(conflicts):
        add(rid, _MSG_NEG_NA if kind == "negative" else _MSG_NA_NEG)
    return errors


def _transform(rules: dict[str, _R], nodes: Sequence[str]) -> list[str]:
    """``Rules::transform``: drop the infeasible rules (their lines returned), then merge connected
    positive rules, add the implicit negative rules, extend node affinity to positive sets."""
    errors = _errors(rules, nodes)
    for rid in errors:
        rules.pop(rid, None)
    messages = [f"Drop rule '{rid}', because {m}." for rid in sorted(errors) for m in errors[rid]]
    _, pos, _ = _args(rules)
    for ids, union in _disjoint_sets(pos):
        if len(ids) < 2:
            continue
        for rid in ids:
            rules.pop(rid)
        rules["_merged-" + "-".join(ids)] = {"type": "ra", "positive": True, "resources": union}
    _, pos, neg = _args(rules)
    for pid, p in pos.items():
        apart: dict[str, dict[str, int]] = {}  # sid2 → the positive resources kept apart from it
        for n in neg.values():
            for sid in p["resources"]:
                if sid in n["resources"]:
                    for csid in n["resources"]:
                        if csid != sid:
                            apart.setdefault(csid, {})[sid] = 1
        for csid, done in apart.items():
            for sid in p["resources"]:
                if sid not in done:
                    rules[f"_implicit-negative-{pid}-{sid}-{csid}"] = {
                        "type": "ra",
                        "positive": False,
                        "resources": {sid: 1, csid: 1},
                    }
    na, pos, _ = _args(rules)
    for p in pos.values():
        for n in na.values():
            if any(s in n["resources"] for s in p["resources"]):
                n["resources"].update(dict.fromkeys(p["resources"], 1))
                break
    return messages


@dataclass
class CompiledRules:
    """One compile (:func:`compile_rules`): arrays over the cluster's sids and nodes."""

    prio: np.ndarray  # (S, N) int64
    pair: np.ndarray  # (S, S) int64: PAIR_* bits
    svc: np.ndarray  # (S, N_RS_FIELDS) int64
    failback: np.ndarray  # (S,) int64: the services' failback after the groups' migration
    messages: list[str]  # the "Drop rule" lines
    nodes: tuple[str, ...]  # the node list compiled with


def compile_rules(
    cfg: RulesConfig,
    sids: Sequence[str],
    nodes: Sequence[str],
    compile_nodes: Sequence[str],
    failback: Sequence[int],
) -> CompiledRules:
    """The arrays of ``cfg`` for the cluster's ``sids`` and ``nodes`` (both in index order).

    ``compile_nodes``: the nodes the Manager's node status lists (``ns.list_nodes()``, what the
    port compiles with: a non-strict rule adds these at −1, a negative rule may have as many
    resources); ``failback``: each service's own flag (a group's ``nofailback`` overrides it)."""
    groups = {g.id: g for g in cfg.groups}
    svc_group = dict(cfg.service_groups)
    rules: dict[str, _R] = {}
    for r in cfg.rules:
        if r.disabled:
            continue  # ``exclude_disabled_rules``: no check, transform or compile sees it
        if isinstance(r, NodeAffinityRule):
            rules[r.id] = {
                "type": "na",
                "resources": dict.fromkeys(r.resources, 1),
                "nodes": dict(r.nodes),
                "strict": r.strict,
            }
        else:
            rules[r.id] = {
                "type": "ra",
                "resources": dict.fromkeys(r.resources, 1),
                "positive": r.positive,
            }
    members: dict[str, dict[str, int]] = {}
    for sid in sids:
        if sid in svc_group:
            members.setdefault(svc_group[sid], {})[sid] = 1
    for gid, res in members.items():
        g = groups[gid]
        rules[f"ha-group-{gid}"] = {
            "type": "na",
            "resources": res,
            "nodes": dict(g.nodes),
            "strict": g.restricted,
        }
    messages = _transform(rules, compile_nodes)
    sidx = {s: i for i, s in enumerate(sids)}
    nidx = {n: i for i, n in enumerate(nodes)}
    ns, nn = len(sids), len(nodes)
    prio = np.full((ns, nn), NA_OUT, dtype=np.int64)
    pair = np.zeros((ns, ns), dtype=np.int64)
    rsvc = np.zeros((ns, N_RS_FIELDS), dtype=np.int64)
    for rd in rules.values():
        if rd["type"] == "na":
            effective = dict(rd["nodes"])
            if not rd["strict"]:
                for n in compile_nodes:
                    effective.setdefault(n, -1)
            for sid in rd["resources"]:
                if sid not in sidx:
                    continue
                s = sidx[sid]
                prio[s] = NA_OUT  # the last rule of a resource wins (none has two after the checks)
                for n, p in effective.items():
                    if n in nidx:
                        prio[s, nidx[n]] = p
                rsvc[s, RS_HAS_NA] = 1
        else:
            bit = PAIR_POSITIVE if rd["positive"] else PAIR_NEGATIVE
            for a in rd["resources"]:
                for b in rd["resources"]:
                    if a != b and a in sidx and b in sidx:
                        pair[sidx[a], sidx[b]] |= bit
                        rsvc[sidx[a], RS_HAS_RA] = 1
    fb = np.array(group_failback(cfg, sids, failback), dtype=np.int64)
    return CompiledRules(prio, pair, rsvc, fb, messages, tuple(compile_nodes))


def group_failback(cfg: RulesConfig, sids: Sequence[str], failback: Sequence[int]) -> list[int]:
    """The services' ``failback`` after ``migrate_groups_to_resources``: a grouped service's is
    its group's ``not nofailback``, the others keep their own."""
    groups = {g.id: g for g in cfg.groups}
    svc_group = dict(cfg.service_groups)
    return [
        (0 if groups[svc_group[sid]].nofailback else 1) if sid in svc_group else int(f)
        for sid, f in zip(sids, failback, strict=True)
    ]


def rx_arrays(n_clusters: int, n_svc: int, n_nodes: int) -> dict[str, np.ndarray]:
    """Fresh rules and CRS arrays (``rx``, :data:`~pvegym.sim.engine.codes.RX_ARRAYS`)."""
    c, s, n = n_clusters, n_svc, n_nodes
    rprio = np.full((c, 2, s, n), NA_OUT, dtype=np.int64)
    return {
        "rprio": rprio,
        "rpair": np.zeros((c, 2, s, s), dtype=np.int64),
        "rsvc": np.zeros((c, 2, s, N_RS_FIELDS), dtype=np.int64),
        "rk": np.zeros((c, k.N_RK_FIELDS), dtype=np.int64),
        "rnode": np.zeros((c, n, k.N_RN_FIELDS), dtype=np.int64),
        "usvc": np.zeros((c, s, k.N_US_FIELDS), dtype=np.int64),
        "fsvc": np.zeros((c, s, k.N_FS_FIELDS), dtype=np.float64),
        "fnode": np.zeros((c, n, k.N_FN_FIELDS), dtype=np.float64),
    }


@dataclass
class RulesHost:
    """One cluster's rules outside the kernel: recompiles into the pending slot when the config
    or the node list the port would compile with changes (:meth:`before_round`)."""

    cfg: RulesConfig
    sids: tuple[str, ...]
    nodes: tuple[str, ...]
    failback: tuple[int, ...]
    compiled: CompiledRules | None = None
    #: the drop lines of the compile the kernel took over last (for the log formatter)
    messages: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cfg.validate()

    def init_arrays(self, rx: Mapping[str, np.ndarray], c: int) -> None:
        """The groups' part of the arrays (once, before the first round; the services'
        ``F_FAILBACK`` is the host's to set, from :func:`group_failback`)."""
        rk, usvc = rx["rk"][c], rx["usvc"][c]
        rk[k.RK_HAS_GROUPS] = 1 if self.cfg.groups else 0
        rk[k.RK_GROUP_ROUND] = GROUP_MIGRATION_FIRST_ROUND
        grouped = dict(self.cfg.service_groups)
        nofailback = {g.id: g.nofailback for g in self.cfg.groups}
        for i, sid in enumerate(self.sids):
            usvc[i, k.US_GROUPED] = 1 if sid in grouped else 0
            usvc[i, k.US_FAILBACK_MIGRATED] = (
                0 if sid in grouped and nofailback[grouped[sid]] else self.failback[i]
            )

    def before_round(
        self, rx: Mapping[str, np.ndarray], c: int, node_state: np.ndarray, online: Sequence[bool]
    ) -> None:
        """Compile into the pending slot for the node status this round's update will leave (the
        known nodes and the online ones) if that changed since the last compile."""
        listed = tuple(
            n for i, n in enumerate(self.nodes) if node_state[i] != NS_ABSENT or online[i]
        )
        if self.compiled is not None and self.compiled.nodes == listed:
            return
        cr = compile_rules(self.cfg, self.sids, self.nodes, listed, self.failback)
        self.compiled = cr
        rx["rprio"][c, RULES_PENDING] = cr.prio
        rx["rpair"][c, RULES_PENDING] = cr.pair
        rx["rsvc"][c, RULES_PENDING] = cr.svc
        rx["rk"][c, k.RK_N_DROPS] = len(cr.messages)

    def after_round(self, rx: Mapping[str, np.ndarray], c: int) -> None:
        """The drop lines of a compile the kernel took over; the config after a persistent
        groups migration (the groups as ``ha-group-<id>`` rules, ``nofailback`` as failback 0)."""
        if rx["rk"][c, RK_ACTIVATED] and self.compiled is not None:
            self.messages = list(self.compiled.messages)
        if rx["rk"][c, k.RK_GROUPS_MIGRATED]:
            self.failback = tuple(int(x) for x in rx["usvc"][c, :, k.US_FAILBACK_MIGRATED])
            self.cfg = migrated_config(self.cfg, self.sids)
            self.compiled = None  # the same arrays; recompiled from the migrated config


def migrated_config(cfg: RulesConfig, sids: Sequence[str]) -> RulesConfig:
    """``cfg`` after ``_migrate_group_persistently``: one rule per used group, no groups."""
    groups = {g.id: g for g in cfg.groups}
    members: dict[str, list[str]] = {}
    svc_group = dict(cfg.service_groups)
    for sid in sids:
        if sid in svc_group:
            members.setdefault(svc_group[sid], []).append(sid)
    added = tuple(
        NodeAffinityRule(
            id=f"ha-group-{gid}",
            resources=tuple(res),
            nodes=groups[gid].nodes,
            strict=groups[gid].restricted,
        )
        for gid, res in members.items()
    )
    return RulesConfig(rules=(*cfg.rules, *added))


# ---------------------------------------------------------------------------- the kernel


@njit(cache=True)
def activate_rules(rx, clu, evbuf, nodelist_changed):
    """The port's recompile in ``_read_services_and_rules``: the pending compile becomes the
    active one (and its drop lines are logged) when there is none yet, the node list changed
    (a node not in the node status) or the config changed."""
    rprio, rpair, rsvc, rk = rx[0], rx[1], rx[2], rx[3]
    rk[RK_ACTIVATED] = 0
    if rk[RK_COMPILED] and not nodelist_changed and not rk[RK_CONFIG_CHANGED]:
        return
    rprio[RULES_ACTIVE] = rprio[RULES_PENDING]
    rpair[RULES_ACTIVE] = rpair[RULES_PENDING]
    rsvc[RULES_ACTIVE] = rsvc[RULES_PENDING]
    rk[RK_COMPILED] = 1
    rk[RK_CONFIG_CHANGED] = 0
    rk[RK_ACTIVATED] = 1
    for i in range(rk[RK_N_DROPS]):
        _emit1(evbuf, clu, ev.E_DROP_RULE, -1, i)


@njit(cache=True)
def _gm(evbuf, clu, step, node, c):
    _emit3(evbuf, clu, ev.E_GROUP_MIGRATION, -1, step, node, c)


@njit(cache=True)
def _count_active_services(svc, n):
    """``Tools.pm`` ``count_active_services``: on or moving to node ``n``, in an active state."""
    count = 0
    for s in range(svc.shape[0]):
        st = svc[s, F_STATE]
        if st in (SS_ABSENT, SS_STOPPED, SS_FREEZE, SS_ERROR, SS_REQUEST_START):
            continue
        if svc[s, F_NODE] == n or svc[s, F_TARGET] == n:
            count += 1
    return count


@njit(cache=True)
def _group_migration_check(svc, nodes, clu, evbuf, rx):
    """``_assert_cluster_can_migrate_ha_groups``: (−1, −1) or (the abort reason, its node)."""
    rk, rnode = rx[3], rx[4]
    if not rk[RK_QUORATE]:
        return ev.GM_NOT_QUORATE, NONE
    listed = False
    for n in range(nodes.shape[0]):
        if nodes[n, N_STATE] != NS_ABSENT:
            listed = True
    if not listed:
        return ev.GM_NO_NODES, NONE
    for n in range(nodes.shape[0]):
        st = nodes[n, N_STATE]
        if st == NS_ABSENT:
            continue
        _gm(evbuf, clu, ev.GM_NODE_STATE, n, st)
        if st != NS_ONLINE:
            return ev.GM_NOT_ONLINE, n
        ls, mode = rnode[n, RN_LRM_STATE], nodes[n, N_MODE]
        if ls == LRM_STATE_NONE:
            return ev.GM_NO_LRM_STATE, n
        _gm(evbuf, clu, ev.GM_LRM, n, ls * 8 + mode)
        if not (
            ls == LRM_STATE_ACTIVE or (ls == LRM_STATE_WAIT and _count_active_services(svc, n) == 0)
        ):
            return ev.GM_NOT_ACTIVE_IDLE, n
        if mode != MODE_ACTIVE:
            return ev.GM_NOT_MODE_ACTIVE, n
        v = rnode[n, RN_VERSION]
        if v < 0:
            return ev.GM_NO_VERSION, n
        _gm(evbuf, clu, ev.GM_VERSION, n, v)
        if not VERSION_OK[v]:
            return ev.GM_OLD_VERSION, n
    return -1, NONE


@njit(cache=True)
def try_group_migration(svc, nodes, clu, evbuf, rx):
    """``try_persistent_group_migration``: while the groups config has groups, every
    GROUP_MIGRATION_COOLDOWN_ROUNDS rounds check the cluster and migrate them into the rules and
    service configs (the compile is then redone: the rules' digest changed)."""
    rk, usvc = rx[3], rx[5]
    rk[RK_GROUPS_MIGRATED] = 0
    if not rk[RK_HAS_GROUPS]:
        return
    rk[RK_GROUP_ROUND] -= 1
    if rk[RK_GROUP_ROUND] > 0:
        return
    rk[RK_GROUP_ROUND] = GROUP_MIGRATION_COOLDOWN_ROUNDS
    _gm(evbuf, clu, ev.GM_START, NONE, -1)
    reason, node = _group_migration_check(svc, nodes, clu, evbuf, rx)
    if reason >= 0:
        _gm(evbuf, clu, ev.GM_ABORT + reason, node, -1)
        _gm(evbuf, clu, ev.GM_FAILED, NONE, -1)
        _gm(evbuf, clu, ev.GM_RETRY, NONE, -1)
        return
    for step in (ev.GM_RULES_OK, ev.GM_RESOURCES_OK, ev.GM_DELETED, ev.GM_SUCCESS):
        _gm(evbuf, clu, step, NONE, -1)
    rk[RK_HAS_GROUPS] = 0
    rk[RK_GROUPS_MIGRATED] = 1
    rk[RK_CONFIG_CHANGED] = 1
    for s in range(svc.shape[0]):
        if usvc[s, US_GROUPED]:
            svc[s, F_FAILBACK] = usvc[s, US_FAILBACK_MIGRATED]
            usvc[s, US_GROUPED] = 0


@njit(cache=True)
def log_crs_mode(rx, clu, evbuf):
    """The Manager's first line, when it is created: ``using scheduler mode`` unless basic."""
    rk = rx[3]
    if rk[RK_MODE_LOGGED]:
        return
    rk[RK_MODE_LOGGED] = 1
    if rk[RK_CRS_MODE] != CRS_BASIC:
        _emit1(evbuf, clu, ev.E_CRS_MODE, -1, rk[RK_CRS_MODE])


@njit(cache=True)
def _emit1(evbuf, clu, kind, sid, a):
    _emit3(evbuf, clu, kind, sid, a, -1, -1)


@njit(cache=True)
def _emit3(evbuf, clu, kind, sid, a, b, c):
    ev.emit(evbuf, clu, kind, sid, a, b, c, -1, -1, -1)


@njit(cache=True)
def nodelist_changed(nodes):
    """``check_for_changed_nodelist`` before the node status update: a member not in the status
    (every node is a member; no node leaves the membership)."""
    return np.any(nodes[:, N_STATE] == NS_ABSENT)


@njit(cache=True)
def _used_nodes(svc, nodes, s):
    """``get_used_service_nodes`` over the usage's nodes."""
    state, node, target = svc[s, F_STATE], svc[s, F_NODE], svc[s, F_TARGET]
    cur = NONE
    tgt = NONE
    if state in (SS_STOPPED, SS_REQUEST_START, SS_ABSENT):
        return cur, tgt
    if state != SS_REQUEST_START_BALANCE and node >= 0 and nodes[node, N_USAGE]:
        cur = node
    if (
        state in (SS_MIGRATE, SS_RELOCATE, SS_REQUEST_START_BALANCE)
        and target >= 0
        and nodes[target, N_USAGE]
    ):
        tgt = target
    return cur, tgt


@njit(cache=True)
def select_service_node(svc, nodes, clu, evbuf, rx, s, pref):
    """``select_service_node``: the node for ``s`` (NONE if there is none). Scratch: the nodes'
    ``N_PRI``/``N_ORDER`` and ``rnode``."""
    rprio, rpair, rsvc, rnode = rx[0][RULES_ACTIVE], rx[1][RULES_ACTIVE], rx[2][RULES_ACTIVE], rx[4]
    nn = nodes.shape[0]
    current = svc[s, F_NODE]
    maint = svc[s, F_MAINT_NODE]
    has_na = rsvc[s, RS_HAS_NA]
    has_ra = rsvc[s, RS_HAS_RA]
    anyn = False
    for n in range(nn):
        rnode[n, RN_TOGETHER] = 0
        rnode[n, RN_SEPARATE] = 0
        ok = nodes[n, N_USAGE] != 0 and (not has_na or rprio[s, n] != NA_OUT)
        rnode[n, RN_ALLOWED] = 1 if ok else 0
        nodes[n, N_PRI] = 1 if ok else 0
        if ok:
            anyn = True
    if has_na and anyn:  # the highest priority among the allowed online nodes
        best = NA_OUT
        for n in range(nn):
            if rnode[n, RN_ALLOWED] and rprio[s, n] > best:
                best = rprio[s, n]
        for n in range(nn):
            nodes[n, N_PRI] = 1 if rnode[n, RN_ALLOWED] and rprio[s, n] == best else 0
    if not anyn:
        return NONE
    any_together = False
    any_separate = False
    if has_ra:  # get_resource_affinity
        for c2 in range(svc.shape[0]):
            bits = rpair[s, c2]
            if bits == 0 or svc[c2, F_STATE] == SS_ABSENT:
                continue
            cur, tgt = _used_nodes(svc, nodes, c2)
            if bits & PAIR_POSITIVE:
                node = tgt if tgt >= 0 else cur  # a moving partner counts on its target
                if node >= 0:
                    rnode[node, RN_TOGETHER] += 1
                    any_together = True
            if bits & PAIR_NEGATIVE:
                if cur >= 0:
                    rnode[cur, RN_SEPARATE] = 1
                    any_separate = True
                if tgt >= 0:
                    rnode[tgt, RN_SEPARATE] = 1
                    any_separate = True
    # stay on the current node if possible (avoids random migrations)
    if (
        pref == PREF_NONE
        and not svc[s, F_FAILBACK]
        and current >= 0
        and rnode[current, RN_ALLOWED]
        and (rnode[current, RN_TOGETHER] > 0 or not rnode[current, RN_SEPARATE])
    ):
        return current
    if pref == PREF_TRY_NEXT:
        nf = svc[s, F_N_FAILED]
        packed = svc[s, F_FAILED]
        for i in range(nf):
            nodes[((packed >> (4 * i)) & 15) - 1, N_PRI] = 0
    if any_separate:
        for n in range(nn):
            if rnode[n, RN_SEPARATE]:
                nodes[n, N_PRI] = 0
    if any_together:  # the preferred node most positive partners use (ties: the first by name)
        major = NONE
        for n in range(nn):
            count = rnode[n, RN_TOGETHER] if nodes[n, N_PRI] else 0
            if count > 0 and (major < 0 or count > rnode[major, RN_TOGETHER]):
                major = n
        if major >= 0:
            for n in range(nn):
                if n != major:
                    nodes[n, N_PRI] = 0
    if maint >= 0 and nodes[maint, N_PRI]:
        return maint
    if pref == PREF_NONE and current >= 0 and nodes[current, N_PRI]:
        return current
    ecrs.score_nodes(svc, nodes, clu, evbuf, rx, s)
    fnode = rx[7]
    # sort by (score, name): insertion sort over the node order (= name order)
    m = 0
    for n in range(nn):
        if not nodes[n, N_PRI]:
            continue
        j = m
        while j > 0 and fnode[nodes[j - 1, N_ORDER], FN_SCORE] > fnode[n, FN_SCORE]:
            nodes[j, N_ORDER] = nodes[j - 1, N_ORDER]
            j -= 1
        nodes[j, N_ORDER] = n
        m += 1
    if m == 0:
        return NONE
    found = -1
    for i in range(m - 1, -1, -1):
        if nodes[i, N_ORDER] == current:
            found = i
    if pref == PREF_TRY_NEXT and found >= 0 and found < m - 1:
        return _counted(svc, nodes, rx, s, pref, nodes[found + 1, N_ORDER], m, False)
    return _counted(svc, nodes, rx, s, pref, nodes[0, N_ORDER], m, True)


@njit(cache=True)
def _counted(svc, nodes, rx, s, pref, chosen, m, first):
    """Count what decided a placement by score (``RK_N_*``) and return ``chosen``."""
    rprio, rsvc, rk, rnode = rx[0][RULES_ACTIVE], rx[2][RULES_ACTIVE], rx[3], rx[4]
    if m >= 2:
        rk[RK_N_SCORED] += 1
        if first:
            fewest = NONE
            for n in range(nodes.shape[0]):
                if nodes[n, N_PRI] and (fewest < 0 or nodes[n, N_COUNT] < nodes[fewest, N_COUNT]):
                    fewest = n
            if fewest != chosen:
                rk[RK_N_NOT_BASIC] += 1
    if rsvc[s, RS_HAS_NA]:
        for n in range(nodes.shape[0]):
            if nodes[n, N_USAGE] and rprio[s, n] == NA_OUT:
                rk[RK_N_STRICT] += 1
                break
        if rprio[s, chosen] == -1:
            rk[RK_N_FALLBACK] += 1
    current = svc[s, F_NODE]
    if (
        pref == PREF_NONE
        and svc[s, F_FAILBACK]
        and chosen != current
        and current >= 0
        and rnode[current, RN_ALLOWED]
        and (rnode[current, RN_TOGETHER] > 0 or not rnode[current, RN_SEPARATE])
    ):
        rk[RK_N_FAILBACK] += 1
    return chosen


@njit(cache=True)
def queue_resource_motion(svc, clu, evbuf, rx, qkind, s, target):
    """``queue_resource_motion``: refused if a negative partner is on ``target`` (and not moving
    elsewhere); else queued for ``s`` and every positive partner not on or moving to ``target``."""
    rpair, rsvc = rx[1][RULES_ACTIVE], rx[2][RULES_ACTIVE]
    ns = svc.shape[0]
    if rsvc[s, RS_HAS_RA]:
        for c2 in range(ns):
            if not rpair[s, c2] & PAIR_NEGATIVE or svc[c2, F_STATE] == SS_ABSENT:
                continue
            node, tgt = svc[c2, F_NODE], svc[c2, F_TARGET]
            if node >= 0 and node != target:
                continue
            if tgt >= 0 and tgt != target:
                continue
            _emit3(evbuf, clu, ev.E_NEGATIVE_REFUSED, s, qkind, target, c2)
            return
    _emit3(evbuf, clu, ev.E_GOT_MOTION, s, qkind, target, -1)
    cmd = CMD_MIGRATE if qkind == Q_MIGRATE else CMD_RELOCATE
    svc[s, F_CMD] = cmd
    svc[s, F_CMD_ARG] = target
    if not rsvc[s, RS_HAS_RA]:
        return
    for c2 in range(ns):
        if not rpair[s, c2] & PAIR_POSITIVE or svc[c2, F_STATE] == SS_ABSENT:
            continue
        node, tgt = svc[c2, F_NODE], svc[c2, F_TARGET]
        if node >= 0 and node == target:
            continue
        if tgt >= 0 and tgt == target:
            continue
        _emit3(evbuf, clu, ev.E_POSITIVE_PARTNER, s, qkind, target, c2)
        svc[c2, F_CMD] = cmd
        svc[c2, F_CMD_ARG] = target
