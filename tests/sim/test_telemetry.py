"""Telemetry timing as pvestatd has it (issue 17 item 5): pve-manager ``PVE/Service/pvestatd.pm``
(every node samples every ``$updatetime`` = 10 s at its own phase), qemu-server ``vmstatus``
(``cpu`` from the change since ``$last_proc_pid_stat``: 0 for a process's first sample), pve-cluster
``status.c`` (RRD step 60 s, AVERAGE)."""

from typing import Any

import numpy as np
import pytest

from pvegym.sim.scenario import TelemetrySettings, scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Motion
from pvegym.units import GiB


def _sim(**telemetry: Any) -> Simulation:
    """Two nodes; vm:100 (3 cores busy) on n1 steps to 9 cores at t = 100 s; vm:101 idle on n2."""
    data = {
        "name": "t",
        "duration": "1h",
        "telemetry": telemetry,
        "migration": {"lrm_delay_max_s": 0, "precheck_s": 1, "bandwidth": "16GiB/s"},
        "nodes": [
            {"name": "n1", "maxcpu": 16, "maxmem": 64 * GiB},
            {"name": "n2", "maxcpu": 16, "maxmem": 64 * GiB},
        ],
        "guests": [
            {
                "sid": "vm:100",
                "node": "n1",
                "maxcpu": 12,
                "maxmem": 4 * GiB,
                "cpu": [{"type": "constant", "level": 3.0}, {"type": "steps", "at": [[100, 6.0]]}],
                "memhost": 2 * GiB,
            },
            {
                "sid": "vm:101",
                "node": "n2",
                "maxcpu": 2,
                "maxmem": 4 * GiB,
                "cpu": 0.5,
                "memhost": 2 * GiB,
            },
        ],
    }
    return Simulation(scenario_from_dict(data), seed=3)


def test_defaults_are_pve_9s() -> None:
    """PVE 9: every node's own pvestatd loop (phased), the HA manager reads point samples
    (``Env/PVE2.pm`` ``rrd_dump``), and vmstatus's first-sample rule."""
    s = TelemetrySettings()
    assert (s.timing, s.mode, s.first_sample_zero) == ("phased", "point", True)


def test_nodes_sample_at_their_own_phase() -> None:
    """A sample's cpu is the busy share of the 10 s before it: at round t node n's latest sample
    was taken at t − aₙ, so a load step at the start of the round (t − 10) shows with weight
    1 − aₙ/10 in the first round and fully in the second; the phase differs per node."""
    sim = _sim()
    view = sim.reset()
    ages = sim.telemetry.node_age.copy()
    assert np.all((ages >= 0.0) & (ages < 1.0)) and ages[0] != ages[1]
    while sim.t < 100:
        view = sim.step(None)
    before = float(view.node_cpu[0])
    assert before == pytest.approx(3.0)
    view = sim.step(None)  # the round (100, 110]: vm:100 now wants 9 cores
    assert sim.cluster.node_cpu[0] == pytest.approx(9.0)  # the truth
    assert view.node_cpu[0] == pytest.approx(9.0 - 6.0 * ages[0], rel=1e-12)
    view = sim.step(None)
    assert view.node_cpu[0] == pytest.approx(9.0)


def test_aligned_timing_samples_at_the_round_time() -> None:
    sim = _sim(timing="aligned", first_sample_zero=False)
    assert sim.telemetry.passthrough
    sim.reset()
    while sim.t < 110:
        view = sim.step(None)
    assert view.node_cpu[0] == pytest.approx(9.0)


@pytest.mark.parametrize("timing", ["aligned", "phased"])
def test_a_moved_guests_first_sample_on_the_target_reports_cpu_0(timing: str) -> None:
    """qemu-server ``vmstatus``: a new QEMU process (the guest on its target) has no previous CPU
    time to difference, its first sample reports cpu 0; until the target's pvestatd samples it,
    the latest sample is still the source's (the last value before it left)."""
    sim = _sim(timing=timing)
    view = sim.reset()
    for _ in range(3):
        view = sim.step(None)
    assert view.guest_cpu[1] == pytest.approx(0.5)
    seen = []
    view = sim.step(Motion("vm:101", "n1"))  # 16 GiB/s: it lands within this round
    assert sim.cluster.node[1] == 0
    seen.append(float(view.guest_cpu[1]))
    for _ in range(3):
        seen.append(float(sim.step(None).guest_cpu[1]))
    # the source's last value, possibly, then exactly one sample of 0, then the real cpu
    assert seen.count(0.0) == 1
    first_zero = seen.index(0.0)
    assert first_zero <= 1 if timing == "phased" else first_zero == 0
    assert all(v > 0.0 for v in seen[first_zero + 1 :])
    assert sim.cluster.received[1] > 0.0  # the truth never paused that long


def test_first_sample_rule_switched_off() -> None:
    sim = _sim(timing="aligned", first_sample_zero=False)
    sim.reset()
    view = sim.step(Motion("vm:101", "n1"))
    assert sim.cluster.node[1] == 0 and view.guest_cpu[1] > 0.0


def test_rrd_mode_averages_the_last_complete_minute() -> None:
    """pve-cluster RRD step 60 s, AVERAGE: the six 10 s samples of the last complete minute,
    updated once a minute. vm:100's 3 → 9 core step at t = 100 s reaches the minute ending at
    120 s with two of its six samples: (4 × 3 + 2 × 9) / 6 = 5 cores on n1; the next minute 9."""
    sim = _sim(timing="aligned", mode="rrd", first_sample_zero=False)
    sim.reset()
    seen = {}
    while sim.t < 180:
        view = sim.step(None)
        seen[sim.t] = float(view.node_cpu[0])
    assert seen[110.0] == pytest.approx(3.0)  # still the minute ending at 60 s
    assert seen[120.0] == pytest.approx((4 * 3.0 + 2 * 9.0) / 6)
    assert seen[170.0] == seen[120.0]  # held for the minute
    assert seen[180.0] == pytest.approx(9.0)
