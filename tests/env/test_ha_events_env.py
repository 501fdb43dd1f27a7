"""Issue 16: each scenario event kind through the environment (Cluster-v1 on the full HA stack).

The mask follows what the HA manager accepts: a motion to a node in maintenance, unknown, being
fenced or fenced is refused (``Manager.pm`` ignores a motion to a node that is not ``online``),
and so is a motion of a service that is not ``started`` (stopped, disabled, ignored, frozen by a
disarm) or any motion while HA is disarmed. Cluster-v1's node rows ``online``, ``maintenance``
and ``fenced`` show the HA manager's node states. The cluster and events are
``tests/sim/test_ha_events.py``'s.
"""

from __future__ import annotations

import tomllib
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from pvegym.env import observation_layout as L
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.view import Motion
from tests.sim.test_ha_events import RECOVERY_BOUND_S, T0, scenario_toml


def env_at(
    events: list[dict[str, Any]], t: float, **extra: Any
) -> tuple[ClusterEnvV1, NDArray[np.float32]]:
    """Cluster-v1 on the test cluster with ``events`` (and ``extra`` scenario keys), run with no
    motion until time ``t``."""
    scn = scenario_from_dict({**tomllib.loads(scenario_toml(events)), **extra})
    env = ClusterEnvV1(scn)
    obs, _ = env.reset(seed=0)
    while env.sim.t < t:
        obs, _, _, _, _ = env.step(0)
    return env, obs


def node_row(env: ClusterEnvV1, obs: NDArray[np.float32], feature: str, node: str) -> float:
    lay = env.layout
    nodef = obs[lay.node_offset : lay.guest_offset].reshape(-1, env.max_nodes)
    return float(nodef[L.N_INDEX[feature], env.view.node_names.index(node)])


def allowed(env: ClusterEnvV1, sid: str, node: str) -> bool:
    return bool(env.action_masks()[env.encode_motion(Motion(sid, node))])


def refused(env: ClusterEnvV1, sid: str, node: str) -> bool:
    """The mask refuses the motion, and taking it is a counted no-op."""
    if allowed(env, sid, node):
        return False
    _, _, _, _, info = env.step(env.encode_motion(Motion(sid, node)))
    return bool(info["invalid_action"])


@pytest.mark.parametrize("kind", ["power-off", "network-off"])
def test_a_failed_node_is_no_target_until_it_is_back(kind: str) -> None:
    env, obs = env_at([{"t": T0, "type": kind, "node": "node2"}], T0 + 10.0)
    assert node_row(env, obs, "online", "node2") == 0.0
    assert node_row(env, obs, "fenced", "node2") == 1.0  # unknown: fenced before recovery
    assert refused(env, "vm:101", "node2")
    env, obs = env_at([{"t": T0, "type": kind, "node": "node2"}], T0 + RECOVERY_BOUND_S + 10)
    assert node_row(env, obs, "fenced", "node2") == 1.0 and refused(env, "vm:101", "node2")
    assert allowed(env, "vm:101", "node3")  # the others are targets


@pytest.mark.parametrize("kind", ["power", "network"])
def test_a_node_back_is_a_target_again(kind: str) -> None:
    events = [
        {"t": T0, "type": f"{kind}-off", "node": "node2"},
        {"t": T0 + 30.0, "type": f"{kind}-on", "node": "node2"},
    ]
    env, obs = env_at(events, T0 + 60.0)
    assert node_row(env, obs, "online", "node2") == 1.0
    assert node_row(env, obs, "fenced", "node2") == 0.0
    assert allowed(env, "vm:101", "node2")


def test_a_node_in_maintenance_is_no_target() -> None:
    events = [{"t": T0, "type": "maintenance-enable", "node": "node3"}]
    env, obs = env_at(events, 300.0)  # drained by then (two small guests)
    assert node_row(env, obs, "maintenance", "node3") == 1.0
    assert node_row(env, obs, "online", "node3") == 0.0
    assert env.view.guest_node[env.view.sids.index("vm:103")] != 2
    assert refused(env, "vm:101", "node3")
    assert allowed(env, "vm:101", "node2")
    events.append({"t": 300.0, "type": "maintenance-disable", "node": "node3"})
    env, obs = env_at(events, 500.0)
    assert node_row(env, obs, "maintenance", "node3") == 0.0
    assert node_row(env, obs, "online", "node3") == 1.0
    assert allowed(env, "vm:101", "node3")


