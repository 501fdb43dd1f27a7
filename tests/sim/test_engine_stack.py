"""The engine stack (``ha_stack = "engine"``, :mod:`pvegym.sim.engine_stack`): the compiled
engine's CRM round with the port's LRMs, on the model's hardware, against the full stack (the
port: the specification) on whole scenarios — metrics, moves and every log line
(:mod:`pvegym.experiments.engine_check`; any number of pairs: ``scripts/engine_diff.py
--scenarios``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pvegym.sim.ha.manager as ha_manager
from pvegym.experiments.engine_check import compare, first_difference, run
from pvegym.policies import make_policy
from pvegym.sim import catalog
from pvegym.sim.engine_stack import EngineStack
from pvegym.sim.ha_model_env import ModelHAEnv
from pvegym.sim.simulation import Simulation

#: scenarios whose HA manager runs with failures, maintenance and operator commands
#: (``node-failure``: network cut, fencing, recovery; ``events.toml``: every event type), a field
#: scenario, a family instance with resource-affinity rules the balancer never trips, a bench
#: cluster; the CI sample's seeds are drawn once from a fixed generator (train seeds only)
SAMPLE = (
    "node-failure",
    "experiments/scenarios/events.toml",
    "failure-loop",
    "small",
    "contended-3node",
)
_SEEDS = np.random.default_rng(31).integers(0, 1000, size=len(SAMPLE)).tolist()


@pytest.mark.parametrize(("scenario", "seed"), list(zip(SAMPLE, _SEEDS, strict=True)))
@pytest.mark.parametrize("policy", ["upstream", "patched"])
def test_engine_stack_is_the_full_stack(scenario: str, seed: int, policy: str) -> None:
    assert compare(scenario, policy, seed, basic=True) == ""


def test_maintenance_drain_identical_over_its_first_half() -> None:
    # the drain and its moves: node1 enters maintenance at 10 min, the services leave it
    assert compare("maintenance-drain", "patched", 7, basic=True, duration=1500.0) == ""


def test_engine_stack_never_builds_the_ports_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any, haenv: Any) -> None:
        raise AssertionError("the engine stack built a port Manager")

    monkeypatch.setattr(ha_manager.Manager, "__init__", refuse)
    out = run("node-failure", "patched", 0, "engine", basic=True)
    assert any("fencing: acknowledged" in line for _, line in out.log)
    assert any("recover service" in line for _, line in out.log)
    with pytest.raises(AssertionError, match="port Manager"):
        run("node-failure", "patched", 0, "full", basic=True)


def test_the_check_reports_a_difference_the_engine_has() -> None:
    """Recovery places by the scheduler's scores: the engine has only the basic one, the
    scenario's is ``dynamic`` — the check must see it (until the engine gets static/dynamic)."""
    full = run("node-failure", "patched", 0, "full", basic=False)
    engine = run("node-failure", "patched", 0, "engine", basic=False)
    full.log = [x for x in full.log if "using scheduler mode" not in x[1]]
    assert first_difference(full, engine) != ""
    recovered = [line for _, line in engine.log if "recover service" in line]
    assert recovered and recovered != [line for _, line in full.log if "recover service" in line]


def test_engine_stack_selected_by_the_scenario_key() -> None:
    scn = catalog.scenario("node-failure", 0, {"ha_stack": "engine"})
    sim = Simulation(scn, 0)
    assert isinstance(sim.ha_stack, EngineStack)
    assert sim.ha_busy  # until a master wrote the services' status
    assert catalog.scenario("failure-loop", 0).ha_stack == "model"  # the default is unchanged


def test_an_unknown_crm_command_is_refused_by_name() -> None:
    sim = Simulation(catalog.scenario("node-failure", 0, {"ha_stack": "engine"}), 0)
    assert isinstance(sim.ha_stack, EngineStack)
    with pytest.raises(ValueError, match="'migrate vm:999 node2'"):
        sim.ha_stack.engine.command_row("migrate vm:999 node2")


