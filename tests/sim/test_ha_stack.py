"""The full HA stack in the simulation (scenario key ``ha_stack = "full"``): the port of
pve-ha-manager's CRM and LRM on the cluster model's hardware (:mod:`pvegym.sim.ha_stack`).

A migration goes through the Manager's state machine and an LRM worker and takes the model's
migration time; the HA latency around it follows from the port's cadence (CRM at the round time,
the source node's LRM at its phase after it). One implementation: ``replay-upstream``,
``pvegym simulate`` and the environment all run :meth:`Manager.manage`. Same seed, same episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest

import pvegym.env  # noqa: F401 - registers pvegym/Cluster-v0
import pvegym.sim.ha.manager as ha_manager
from pvegym.cli import main
from pvegym.experiments.ablation import check_target, needed, qemu_server_for, run_episode
from pvegym.policies.registry import make_policy
from pvegym.sim.ha.lrm import WORKER_POLL_TIME
from pvegym.sim.ha.tools import QUIET_SERIAL_KEY
from pvegym.sim.motions import Job
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.scenarios import FIELD_SCENARIOS
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import STARTED, Motion
from pvegym.units import GiB

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-tests"


def _scenario(stack: str) -> Any:
    """Two nodes, two VMs on node1 and one on node2; constant demand (no noise in the
    migration's inputs), so the model's migration time is the same whenever it starts."""

    def vm(sid: str, node: str, cpu: float) -> dict[str, Any]:
        return {
            "sid": sid,
            "node": node,
            "maxcpu": 4,
            "maxmem": 8 * GiB,
            "cpu": cpu,
            "memhost": 6 * GiB,
            "dirty_rate": 50 * 2**20,
        }

    return scenario_from_dict(
        {
            "name": "t",
            "duration": "10m",
            "ha_stack": stack,
            "nodes": [
                {"name": "node1", "maxcpu": 16, "maxmem": 64 * GiB},
                {"name": "node2", "maxcpu": 16, "maxmem": 64 * GiB},
            ],
            "guests": [
                vm("vm:100", "node1", 2.0),
                vm("vm:101", "node1", 1.0),
                vm("vm:102", "node2", 1.0),
            ],
        }
    )


def _ended_job(sim: Simulation, sid: str) -> Job:
    return next(e for _, e in sim._log if isinstance(e, Job) and e.sid == sid)


def _migrate_at(stack: str, t_commit: float) -> tuple[Simulation, list[tuple[float, str, int]]]:
    """Step with no motion until ``t_commit``, commit vm:100 → node2, then step to the end;
    the service table (time, state, node) of vm:100 after every commit."""
    sim = Simulation(_scenario(stack), seed=3)
    sim.reset()
    g = sim.cluster.guest_index["vm:100"]
    table = []
    while sim.t < t_commit:
        sim.step(None)
    assert sim.motion_possible(g, 1)
    assert sim.commit(Motion("vm:100", "node2"))
    while sim.t < sim.scenario.duration - sim.round_s:
        table.append((sim.t, sim.svc_state[g], int(sim.svc_node[g])))
        sim.advance()
        sim.receive()
        sim.commit(None)
    return sim, table


def test_migration_through_the_full_stack_takes_the_model_time_plus_ha_latency() -> None:
    t_commit = 60.0
    full, table = _migrate_at("full", t_commit)
    model, _ = _migrate_at("model", t_commit)
    g, cl = full.cluster.guest_index["vm:100"], full.cluster
    # the guest ends on the target, in the model and in the Manager's and the config's view
    assert int(cl.node[g]) == 1 and int(full.svc_node[g]) == 1 and full.svc_state[g] == STARTED
    assert full._stack is not None
    assert full._stack.cfs.service_config["vm:100"]["node"] == "node2"
    (rec,) = full.metrics.moves
    assert rec.outcome == "succeeded" and rec.t == t_commit and rec.t_end is not None
    # the worker starts the model's motion at the source LRM's tick after the CRM round
    phase = full._stack.phase["node1"]
    job, model_job = _ended_job(full, "vm:100"), _ended_job(model, "vm:100")
    assert job.t_start == pytest.approx(t_commit + phase)
    # … and the motion itself takes the model's time (precheck + live migration)
    assert job.t_end is not None and model_job.t_end is not None
    assert job.t_end - job.t_start == pytest.approx(model_job.t_end - model_job.t_start)
    assert full.metrics.migration_seconds == pytest.approx(model.metrics.migration_seconds)
    assert rec.t_end == pytest.approx(job.t_end)
    # the HA latency: the source LRM polls its worker each second for 8 s from its tick, and the
    # physics of a round is known once its LRM ticks run (a motion queued at a tick runs over
    # the rest of the round at once); the first round whose tick sees the end collects it, and
    # the CRM sees the result (state started, on the target) one round later
    round_s = full.round_s
    k = int(t_commit // round_s)
    while job.t_end > k * round_s + min(phase + WORKER_POLL_TIME, round_s):
        k += 1
    seen = [t for t, state, node in table if state == STARTED and node == 1]
    assert seen[0] == (k + 1) * round_s
    moving = [t for t, state, _ in table if state == "migrate"]
    assert moving[0] == t_commit and moving[-1] == k * round_s


def test_same_seed_same_episode_with_the_full_stack() -> None:
    scn = _scenario("full")
    sims = [Simulation(scn, seed=5) for _ in range(2)]
    runs = [sim.run(make_policy("upstream")) for sim in sims]
    assert runs[0] == runs[1]
    assert sims[0].log == sims[1].log
    # the episode's log is the HA stack's (the CRM took the lock and started the services)
    assert any(
        "node1/crm: status change wait_for_quorum => master" in line for _, line in sims[0].log
    )


def test_bad_stack_is_one_line_naming_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--scenario", "small", "--set", "ha_stack=both"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "ha_stack" in err[0] and "model, full" in err[0]


def test_full_stack_fences_a_node_that_is_off_from_the_start() -> None:
    """A node configured off (issue 16): no daemon, no running guest; the master fences it after
    the fence delay (its agent lock was never taken) and recovers its services elsewhere."""
    from pvegym.sim.ha.node_status import FENCE_DELAY

    data: dict[str, Any] = {
        "name": "t",
        "ha_stack": "full",
        "duration": "5m",
        "nodes": [
            {"name": f"node{i}", "maxcpu": 4, "maxmem": 8 * GiB, "online": i != 2}
            for i in (1, 2, 3)
        ],
        "guests": [
            {"sid": "vm:101", "node": "node1", "maxcpu": 1, "maxmem": GiB},
            {"sid": "vm:201", "node": "node2", "maxcpu": 1, "maxmem": GiB},
        ],
    }
    sim = Simulation(scenario_from_dict(data), seed=0)
    sim.run(make_policy("noop"))
    ack = next(t for t, line in sim.log if "fencing: acknowledged" in line and "node2" in line)
    assert FENCE_DELAY <= ack <= FENCE_DELAY + 2 * sim.round_s
    g = sim.cluster.guest_index["vm:201"]
    assert sim.cluster.node_names[int(sim.cluster.node[g])] != "node2" and sim.cluster.running[g]


@pytest.fixture
def manage_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts :meth:`Manager.manage` calls: the round entry point of the one HA manager."""
    calls = {"n": 0}
    manage = ha_manager.Manager.manage

    def counted(self: Any) -> None:
        calls["n"] += 1
        manage(self)

    monkeypatch.setattr(ha_manager.Manager, "manage", counted)
    return calls


def test_one_implementation_replay_simulate_and_env(
    manage_calls: dict[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    # the upstream replay drives the port with upstream's test hardware
    assert (
        main(["replay-upstream", str(DATA / "test-crs-dynamic-constrained-auto-rebalance1")]) == 0
    )
    replay = manage_calls["n"]
    assert replay > 0
    # pvegym simulate with the full stack
    args = ["simulate", "--scenario", "small", "--policy", "upstream", "--duration", "2m"]
    assert main([*args, "--set", "ha_stack=full"]) == 0
    simulate = manage_calls["n"] - replay
    assert simulate == 12  # one Manager round per CRM round of 10 s
    # the environment with the full stack
    env = gymnasium.make("pvegym/Cluster-v0", scenario="small", overrides={"ha_stack": "full"})
    env.reset(seed=0)
    base: Any = env.unwrapped
    rng = np.random.default_rng(0)
    for _ in range(6):
        valid = base.action_masks().nonzero()[0]
        env.step(int(valid[int(rng.random() * valid.size)]))
    assert manage_calls["n"] - replay - simulate >= 6  # a step runs one round or more
    # and the model stack does not run it
    before = manage_calls["n"]
    assert main(args) == 0
    assert manage_calls["n"] == before
    capsys.readouterr()


#: Where the full stack's timing changes a target's rate, measured and explained (docs/model.md):
#: with the full stack no motion is possible until the first master has written the services
#: (round 0 counts as busy, as upstream's balancer sees no started service yet), so upstream's
#: hold counter starts one round later; in seed 7 it then moves vm:110 once (640 s) instead of
#: three times, and the oscillation target holds in 7 of 10 seeds (seeds 1, 2, 7 miss it) against
#: 8 of 10 on the model stack. Strict: the mark goes when the rate is back.
FULL_STACK_DEVIATIONS = {
    ("dominant-oscillation", "upstream"): "the first round busy: 7 of 10 seeds (model stack 8)",
}

FIELD_CASES = [
    pytest.param(
        scenario,
        policy,
        id=f"{scenario}-{policy}",
        marks=[pytest.mark.xfail(reason=FULL_STACK_DEVIATIONS[scenario, policy], strict=True)]
        if (scenario, policy) in FULL_STACK_DEVIATIONS
        else [],
    )
    for scenario in FIELD_SCENARIOS
    for policy in ("upstream", "patched")
    if not (scenario == "pressure-evacuation" and policy == "upstream")  # no upstream target
]


@pytest.mark.parametrize(("scenario", "policy"), FIELD_CASES)
def test_field_targets_hold_with_the_full_stack(scenario: str, policy: str) -> None:
    """``docs/model.md`` (Targets) with the port as the HA manager: ≥ 8 of 10 seeds, as with the
    model's round (``tests/sim/test_field_scenarios.py``)."""
    results = []
    for seed in range(10):
        ep = run_episode(
            scenario,
            policy,
            seed,
            qemu_server=qemu_server_for(scenario, policy),
            overrides={"ha_stack": "full"},
        )
        results.append(check_target(ep, policy))
    passed = sum(1 for ok, _ in results if ok)
    assert passed >= needed(10), [d for _, d in results]


def test_no_motion_before_the_first_master_wrote_the_services() -> None:
    """Until a manager status shows the services (the CRM becomes master in the first round),
    the pipeline counts as busy; a reset restores that."""
    sim = Simulation(_scenario("full"), seed=3)
    for _ in range(2):
        sim.reset()
        g = sim.cluster.guest_index["vm:100"]
        assert sim.motion_active() and not sim.motion_possible(g, 1)
        assert not sim.commit(Motion("vm:100", "node2"))
        sim.advance()
        sim.receive()
        assert not sim.motion_active() and sim.motion_possible(g, 1)
        assert sim.metrics.moves == []


def test_a_motion_no_master_took_is_retracted() -> None:
    """A motion answered in a round whose master does not ask (here the first round, forced
    past the busy state: the new Manager resets its balancer) is retracted: no move counts, and
    no stale move index waits for a later motion of the guest."""
    sim = Simulation(_scenario("full"), seed=3)
    sim.reset()
    g = sim.cluster.guest_index["vm:100"]
    sim.ha_busy = False  # what the busy state prevents
    assert sim.commit(Motion("vm:100", "node2"))
    assert sim.metrics.moves == [] and sim.moves.pending == {}
    assert any("retracted motion vm:100 -> node2" in line for _, line in sim.log)
    for _ in range(10):
        sim.step(None)
    assert int(sim.cluster.node[g]) == 0 and sim.jobs == []
    # the next round's motion is taken and carried out
    assert sim.commit(Motion("vm:100", "node2"))
    for _ in range(20):
        sim.step(None)
    (rec,) = sim.metrics.moves
    assert rec.outcome == "succeeded" and int(sim.cluster.node[g]) == 1


def test_sync_reads_every_status_without_a_serial() -> None:
    """A manager status without the serial key is read every time (not only the first)."""
    sim = Simulation(_scenario("full"), seed=3)
    sim.reset()
    sim.step(None)
    stack = sim._stack
    assert stack is not None
    g = sim.cluster.guest_index["vm:100"]
    ms = stack.cfs.manager_status
    for state in ("stopped", "started"):
        ms.pop(QUIET_SERIAL_KEY, None)
        ms["service_status"]["vm:100"]["state"] = state
        stack.sync()
        assert sim.svc_state[g] == state
