"""Issue 17 item 8: a node fails, is cut off or enters maintenance while a live migration runs.

The cluster (full HA stack): three nodes; vm:101 on node1, vm:102 on node2, node3 empty (its
LRM takes its agent lock — and arms its watchdog — once a service migrates to it). An operator
migrates vm:102 to node3 at 60 s; over a 50 MiB/s stream its 6 GiB take about two minutes, so
an event at ``T_CUT`` = 120 s falls into the transfer. The sources each test follows:

* qemu-server ``src/PVE/QemuMigrate.pm``: ``prepare`` (the ssh test of the target),
  ``phase2`` (the ``query-migrate`` loop: "migration status error: …", no timeout of its own),
  ``phase2_cleanup`` ("aborting phase 2 - cleanup resources", ``migrate_cancel``: the guest stays
  on its source); pve-guest-common ``PVE/Tunnel.pm`` ``fork_ssh_tunnel`` and pve-cluster
  ``PVE/SSHInfo.pm`` ``ssh_info_to_ssh_opts`` (no ``ServerAliveInterval``);
* Linux ``Documentation/networking/ip-sysctl.rst`` ``tcp_retries2`` and ``include/net/tcp.h``
  (``TCP_RTO_MIN``, ``TCP_RTO_MAX``): the stalled ssh connection dies after 924.6 s, a link back
  before then carries it again at the next retransmission (:mod:`pvegym.sim.link`);
* pve-ha-manager ``src/PVE/HA/LRM.pm`` (a running worker is not stopped by maintenance; "service
  … not moved (migration error)") and ``Manager.pm`` ``next_state_migrate_relocate`` ("migration
  failed": back to started on the source; a source offline: fenced and recovered).

The cut falls on a round boundary (events happen at round times), so the stall begins exactly at
``T_CUT`` and the model's times below are exact, not within a round.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

import pytest

from pvegym.policies import make_policy
from pvegym.sim.ha_model_env import LOCK_TIMEOUT, WATCHDOG_TIMEOUT
from pvegym.sim.link import (
    NO_SSH,
    STREAM_FAILED,
    TCP_TIMEOUT_S,
    next_retransmission,
    retransmission_times,
)
from pvegym.sim.motions import Job
from pvegym.sim.scenario import MigrationSettings, scenario_from_dict
from pvegym.sim.simulation import Simulation

ROUND_S = 10.0
#: issue 16's bound (tests/sim/test_ha_events.py): a failed node's services run again within
#: the agent lock's timeout, a CRM round and an LRM's tick
RECOVERY_BOUND_S = LOCK_TIMEOUT + ROUND_S + MigrationSettings().lrm_delay_max_s
T_MIGRATE, T_CUT = 60.0, 120.0
MIGRATE = {"t": T_MIGRATE, "type": "migrate", "sid": "vm:102", "target": "node3"}


def scenario(events: list[dict[str, Any]], precheck_s: float = 3.0) -> dict[str, Any]:
    """The test cluster with ``events``, 20 min on the full stack, a 50 MiB/s stream."""
    lines = ['name = "failure-during-migration"', 'duration = "20m"', 'ha_stack = "full"']
    lines += ["[migration]", 'bandwidth = "50MiB/s"', f"precheck_s = {precheck_s}"]
    for i in (1, 2, 3):
        lines += ["[[nodes]]", f'name = "node{i}"', "maxcpu = 16", 'maxmem = "64GiB"']
        lines += ["base_cpu = 0.3", 'base_mem = "4GiB"']
    for sid, node in (("vm:101", "node1"), ("vm:102", "node2")):
        lines += ["[[guests]]", f'sid = "{sid}"', f'node = "{node}"', "maxcpu = 4"]
        lines += ['maxmem = "8GiB"', "cpu = 1.5", 'memhost = "6GiB"']
    for ev in events:
        lines.append("[[events]]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in ev.items()]
    return tomllib.loads("\n".join(lines))


def episode(events: list[dict[str, Any]], precheck_s: float = 3.0) -> tuple[Simulation, Any]:
    """The whole episode (seed 0, no balancer motion): the simulation and its metrics."""
    sim = Simulation(scenario_from_dict(scenario(events, precheck_s)), seed=0)
    metrics = sim.run(make_policy("noop"))["metrics"]
    return sim, metrics


def motion(sim: Simulation) -> Job:
    """The ended motion of vm:102 (the one the operator started)."""
    jobs = [e for _, e in sim._log if isinstance(e, Job) and e.sid == "vm:102"]
    assert len(jobs) == 1, jobs
    return jobs[0]


def t_end(job: Job) -> float:
    """When the motion ended (s)."""
    assert job.t_end is not None
    return job.t_end


def where(sim: Simulation, sid: str) -> tuple[str, bool]:
    cl = sim.cluster
    g = cl.guest_index[sid]
    return cl.node_names[int(cl.node[g])], bool(cl.running[g])


def log_text(sim: Simulation) -> str:
    return "\n".join(f"{t:.1f} {line}" for t, line in sim.log)


def test_the_tcp_timeout_is_ip_sysctl_s() -> None:
    """``ip-sysctl.rst`` ``tcp_retries2``: "The default value of 15 yields a hypothetical timeout
    of 924.6 seconds"; "RFC 1122 recommends at least 100 seconds for the timeout, which
    corresponds to a value of at least 8"."""
    assert pytest.approx(924.6, abs=1e-9) == TCP_TIMEOUT_S
    assert retransmission_times(8)[-1] >= 100.0 > retransmission_times(7)[-1]
    # a link back at 180 s into the stall: the 10th retransmission, 204.6 s after the cut
    assert next_retransmission(180.0) == pytest.approx(204.6, abs=1e-9)


