"""Memory that moves (issue 17 item 6): auto-ballooning (pve-manager ``PVE/AutoBalloon.pm``
``compute_alg1``, ``PVE/Service/pvestatd.pm`` ``auto_ballooning``) and KSM (ksmtuned's defaults).

Figures come from those sources: 100 MiB per VM per 10 s cycle, an 80 % target, ±10 MiB dead
zone, shares weighting; ksmtuned's 60 s monitor, +300/−50 pages, 64…1250 pages per 10 ms sleep,
a 20 % free-memory threshold, a merge on the second pass.
"""

from typing import Any

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.sim.memory import BALLOON_MAX_CHANGE, compute_alg1
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion
from pvegym.units import GiB, MiB


def _vm(balloon: float, bmin: float, maxmem: float, free: float, shares: float = 1000) -> Any:
    return {
        "balloon": balloon,
        "balloon_min": bmin,
        "maxmem": maxmem,
        "freemem": free,
        "shares": shares,
        "lock": 0.0,
    }


# ------------------------------------------------------------------ compute_alg1
def test_alg1_shrinks_by_at_most_100_mib_per_vm() -> None:
    """A goal of −4 GiB on two VMs with room: each gives 100 MiB ($maxchange), no more."""
    vms = {1: _vm(8 * GiB, 2 * GiB, 8 * GiB, 4 * GiB), 2: _vm(8 * GiB, 2 * GiB, 8 * GiB, 4 * GiB)}
    res = compute_alg1(vms, -4 * GiB, BALLOON_MAX_CHANGE)
    assert res == {1: 8 * GiB - 100 * MiB, 2: 8 * GiB - 100 * MiB}


def test_alg1_small_goals_and_unballooned_vms_are_left_alone() -> None:
    vms = {1: _vm(8 * GiB, 2 * GiB, 8 * GiB, 4 * GiB), 2: _vm(8 * GiB, 0.0, 8 * GiB, 4 * GiB)}
    assert compute_alg1(vms, -9 * MiB, BALLOON_MAX_CHANGE) == {}  # within the ±10 MiB dead zone
    assert set(compute_alg1(vms, -1 * GiB, BALLOON_MAX_CHANGE)) == {1}  # no minimum: skipped
    locked = {1: {**vms[1], "lock": 1.0}}
    assert compute_alg1(locked, -1 * GiB, BALLOON_MAX_CHANGE) == {}  # lock migrate: skipped


def test_alg1_stops_at_the_goal_and_the_minimum() -> None:
    """Shrinking by 150 MiB in total from one VM: 100 MiB now (the cap); a VM 50 MiB above its
    minimum gives 50 MiB."""
    one = {1: _vm(8 * GiB, 2 * GiB, 8 * GiB, 4 * GiB)}
    assert compute_alg1(one, -150 * MiB, BALLOON_MAX_CHANGE) == {1: 8 * GiB - 100 * MiB}
    near = {1: _vm(2 * GiB + 50 * MiB, 2 * GiB, 8 * GiB, 1 * GiB)}
    assert compute_alg1(near, -1 * GiB, BALLOON_MAX_CHANGE) == {1: 2 * GiB}


def test_alg1_grows_pressured_vms_first_by_shares() -> None:
    """Growing: VMs short of free memory (≤ 25 % of their minimum) come first; within a list the
    desired size is minimum + shares-weighted part of the allocation, each step ≤ 100 MiB."""
    vms = {
        1: _vm(4 * GiB, 4 * GiB, 8 * GiB, 0.5 * GiB),  # pressured
        2: _vm(4 * GiB, 4 * GiB, 8 * GiB, 3 * GiB),  # enough free memory
    }
    res = compute_alg1(vms, 1 * GiB, BALLOON_MAX_CHANGE)
    assert res == {1: 4 * GiB + 100 * MiB}


# ------------------------------------------------------------------ auto-ballooning in a cluster
def _balloon_cluster(**memory: Any) -> Simulation:
    """One 64 GiB node, 20 GiB of host load and a 40 GiB VM that wants all of it, with a balloon
    minimum of 20 GiB: 93.75 % of the node in use, above pvestatd's 80 % target."""
    data = {
        "name": "t",
        "duration": "1h",
        "memory": memory,
        "nodes": [{"name": "n1", "maxcpu": 16, "maxmem": 64 * GiB, "base_mem": 20 * GiB}],
        "guests": [
            {
                "sid": "vm:100",
                "node": "n1",
                "maxcpu": 4,
                "maxmem": 40 * GiB,
                "cpu": 1.0,
                "memhost": 40 * GiB,
                "balloon_min": 20 * GiB,
            }
        ],
    }
    return Simulation(scenario_from_dict(data), seed=0)


