"""Parallel migrations share the network (issue 17 item 2).

Upstream sources followed:

* pve-ha-manager ``src/PVE/HA/LRM.pm`` ``run_workers`` — the LRM forks up to ``max_workers``
  workers in one iteration — and ``src/PVE/HA/Env/PVE2.pm`` ``get_max_workers`` (datacenter.cfg
  ``max_workers``, default 4): a bundle's members queued in one CRM round on one source start at
  the same LRM tick and migrate at once;
* QEMU ``migration/migration.c`` ``migration_update_counters``: ``bandwidth = transferred /
  time_spent`` of each iteration and ``threshold_size = bandwidth × downtime_limit`` — a stream
  whose share of the link changes sends at the new rate and switches over at the new threshold.

A stream's rate is its max-min fair share of its source's and its target's link, at most one
stream's cap (``pvegym/sim/network.py``). The migrations here dirty nothing, so each is pass 1 at
its rate and its end is exact in closed form: QEMU's iteration check falls on the 50 ms grid, and
the switchover sends the rest at the same rate, so a lone stream of R bytes ends R/B after it
started (up to float rounding).
"""

from typing import Any

import pytest

from pvegym.sim.migration import Migration, MigrationParams
from pvegym.sim.motions import Job, MotionPipeline, migration_template
from pvegym.sim.network import fair_rates
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion
from pvegym.units import GiB, MiB

B = 430 * MiB  # one stream's cap (the scenario default)
#: QEMU's iteration check grid (``MAX_WAIT`` 50 ms): a rate change off the grid can move an end
#: by at most a tick either way; two of them bound every closed-form figure below
TICK = 0.05


def _vm(sid: str, node: str, resident: float, **kw: Any) -> dict[str, Any]:
    return {
        "sid": sid,
        "node": node,
        "maxcpu": 4,
        "maxmem": 48 * GiB,
        "cpu": 1.0,
        "memhost": resident,
        **kw,
    }


def _bundle(residents: tuple[float, ...], **migration: Any) -> Simulation:
    """node1 holds a bundle (positive affinity) of VMs with these footprints; node2 is empty."""
    sids = [f"vm:{101 + i}" for i in range(len(residents))]
    data = {
        "name": "bundle",
        "duration": "30m",
        "nodes": [
            {"name": "node1", "maxcpu": 64, "maxmem": 512 * GiB},
            {"name": "node2", "maxcpu": 64, "maxmem": 512 * GiB},
        ],
        "guests": [_vm(s, "node1", r) for s, r in zip(sids, residents, strict=True)],
        "resource_affinity": [{"name": "b", "resources": sids, "affinity": "positive"}],
        "migration": migration,
    }
    sim = Simulation(scenario_from_dict(data), seed=3)
    sim.reset()
    assert sim.commit(Motion("vm:101", "node2"))
    return sim


def _run_until_moved(sim: Simulation, limit_s: float = 1200.0) -> list[Job]:
    """Step until the bundle's move record ended; the ended jobs in order of their end."""
    rec = sim.metrics.moves[0]
    while rec.t_end is None and sim.t < limit_s:
        sim.step(None)
    assert rec.t_end is not None and rec.outcome == "succeeded"
    return [e for _, e in sim._log if isinstance(e, Job)]


def _solo_s(resident: float, bandwidth: float = B) -> float:
    """The migration time (s) of one guest alone at ``bandwidth``."""
    mig = Migration(
        MigrationParams(memory=48 * GiB, bandwidth=bandwidth, dirty_rate=0.0, resident=resident),
        record_timeline=False,
    )
    return mig.run(3600.0).t


def test_a_bundle_with_link_room_takes_its_longest_member_not_the_sum() -> None:
    # two streams of 430 MiB/s fit in the default 10 GbE link (1.25e9 B/s > 2 × 451e6): both
    # run at the cap from the same LRM tick, so the bundle ends with its longest member
    r1, r2 = 32 * GiB, 20 * GiB
    sim = _bundle((r1, r2))
    jobs = {j.sid: j for j in sim.jobs}
    assert jobs["vm:101"].t_start == jobs["vm:102"].t_start  # one LRM tick for the source
    ended = _run_until_moved(sim)
    rec = sim.metrics.moves[0]
    assert rec.t_end is not None
    wall = rec.t_end - rec.t
    t1, t2 = _solo_s(r1), _solo_s(r2)
    lead_in = jobs["vm:101"].t_start - rec.t + sim.scenario.migration.precheck_s
    assert wall == pytest.approx(lead_in + max(t1, t2), abs=1e-6)
    assert t1 <= wall <= 1.2 * t1  # issue 17's field target: ≤ 1.2 × the longest member
    assert wall < 0.75 * (t1 + t2)  # clearly below the serialized sum
    for job in ended:  # each ran at the cap throughout
        solo = _solo_s(r1 if job.sid == "vm:101" else r2)
        assert job.t_end is not None
        assert job.t_end - job.t_transfer_start == pytest.approx(solo, abs=1e-6)


