"""Heuristic balancers act in the environment exactly as in ``pvegym simulate``."""

import gymnasium
import pytest

import pvegym.env  # noqa: F401  (registers pvegym/Cluster-v0)
from pvegym.commands.simulate import simulate
from pvegym.policies import make_policy
from pvegym.policies.env_adapter import HeuristicAgent
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.simulation import Simulation


@pytest.mark.parametrize("policy", ["noop", "upstream"])
@pytest.mark.parametrize("seed", [0, 3])
def test_metrics_equal_simulation_run(policy: str, seed: int) -> None:
    env = gymnasium.make("pvegym/Cluster-v0", scenario="contended-3node", episode_seconds=1200)
    final = HeuristicAgent(policy).run_episode(env, seed=seed)
    expect = Simulation(catalog.scenario("contended-3node"), seed).run(make_policy(policy), 1200)
    assert {k: final[k] for k in METRIC_KEYS} == expect["metrics"]
    assert final["move_log"] == expect["moves"]
    assert final["steps"] == 120
    assert final["invalid_actions"] == 0
    doc = simulate("contended-3node", policy, seed, "20m")
    assert {k: final[k] for k in METRIC_KEYS} == doc["metrics"]
    if policy == "upstream":
        assert final["moves"] > 0


def test_predict_encodes_the_decision() -> None:
    env = gymnasium.make("pvegym/Cluster-v0", scenario="contended-3node")
    env.reset(seed=0)
    agent = HeuristicAgent("noop")
    assert agent.predict(env) == 0
    assert agent.name == "noop"
