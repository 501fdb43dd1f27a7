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