def test_a_bundle_on_a_link_of_one_streams_cap_takes_the_sum() -> None:
    # link = one stream's cap: two streams share it half and half until the smaller ends, then
    # the larger has it whole — the link sends R1 + R2 bytes at B, the bundle takes the sum
    r1, r2 = 32 * GiB, 20 * GiB
    sim = _bundle((r1, r2), link_bandwidth=B)
    start = sim.jobs[0].t_start
    sim.step(None)
    while not any(j.phase == "transfer" for j in sim.jobs):
        sim.step(None)
    sim.step(None)  # a whole round with both streams: the source sends B × 10 s
    node1 = sim.cluster.node_index["node1"]
    ms = sim.scenario.migration
    assert sim.cluster.motion_cpu[node1] == pytest.approx(ms.cpu_source_cores, rel=1e-9)
    assert all(j.migration is not None and j.migration.bandwidth == B / 2 for j in sim.jobs)
    ended = _run_until_moved(sim)
    rec = sim.metrics.moves[0]
    assert rec.t_end is not None
    t1, t2 = _solo_s(r1), _solo_s(r2)
    expected = start + ms.precheck_s + t1 + t2
    assert rec.t_end == pytest.approx(expected, abs=2 * TICK)
    small = next(j for j in ended if j.sid == "vm:102")  # at half the rate: twice its solo time
    assert small.t_end is not None
    assert small.t_end - small.t_transfer_start == pytest.approx(2 * t2, abs=2 * TICK)


def test_the_worker_pool_runs_four_at_once_and_the_fifth_waits_for_a_worker() -> None:
    # LRM.pm run_workers: at most max_workers (4) workers; four equal streams share the 10 GbE
    # link (4 × 451e6 > 1.25e9): 312.5e6 B/s each; the fifth starts when a worker frees
    r = 8 * GiB
    link = 1.25e9
    sim = _bundle((r,) * 5)
    start = sim.jobs[0].t_start
    ended = _run_until_moved(sim)
    first4 = [j for j in ended if j.sid != "vm:105"]
    fifth = next(j for j in ended if j.sid == "vm:105")
    ms = sim.scenario.migration
    for job in first4:
        assert job.t_transfer_start == pytest.approx(start + ms.precheck_s)
        assert job.t_end is not None
        assert job.t_end - job.t_transfer_start == pytest.approx(_solo_s(r, link / 4), abs=2 * TICK)
    first_end = min(j.t_end or 0.0 for j in first4)
    assert fifth.t_transfer_start == pytest.approx(first_end + ms.precheck_s, abs=1e-9)


def test_fair_rates_is_max_min_fair() -> None:
    # node 0 sends three streams on a 10-unit link; one of them also shares node 2's 2-unit
    # receiving side with a stream from node 1: that pair is held to 1 each, the other two
    # streams of node 0 split the rest of its link, 4.5 each — capped at 4
    rates = fair_rates([(0, 1), (0, 2), (0, 3), (1, 2)], 4.0, [10.0, 10.0, 2.0, 10.0])
    assert rates == pytest.approx([4.0, 1.0, 4.0, 1.0])
    assert fair_rates([(0, 1)], 4.0, [3.0, 10.0]) == [3.0]  # a lone stream: min(cap, links)
    assert fair_rates([(0, 1), (1, 0)], 4.0, [5.0, 5.0]) == [4.0, 4.0]  # full duplex


def test_a_single_motion_keeps_its_path_and_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    # no sharing when one motion runs: the lone-job path, no bandwidth change, the standalone
    # migration's time
    def never(*_: Any) -> None:
        raise AssertionError("a lone motion took the shared path")

    monkeypatch.setattr(MotionPipeline, "_lrm_shared", never)
    monkeypatch.setattr(Migration, "set_bandwidth", never)
    data = {
        "name": "one",
        "duration": "10m",
        "nodes": [
            {"name": "node1", "maxcpu": 16, "maxmem": 128 * GiB},
            {"name": "node2", "maxcpu": 16, "maxmem": 128 * GiB},
        ],
        "guests": [_vm("vm:101", "node1", 12 * GiB, dirty_rate=100 * MiB, wws=2 * GiB)],
    }
    scn = scenario_from_dict(data)
    sim = Simulation(scn, seed=0)
    sim.reset()
    assert sim.commit(Motion("vm:101", "node2"))
    for _ in range(30):
        sim.step(None)
    (job,) = [e for _, e in sim._log if isinstance(e, Job)]
    g = scn.guests[0]
    solo = Migration.for_guest(
        migration_template(scn.migration), g.maxmem, 12 * GiB, g.dirty_rate, 2 * GiB, 1.0
    ).run(3600.0)
    assert job.ok and job.t_end is not None
    assert job.t_end - job.t_transfer_start == solo.t