def test_autoballoon_shrinks_100_mib_per_10_s_towards_80_percent() -> None:
    """pvestatd every 10 s: goal = 80 % × 64 GiB − used < −10 MiB, so the VM's balloon shrinks by
    $maxchange = 100 MiB per cycle, its footprint with it, until the node is at 80 % (51.2 GiB in
    use: 8.8 GiB = 90.1 cycles of 100 MiB) — and the guest, wanting 40 GiB, feels its own memory
    pressure."""
    sim = _balloon_cluster()
    sim.reset()  # the first round: pvestatd saw nothing yet (no memory in use measured)
    cl = sim.cluster
    sizes = [float(cl.balloon[0])]
    used = [float(cl.node_mem[0])]
    for _ in range(120):
        sim.step(None)
        sizes.append(float(cl.balloon[0]))
        used.append(float(cl.node_mem[0]))
    steps = -np.diff(sizes)
    assert used[0] == pytest.approx(60 * GiB)
    np.testing.assert_array_equal(steps[:80], 100 * MiB)  # exactly $maxchange per cycle
    target = 0.8 * 64 * GiB
    assert abs(used[-1] - target) <= 100 * MiB  # settles within one step of 80 %
    assert np.all(steps >= 0)  # never more than the goal asks
    assert cl.memhost[0] == pytest.approx(sizes[-1])
    assert cl.guest_mem_some[0] > 0.0  # it wants 40 GiB and has less


def test_autoballoon_switched_off_leaves_the_balloon_alone() -> None:
    sim = _balloon_cluster(autoballoon=False)
    sim.reset()
    for _ in range(20):
        sim.step(None)
    assert sim.cluster.balloon[0] == 40 * GiB
    assert sim.cluster.node_mem[0] == pytest.approx(60 * GiB)


def test_balloon_minimum_is_validated() -> None:
    data = {
        "name": "t",
        "nodes": [{"name": "n1", "maxcpu": 4, "maxmem": 8 * GiB}],
        "guests": [
            {"sid": "vm:1", "node": "n1", "maxcpu": 1, "maxmem": 2 * GiB, "balloon_min": 4 * GiB}
        ],
    }
    with pytest.raises(ConfigError) as err:
        scenario_from_dict(data)
    assert err.value.path == "guests[0].balloon_min"


# ------------------------------------------------------------------ KSM
def _ksm_cluster(**memory: Any) -> Simulation:
    """Two 32 GiB nodes with 20 GiB of host load each (free memory below ksmtuned's 20 %
    threshold of 6.4 GiB, so KSM runs and boosts) and an 8 GiB VM on n1 of which half is
    shareable."""
    node = {"maxcpu": 16, "maxmem": 32 * GiB, "base_mem": 20 * GiB}
    data = {
        "name": "t",
        "duration": "1h",
        "memory": memory,
        "migration": {"lrm_delay_max_s": 0, "precheck_s": 1, "bandwidth": "8GiB/s"},
        "nodes": [{"name": "n1", **node}, {"name": "n2", **node}],
        "guests": [
            {
                "sid": "vm:100",
                "node": "n1",
                "maxcpu": 4,
                "maxmem": 8 * GiB,
                "cpu": 1.0,
                "memhost": 8 * GiB,
                "ksm_shareable": 0.5,
            }
        ],
    }
    return Simulation(scenario_from_dict(data), seed=0)


def test_ksm_merges_at_ksmtuneds_pace() -> None:
    """ksmtuned with free memory below its threshold: npages = 64 + 300 per 60 s adjust (at most
    1250), one scan per 10 ms (16 GiB × 10 ms / 32 GiB = 5 ms, at least 10 ms); a page merges on
    the second pass over the node's mergeable memory (here the VM's 8 GiB)."""
    sim = _ksm_cluster()
    sim.reset()
    cl = sim.cluster
    for _ in range(11):  # rounds 0 … 11 at t = 0 … 110 s
        sim.step(None)
    # the first round's ksmtuned ran at t = 0 with nothing measured yet (free = 32 GiB): it
    # stopped KSM; from t = 60 s on it boosts. Merged share after each later round:
    merged = 0.0
    npages = 64.0
    for t in range(10, 120, 10):
        if t % 60 == 0:
            npages = min(npages + 300, 1250)
        if t >= 60:
            merged = min(merged + npages * 4096 / 0.010 * 10 / (2 * 8 * GiB), 1.0)
    assert cl.ksm_frac[0] == pytest.approx(0.5 * merged, rel=1e-9)
    assert cl.memhost[0] == pytest.approx(8 * GiB * (1 - 0.5 * merged), rel=1e-9)
    assert 0.0 < merged < 1.0


def test_a_migrated_guest_arrives_unmerged() -> None:
    """After KSM merged half of the VM on n1, it migrates to n2: the target holds its full 8 GiB
    footprint at once (the copies are fresh pages), then KSM on n2 merges it again; the VM's own
    view (``mem``) never saw the merging."""
    sim = _ksm_cluster()
    view = sim.reset()
    cl = sim.cluster
    while sim.t < 600:
        view = sim.step(None)
    assert cl.ksm_frac[0] == pytest.approx(0.5)  # fully merged on n1 by now
    mem_before = float(view.guest_mem[0])
    on_n2 = float(cl.node_mem[1])
    view = sim.step(Motion("vm:100", "n2"))
    assert cl.node[0] == 1
    assert cl.memhost[0] == pytest.approx(8 * GiB, rel=1e-6)  # the full footprint
    assert cl.node_mem[1] - on_n2 == pytest.approx(8 * GiB, rel=1e-6)
    assert view.guest_mem[0] == pytest.approx(mem_before)
    for _ in range(30):
        sim.step(None)
    assert 0.0 < cl.ksm_frac[0] <= 0.5 and cl.memhost[0] < 8 * GiB


def test_ksm_switched_off_never_merges() -> None:
    sim = _ksm_cluster(ksm=False)
    sim.reset()
    for _ in range(60):
        sim.step(None)
    assert sim.cluster.ksm_frac[0] == 0.0 and sim.cluster.memhost[0] == 8 * GiB
