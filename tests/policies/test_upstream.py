"""Unit tests of the upstream balancer's semantics (``Manager.pm`` ``load_balance``, ``Usage.pm``, the crate's scoring)."""

from __future__ import annotations

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.policies.upstream import UpstreamPolicy
from pvegym.sim.view import ClusterView, NodeAffinityRule, ResourceAffinityRule, Rules

GIB = float(1 << 30)


def view(
    placement: dict[str, str],
    *,
    cpu: dict[str, float] | None = None,
    mem: dict[str, float] | None = None,
    states: dict[str, str] | None = None,
    targets: dict[str, str] | None = None,
    nodes: tuple[str, ...] = ("node1", "node2", "node3"),
    online: tuple[bool, ...] | None = None,
    rules: Rules | None = None,
    motion_active: bool = False,
    mode: str = "dynamic",
    maxcpu: dict[str, float] | None = None,
    maxmem: dict[str, float] | None = None,
) -> ClusterView:
    """A view where node stats are the sum of the (running) guests' dynamic stats."""
    sids = tuple(sorted(placement))
    cpu = cpu or {}
    mem = mem or {}
    states = states or {}
    targets = targets or {}
    idx = {n: i for i, n in enumerate(nodes)}
    gcpu = np.array([cpu.get(s, 1.0) for s in sids])
    gmem = np.array([mem.get(s, 4 * GIB) for s in sids])
    gnode = np.array([idx[placement[s]] for s in sids], dtype=np.int64)
    ncpu = np.zeros(len(nodes))
    nmem = np.zeros(len(nodes))
    np.add.at(ncpu, gnode, gcpu)
    np.add.at(nmem, gnode, gmem)
    g = len(sids)
    nan_g = np.full(g, np.nan)
    nan_n = np.full(len(nodes), np.nan)
    return ClusterView(
        t=100.0,
        node_names=nodes,
        node_online=np.array(online if online is not None else [True] * len(nodes)),
        node_maxcpu=np.full(len(nodes), 24.0),
        node_maxmem=np.full(len(nodes), 32 * GIB),
        node_cpu=ncpu,
        node_mem=nmem,
        node_cpu_some=nan_n,
        node_mem_some=nan_n,
        node_mem_full=nan_n,
        sids=sids,
        guest_node=gnode,
        guest_target=np.array(
            [idx[targets[s]] if s in targets else -1 for s in sids], dtype=np.int64
        ),
        guest_state=tuple(states.get(s, "started") for s in sids),
        guest_running=np.ones(g, dtype=bool),
        guest_maxcpu=np.array([(maxcpu or {}).get(s, 2.0) for s in sids]),
        guest_maxmem=np.array([(maxmem or {}).get(s, 8 * GIB) for s in sids]),
        guest_cpu=gcpu,
        guest_mem=gmem,
        guest_memhost=gmem,
        guest_cpu_some=nan_g,
        guest_cpu_full=nan_g,
        guest_mem_some=nan_g,
        guest_mem_full=nan_g,
        guest_migratable=np.ones(g, dtype=bool),
        rules=rules or Rules(),
        motion_active=motion_active,
        mode=mode,
    )


FOUR_ON_NODE1 = {f"vm:10{i}": "node1" for i in range(1, 5)}


def raw(**kw) -> UpstreamPolicy:
    return UpstreamPolicy(normalized=False, **kw)


def test_hold_counter_then_move_and_log():
    p = raw()
    v = view(FOUR_ON_NODE1)
    assert p.decide(v) is None and p.sustained == 1
    assert p.decide(v) is None and p.sustained == 2
    m = p.decide(v)
    assert m is not None and (m.sid, m.target) == ("vm:101", "node2")
    assert round(m.imbalance_before, 2) == 1.41 and round(m.imbalance_after, 2) == 0.94
    assert p.sustained == 0
    assert p.log == [
        (
            100.0,
            "auto rebalance - migrate vm:101 to node2 (expected change for imbalance from 1.41 to 0.94)",
        )
    ]