def _drain(link: float | None) -> list[Job]:
    """Full HA stack: node1 (two idle 16 GiB VMs that dirty nothing) enters maintenance at
    60 s; the HA manager migrates both in one CRM round, node1's LRM forks both workers."""
    data: dict[str, Any] = {
        "name": "drain",
        "duration": "15m",
        "ha_stack": "full",
        "nodes": [{"name": f"node{i}", "maxcpu": 32, "maxmem": 256 * GiB} for i in (1, 2, 3)],
        "guests": [
            _vm("vm:101", "node1", 16 * GiB),
            _vm("vm:102", "node1", 16 * GiB),
            _vm("vm:201", "node2", 4 * GiB),
            _vm("vm:301", "node3", 4 * GiB),
        ],
        "events": [{"t": 60, "type": "maintenance-enable", "node": "node1"}],
    }
    if link is not None:
        data["migration"] = {"link_bandwidth": link}
    sim = Simulation(scenario_from_dict(data), seed=1)
    sim.run(lambda view: None)
    moved = [e for _, e in sim._log if isinstance(e, Job)]
    assert sorted(j.sid for j in moved) == ["vm:101", "vm:102"]
    assert all(j.ok for j in moved)
    return moved


def test_full_stack_maintenance_migrations_overlap_and_share_the_source_link() -> None:
    r = 16 * GiB
    solo = _solo_s(r)
    # 10 GbE: room for both at the cap — they overlap and each takes its solo time
    a, b = _drain(None)
    assert max(a.t_transfer_start, b.t_transfer_start) < min(a.t_end or 0.0, b.t_end or 0.0)
    for job in (a, b):
        assert job.t_end is not None
        assert job.t_end - job.t_transfer_start == pytest.approx(solo, abs=1e-6)
    # a source link of one stream's cap: node1 sends 2 R bytes at B at most — the drain takes
    # the sum; the second worker's stream finds the link full and starts with the next round,
    # its precheck then overlapping the first's sending (≤ one round + the precheck longer)
    a, b = _drain(B)
    first = min(a.t_transfer_start, b.t_transfer_start)
    last = max(a.t_end or 0.0, b.t_end or 0.0)
    assert max(a.t_transfer_start, b.t_transfer_start) < min(a.t_end or 0.0, b.t_end or 0.0)
    assert 2 * solo - 2 * TICK <= last - first <= 2 * solo + 10.0 + 3.0


# ------------------------------------------------------------------ the kernel's share changes
def _mig(resident: float, dirty: float = 0.0, wws: float | None = None) -> Migration:
    params = MigrationParams(
        memory=48 * GiB if dirty == 0.0 else resident,
        bandwidth=B,
        dirty_rate=dirty,
        wws=wws,
        resident=resident,
    )
    return Migration(params, record_timeline=False)


def test_a_bandwidth_change_mid_migration_changes_the_rate_from_then_on() -> None:
    # pass 1 of R bytes, halved at 20 s: R − 20 B left at B / 2
    r = 16 * GiB
    mig = _mig(r)
    mig.advance(20.0)
    mig.set_bandwidth(B / 2)
    mig.run(3600.0)
    assert mig.outcome == "completed"
    assert mig.t == pytest.approx(20.0 + (r - 20.0 * B) / (B / 2), abs=1e-6)


def test_the_switchover_threshold_follows_the_share() -> None:
    # QEMU migration_update_counters: threshold_size = measured bandwidth × downtime limit, so at
    # half the rate QEMU waits for a tail that half the rate sends within the limit; had it kept
    # the old threshold, the tail (< B × limit) would take up to twice the limit at B / 2
    mig = _mig(8 * GiB, dirty=100 * MiB, wws=512 * MiB)
    mig.advance(5.0)  # within pass 1 (8 GiB at 430 MiB/s: 19 s)
    mig.set_bandwidth(B / 2)
    mig.run(3600.0)
    assert mig.outcome == "completed"
    assert mig.downtime_s <= mig.downtime_limit_ms / 1000.0


def test_setting_the_same_bandwidth_changes_nothing() -> None:
    # the non-convergence case of docs/model.md (24 GiB, 680 MiB/s raw over all memory): its
    # 100 ms polls and downtime doublings are the state a re-planned next check must keep
    def run(step: float | None) -> Migration:
        mig = _mig(24 * GiB, dirty=680 * MiB)
        t = 0.0
        while step is not None and t + step < 150.0:
            t += step
            mig.advance(step)
            mig.set_bandwidth(B)
        mig.advance(150.0 - mig.t)
        return mig

    plain, poked = run(None), run(7.3)
    assert poked.downtime_limit_ms == plain.downtime_limit_ms == 800.0
    assert poked.sync_count == plain.sync_count
    assert poked.throttle_pct == plain.throttle_pct
    assert poked.transferred == pytest.approx(plain.transferred, rel=1e-9)
