"""The shortcuts that make a full HA round cheaper give upstream's answers and share nothing a
caller could change (``pvegym bench --only ha-round``; the replays prove the logs identical, these
tests the cases the replays may not reach)."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from pvegym.experiments.bench_ha import NODES, HARoundLoop, MemoryCFS, MemoryHAEnv
from pvegym.sim.ha.lrm import LRM
from pvegym.sim.ha.manager import select_service_node
from pvegym.sim.ha.perl import PerlDie, truthy
from pvegym.sim.ha.rules import Rules
from pvegym.sim.ha.rules_node_affinity import get_node_affinity
from pvegym.sim.ha.rules_resource_affinity import (
    apply_negative_resource_affinity,
    apply_positive_resource_affinity,
    get_resource_affinity,
    is_allowed_on_node,
)
from pvegym.sim.ha.tools import count_fenced_services, frozen
from pvegym.sim.ha.usage import BasicUsage, DynamicUsage, StaticUsage, Usage


def _env() -> Any:
    return MemoryHAEnv(MemoryCFS(), "node1", "crm")


def _usages() -> list[Usage]:
    env = _env()
    return [
        BasicUsage(env),
        StaticUsage(env, env.get_static_service_stats()),
        DynamicUsage(env, env.get_dynamic_service_stats()),
    ]


@pytest.mark.parametrize("usage", _usages(), ids=["basic", "static", "dynamic"])
def test_online_nodes_follow_add_and_remove_node(usage: Usage) -> None:
    """The kept ``{node: 1}`` hash is rebuilt after every change of the node list."""
    assert usage.online_nodes() == {}
    usage.add_node("node1")
    assert usage.online_nodes() == {"node1": 1}
    usage.add_node("node2")
    assert usage.online_nodes() == {"node1": 1, "node2": 1} == dict.fromkeys(usage.list_nodes(), 1)
    usage.remove_node("node1")
    assert usage.online_nodes() == {"node2": 1} == dict.fromkeys(usage.list_nodes(), 1)


def _rules(text: str) -> Any:
    rules = Rules.parse_config("rules.cfg", text)
    for rule in rules["ids"].values():
        Rules.set_rule_defaults(rule)
    return Rules.compile(rules, list(NODES))


def _basic(counts: dict[str, int]) -> BasicUsage:
    usage = BasicUsage(_env())
    for node in NODES:
        usage.add_node(node)
        for i in range(counts.get(node, 0)):
            usage.add_service(f"ct:{node}{i}", node, None, True)
    return usage


def _reference_select(compiled: Any, usage: Usage, sid: str, cd: Any, ss: Any, pref: str) -> Any:
    """``Manager.pm select_service_node`` in upstream's structure (the port before the shortcut):
    a fresh online-nodes hash every call, every affinity step."""
    sd = ss[sid]
    current_node = sd["node"]
    online_nodes = {n: 1 for n in usage.list_nodes()}
    allowed_nodes, pri_nodes = get_node_affinity(compiled["node-affinity"], sid, online_nodes)
    if not pri_nodes:
        return None
    together, separate = get_resource_affinity(compiled["resource-affinity"], sid, ss, online_nodes)
    if (
        pref == "none"
        and not truthy(cd.get("failback"))
        and current_node in allowed_nodes
        and allowed_nodes[current_node]
        and is_allowed_on_node(together, separate, current_node)
    ):
        return current_node
    if pref == "try-next":
        for node in sd.get("failed_nodes") or []:
            pri_nodes.pop(node, None)
    apply_negative_resource_affinity(separate, pri_nodes)
    apply_positive_resource_affinity(together, pri_nodes)
    fallback = sd.get("maintenance_node")
    if fallback is not None and pri_nodes.get(fallback):
        return fallback
    if pref == "none" and pri_nodes.get(current_node):
        return current_node
    scores = usage.score_nodes_to_start_service(sid, current_node)
    nodes = sorted(pri_nodes, key=lambda n: (scores.get(n, 0.0), n))
    found = None
    for i in range(len(nodes) - 1, -1, -1):
        if nodes[i] == current_node:
            found = i
    if not nodes:
        return None
    if pref == "try-next" and found is not None and found < len(nodes) - 1:
        return nodes[found + 1]
    return nodes[0]


RULES = """node-affinity: na1
\tnodes node3:2,node4
\tresources vm:102

resource-affinity: ra1
\taffinity negative
\tresources vm:103,vm:104
"""


@pytest.mark.parametrize("pref", ["none", "best-score", "try-next"])
@pytest.mark.parametrize("sid", ["vm:101", "vm:102", "vm:103"])
def test_select_service_node_as_upstream_and_shares_nothing(pref: str, sid: str) -> None:
    """With and without rules, every preference, failback on and off, maintenance fallbacks,
    failed nodes: the answer of the general path, and the usage's online-nodes hash unchanged."""
    compiled = _rules(RULES)
    rng = random.Random(f"{pref}{sid}")
    for _ in range(60):
        usage = _basic({n: rng.randrange(4) for n in NODES})
        ss: dict[str, dict[str, Any]] = {
            s: {"state": "started", "node": rng.choice(NODES)}
            for s in ("vm:101", "vm:102", "vm:103", "vm:104")
        }
        if rng.random() < 0.3:
            ss[sid]["maintenance_node"] = rng.choice(NODES)
        if rng.random() < 0.5:
            ss[sid]["failed_nodes"] = rng.sample(NODES, rng.randrange(1, 4))
        cd = {"failback": rng.choice([0, 1])}
        shared = usage.online_nodes()
        before = dict(shared)
        expected = _reference_select(compiled, usage, sid, cd, ss, pref)
        assert select_service_node(compiled, usage, sid, cd, ss, pref) == expected
        assert usage.online_nodes() is shared and shared == before