def test_blocked_round_leaves_counter_untouched():
    p = raw()
    v = view(FOUR_ON_NODE1)
    p.decide(v)
    p.decide(v)
    assert p.decide(view(FOUR_ON_NODE1, motion_active=True)) is None
    assert p.sustained == 2
    assert p.decide(v) is not None


def test_at_or_below_threshold_resets_counter():
    p = raw(threshold=1.5)
    v = view(FOUR_ON_NODE1)
    p.sustained = 2
    assert p.decide(v) is None and p.sustained == 0
    # imbalance == threshold does not trigger ('<=')
    p = raw(threshold=float(np.sqrt(2.0)), hold_duration=0)
    assert p.decide(v) is None and p.sustained == 0


def test_counter_resets_on_failed_attempt():
    p = raw(hold_duration=1)
    v = view({"vm:101": "node1"})  # every move keeps CV 1.41 -> margin fails
    assert p.decide(v) is None and p.sustained == 0
    assert p.decide(v) is None and p.sustained == 0


def test_hold_zero_acts_like_one():
    assert raw(hold_duration=0).decide(view(FOUR_ON_NODE1)) is not None
    assert raw(hold_duration=1).decide(view(FOUR_ON_NODE1)) is not None


def test_margin():
    v = view(FOUR_ON_NODE1)  # 1.414 -> 0.935 is a 33.9 % improvement
    assert raw(hold_duration=1, margin=0.33).decide(v) is not None
    assert raw(hold_duration=1, margin=0.35).decide(v) is None


def test_container_relocates():
    p = raw(hold_duration=1)
    m = p.decide(view({"ct:200": "node1", "ct:201": "node1"}))
    assert m is not None and m.sid == "ct:200"
    assert "relocate ct:200 to node2" in p.log[0][1]


def _bundles(
    placement, states=None, positive=(("vm:101", "vm:102", "vm:103"),)
) -> set[tuple[int, ...]]:
    rules = Rules(
        resource_affinity=tuple(
            ResourceAffinityRule(f"r{i}", r, True) for i, r in enumerate(positive)
        )
    )
    p = raw()
    v = view(placement, states=states, rules=rules)
    c = p.candidates(v)
    return {(int(leader), *c.members.get(int(leader), ())) for leader in c.leader}


def test_bundles_six_cases():
    # trivial: one bundle per VM
    assert _bundles({"vm:101": "node1", "vm:102": "node1"}, positive=()) == {(0,), (1,)}
    two = {"vm:101": "node1", "vm:102": "node1"}
    rules2 = (("vm:101", "vm:102"),)
    assert _bundles(two, positive=rules2) == {(0, 0, 1)}
    three = {"vm:101": "node1", "vm:102": "node1", "vm:103": "node1"}
    # first member stopped -> leader vm:102
    assert _bundles(three, states={"vm:101": "stopped"}) == {(1, 1, 2)}
    # middle member stopped -> [vm:101, vm:103]
    assert _bundles(three, states={"vm:102": "stopped"}) == {(0, 0, 2)}
    # any member migrating -> no bundle
    assert _bundles(three, states={"vm:102": "migrate"}) == set()
    assert _bundles(three, states={"vm:103": "relocate"}) == set()
    # members on different nodes -> no bundle
    assert _bundles({"vm:101": "node1", "vm:102": "node2", "vm:103": "node1"}) == set()


def _movable_bundles(placement, auto, positive=()) -> set[tuple[int, ...]]:
    rules = Rules(
        resource_affinity=tuple(
            ResourceAffinityRule(f"r{i}", r, True) for i, r in enumerate(positive)
        )
    )
    v = view(placement, rules=rules)
    v.guest_auto_rebalance = np.array([auto.get(s, True) for s in v.sids])
    c = raw().candidates(v)
    return {(int(leader), *c.members.get(int(leader), ())) for leader in c.leader}


