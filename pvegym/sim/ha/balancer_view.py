"""What the Manager's ``load_balance`` step shows its balancer: a :class:`~pvegym.sim.view.ClusterView`.

Upstream's ``load_balance`` reads the round's node usage (``online_node_usage``), the service
status and the compiled rules; pvegym's balancers are policies over a ``ClusterView``. This module
builds that view from the same inputs, so that :class:`pvegym.policies.upstream.UpstreamPolicy` decides
exactly what upstream's built-in balancer decides:

* nodes: every node the CRM knows, sorted; online = in the round's usage (node state ``online``);
* node stats: the usage's node stats (``dynamic``: the nodes' measured cpu/mem; ``static``: only
  the capacities, ``int()`` as ``Usage/Static.pm`` passes them — the policy sums the services);
* services: the manager's service status, sorted by sid, with the usage's service stats
  (``maxcpu``/``maxmem``, ``cpu``/``mem``; missing → NaN);
* rules: the compiled rules as :class:`~pvegym.sim.view.Rules` — node affinity per rule with its
  effective priorities (a non-strict rule already lists every other node at −1, so it is passed as
  strict), positive groups and negative pairs as compiled (merged, implicit ones included);
* ``motion_active``: ``any_resource_motion_queued_or_running`` after this round's CRM commands.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from pvegym.sim.ha.perl import truthy
from pvegym.sim.view import ClusterView, NodeAffinityRule, ResourceAffinityRule, Rules

if TYPE_CHECKING:
    from pvegym.sim.ha.rules import CompiledRules
    from pvegym.sim.ha.usage import Usage


def view_rules(compiled: CompiledRules | None) -> Rules:
    """The compiled rules (``Rules.compile``) as the policies' :class:`Rules`."""
    if not compiled:
        return Rules()
    node_rules: list[NodeAffinityRule] = []
    by_nodes: dict[int, tuple[dict[str, Any], list[str]]] = {}
    for sid in sorted(compiled.get("node-affinity") or {}):
        nodes = compiled["node-affinity"][sid]["nodes"]
        by_nodes.setdefault(id(nodes), (nodes, []))[1].append(sid)
    for i, (nodes, sids) in enumerate(by_nodes.values()):
        prios = tuple(
            (node, int((nodes[node] or {}).get("priority") or 0)) for node in sorted(nodes)
        )
        node_rules.append(NodeAffinityRule(f"compiled-{i}", tuple(sids), prios, strict=True))
    ra = compiled.get("resource-affinity") or {}
    res_rules: list[ResourceAffinityRule] = []
    seen: set[tuple[str, ...]] = set()
    positive = ra.get("positive") or {}
    for sid in sorted(positive):
        group = tuple(sorted({sid, *positive[sid]}))
        if group not in seen:
            seen.add(group)
            res_rules.append(ResourceAffinityRule(f"positive-{len(seen)}", group, True))
    negative = ra.get("negative") or {}
    for sid in sorted(negative):
        for other in sorted(negative[sid]):
            pair = (sid, other)
            res_rules.append(ResourceAffinityRule(f"negative-{sid}-{other}", pair, False))
    return Rules(tuple(node_rules), tuple(res_rules))


def cluster_view(
    t: float,
    node_names: tuple[str, ...],
    usage: Usage,
    ss: dict[str, dict[str, Any]],
    compiled_rules: CompiledRules | None,
    motion_active: bool,
    mode: str,
) -> ClusterView:
    """The round's view for the balancer at time ``t`` (s): the nodes the CRM knows, the round's
    ``usage``, the service status ``ss`` (see the module docstring)."""
    index = {n: i for i, n in enumerate(node_names)}
    online = set(usage.list_nodes())
    node_stats: dict[str, dict[str, Any]] = getattr(usage, "node_stats", None) or {}
    service_stats: dict[str, dict[str, Any]] = getattr(usage, "service_stats", None) or {}
    n = len(node_names)
    maxcpu = np.full(n, np.nan)
    maxmem = np.full(n, np.nan)
    cpu = np.zeros(n)
    mem = np.zeros(n)
    for i, name in enumerate(node_names):
        st = node_stats.get(name)
        if not st:
            continue
        maxcpu[i] = float(int(st.get("maxcpu") or 0))
        maxmem[i] = float(int(st.get("maxmem") or 0))
        cpu[i] = float(st.get("cpu") or 0.0)
        mem[i] = float(st.get("mem") or 0.0)
    sids = tuple(sorted(ss))
    g = len(sids)

    def stat(sid: str, key: str) -> float:
        u = (service_stats.get(sid) or {}).get("usage") or {}
        v = u.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan

    nan_n = np.full(n, np.nan)
    nan_g = np.full(g, np.nan)
    gmem = np.array([stat(s, "mem") for s in sids], dtype=np.float64)
    return ClusterView(
        t=float(t),
        node_names=node_names,
        node_online=np.array([x in online for x in node_names], dtype=bool),
        node_maxcpu=maxcpu,
        node_maxmem=maxmem,
        node_cpu=cpu,
        node_mem=mem,
        node_cpu_some=nan_n,
        node_mem_some=nan_n.copy(),
        node_mem_full=nan_n.copy(),
        sids=sids,
        guest_node=np.array([index.get(str(ss[s].get("node")), -1) for s in sids], dtype=np.int64),
        guest_target=np.array(
            [index.get(str(ss[s].get("target")), -1) for s in sids], dtype=np.int64
        ),
        guest_state=tuple(str(ss[s].get("state")) for s in sids),
        guest_running=np.array([truthy(ss[s].get("running")) for s in sids], dtype=bool),
        guest_maxcpu=np.array([stat(s, "maxcpu") for s in sids], dtype=np.float64),
        guest_maxmem=np.array([stat(s, "maxmem") for s in sids], dtype=np.float64),
        guest_cpu=np.array([stat(s, "cpu") for s in sids], dtype=np.float64),
        guest_mem=gmem,
        guest_memhost=gmem.copy(),
        guest_cpu_some=nan_g,
        guest_cpu_full=nan_g.copy(),
        guest_mem_some=nan_g.copy(),
        guest_mem_full=nan_g.copy(),
        guest_migratable=np.ones(g, dtype=bool),
        rules=view_rules(compiled_rules),
        motion_active=motion_active,
        mode=mode,
    )
