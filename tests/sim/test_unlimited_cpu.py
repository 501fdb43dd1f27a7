"""A container without a CPU limit (``maxcpu = 0``: neither ``cores`` nor ``cpulimit``), counted
as PVE counts it (issue 33, item 5).

Upstream: pve-container ``PVE::LXC::Config::get_derived_property('max-cpu')`` is
``cpulimit || cores || 0``, read by pve-ha-manager ``PVECT::get_static_stats_from_config``;
proxmox-resource-scheduling ``NodeStats::add_started_resource`` (``node.rs``) and
``add_cpu_usage`` (``pve_static.rs``) charge a ``maxcpu`` of 0 as the whole node's CPUs
("a maxcpu value of `0.0` means no cpu usage limit on the node"), while a static move transfers
``cpu = maxcpu`` = 0; the dynamic usage (``PVE2.pm`` ``get_dynamic_service_stats``) is the RRD's
cores busy out of its ``maxcpu``, which pve-container's ``vmstatus`` gives as the host's CPU
count.
"""

from __future__ import annotations

from typing import Any

import pytest

from pvegym.errors import ConfigError
from pvegym.policies.upstream import UpstreamPolicy
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion, guest_cpu_cap
from pvegym.units import GiB


def _data(ct_node: str = "small", demand: float = 30.0, **extra: Any) -> dict[str, Any]:
    return {
        "name": "unlimited",
        "duration": 600,
        "migration": {"lrm_delay_max_s": 0, "ct_shutdown_s": 5, "ct_start_s": 5},
        "nodes": [
            {"name": "big", "maxcpu": 72, "maxmem": 256 * GiB},
            {"name": "small", "maxcpu": 16, "maxmem": 64 * GiB},
        ],
        "guests": [
            {"sid": "ct:200", "node": ct_node, "maxcpu": 0, "maxmem": 4 * GiB, "cpu": demand},
            {"sid": "vm:100", "node": "big", "maxcpu": 4, "maxmem": 8 * GiB, "cpu": 1.0},
        ],
        **extra,
    }


def test_zero_is_a_containers_no_limit_only() -> None:
    scenario_from_dict(_data())  # a container: valid
    bad = _data()
    bad["guests"][0]["sid"] = "vm:200"
    with pytest.raises(ConfigError, match=r"guests\[0\]\.maxcpu.*only for a container"):
        scenario_from_dict(bad)
    bad = _data()
    bad["guests"][0]["maxcpu"] = -1
    with pytest.raises(ConfigError, match=r"guests\[0\]\.maxcpu"):
        scenario_from_dict(bad)


@pytest.mark.parametrize(("node", "cores"), [("small", 16.0), ("big", 72.0)])
def test_static_usage_charges_the_whole_node_it_runs_on(node: str, cores: float) -> None:
    """On the 16-core node it counts 16, on the 72-core one 72 (beside vm:100's 4 there)."""
    view = Simulation(scenario_from_dict(_data(node)), seed=0).reset()
    g = view.sids.index("ct:200")
    assert view.guest_maxcpu[g] == 0.0  # configured, as PVE's static stats read it
    assert guest_cpu_cap(view)[g] == cores  # what it can use: its node's CPUs
    pol = UpstreamPolicy(mode="static")
    stats = pol.node_stats(view)
    big, small = view.node_names.index("big"), view.node_names.index("small")
    assert stats.cpu[big] == 4.0 + (72.0 if node == "big" else 0.0)
    assert stats.cpu[small] == (16.0 if node == "small" else 0.0)
    # a static move transfers its cpu = maxcpu = 0 (pve_static.rs): the asymmetry upstream has
    assert pol.guest_stats(view)[0][g] == 0.0


def test_the_workload_is_capped_at_the_nodes_cpus_where_it_runs() -> None:
    """30 cores wanted: 16 on the 16-core node, all 30 after it relocates to the 72-core one."""
    sim = Simulation(scenario_from_dict(_data("small", 30.0)), seed=0)
    sim.reset()
    cl = sim.cluster
    g = cl.guest_index["ct:200"]
    sim.step(None)
    assert cl.demand[g] == 16.0 and cl.guest_maxcpu[g] == 16.0
    sim.step(Motion("ct:200", "big"))
    for _ in range(4):
        view = sim.step(None)
    assert cl.node[g] == cl.node_index["big"]
    assert cl.demand[g] == 30.0 and cl.guest_maxcpu[g] == 72.0
    assert view.guest_maxcpu[view.sids.index("ct:200")] == 0.0  # the view keeps the config


def test_the_ports_static_and_dynamic_stats() -> None:
    """The full stack's CRM environment hands the port ``maxcpu`` 0 (static, from the config)
    and the node's CPUs (dynamic, the RRD's ``maxcpu``), as ``PVE2.pm`` does."""
    sim = Simulation(scenario_from_dict(_data("small", 3.0, ha_stack="full")), seed=0)
    sim.reset()
    sim.step(None)
    env = sim.moves.stack.daemons["big"][0]
    static = env.get_static_service_stats()["ct:200"]["usage"]
    dynamic = env.get_dynamic_service_stats()["ct:200"]["usage"]
    assert static["maxcpu"] == 0.0
    assert dynamic["maxcpu"] == 16.0 and dynamic["cpu"] == pytest.approx(3.0)
