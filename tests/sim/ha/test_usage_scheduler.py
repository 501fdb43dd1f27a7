"""The CRS scheduler objects (``scheduler.py``, the pve-rs bindings) and the Manager's usage
(``usage.py``), against upstream's own vectors where there are some."""

from __future__ import annotations

import pytest

from pvegym.harness import read_testdir
from pvegym.harness.sim_env import SimEnv
from pvegym.harness.testhardware import TestHardware
from pvegym.sim.ha.scheduler import (
    CompactMigrationCandidate,
    DynamicScheduler,
    SchedulerError,
    StaticScheduler,
)
from pvegym.sim.ha.tools import count_active_services, has_min_version
from pvegym.sim.ha.usage import StaticUsage

GIB = 1 << 30
MIB = 1 << 20

#: proxmox-resource-scheduling ``tests/scheduler.rs``: the homogeneous cluster
HOMOGENEOUS = {
    "node1": {"cpu": 1.7, "maxcpu": 16, "mem": 12334 * MIB, "maxmem": 64 * GIB},
    "node2": {"cpu": 15.184, "maxcpu": 16, "mem": 529 * MIB, "maxmem": 64 * GIB},
    "node3": {"cpu": 5.2, "maxcpu": 16, "mem": 9381 * MIB, "maxmem": 64 * GIB},
}


def _dynamic() -> DynamicScheduler:
    s = DynamicScheduler()
    for name, stats in HOMOGENEOUS.items():
        s.add_node(name, stats)
    return s


@pytest.mark.parametrize(
    ("resource", "ranking"),
    [
        ({"cpu": 0, "maxcpu": 1.0, "mem": 0, "maxmem": 12 * GIB}, ["node2", "node3", "node1"]),
        ({"cpu": 0, "maxcpu": 12.0, "mem": 0, "maxmem": 0}, ["node1", "node3", "node2"]),
        ({"cpu": 0, "maxcpu": 0.0, "mem": 0, "maxmem": 0}, ["node1", "node3", "node2"]),
        ({"cpu": 0, "maxcpu": 12.0, "mem": 0, "maxmem": 12 * GIB}, ["node2", "node3", "node1"]),
    ],
)
def test_start_scoring_matches_the_crate(resource, ranking):
    """``score_nodes_to_start_resource`` ranks as the crate's tests do (no resource placed yet:
    the starting-as-started aggregator adds nothing)."""
    scores = dict(_dynamic().score_nodes_to_start_resource(resource))
    assert sorted(scores, key=lambda n: (-scores[n], n)) == ranking


def test_imbalance_is_the_raw_coefficient_of_variation():
    """ha-manager 5.2.0 links crate 2.0: the homogeneous cluster's imbalance 0.4893954724628247."""
    assert _dynamic().calculate_node_imbalance() == pytest.approx(0.4893954724628247, rel=1e-15)


def test_static_counts_every_placed_resource_at_its_size():
    s = StaticScheduler()
    s.add_node("node1", 16, 64 * GIB)
    s.add_node("node2", 16, 64 * GIB)
    stats = {"maxcpu": 4.0, "maxmem": 8 * GIB}
    s.add_service("vm:101", {"stats": stats, "running": True, "current-node": "node1"})
    s.add_service(
        "vm:102",
        {"stats": stats, "running": False, "current-node": "node1", "target-node": "node2"},
    )
    nodes = s.node_stats()
    assert (nodes["node1"].cpu, nodes["node1"].mem) == (8.0, 16 * GIB)
    assert (nodes["node2"].cpu, nodes["node2"].mem) == (4.0, 8 * GIB)  # moving: on both nodes
    s.remove_service_usage("vm:102")
    assert s.node_stats()["node2"].cpu == 0.0


def test_scheduler_errors_are_the_crates():
    s = StaticScheduler()
    s.add_node("node1", 16, 64 * GIB)
    stats = {"maxcpu": 4.0, "maxmem": 8 * GIB}
    s.add_service("vm:101", {"stats": stats, "running": True, "current-node": "node1"})
    with pytest.raises(SchedulerError, match="resource 'vm:101' already exists"):
        s.add_service("vm:101", {"stats": stats, "running": True, "current-node": "node1"})
    with pytest.raises(SchedulerError, match="nodes for resource 'vm:102' do not exist"):
        s.add_service(
            "vm:102",
            {"stats": stats, "running": True, "current-node": "node1", "target-node": "node9"},
        )
    s.add_node("node2", 16, 64 * GIB)
    s.add_service(
        "vm:103",
        {"stats": stats, "running": True, "current-node": "node1", "target-node": "node2"},
    )
    moving = CompactMigrationCandidate("vm:101", ("vm:101", "vm:103"), ("node2",))
    with pytest.raises(SchedulerError, match="resource 'vm:103' is non-stationary"):
        s.score_best_balancing_migration_candidates([moving], 1)


def test_static_usage_of_a_directory():
    """``Usage/Static.pm`` over test-crs-static1's hardware: the first add_node, the usage of a
    started service, and the lower-is-better start scores the Manager sorts by."""
    td = read_testdir("tests/data/upstream-tests/test-crs-static1")
    hw = TestHardware(td.files, td.cmdlist)
    env = SimEnv("node1", hw, "crm")
    usage = StaticUsage(env, env.get_static_service_stats())
    for node in sorted(hw.nodes):
        usage.add_node(node)
    sid = sorted(hw.service_config)[0]
    usage.add_service_usage(sid, {"state": "started", "node": "node1", "running": 1})
    scores = usage.score_nodes_to_start_service(sid)
    assert set(scores) == set(hw.nodes)
    assert min(scores, key=lambda n: (scores[n], n)) != "node1"  # node1 already carries it


def test_active_services_and_versions():
    ss = {
        "vm:1": {"node": "node1", "state": "started"},
        "vm:2": {"node": "node1", "state": "stopped"},
        "vm:3": {"node": "node2", "state": "migrate", "target": "node1"},
        "vm:4": {"node": "node1", "state": "freeze"},
        "vm:5": {"node": "node1", "state": "request_start"},
    }
    assert count_active_services(ss, "node1") == 2  # vm:1, and vm:3 moving to it
    assert count_active_services(ss, "node2") == 1
    assert has_min_version("9.0.0~16", "9.0.0~16")
    assert has_min_version("9.0.0", "9.0.0~16")  # no revision: not older
    assert not has_min_version("9.0.0~2", "9.0.0~16")
    assert not has_min_version("8.4.1", "9.0.0~16")
    assert has_min_version("9.1.0", "9.0.0~16")
