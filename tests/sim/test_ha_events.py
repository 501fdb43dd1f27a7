"""Issue 16: scenario events on the full HA stack, each kind through ``pvegym simulate`` (its
metrics) and the simulation it runs (the HA manager's log), and bad events (exit 2).

The cluster: three nodes; vm:101 on node1, vm:102 on node2, vm:103 and ct:200 on node3; 10 min.
An event at 60 s happens at the start of that round. Bounds come from the real cluster's timings
(``pvegym/sim/ha_model_env.py``, ``pvegym/sim/ha/node_status.py``):

* a failed node's services run again within ``LOCK_TIMEOUT + round_s + lrm_delay_max_s`` (140 s):
  its LRM last renewed its agent lock at its tick in the round before the failure, at most the
  failure's time; the master (node1, which takes the manager lock first) acknowledges the fence in
  its first round after the lock expired (≤ one round later; the fence delay of 60 s, from the
  node's last round online, has passed by then), recovers the services in the same round, and
  their new nodes' LRMs start them at their next tick (≤ ``lrm_delay_max_s`` later);
* a node back before that (its own LRM renews the lock it still holds) runs its services again
  at its LRM's first tick after it is back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest

from pvegym.policies import make_policy
from pvegym.sim.ha.node_status import FENCE_DELAY
from pvegym.sim.ha_model_env import LOCK_TIMEOUT, WATCHDOG_TIMEOUT
from pvegym.sim.motions import Job
from pvegym.sim.scenario import EventType, MigrationSettings, scenario_from_dict
from pvegym.sim.simulation import Simulation
from tests.conftest import RunCli

ROUND_S = 10.0
LRM_DELAY_MAX_S = MigrationSettings().lrm_delay_max_s
#: a failed node's services run again within this (s; module docstring)
RECOVERY_BOUND_S = LOCK_TIMEOUT + ROUND_S + LRM_DELAY_MAX_S
T0 = 60.0  # s, the first event
EVENT_KINDS = get_args(EventType)

NODES = """
[[nodes]]
name = "node{i}"
maxcpu = 16
maxmem = "64GiB"
base_cpu = 0.3
base_mem = "4GiB"
"""
GUESTS = [("vm:101", "node1", 2.0), ("vm:102", "node2", 1.5), ("vm:103", "node3", 1.0)]


def scenario_toml(events: list[dict[str, Any]], ha_stack: str = "full") -> str:
    """The test cluster with ``events`` as a scenario file."""
    out = ['name = "events-test"', 'description = "events"', 'duration = "10m"']
    out.append(f'ha_stack = "{ha_stack}"')
    out += [NODES.format(i=i) for i in (1, 2, 3)]
    for sid, node, cpu in [*GUESTS, ("ct:200", "node3", 0.5)]:
        out += ["[[guests]]", f'sid = "{sid}"', f'node = "{node}"', "maxcpu = 4"]
        out += ['maxmem = "8GiB"', f"cpu = {cpu}", 'memhost = "6GiB"', ""]
    for ev in events:
        out.append("[[events]]")
        out += [f"{k} = {json.dumps(v)}" for k, v in ev.items()]
        out.append("")
    return "\n".join(out)


def simulate(cli: RunCli, tmp_path: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    """``pvegym simulate --scenario FILE --json`` (noop): its metrics."""
    path = tmp_path / "events.toml"
    path.write_text(scenario_toml(events))
    code, out, err = cli("simulate", "--scenario", str(path), "--json", "--policy", "noop")
    assert code == 0, err
    metrics: dict[str, Any] = json.loads(out)["metrics"]
    return metrics


def episode(events: list[dict[str, Any]]) -> Simulation:
    """The episode ``simulate`` ran (same scenario, seed 0, noop), for its log and state."""
    import tomllib

    scn = scenario_from_dict(tomllib.loads(scenario_toml(events)))
    sim = Simulation(scn, seed=0)
    sim.run(make_policy("noop"))
    return sim


def log_after(sim: Simulation, t0: float) -> str:
    return "\n".join(f"{t:.1f} {line}" for t, line in sim.log if t >= t0)


def node_of(sim: Simulation, sid: str) -> str:
    cl = sim.cluster
    return cl.node_names[int(cl.node[cl.guest_index[sid]])]


def running(sim: Simulation, sid: str) -> bool:
    return bool(sim.cluster.running[sim.cluster.guest_index[sid]])


# ---------------------------------------------------------------------------------- node events
@pytest.mark.parametrize("kind", ["power-off", "network-off"])
def test_node_failure_is_fenced_and_recovered(kind: str, cli: RunCli, tmp_path: Path) -> None:
    events = [{"t": T0, "type": kind, "node": "node2"}]
    m = simulate(cli, tmp_path, events)
    assert m["recovery_s"] is not None and 0.0 < m["recovery_s"] <= RECOVERY_BOUND_S
    assert m["services_down_s"] > 0.0 and m["moves"] == 0
    sim = episode(events)
    log = log_after(sim, T0)
    assert "fencing: acknowledged - got agent lock for node 'node2'" in log
    assert "recover service 'vm:102' from fenced node 'node2'" in log
    assert node_of(sim, "vm:102") != "node2" and running(sim, "vm:102")
    if kind == "network-off":  # its watchdog resets it, before the fence is acknowledged
        reset = next(t for t, line in sim.log if "node2 off (watchdog expired)" in line)
        ack = next(t for t, line in sim.log if "fencing: acknowledged" in line)
        assert T0 + WATCHDOG_TIMEOUT - ROUND_S < reset <= T0 + WATCHDOG_TIMEOUT + ROUND_S < ack


@pytest.mark.parametrize("kind", ["power", "network"])
def test_node_back_before_fencing_runs_its_services_again(
    kind: str, cli: RunCli, tmp_path: Path
) -> None:
    """Off for 30 s (shorter than the watchdog and the lock): no fencing, the node's own LRM
    starts (power) or keeps (network) its services."""
    off = 30.0
    assert off < min(WATCHDOG_TIMEOUT, FENCE_DELAY, LOCK_TIMEOUT)
    events = [
        {"t": T0, "type": f"{kind}-off", "node": "node2"},
        {"t": T0 + off, "type": f"{kind}-on", "node": "node2"},
    ]
    m = simulate(cli, tmp_path, events)
    assert m["recovery_s"] is not None and off <= m["recovery_s"] <= off + LRM_DELAY_MAX_S
    sim = episode(events)
    log = log_after(sim, T0)
    assert f"hardware: {kind} node2 on" in log
    assert "fencing" not in log and "watchdog expired" not in log
    assert node_of(sim, "vm:102") == "node2" and running(sim, "vm:102")
    if kind == "power":
        assert "node2/lrm: starting service vm:102" in log
    else:
        assert "node2/lrm: status change lost_agent_lock => active" in log


def test_maintenance_drains_the_node_and_brings_its_services_back(
    cli: RunCli, tmp_path: Path
) -> None:
    enable = [{"t": T0, "type": "maintenance-enable", "node": "node3"}]
    both = [*enable, {"t": 300.0, "type": "maintenance-disable", "node": "node3"}]
    m1, m2 = simulate(cli, tmp_path, enable), simulate(cli, tmp_path, both)
    # the HA manager's motions, not the balancer's: bytes and downtime, no moves
    assert m1["moves"] == m2["moves"] == 0
    assert m1["migration_bytes"] > 0.0 and m2["migration_bytes"] > m1["migration_bytes"]
    assert m1["maintenance_moves"] == 0 and m1["services_down_s"] == 0.0
    sim = episode(enable)
    assert "node 'node3': state changed from 'online' => 'maintenance'" in log_after(sim, T0)
    assert node_of(sim, "vm:103") != "node3" and node_of(sim, "ct:200") != "node3"
    sim = episode(both)
    assert "moving service 'vm:103' back to 'node3'" in log_after(sim, 300.0)
    assert node_of(sim, "vm:103") == "node3" and node_of(sim, "ct:200") == "node3"


# ------------------------------------------------------------------------------ service commands
@pytest.mark.parametrize("kind", ["migrate", "relocate"])
def test_migrate_and_relocate(kind: str, cli: RunCli, tmp_path: Path) -> None:
    events = [{"t": T0, "type": kind, "sid": "vm:101", "target": "node2"}]
    m = simulate(cli, tmp_path, events)
    assert m["moves"] == 0  # an operator's motion, not the balancer's
    if kind == "migrate":  # live: bytes on the wire, a sub-second pause
        assert m["migration_bytes"] > 0.0 and m["downtime_s"] < 1.0
    else:  # stop, move, start: down for the shutdown and the start
        ms = MigrationSettings()
        assert m["migration_bytes"] == 0.0
        assert m["downtime_s"] == pytest.approx(ms.ct_shutdown_s + ms.ct_start_s)
    sim = episode(events)
    assert f"got crm command: {kind} vm:101 node2" in log_after(sim, T0)
    assert node_of(sim, "vm:101") == "node2" and running(sim, "vm:101")


def test_stop(cli: RunCli, tmp_path: Path) -> None:
    events = [{"t": T0, "type": "stop", "sid": "vm:101", "timeout": 60}]
    m = simulate(cli, tmp_path, events)
    assert m["services_down_s"] == 0.0  # an operator's stop: the config asks for stopped
    sim = episode(events)
    assert "request graceful stop with timeout '60' for service 'vm:101'" in log_after(sim, T0)
    assert not running(sim, "vm:101")


@pytest.mark.parametrize("state", ["disabled", "stopped", "ignored", "started"])
def test_set_state(state: str, cli: RunCli, tmp_path: Path) -> None:
    """``ha-manager set --state``; ``started`` after a stop starts the guest again."""
    events = [{"t": T0, "type": "set-state", "sid": "vm:101", "state": state}]
    if state == "started":
        events.insert(0, {"t": T0 - 30.0, "type": "stop", "sid": "vm:101"})
    m = simulate(cli, tmp_path, events)
    assert m["services_down_s"] == 0.0
    sim = episode(events)
    log = log_after(sim, T0)
    if state == "ignored":
        assert "removing stale service 'vm:101' (ignored state requested)" in log
        assert running(sim, "vm:101")  # HA lets go of it; it keeps running
        assert sim.svc_state[sim.cluster.guest_index["vm:101"]] == "ignored"
    elif state == "started":
        assert "service 'vm:101': state changed from 'stopped' to 'request_start'" in log
        assert running(sim, "vm:101")
    else:
        assert "service 'vm:101': state changed from 'started' to 'request_stop'" in log
        assert not running(sim, "vm:101")


@pytest.mark.parametrize("mode", ["freeze", "ignore"])
def test_disarm_and_arm(mode: str, cli: RunCli, tmp_path: Path) -> None:
    events = [
        {"t": T0, "type": "disarm", "mode": mode},
        {"t": 200.0, "type": "arm"},
        {"t": 300.0, "type": "migrate", "sid": "vm:101", "target": "node2"},
    ]
    m = simulate(cli, tmp_path, events)
    assert m["services_down_s"] == 0.0 and m["migration_bytes"] > 0.0  # armed again: it moves
    sim = episode(events)
    log = log_after(sim, T0)
    assert f"got crm command: disarm-ha {mode}" in log
    assert "HA stack is now fully disarmed" in log
    assert "re-arming HA stack" in log_after(sim, 200.0)
    assert node_of(sim, "vm:101") == "node2"


# ------------------------------------------------------------------------------------ bad events
@pytest.mark.parametrize(
    ("event", "stack", "path", "says"),
    [
        ({"t": T0, "type": "power-off", "node": "node9"}, "full", "events[0].node", "node9"),
        ({"t": 600, "type": "power-off", "node": "node1"}, "full", "events[0].t", "before the end"),
        ({"t": T0, "type": "reboot", "node": "node1"}, "full", "events[0].type", "allowed"),
        ({"t": T0, "type": "stop", "sid": "vm:999"}, "full", "events[0].sid", "vm:999"),
        ({"t": T0, "type": "migrate", "sid": "vm:101", "target": "x"}, "full", "events[0].target", "x"),
        ({"t": T0, "type": "set-state", "sid": "vm:101"}, "full", "events[0].state", "needs"),
        ({"t": T0, "type": "disarm", "mode": "off"}, "full", "events[0].mode", "allowed"),
        (
            {"t": T0, "type": "maintenance-enable", "node": "node1"},
            "model",
            "events[0].type",
            'set ha_stack = "full"',
        ),
    ],
)  # fmt: skip
def test_bad_event_exits_2_naming_the_key_path(
    event: dict[str, Any], stack: str, path: str, says: str, cli: RunCli, tmp_path: Path
) -> None:
    file = tmp_path / "bad.toml"
    file.write_text(scenario_toml([event], ha_stack=stack))
    code, out, err = cli("simulate", "--scenario", str(file))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and path in lines[0] and says in lines[0], err


def test_every_event_kind_in_one_episode_is_deterministic() -> None:
    """``experiments/scenarios/events.toml`` (every kind): same seed, same log and metrics; the
    power loss of node2 is recovered within the bound."""
    from pvegym.sim import catalog

    root = Path(__file__).resolve().parents[2]
    scn = catalog.resolve(str(root / "experiments" / "scenarios" / "events.toml")).scenario
    kinds = {ev.type for ev in scn.events}
    assert kinds == set(EVENT_KINDS) - {"pressure-onset"}
    runs = []
    for _ in range(2):
        sim = Simulation(scn, seed=3)
        runs.append((sim.run(make_policy("patched")), sim.log))
    assert runs[0] == runs[1]
    assert 0.0 < runs[0][0]["metrics"]["recovery_s"] <= RECOVERY_BOUND_S


def test_migrate_of_a_stopped_vm_moves_it_offline_as_the_model_stack_does() -> None:
    """A stopped HA guest's migrate (the Manager sends it to the LRM as an offline migrate):
    the guest moves at once, no motion — the model stack's downtime and no migration time."""
    import tomllib

    events = [{"t": T0, "type": "migrate", "sid": "vm:101", "target": "node2"}]
    results, sims = {}, {}
    for stack in ("model", "full"):
        data = tomllib.loads(scenario_toml(events, ha_stack=stack))
        data["guests"][0]["state"] = "stopped"
        sims[stack] = sim = Simulation(scenario_from_dict(data), seed=0)
        results[stack] = sim.run(make_policy("noop"))["metrics"]
    full, model = results["full"], results["model"]
    assert full["migration_seconds"] == model["migration_seconds"] == 0.0
    assert full["migration_bytes"] == model["migration_bytes"] == 0.0
    assert full["downtime_s"] == pytest.approx(model["downtime_s"])
    for sim in sims.values():
        assert node_of(sim, "vm:101") == "node2" and not running(sim, "vm:101")
        jobs = [e for _, e in sim._log if isinstance(e, Job) and e.sid == "vm:101"]
        assert jobs == []  # no motion of the model


