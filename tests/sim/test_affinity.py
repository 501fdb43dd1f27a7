"""Node affinity on motion targets (``Manager.pm`` ``get_resource_migration_candidates``), in the model, the env and the view."""

import numpy as np

import pvegym.env  # noqa: F401  (registers the environment)
from pvegym.env.cluster_env import ClusterEnv
from pvegym.env.view_encoding import mask_from_view
from pvegym.sim.affinity import allowed_targets, node_affinity_mask
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import NodeAffinityRule, Rules
from pvegym.units import GiB

NODES = ("node1", "node2", "node3")


def test_highest_priority_online_nodes_and_non_strict_fallback() -> None:
    online = np.array([True, True, True])
    rule = NodeAffinityRule("r", ("vm:1",), (("node1", 1), ("node2", 2)), strict=True)
    assert node_affinity_mask(rule, NODES, online).tolist() == [False, True, False]
    down = np.array([True, False, True])  # the preferred node is offline: the next priority
    assert node_affinity_mask(rule, NODES, down).tolist() == [True, False, False]
    none_up = np.array([False, False, True])
    assert node_affinity_mask(rule, NODES, none_up).tolist() == [False, False, False]
    loose = NodeAffinityRule("r", ("vm:1",), (("node1", 1),), strict=False)
    assert node_affinity_mask(loose, NODES, none_up).tolist() == [False, False, True]
    allowed = allowed_targets(Rules(node_affinity=(rule,)), ("vm:1", "vm:2"), NODES, online)
    assert allowed.tolist() == [[False, True, False], [True, True, True]]


def _scenario() -> object:
    return scenario_from_dict(
        {
            "name": "affinity",
            "duration": "10m",
            "nodes": [{"name": n, "maxcpu": 16, "maxmem": 64 * GiB} for n in NODES],
            "guests": [
                {
                    "sid": f"vm:{100 + i}",
                    "node": "node1",
                    "maxcpu": 2,
                    "maxmem": 4 * GiB,
                    "cpu": 1.0,
                    "memhost": 2 * GiB,
                }
                for i in range(3)
            ],
            "node_affinity": [
                {"name": "pin", "resources": ["vm:100"], "nodes": {"node1": 1}, "strict": True},
                {"name": "prefer", "resources": ["vm:101"], "nodes": {"node3": 2, "node2": 1}},
            ],
        }
    )


def test_model_env_and_view_masks_agree() -> None:
    sim = Simulation(_scenario(), seed=0)  # type: ignore[arg-type]
    sim.reset()
    possible = [[sim.motion_possible(g, n) for n in range(3)] for g in range(3)]
    assert possible == [[False, False, False], [False, False, True], [False, True, True]]
    env = ClusterEnv(scenario=_scenario())  # type: ignore[arg-type]
    env.reset(seed=0)
    mask = env.action_masks()
    assert mask[1:].reshape(3, 3).tolist() == possible
    np.testing.assert_array_equal(mask_from_view(env.view, 3, 3), mask)