#: event histories beyond the shipped scenarios': the master's node fails (a new master takes
#: over: what ``Manager->new`` starts afresh), is cut off (the old master finds itself offline),
#: goes into maintenance; an ignore-disarm while a motion is queued
HISTORIES = {
    "master-power": [
        {"t": 60, "type": "power-off", "node": "node1"},
        {"t": 400, "type": "power-on", "node": "node1"},
    ],
    "master-network": [
        {"t": 60, "type": "network-off", "node": "node1"},
        {"t": 300, "type": "network-on", "node": "node1"},
    ],
    "master-maintenance": [
        {"t": 60, "type": "maintenance-enable", "node": "node1"},
        {"t": 300, "type": "maintenance-disable", "node": "node1"},
    ],
    "disarm-ignore": [
        {"t": 60, "type": "migrate", "sid": "vm:102", "target": "node3"},
        {"t": 60, "type": "disarm", "mode": "ignore"},
        {"t": 200, "type": "set-state", "sid": "vm:103", "state": "stopped"},
        {"t": 300, "type": "arm"},
    ],
}


@pytest.mark.parametrize("history", sorted(HISTORIES))
def test_engine_stack_on_event_histories(history: str, tmp_path: Path) -> None:
    from tests.sim.test_ha_events import scenario_toml

    path = tmp_path / f"{history}.toml"
    path.write_text(scenario_toml(HISTORIES[history]))
    for seed in (0, 1):
        assert compare(str(path), "patched", seed, basic=True) == "", (history, seed)


def _uid_renewals(
    scenario: str, stack: str, seed: int, rounds: int
) -> tuple[list[dict[str, bool]], dict[str, Any]]:
    """Per round after the first, per service of the manager status: whether its uid is new;
    and the episode's metrics."""
    scn = catalog.scenario(scenario, seed, {"ha_stack": stack})
    sim = Simulation(scn, seed)
    assert sim.ha_stack is not None
    sim.ha_stack.cfs.datacenter["crs"]["ha"] = "basic"
    pol = make_policy("patched", "--policy")
    pol.reset(seed)
    sim.advance()
    view = sim.observe()
    last: dict[str, str] = {}
    out: list[dict[str, bool]] = []
    for _ in range(rounds):
        view = sim.step(pol.decide(view))
        ss = sim.ha_stack.cfs.manager_status.get("service_status") or {}
        uids = {sid: str(sd["uid"]) for sid, sd in ss.items()}
        if last:
            out.append({sid: uids[sid] != last.get(sid) for sid in sorted(uids)})
        last = uids
    return out, sim.result()["metrics"]


def test_the_engine_renews_uids_as_the_port_without_its_quiet_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every CRM round gives a started service whose LRM result it read a new uid (upstream's
    ``next_state_started``: "ensure service gets started again if it went unexpected down"), so
    its LRM checks it again. The port skips that only in a quiet round (its steady-state fast
    path, keyed on :meth:`~pvegym.sim.ha.env.HAEnv.quiescence_token`); without the token the
    port renews in the very rounds the engine does — the engine has no quiet path yet."""
    rounds = 40
    quiet, quiet_metrics = _uid_renewals("contended-3node", "full", 3, rounds)
    engine, engine_metrics = _uid_renewals("contended-3node", "engine", 3, rounds)
    monkeypatch.setattr(ModelHAEnv, "quiescence_token", lambda self: None)
    full, full_metrics = _uid_renewals("contended-3node", "full", 3, rounds)
    assert engine == full
    assert engine_metrics == full_metrics == quiet_metrics  # the quiet path changes no outcome
    # settled (no motion since round 15): the engine renews every service every round, the
    # port's quiet rounds none
    assert all(all(r.values()) for r in engine[-20:])
    assert not any(any(r.values()) for r in quiet[-20:])
