"""The one lock table (``Sim/Env.pm`` ``sim_get_lock``) the three HA environments share."""

from typing import Any

from pvegym.sim.cluster_locks import LOCK_TIMEOUT, sim_get_lock


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
