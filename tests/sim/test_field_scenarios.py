"""``docs/model.md`` (Targets): the five field scenarios hold their targets in ≥ 8 of 10 seeds.

Targets are judged by :func:`pvegym.experiments.ablation.check_target` (the single definition the
``ablate`` command uses too); each scenario runs for its own duration. ``nonconverging-migration``
runs with ``--qemu-server unpatched`` for upstream and ``patched`` for patched.
"""

from __future__ import annotations

import pytest

from pvegym.experiments.ablation import (
    BUNDLE_RATIO,
    check_target,
    needed,
    qemu_server_for,
    run_episode,
    solo_migration_s,
)
from pvegym.sim import catalog
from pvegym.sim.scenarios import BUNDLE_MEMBERS, FIELD_SCENARIOS
from pvegym.units import GiB

SEEDS = range(10)

CASES = [
    pytest.param(scenario, policy, id=f"{scenario}-{policy}")
    for scenario in FIELD_SCENARIOS
    for policy in ("upstream", "patched")
    if not (scenario == "pressure-evacuation" and policy == "upstream")  # no upstream target
]


@pytest.mark.parametrize(("scenario", "policy"), CASES)
def test_target_holds_in_8_of_10_seeds(scenario: str, policy: str) -> None:
    results = []
    for seed in SEEDS:
        ep = run_episode(scenario, policy, seed, qemu_server=qemu_server_for(scenario, policy))
        results.append(check_target(ep, policy))
    passed = sum(1 for ok, _ in results if ok)
    assert passed >= needed(len(SEEDS)), [d for _, d in results]


def test_scenarios_are_registered_with_faithful_durations() -> None:
    durations = {name: catalog.scenario(name).duration for name in FIELD_SCENARIOS}
    assert durations["failure-loop"] == 20 * 60  # "25 identical failing attempts in 20 minutes"
    assert durations["dominant-oscillation"] == 27 * 60  # "five moves … in 27 minutes"
    assert durations["idle-night"] == 8 * 3600  # docs/model.md, Targets: the night, 8 h
    scn = catalog.scenario("nonconverging-migration")
    big = next(g for g in scn.guests if g.sid == "vm:120")
    assert big.maxmem == 24 * 2**30 and big.dirty_rate > scn.migration.bandwidth


def test_nonconverging_upstream_pause_is_a_guest_failure() -> None:
    """``docs/model.md`` (Live migration, Targets; revised): with the shipped qemu-server and QEMU's 5 s sync timer the balancer's
    move of vm:120 ends after ≈ 300–320 s of transfer with a ≈ 23 s guest pause (limit 25.6 s) —
    the HA manager counts it as succeeded, the metrics count it as a failure for the guest; without
    the timer (QEMU < 9.2) it is still running 10 min after it was issued."""
    ep = run_episode("nonconverging-migration", "upstream", 0, qemu_server="unpatched")
    move = next(m for m in ep.moves if m.guest == "vm:120")
    assert move.outcome == "succeeded" and move.t_end is not None
    assert 300.0 <= move.t_end - move.t <= 320.0 + 10.0 + 3.0  # + LRM start offset + precheck
    assert 12.8 < move.pause_s <= 25.6 + 1.0 + 0.1  # under the 8th limit, + poll lag and resume
    assert ep.metrics["moves_guest_failed"] == 1
    assert ep.metrics["downtime_s"] == pytest.approx(move.pause_s)
    off = run_episode(
        "nonconverging-migration",
        "upstream",
        0,
        qemu_server="unpatched",
        overrides={"migration.sync_timer": False},
    )
    first = next(m for m in off.moves if m.guest == "vm:120")
    assert first.outcome == "running" and off.metrics["sim_seconds"] - first.t >= 600.0


def test_idle_night_imbalance_near_049_when_nothing_moves() -> None:
    """The field report's "imbalance metric standing at ~49% the whole time" (noop = nothing moves)."""
    for seed in (0, 1):
        ep = run_episode("idle-night", "noop", seed)
        assert ep.metrics["imbalance_mean"] == pytest.approx(0.49, abs=0.02)
        assert ep.metrics["stall_cpu_s"] < 60.0  # no pressure all night


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_patched_without_pressure_telemetry_fails_open(seed: int) -> None:
    """Telemetry off: patched decides like patched without its pressure gate (patches 1–3, 6)."""
    off = ("node_cpu_some", "node_mem_some", "node_mem_full")
    gated = run_episode("failure-loop", "patched", seed, telemetry_off=off)
    ungated = run_episode(
        "failure-loop", "patched", seed, {"pressure_gate": False}, telemetry_off=off
    )
    moves = [(m.t, m.guest, m.source, m.target, m.outcome) for m in gated.moves]
    assert moves == [(m.t, m.guest, m.source, m.target, m.outcome) for m in ungated.moves]
    assert len(moves) >= 1