def test_parse_sid_keeps_valid_ids_only() -> None:
    env = _env()
    assert env.parse_sid("vm:101") == ("vm:101", "vm", "101")
    assert env.parse_sid("vm:101") == ("vm:101", "vm", "101")  # from the kept ids
    # Sim/Env.pm's ^(\S+):(\S+)$ is greedy: a second colon belongs to the type
    assert env.parse_sid("ct:a:7") == ("ct:a:7", "ct:a", "7")
    for bad in ("vm101", ":101", "vm:", "vm: 101", "vm:1\u200901"):
        for _ in range(2):  # an invalid id is refused every time
            with pytest.raises(PerlDie, match="unable to parse service id"):
                env.parse_sid(bad)


def _count_fenced_upstream(ss: dict[str, Any], node: str) -> int:
    count = 0
    for sd in ss.values():
        if not sd.get("node") or sd["node"] != node:
            continue
        if sd.get("state") == "fence":
            count += 1
    return count


def test_count_fenced_services_counts_as_upstream() -> None:
    states = [None, "fence", "started", "migrate"]
    nodes = [None, "", "0", "node1", "node2"]
    entries = [
        {k: v for k, v in (("state", s), ("node", n)) if v is not None}
        for s, n in itertools.product(states, nodes)
    ]
    rng = random.Random(15)
    for _ in range(300):
        ss = {f"vm:{i}": rng.choice(entries) for i in range(rng.randrange(6))}
        for node in ("node1", "node2", "", "0"):
            assert count_fenced_services(ss, node) == _count_fenced_upstream(ss, node)


def test_lrm_results_follow_each_manager_status_read() -> None:
    """The valid-uid set is the one of the manager status read last: a result whose uid the new
    status no longer has is dropped when the next job finishes, as upstream drops it."""
    loop = HARoundLoop()
    lrm: LRM = loop.lrms[1][1]
    loop.run(1)
    uids = {sd["uid"] for sd in loop.cfs.manager_status["service_status"].values()}
    assert lrm.results and set(lrm.results) <= uids
    # the next rounds give every started service a new uid: old results must go
    old = set(lrm.results)
    loop.run(2)
    assert lrm.results and not (set(lrm.results) & old)
    assert set(lrm.results) <= {
        sd["uid"] for sd in loop.cfs.manager_status["service_status"].values()
    }


def _frozen_upstream_port(value: Any) -> Any:
    """:func:`frozen` as first written: every pair sorted."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen_upstream_port(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen_upstream_port(v) for v in value)
    return value


def _json_like(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth < 3 and r < 0.3:
        return {
            f"{rng.choice('abcdefg')}{rng.randrange(5)}": _json_like(rng, depth + 1)
            for _ in range(rng.randrange(5))
        }
    if depth < 3 and r < 0.45:
        return [_json_like(rng, depth + 1) for _ in range(rng.randrange(4))]
    if depth < 3 and r < 0.5:
        return tuple(_json_like(rng, depth + 1) for _ in range(rng.randrange(4)))
    return rng.choice([None, True, False, 0, 1, 2.5, "x", "", -3])


def test_frozen_is_the_sorted_pairs_copy() -> None:
    rng = random.Random(15)
    for _ in range(3000):
        value = _json_like(rng)
        got = frozen(value)
        assert got == _frozen_upstream_port(value)
        assert repr(got) == repr(_frozen_upstream_port(value))
        hash(got)


def test_frozen_skip_leaves_out_one_top_level_key() -> None:
    """``frozen(d, skip)`` is ``frozen`` of ``d`` without the key ``skip`` (top level only)."""
    rng = random.Random(16)
    for _ in range(1000):
        value = {k: _json_like(rng) for k in rng.sample(["uid", "node", "state", "x"], 3)}
        value["inner"] = {"uid": 1, "a": _json_like(rng)}
        rest = {k: v for k, v in value.items() if k != "uid"}
        assert frozen(value, "uid") == _frozen_upstream_port(rest)
        assert repr(frozen(value, "uid")) == repr(_frozen_upstream_port(rest))


def test_frozen_copy_is_independent() -> None:
    """A snapshot does not change when the status it was taken of does."""
    status = {"vm:101": {"state": "started", "failed_nodes": ["node1"]}}
    snap = frozen(status)
    status["vm:101"]["failed_nodes"].append("node2")
    status["vm:101"]["state"] = "migrate"
    assert snap == (("vm:101", (("failed_nodes", ("node1",)), ("state", "started"))),)


def test_manager_state_snapshot_as_first_written() -> None:
    loop = HARoundLoop()
    manager = loop.crms[0][1].manager
    assert manager is not None
    manager.ss["vm:101"]["failed_nodes"] = ["node3"]
    ms = manager.ms
    services = {sid: {k: v for k, v in sd.items() if k != "uid"} for sid, sd in manager.ss.items()}
    expected = _frozen_upstream_port(
        (
            services,
            manager.ns.status,
            ms.get("node_request"),
            ms.get("disarm"),
            manager.crs_scheduler,
            manager.group_migration_round,
            manager.last_rules_digest,
            manager.last_groups_digest,
            manager.last_services_digest,
        )
    )
    assert manager._state_snapshot() == expected