def test_a_node_power_off_stalls_the_migration_to_it_until_tcp_gives_up() -> None:
    """A migration whose target loses its power (``HAStack.power``) does not end at once: its
    stream stalls and the ssh tunnel's TCP connection dies after ``tcp_retries2``'s 924.6 s
    (``pvegym/sim/link.py``; issue 17 item 8, ``tests/sim/test_failure_during_migration.py``);
    then the job ends, not ok, with qemu-server's reason, and the guest keeps running on its
    source."""
    import tomllib

    from pvegym.sim.link import STREAM_FAILED, TCP_TIMEOUT_S

    events = [{"t": T0, "type": "migrate", "sid": "vm:101", "target": "node2"}]
    sim = Simulation(scenario_from_dict(tomllib.loads(scenario_toml(events))), seed=0)
    sim.reset()
    while not sim.jobs and sim.t < T0 + 3 * ROUND_S:
        sim.step(None)
    assert sim.jobs and sim.jobs[0].sid == "vm:101", "the migrate event started no motion"
    job = sim.jobs[0]
    assert job.phase == "transfer"
    t_cut = sim.t
    assert sim._stack is not None
    sim._stack.power("node2", False)
    sim.step(None)
    assert sim.jobs == [job] and job.t_stall == t_cut  # stalled, not ended
    while job in sim.jobs and sim.t < t_cut + TCP_TIMEOUT_S + 2 * ROUND_S:
        sim.step(None)
    assert (job.phase, job.ok, job.reason) == ("done", False, STREAM_FAILED)
    assert job.t_end == pytest.approx(t_cut + TCP_TIMEOUT_S, abs=1e-6)
    assert node_of(sim, "vm:101") == "node1" and running(sim, "vm:101")