@pytest.mark.parametrize("kind", ["migrate", "relocate"])
def test_an_operator_motion_holds_the_mask_then_moves_the_guest(kind: str) -> None:
    events = [{"t": T0, "type": kind, "sid": "vm:101", "target": "node2"}]
    env, _ = env_at(events, T0)
    assert not env.action_masks()[1:].any()  # queued: the pipeline is busy
    env, _ = env_at(events, 200.0)
    assert env.view.guest_node[env.view.sids.index("vm:101")] == 1  # node2
    assert refused(env, "vm:101", "node2") and allowed(env, "vm:101", "node1")


@pytest.mark.parametrize(
    "events",
    [
        [{"t": T0, "type": "stop", "sid": "vm:101", "timeout": 0}],
        [{"t": T0, "type": "set-state", "sid": "vm:101", "state": "disabled"}],
        [{"t": T0, "type": "set-state", "sid": "vm:101", "state": "stopped"}],
        [{"t": T0, "type": "set-state", "sid": "vm:101", "state": "ignored"}],
    ],
    ids=["stop", "disabled", "stopped", "ignored"],
)
def test_a_service_not_started_is_not_movable(events: list[dict[str, Any]]) -> None:
    env, _ = env_at(events, T0 + 60.0)
    assert refused(env, "vm:101", "node2")
    assert allowed(env, "vm:102", "node1")  # the others move
    started = [*events, {"t": T0 + 60.0, "type": "set-state", "sid": "vm:101", "state": "started"}]
    env, _ = env_at(started, T0 + 120.0)
    assert allowed(env, "vm:101", "node2")


@pytest.mark.parametrize("mode", ["freeze", "ignore"])
def test_disarmed_ha_moves_nothing_until_armed(mode: str) -> None:
    events = [{"t": T0, "type": "disarm", "mode": mode}, {"t": 200.0, "type": "arm"}]
    env, _ = env_at(events, T0 + 30.0)
    assert not env.action_masks()[1:].any()
    assert refused(env, "vm:101", "node2")
    env, _ = env_at(events, 260.0)
    assert allowed(env, "vm:101", "node2")


def test_node_affinity_follows_the_online_nodes() -> None:
    """vm:103 (on node3) prefers node3 (priority 2) over node1 and node2 (1): no target while
    node3 is online; with node3 in maintenance the HA manager picks among the online nodes, so
    vm:103, drained to one of node1 and node2, may move to the other."""
    rule = {"name": "na", "resources": ["vm:103"], "nodes": {"node3": 2, "node1": 1, "node2": 1}}
    events = [{"t": T0, "type": "maintenance-enable", "node": "node3"}]
    env, _ = env_at(events, T0 - 10.0, node_affinity=[rule])
    assert not allowed(env, "vm:103", "node1") and not allowed(env, "vm:103", "node2")
    env, _ = env_at(events, 300.0, node_affinity=[rule])
    here = env.view.node_names[env.view.guest_node[env.view.sids.index("vm:103")]]
    other = {"node1": "node2", "node2": "node1"}[here]
    assert allowed(env, "vm:103", other) and refused(env, "vm:103", "node3")


def test_the_first_valid_motion_is_carried_out() -> None:
    """The env's first valid action (issue 16 review): with the full stack no motion is valid
    until the first master wrote the services' status, and the first one the mask admits runs
    and ends; no move stays ``running`` with no job. A reset makes the pipeline busy again."""
    import gymnasium

    import pvegym.env  # noqa: F401 - registers the environments

    env = gymnasium.make("pvegym/Cluster-v1", scenario="small", overrides={"ha_stack": "full"})
    env.reset(seed=0)
    u: Any = env.unwrapped
    assert not u.action_masks()[1:].any()  # the first round: no master yet
    while not u.action_masks()[1:].any():
        env.step(0)
    env.step(int(np.flatnonzero(u.action_masks()[1:])[0]) + 1)
    (rec,) = u.sim.metrics.moves
    for _ in range(40):
        env.step(0)
    assert rec.outcome == "succeeded" and u.sim.moves.pending == {}
    env.reset(seed=0)
    assert not u.action_masks()[1:].any()