def test_auto_rebalance_off_is_never_a_bundle():
    """The three auto-rebalance cases of upstream's ``src/test/test_resource_bundles.pl``
    (``get_active_stationary_movable_resource_bundles``): off on a singleton, on a bundle's
    leader, on another member of a bundle — the bundle is never a candidate."""
    two = {"vm:101": "node1", "vm:102": "node1"}
    assert _movable_bundles(two, {"vm:101": False}) == {(1,)}
    three = {"vm:101": "node1", "vm:102": "node1", "ct:103": "node2"}
    pair = (("vm:101", "vm:102"),)
    # sids sort ct:103, vm:101, vm:102: indices 0, 1, 2
    assert _movable_bundles(three, {"vm:101": False}, pair) == {(0,)}
    assert _movable_bundles(three, {"vm:102": False}, pair) == {(0,)}
    # all on, given explicitly: the same bundles as without flags
    assert _movable_bundles(three, {}, pair) == {(0,), (1, 1, 2)}


def test_auto_rebalance_off_guest_is_never_moved():
    p = raw(hold_duration=1)
    v = view(FOUR_ON_NODE1)
    assert p.decide(v) is not None and p.log[-1][1].startswith("auto rebalance - migrate vm:101")
    v.guest_auto_rebalance = np.array([s != "vm:101" for s in v.sids])
    p = raw(hold_duration=1)
    m = p.decide(v)
    assert m is not None and m.sid != "vm:101"
    v.guest_auto_rebalance = np.zeros(len(v.sids), dtype=bool)
    assert raw(hold_duration=1).decide(v) is None


def test_bundle_moves_summed_stats():
    rules = Rules(resource_affinity=(ResourceAffinityRule("r", ("vm:101", "vm:102"), True),))
    c = raw().candidates(
        view(
            {"vm:101": "node1", "vm:102": "node1"}, cpu={"vm:101": 1.0, "vm:102": 2.5}, rules=rules
        )
    )
    assert list(c.cpu) == [3.5, 3.5] and list(c.target) == [1, 2]


def test_node_affinity_strict_and_priorities():
    place = {"vm:101": "node1", "vm:102": "node1"}
    strict = NodeAffinityRule("n", ("vm:101",), (("node1", 0),), strict=True)
    c = raw().candidates(view(place, rules=Rules(node_affinity=(strict,))))
    assert [int(x) for x in c.leader] == [1, 1]
    prio = NodeAffinityRule("n", ("vm:101",), (("node2", 1), ("node3", 2)), strict=False)
    c = raw().candidates(view(place, rules=Rules(node_affinity=(prio,))))
    pairs = [(int(a), int(b)) for a, b in zip(c.leader, c.target, strict=True)]
    assert pairs == [(0, 2), (1, 1), (1, 2)]
    # highest-priority node offline -> next priority; non-strict acts as strict while any is online
    c = raw().candidates(
        view(place, rules=Rules(node_affinity=(prio,)), online=(True, True, False))
    )
    pairs = [(int(a), int(b)) for a, b in zip(c.leader, c.target, strict=True)]
    assert pairs == [(0, 1), (1, 1)]


def test_negative_affinity_prunes_current_and_target_nodes():
    rules = Rules(resource_affinity=(ResourceAffinityRule("apart", ("vm:101", "vm:103"), False),))
    place = {"vm:101": "node1", "vm:102": "node1", "vm:103": "node2"}
    c = raw().candidates(view(place, rules=rules))
    pairs = {(int(a), int(b)) for a, b in zip(c.leader, c.target, strict=True)}
    assert (0, 1) not in pairs and (0, 2) in pairs
    assert (2, 0) not in pairs  # vm:103 may not go to vm:101's node
    # a migrating partner blocks its target too
    v = view(place, rules=rules, states={"vm:103": "migrate"}, targets={"vm:103": "node3"})
    c = raw().candidates(v)
    assert {int(b) for a, b in zip(c.leader, c.target, strict=True) if a == 0} == set()