def test_target_power_off_mid_transfer_fails_after_the_tcp_timeout() -> None:
    """QemuMigrate.pm ``phase2``/``phase2_cleanup`` + ip-sysctl ``tcp_retries2``: the stream
    stalls at the cut; 924.6 s later the tunnel dies, QEMU's migration fails, qemu-server logs it
    and cancels; the guest ran on the source all along and the HA service is started there."""
    base, m0 = episode([MIGRATE])
    sim, m = episode([MIGRATE, {"t": T_CUT, "type": "power-off", "node": "node3"}])
    job = motion(sim)
    assert t_end(motion(base)) > T_CUT  # the cut is mid-transfer
    assert job.t_transfer_start < T_CUT
    assert (job.ok, job.reason) == (False, STREAM_FAILED)
    assert job.t_end == pytest.approx(T_CUT + TCP_TIMEOUT_S, abs=1e-6)
    log = log_text(sim)
    for line in (STREAM_FAILED, "aborting phase 2 - cleanup resources", "migrate_cancel"):
        assert f"vm:102: {line}" in log
    assert "node2/lrm: service vm:102 not moved (migration error)" in log
    assert "service 'vm:102': state changed from 'migrate' to 'started'  (node = node2)" in log
    assert where(sim, "vm:102") == ("node2", True)
    assert m["downtime_s"] == 0.0 and m["services_down_s"] == 0.0
    # bytes up to the cut only; QEMU's clock ran on through the stall
    assert 0.0 < m["migration_bytes"] < m0["migration_bytes"]
    assert m["migration_seconds"] == pytest.approx(t_end(job) - job.t_transfer_start, abs=1e-6)


