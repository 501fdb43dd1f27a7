"""Node affinity as the HA manager applies it to a motion's target (``Manager.pm`` ``get_resource_migration_candidates``).

``get_node_affinity`` (``Rules/NodeAffinity.pm`` L268–290) returns the online rule nodes of the
highest priority; a non-strict rule adds every other node at priority −1 (L170–175), so it acts as
strict while any preferred node is online. A guest in no rule may go to any node.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.view import NodeAffinityRule, Rules


def node_affinity_mask(
    rule: NodeAffinityRule, node_names: tuple[str, ...], online: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """The nodes ``rule`` allows now (bool per node)."""
    n = len(node_names)
    prio = np.full(n, -np.inf if rule.strict else -1.0)
    index = {name: i for i, name in enumerate(node_names)}
    for name, p in rule.nodes:
        i = index.get(name)
        if i is not None:
            prio[i] = float(p)
    prio = np.where(online, prio, -np.inf)
    top = prio.max() if n else -np.inf
    if not np.isfinite(top):
        return np.zeros(n, dtype=bool)
    return np.asarray(prio == top)


def allowed_targets(
    rules: Rules, sids: tuple[str, ...], node_names: tuple[str, ...], online: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """``(len(sids), len(node_names))``: the nodes each guest's node-affinity rules allow."""
    allowed = np.ones((len(sids), len(node_names)), dtype=bool)
    index = {sid: i for i, sid in enumerate(sids)}
    for rule in rules.node_affinity:
        mask = node_affinity_mask(rule, node_names, online)
        for sid in rule.resources:
            i = index.get(sid)
            if i is not None:
                allowed[i] &= mask
    return allowed


def positive_groups(rules: Rules, sids: tuple[str, ...]) -> list[list[int]]:
    """The positive resource-affinity groups over ``sids`` (indices, each sorted by sid): rules
    sharing a resource merge, transitively, as upstream's rule canonicalisation merges them.
    Only groups of two or more guests; resources not among ``sids`` are ignored."""
    index = {s: i for i, s in enumerate(sids)}
    parent = list(range(len(sids)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    members: set[int] = set()
    for rule in rules.resource_affinity:
        if not rule.positive:
            continue
        ms = [index[s] for s in rule.resources if s in index]
        members.update(ms)
        for m in ms[1:]:
            ra, rb = find(ms[0]), find(m)
            if ra != rb:
                parent[rb] = ra
    by_root: dict[int, list[int]] = {}
    for g in sorted(members, key=sids.__getitem__):
        by_root.setdefault(find(g), []).append(g)
    return [grp for grp in by_root.values() if len(grp) > 1]


def rebalance_movable(
    rules: Rules, sids: tuple[str, ...], auto_rebalance: NDArray[np.bool_] | None
) -> NDArray[np.bool_] | None:
    """Which guests a balancer may pick (bool per sid), from each HA resource's
    ``auto-rebalance`` flag: its own must be on, and that of every member of its
    positive-affinity group (upstream's ``get_active_stationary_movable_resource_bundles``
    skips a bundle whose leader or any member has it off, ``src/test/test_resource_bundles.pl``).
    A group member's flag counts whatever its state. ``None`` when no flag is given (all on)."""
    if auto_rebalance is None:
        return None
    movable = np.array(auto_rebalance, dtype=bool).reshape(len(sids))
    if movable.all():
        return movable
    for grp in positive_groups(rules, sids):
        if not movable[grp].all():
            movable[grp] = False
    return movable