def test_constrained4_scenario():
    """Negative affinity (``Manager.pm`` ``get_resource_migration_candidates``) picks vm:101 -> node3 (1.04 -> 0.72)."""
    rules = Rules(
        resource_affinity=(
            ResourceAffinityRule("a1", ("vm:101", "vm:103"), False),
            ResourceAffinityRule("a2", ("vm:102", "vm:103"), False),
        )
    )
    place = {"vm:101": "node1", "vm:102": "node1", "vm:103": "node2", "vm:104": "node3"}
    cpu = {"vm:101": 0.9, "vm:102": 2.4, "vm:103": 0.0, "vm:104": 1.0}
    mem = {"vm:101": 4 * GIB, "vm:102": 2621440000.0, "vm:103": 0.0, "vm:104": 1 * GIB}
    v = view(place, cpu=cpu, mem=mem, rules=rules)
    v.node_maxmem[:] = 48 * GIB
    m = raw(hold_duration=1).decide(v)
    assert m is not None and (m.sid, m.target) == ("vm:101", "node3")
    assert (round(m.imbalance_before, 2), round(m.imbalance_after, 2)) == (1.04, 0.72)


def test_static_mode_uses_configured_sizes():
    place = {"vm:101": "node1", "vm:102": "node1"}
    # dynamic usage is tiny but the configured sizes are large
    v = view(
        place,
        cpu={"vm:101": 0.01, "vm:102": 0.01},
        mem={"vm:101": 1.0, "vm:102": 1.0},
        mode="static",
    )
    p = raw(hold_duration=1)
    stats = p.node_stats(v)
    assert list(stats.cpu) == [4.0, 0.0, 0.0] and list(stats.mem) == [16 * GIB, 0.0, 0.0]
    cpu, mem = p.guest_stats(v)
    assert list(cpu) == [2.0, 2.0] and list(mem) == [8 * GIB, 8 * GIB]
    # moving guests count on both nodes; maxcpu 0 charges the node's maxcpu
    v2 = view(
        place,
        mode="static",
        states={"vm:101": "migrate"},
        targets={"vm:101": "node2"},
        maxcpu={"vm:102": 0.0},
    )
    stats = p.node_stats(v2)
    assert list(stats.cpu) == [2.0 + 24.0, 2.0, 0.0]
    # config mode overrides the view
    assert raw(mode="dynamic").node_stats(v).cpu[0] == pytest.approx(0.02)


def test_static_vs_dynamic_choose_differently():
    place = {"vm:101": "node1", "vm:102": "node1", "vm:103": "node1"}
    cpu = {"vm:101": 6.0, "vm:102": 0.1, "vm:103": 0.1}
    v_dyn = view(place, cpu=cpu)
    v_sta = view(
        place, cpu=cpu, mode="static", maxcpu={"vm:101": 1.0, "vm:102": 8.0, "vm:103": 1.0}
    )
    assert raw(hold_duration=1).decide(v_dyn).sid == "vm:101"
    assert raw(hold_duration=1).decide(v_sta).sid == "vm:102"


def test_basic_mode_and_offline_nodes():
    assert raw(hold_duration=1).decide(view(FOUR_ON_NODE1, mode="basic")) is None
    # an offline node is neither in the imbalance nor a target
    p = raw(hold_duration=1)
    m = p.decide(view(FOUR_ON_NODE1, online=(True, False, True)))
    assert m is not None and m.target == "node3"
    assert round(m.imbalance_before, 2) == 1.0


def test_topsis_method():
    m = raw(hold_duration=1, method="topsis").decide(view(FOUR_ON_NODE1))
    assert m is not None and m.sid == "vm:101"