def test_idle_night_non_ha_guest_is_seen_and_never_moved() -> None:
    """Issue 17 item 3: idle-night's vm:900 is not an HA resource. It loads node2 (the dynamic
    usage reads the node's figures, which include it), the view lists it among the non-HA guests
    the static usage charges at their configured size, and neither the balancer nor a manual
    motion of it through the HA manager moves it."""
    from pvegym.sim.simulation import Simulation
    from pvegym.sim.view import Motion

    sim = Simulation(catalog.scenario("idle-night"), seed=0)
    view = sim.reset()
    g = sim.cluster.guest_index["vm:900"]
    assert "vm:900" not in view.sids
    assert list(view.other_node) == [1] and list(view.other_maxmem) == [4 * GiB]
    assert sim.cluster.memhost[g] == 2 * GiB and sim.cluster.demand[g] == pytest.approx(0.05)
    assert not sim.commit(Motion("vm:900", "node1"))  # not an HA service: ignored
    ep = run_episode("idle-night", "upstream", 0)
    assert ep.moves and all(m.guest != "vm:900" for m in ep.moves)


def test_bundle_migration_takes_the_sum_when_the_link_has_no_room() -> None:
    """``bundle-migration``'s target fails where its premise does: on links of one stream's cap
    the two members share 430 MiB/s and the bundle takes about the sum of their migration times
    (pve-ha-manager ``LRM.pm`` ``run_workers`` starts both; QEMU's rate is the share)."""
    ep = run_episode(
        "bundle-migration", "upstream", 0, overrides={"migration.link_bandwidth": 430 * 2**20}
    )
    ok, desc = check_target(ep, "upstream")
    assert not ok, desc
    move = next(m for m in ep.moves if m.guest == BUNDLE_MEMBERS[0])
    assert move.t_end is not None
    solo = [solo_migration_s("bundle-migration", sid) for sid in BUNDLE_MEMBERS]
    # at least the sum (the link sends both at 430 MiB/s at most); at most the sum + the LRM's
    # offset (< 10 s) + the precheck (3 s) + 5 % for the working sets' pages (2 GiB dirtied at
    # 30–40 MiB/s) sent again while each stream runs at half its rate
    assert BUNDLE_RATIO * max(solo) < sum(solo)  # the premise: one cap, no room for both
    assert sum(solo) <= move.t_end - move.t <= 1.05 * sum(solo) + 13.0


def test_imbalance_without_pressure_tells_upstream_and_patched_apart() -> None:
    """Issue 34: ``pressure-evacuation-imbalanced``'s premise (with nothing moving the imbalance is
    above upstream's 0.3 before t0 and no node is under pressure) and that its targets separate
    the two balancers: upstream's episode fails patched's target and patched's fails upstream's."""
    from pvegym.experiments.ablation import GATE_PCT, PRESSURED_NODE
    from pvegym.policies.upstream import UpstreamPolicy
    from pvegym.sim.move_ledger import CHURN_PRESSURE_PCT
    from pvegym.sim.scenarios import PRESSURE_ONSET_S
    from pvegym.sim.simulation import Simulation

    name = "pressure-evacuation-imbalanced"
    threshold = UpstreamPolicy.Config().threshold
    noop = run_episode(name, "noop", 0)
    pre = [k for k, t in enumerate(noop.t) if t < PRESSURE_ONSET_S]
    assert max(max(noop.cpu_some[k] + noop.mem_some[k]) for k in pre) < CHURN_PRESSURE_PCT
    node = noop.node_names.index(PRESSURED_NODE)
    assert max(noop.cpu_some[k][node] for k in range(pre[-1] + 1, len(noop.t))) >= GATE_PCT
    probe = UpstreamPolicy()
    sim_imbalances = []
    sim = Simulation(catalog.scenario(name, 0), 0)
    view = sim.reset()
    while view.t < PRESSURE_ONSET_S:
        probe.decide(view)  # the counter only: noop's cluster, upstream's imbalance of it
        assert probe.last_imbalance is not None
        sim_imbalances.append(probe.last_imbalance)
        view = sim.step(None)
    assert min(sim_imbalances) > threshold
    for seed in (0, 1):
        up = run_episode(name, "upstream", seed)
        pa = run_episode(name, "patched", seed)
        assert check_target(up, "upstream")[0] and not check_target(up, "patched")[0]
        assert check_target(pa, "patched")[0] and not check_target(pa, "upstream")[0]