@pytest.mark.parametrize("cut_s", [10.0, 40.0])
def test_a_link_back_before_the_timeout_carries_the_migration_on(cut_s: float) -> None:
    """ip-sysctl/``include/net/tcp.h``: the network back after ``cut_s`` s, the stream flows again
    at TCP's next retransmission (12.6 s, 51.0 s after the cut): the migration completes that
    much later than without the cut, with the same downtime and bytes. The cut is shorter than
    the watchdog: node3's LRM holds its agent lock for the incoming service (``Tools.pm``
    ``count_active_services`` counts a service whose target it is); a longer cut resets it (the
    next test)."""
    assert cut_s < WATCHDOG_TIMEOUT
    back = T_CUT + cut_s
    base, m0 = episode([MIGRATE])
    sim, m = episode(
        [
            MIGRATE,
            {"t": T_CUT, "type": "network-off", "node": "node3"},
            {"t": back, "type": "network-on", "node": "node3"},
        ]
    )
    job, job0 = motion(sim), motion(base)
    assert job.ok and job0.ok and t_end(job0) > T_CUT
    delay = t_end(job) - t_end(job0)
    assert delay == pytest.approx(next_retransmission(cut_s), abs=1e-6)
    assert cut_s <= delay <= cut_s + 120.0  # TCP_RTO_MAX
    assert m["downtime_s"] == m0["downtime_s"] and m["services_down_s"] == 0.0
    assert m["migration_bytes"] == pytest.approx(m0["migration_bytes"], rel=1e-9)
    assert where(sim, "vm:102") == ("node3", True)


def test_a_target_cut_off_past_its_watchdog_is_reset_and_the_migration_fails() -> None:
    """``Tools.pm`` ``count_active_services``: the target's LRM is active for the incoming
    service, so cut off from the quorate part it lets its watchdog expire (60 s) and the node
    resets; its network back later brings no connection back: the migration fails at the TCP
    timeout, the guest on its source."""
    sim, m = episode(
        [
            MIGRATE,
            {"t": T_CUT, "type": "network-off", "node": "node3"},
            {"t": T_CUT + 180.0, "type": "network-on", "node": "node3"},
        ]
    )
    assert "hardware: power node3 off (watchdog expired)" in log_text(sim)
    job = motion(sim)
    assert (job.ok, job.reason) == (False, STREAM_FAILED)
    assert job.t_end == pytest.approx(T_CUT + TCP_TIMEOUT_S, abs=1e-6)
    assert where(sim, "vm:102") == ("node2", True) and m["downtime_s"] == 0.0


def test_a_target_rebooted_meanwhile_resets_the_stream() -> None:
    """Linux TCP: the target's power back after 180 s, its new kernel answers the next
    retransmission (204.6 s after the cut) with an RST: the migration fails then, the guest stays
    on its source."""
    sim, m = episode(
        [
            MIGRATE,
            {"t": T_CUT, "type": "power-off", "node": "node3"},
            {"t": T_CUT + 180.0, "type": "power-on", "node": "node3"},
        ]
    )
    job = motion(sim)
    assert (job.ok, job.reason) == (False, STREAM_FAILED)
    assert job.t_end == pytest.approx(T_CUT + next_retransmission(180.0), abs=1e-6)
    assert where(sim, "vm:102") == ("node2", True) and m["downtime_s"] == 0.0


def test_the_target_gone_before_the_transfer_fails_the_precheck() -> None:
    """QemuMigrate.pm ``prepare``: the ssh test of the target fails — "Can't connect to destination
    address using public key" — at the end of the precheck, before any byte is sent."""
    precheck_s = 25.0  # the LRM starts the job at ≤ 70 s: its precheck spans T_MIGRATE + 10 s
    sim, m = episode(
        [MIGRATE, {"t": T_MIGRATE + ROUND_S, "type": "power-off", "node": "node3"}], precheck_s
    )
    job = motion(sim)
    assert job.t_start < T_MIGRATE + ROUND_S < job.t_start + precheck_s
    assert (job.ok, job.reason) == (False, NO_SSH)
    assert job.t_end == pytest.approx(job.t_start + precheck_s, abs=1e-6)
    assert m["migration_bytes"] == 0.0 and where(sim, "vm:102") == ("node2", True)