def test_normalized_imbalance():
    p = UpstreamPolicy(hold_duration=1)
    m = p.decide(view(FOUR_ON_NODE1))
    assert m is not None and round(m.imbalance_before, 6) == 1.0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("threshold", -1),
        ("threshold", "x"),
        ("hold_duration", True),
        ("margin", 2.0),
        ("method", "greedy"),
        ("mode", "basic"),
        ("normalized", 1),
    ],
)
def test_config_validation(key, value):
    with pytest.raises(ConfigError) as err:
        UpstreamPolicy(**{key: value})
    assert err.value.path == f"upstream.{key}"


def test_registry_builds_it():
    from pvegym.policies.registry import make_policy

    p = make_policy("upstream", threshold=0.5)
    assert isinstance(p, UpstreamPolicy) and p.config.threshold == 0.5
    p.reset(0)
    assert p.sustained == 0 and p.log == []


@pytest.mark.benchmark(group="policies")
def test_large_cluster_decides_over_every_candidate(benchmark) -> None:  # type: ignore[no-untyped-def]
    """64 nodes × 2,000 guests: every guest × other node is scored (speed: pytest-benchmark,
    ``--benchmark-enable``; no timing assertion in a unit test)."""
    rng = np.random.default_rng(0)
    nodes = tuple(f"node{i:02d}" for i in range(64))
    place = {f"vm:{1000 + i}": nodes[int(rng.integers(0, 8))] for i in range(2000)}
    v = view(place, nodes=nodes, cpu={s: float(rng.random()) for s in place})
    p = raw(hold_duration=1, margin=0.0)  # one guest of ~250 per node cannot improve by 10 %
    m = benchmark.pedantic(lambda: (p.reset(), p.decide(v))[1], rounds=1)
    assert m is not None
    assert len(p.candidates(v)) == 2000 * 63


def test_static_usage_counts_running_non_ha_guests_at_their_configured_size():
    """pve-ha-manager ``Manager.pm`` ``recompute_online_node_usage`` adds the remaining non-HA
    guests (``Env/PVE2.pm`` ``get_cluster_service_stats``: every guest of the cluster, state
    ``started`` when its RRD says running) to the usage; in static mode ``Usage/Static.pm``
    ``add_service`` charges them at their configured size like HA resources (a ``maxcpu`` of 0
    charges the node's cores). Two HA VMs of 2 vCPUs / 8 GiB on node1 and a non-HA VM of 4 vCPUs /
    16 GiB on node2: both nodes carry (4/24 + 16/32)/2 — no imbalance, no move; without it node1
    alone would be loaded (raw CV of (x, 0): 1)."""
    placement = {"vm:101": "node1", "vm:102": "node1"}
    base = view(placement, mode="static", nodes=("node1", "node2"))
    with_other = ClusterView(
        **{
            **{f: getattr(base, f) for f in base.__slots__},
            "other_node": np.array([1], dtype=np.int64),
            "other_maxcpu": np.array([4.0]),
            "other_maxmem": np.array([16 * GIB]),
        }
    )
    p = raw()
    stats = p.node_stats(with_other)
    np.testing.assert_allclose(stats.cpu, [4.0, 4.0])
    np.testing.assert_allclose(stats.mem, [16 * GIB, 16 * GIB])
    assert p.imbalance(with_other, stats) == 0.0
    assert p.imbalance(base, p.node_stats(base)) == pytest.approx(1.0)  # CV of (x, 0): 1
    for _ in range(3):
        assert p.decide(with_other) is None
    zero = ClusterView(
        **{**{f: getattr(with_other, f) for f in base.__slots__}, "other_maxcpu": np.zeros(1)}
    )
    assert p.node_stats(zero).cpu[1] == 24.0  # maxcpu 0: the node's cores
    offline = ClusterView(
        **{
            **{f: getattr(with_other, f) for f in base.__slots__},
            "node_online": np.array([True, False]),
        }
    )
    assert p.node_stats(offline).cpu[1] == 0.0  # an offline node is not in the usage
