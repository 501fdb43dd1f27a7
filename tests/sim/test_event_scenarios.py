"""Issue 16's field scenarios on the full HA stack, for every headline policy over 10 seeds.

* ``maintenance-drain``: every HA guest of node1 leaves it by 10 min + the drain time, and no
  balancer motion targets node1 while the HA manager has it in maintenance.
* ``node-failure``: node2's services run again elsewhere within the recovery bound of
  ``tests/sim/test_ha_events.py`` (``LOCK_TIMEOUT + round_s + lrm_delay_max_s`` = 140 s: the
  agent lock's lifetime from its last renewal, the master's round that acknowledges the fence and
  recovers, the new node's LRM tick that starts the service; the fence delay of 60 s is shorter
  than the lock's lifetime, so it adds nothing while the master — node1 — survives).

The drain time is derived from the model's timings: the master reads the maintenance command in
the event's round, node1's LRM enters maintenance mode at its tick in that round and the master
sees it the round after (2 rounds); the LRM starts the migrations at its next tick (≤
``lrm_delay_max_s``), up to its four workers at once, all sharing node1's migration link. The link
is work-conserving: while any of them is in flight it sends ``bandwidth``, of which the guests'
dirtying takes back at most the sum of all their dirty rates, so every guest's whole memory is
through after at most Σ maxmem / (bandwidth − Σ dirty_rate); add each motion's precheck and a
second of switchover as if they ran one after the other, and one more round for the fifth guest,
which waits for a worker.
"""

from __future__ import annotations

import pytest

from pvegym.policies import make_policy
from pvegym.sim import catalog
from pvegym.sim.scenario import Scenario
from pvegym.sim.scenarios import MAINTENANCE_OFF_S, MAINTENANCE_ON_S, NODE_FAILURE_S
from pvegym.sim.simulation import Simulation
from tests.sim.test_ha_events import RECOVERY_BOUND_S

SEEDS = range(10)
POLICIES = ("noop", "upstream", "patched", "guest-centric")
SWITCHOVER_S = 1.0  # s, a live migration's pause and resume, at most (migrate_downtime 0.1 s)


def drain_bound(scn: Scenario, node: str) -> float:
    """When every HA guest of ``node`` has left it at the latest (s; module docstring)."""
    ms, rs = scn.migration, scn.round_s
    guests = [g for g in scn.guests if g.node == node and g.ha]
    dirty = sum(g.dirty_rate for g in guests)
    assert dirty < ms.bandwidth, "the bound needs the link to outrun all the guests' dirtying"
    motions = sum(ms.precheck_s + SWITCHOVER_S + g.maxmem / (ms.bandwidth - dirty) for g in guests)
    return MAINTENANCE_ON_S + 2 * rs + ms.lrm_delay_max_s + motions + rs


def _first(log: list[tuple[float, str]], text: str, after: float = 0.0) -> float:
    return next(t for t, line in log if text in line and t >= after)


@pytest.mark.parametrize("policy", POLICIES)
def test_maintenance_drain(policy: str) -> None:
    scn = catalog.resolve("maintenance-drain").scenario
    assert scn.ha_stack == "full"
    bound = drain_bound(scn, "node1")
    node1_guests = [g.sid for g in scn.guests if g.node == "node1"]
    for seed in SEEDS:
        sim = Simulation(scn, seed)
        result = sim.run(make_policy(policy))
        log = sim.log
        start = _first(log, "node 'node1': state changed from 'online' => 'maintenance'")
        end = _first(log, "node 'node1': state changed from 'maintenance' => 'online'")
        assert MAINTENANCE_ON_S <= start < end and end >= MAINTENANCE_OFF_S
        for sid in node1_guests:
            left = _first(log, f"{sid}: migration to node", MAINTENANCE_ON_S)
            assert left <= bound, (seed, sid, left, bound)
        during = [(t, line) for t, line in log if start <= t < end]
        assert not [x for x in during if "auto rebalance" in x[1] and "to node1" in x[1]], seed
        assert not [
            mv for mv in result["moves"] if mv["target"] == "node1" and start <= mv["t"] < end
        ], seed


@pytest.mark.parametrize("policy", POLICIES)
def test_node_failure(policy: str) -> None:
    scn = catalog.resolve("node-failure").scenario
    assert scn.ha_stack == "full"
    node2_guests = [g.sid for g in scn.guests if g.node == "node2"]
    for seed in SEEDS:
        sim = Simulation(scn, seed)
        m = sim.run(make_policy(policy))["metrics"]
        assert sim._stack is not None
        assert sim._stack.cfs.manager_status["master_node"] == "node1"  # the bound's premise
        assert m["recovery_s"] is not None and m["recovery_s"] <= RECOVERY_BOUND_S, seed
        ack = _first(sim.log, "fencing: acknowledged - got agent lock for node 'node2'")
        assert NODE_FAILURE_S < ack <= NODE_FAILURE_S + RECOVERY_BOUND_S
        cl = sim.cluster
        for sid in node2_guests:
            g = cl.guest_index[sid]
            assert cl.node_names[int(cl.node[g])] != "node2" and cl.running[g], (seed, sid)