@pytest.mark.parametrize("kind", ["power-off", "network-off"])
def test_a_failed_source_is_fenced_and_its_guest_recovered(kind: str) -> None:
    """Manager.pm ``next_state_migrate_relocate``: the source offline, the service in migrate is
    fenced and recovered (issue 16's bound: lock 120 s + a round + an LRM tick). Power: the
    guest and the migration die with the node at the cut. Network: the stream stalls, the source
    without quorum is reset by its watchdog (60 s), which ends the migration."""
    sim, m = episode([MIGRATE, {"t": T_CUT, "type": kind, "node": "node2"}])
    job = motion(sim)
    assert (job.ok, job.reason) == (False, "node powered off")
    if kind == "power-off":
        assert job.t_end == T_CUT
    else:  # the watchdog resets the node at the first round after it expired
        assert T_CUT + WATCHDOG_TIMEOUT <= t_end(job) <= T_CUT + WATCHDOG_TIMEOUT + ROUND_S
    log = log_text(sim)
    assert "fencing: acknowledged - got agent lock for node 'node2'" in log
    assert "recover service 'vm:102' from fenced node 'node2'" in log
    node, running = where(sim, "vm:102")
    assert node != "node2" and running
    assert m["recovery_s"] is not None and 0.0 < m["recovery_s"] <= RECOVERY_BOUND_S


@pytest.mark.parametrize("node", ["node2", "node3"])
def test_maintenance_during_a_migration_lets_it_complete(node: str) -> None:
    """LRM.pm: entering maintenance does not stop the running worker: the migration completes
    exactly as without the request (what the HA manager does after it is the port's)."""
    base, _ = episode([MIGRATE])
    sim, _ = episode([MIGRATE, {"t": T_CUT, "type": "maintenance-enable", "node": node}])
    job, job0 = _first(sim), motion(base)
    assert job.ok and t_end(job0) > T_CUT
    assert job.t_end == job0.t_end
    assert f"node '{node}': state changed from 'online' => 'maintenance'" in log_text(sim)


def _first(sim: Simulation) -> Job:
    """The first ended motion of vm:102 (off a target in maintenance it is moved on later)."""
    return next(e for _, e in sim._log if isinstance(e, Job) and e.sid == "vm:102")


def test_a_stalled_stream_leaves_its_share_of_the_link_to_the_others() -> None:
    """Two migrations into node3 share its link (``[migration] link_bandwidth`` = one stream's
    cap, max-min fair: half each); node1's network cut for 10 s stalls vm:101's stream (ip-sysctl
    ``tcp_retries2``: it flows again at the 12.6 s retransmission) and a stalled TCP stream sends
    nothing, so vm:102's takes the whole link meanwhile. Both migrations complete."""
    both = [MIGRATE, {"t": T_MIGRATE, "type": "migrate", "sid": "vm:101", "target": "node3"}]
    cut = [
        {"t": T_CUT, "type": "network-off", "node": "node1"},
        {"t": T_CUT + 10.0, "type": "network-on", "node": "node1"},
    ]
    inside = T_CUT + 10.0  # the end of a round inside the stall

    def run(events: list[dict[str, Any]]) -> tuple[Simulation, dict[str, tuple[float, bool]]]:
        """The episode; each migration's rate (bytes/s) and stall at ``inside``."""
        data = scenario(events)
        data["migration"]["link_bandwidth"] = data["migration"]["bandwidth"]
        sim = Simulation(scenario_from_dict(data), seed=0)
        policy = make_policy("noop")
        view, seen = sim.reset(), {}
        for _ in range(round(sim.scenario.duration / ROUND_S) - 1):
            view = sim.step(policy.decide(view))
            if sim.t == inside:
                seen = {
                    j.sid: (j.migration.bandwidth, j.t_stall is not None)
                    for j in sim.jobs
                    if j.migration is not None
                }
        return sim, seen

    cap = scenario_from_dict(scenario([])).migration.bandwidth
    _, shared = run(both)
    assert shared == {
        "vm:101": (pytest.approx(cap / 2), False),
        "vm:102": (pytest.approx(cap / 2), False),
    }
    sim, seen = run(both + cut)
    assert seen["vm:101"][1] and not seen["vm:102"][1]
    assert seen["vm:102"][0] == pytest.approx(cap)
    ended = [e for _, e in sim._log if isinstance(e, Job)]
    assert sorted((j.sid, j.ok) for j in ended) == [("vm:101", True), ("vm:102", True)]
    assert where(sim, "vm:101") == ("node3", True) and where(sim, "vm:102") == ("node3", True)
