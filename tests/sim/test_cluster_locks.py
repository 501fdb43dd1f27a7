"""The one lock table (``Sim/Env.pm`` ``sim_get_lock``) the three HA environments share."""

from pathlib import Path
from typing import Any

import pytest

from pvegym.experiments.bench_ha import MemoryCFS, MemoryHAEnv
from pvegym.harness import read_testdir
from pvegym.harness.sim_env import SimEnv
from pvegym.harness.testhardware import TestHardware
from pvegym.sim.cluster_locks import LOCK_TIMEOUT, SimLockEnv, sim_get_lock
from pvegym.sim.ha_model_env import ModelHAEnv
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.units import GiB

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-tests"


def test_a_lock_is_its_holders_until_it_expires() -> None:
    locks: dict[str, Any] = {}
    assert sim_get_lock(locks, "ha_manager_lock", "node1", 0.0) == (True, True)  # new holder
    assert sim_get_lock(locks, "ha_manager_lock", "node1", 10.0) == (True, False)  # renewed
    assert locks["ha_manager_lock"] == {"time": 10.0, "node": "node1"}
    # another node waits for the lifetime since the last renewal
    assert sim_get_lock(locks, "ha_manager_lock", "node2", 10.0 + LOCK_TIMEOUT) == (False, False)
    assert sim_get_lock(locks, "ha_manager_lock", "node2", 10.5 + LOCK_TIMEOUT) == (True, True)
    assert locks["ha_manager_lock"] == {"time": 10.5 + LOCK_TIMEOUT, "node": "node2"}


def test_unlock_frees_the_holders_lock_only() -> None:
    locks: dict[str, Any] = {}
    assert sim_get_lock(locks, "l", "node1", 0.0, unlock=True) == (False, False)  # none held
    sim_get_lock(locks, "l", "node1", 0.0)
    assert sim_get_lock(locks, "l", "node2", 1.0, unlock=True) == (False, False)
    assert "l" in locks
    assert sim_get_lock(locks, "l", "node1", 1.0, unlock=True) == (True, False)
    assert "l" not in locks
    sim_get_lock(locks, "l", "node1", 0.0)
    # an expired lock counts as released for anyone; it stays in the table until taken
    assert sim_get_lock(locks, "l", "node2", 1.0 + LOCK_TIMEOUT, unlock=True) == (True, False)
    assert "l" in locks


# ---------------------------------------------------------------- the three environments
def _bench_envs() -> list[SimLockEnv]:
    cfs = MemoryCFS()
    return [MemoryHAEnv(cfs, "node1", "crm"), MemoryHAEnv(cfs, "node2", "crm")]


def _harness_envs() -> list[SimLockEnv]:
    td = read_testdir(DATA / "test-basic1")
    hw = TestHardware(td.files, td.cmdlist)
    return [hw.nodes["node1"].crm_env, hw.nodes["node2"].crm_env]


def _model_envs() -> list[SimLockEnv]:
    guest = {"sid": "vm:100", "node": "node1", "maxcpu": 1, "maxmem": GiB, "memhost": GiB / 2}
    scenario = scenario_from_dict(
        {
            "name": "locks",
            "duration": "1m",
            "ha_stack": "full",
            "nodes": [{"name": f"node{i}", "maxcpu": 4, "maxmem": 8 * GiB} for i in (1, 2, 3)],
            "guests": [guest],
        }
    )
    stack = Simulation(scenario).ha_stack
    assert stack is not None
    envs = {env.nodename(): env for env, _ in stack.crms}
    return [envs["node1"], envs["node2"]]


ENVIRONMENTS = {"bench": _bench_envs, "harness": _harness_envs, "model": _model_envs}


def test_the_three_environments_share_the_one_lock_implementation() -> None:
    """Each HA environment is a SimLockEnv and keeps no lock logic of its own: it says where
    its table is (and the regression hardware adds its clock's delay around the getters)."""
    classes = {MemoryHAEnv, SimEnv, ModelHAEnv}
    assert all(issubclass(c, SimLockEnv) for c in classes)
    shared = ("sim_get_lock", "release_ha_manager_lock", "release_ha_agent_lock")
    for c in classes:
        assert [m for m in shared if getattr(c, m) is not getattr(SimLockEnv, m)] == [], c
    assert MemoryHAEnv.get_ha_agent_lock is SimLockEnv.get_ha_agent_lock
    assert ModelHAEnv.get_ha_manager_lock is SimLockEnv.get_ha_manager_lock
    # the bench skips the quorum check and the log line; the others do neither
    assert not MemoryHAEnv.lock_quorum_check and not MemoryHAEnv.lock_log
    assert SimEnv.lock_quorum_check and ModelHAEnv.lock_quorum_check
    assert SimEnv.lock_log and ModelHAEnv.lock_log


#: (node index, call, time s, quorate) → what sim_get_lock on a bare table answers
SCRIPT = [
    (0, "get_ha_manager_lock", 0.0, True),
    (1, "get_ha_manager_lock", 10.0, True),  # held by node1
    (0, "get_ha_manager_lock", 50.0, True),  # renewed
    (1, "get_ha_manager_lock", 50.0 + LOCK_TIMEOUT, True),  # not yet expired
    (1, "get_ha_manager_lock", 50.5 + LOCK_TIMEOUT, True),  # expired: node2 takes it
    (0, "release_ha_manager_lock", 60.0 + LOCK_TIMEOUT, True),  # not node1's
    (1, "release_ha_manager_lock", 61.0 + LOCK_TIMEOUT, True),
    (0, "get_ha_agent_lock", 200.0, True),
    (1, "get_ha_agent_lock", 200.0, False),  # no quorum: no lock (but in the bench)
    (0, "release_ha_agent_lock", 201.0, True),
    (0, "get_ha_manager_lock", 300.0, False),
]


@pytest.mark.parametrize("kind", sorted(ENVIRONMENTS))
def test_each_environment_answers_as_the_table(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    envs = ENVIRONMENTS[kind]()
    clock = {"t": 0.0, "quorate": True}
    logged: list[str] = []
    for env in envs:
        monkeypatch.setattr(env, "get_time", lambda: clock["t"])
        monkeypatch.setattr(env, "quorate", lambda: clock["quorate"])
        monkeypatch.setattr(env, "log", lambda level, msg: logged.append(msg))
    table: dict[str, Any] = {}
    checks_quorum = type(envs[0]).lock_quorum_check
    expected_log: list[str] = []
    for node, call, t, quorate in SCRIPT:
        clock["t"], clock["quorate"] = t, quorate
        name = "ha_manager_lock" if "manager" in call else f"ha_agent_node{node + 1}_lock"
        want, got = False, False
        if quorate or not checks_quorum:
            want, got = sim_get_lock(table, name, f"node{node + 1}", t, call.startswith("rel"))
        if got and type(envs[0]).lock_log:
            expected_log.append(f"got lock '{name}'")
        assert getattr(envs[node], call)() == want, (kind, node, call, t)
    assert logged == expected_log
    assert expected_log or kind == "bench"
