"""The cost in the metrics' vocabulary: weights by metric name, running value = final value."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.cost import (
    BALANCER_COST,
    COSTS,
    RunningCost,
    additive_names,
    check_weights,
    weighted_cost,
)
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.simulation import Simulation
from pvegym.tuning.study_config import load_study_config
from pvegym.units import GiB

ROOT = Path(__file__).resolve().parents[2]


def test_additive_metrics_are_metrics_and_exclude_means_maxima_latencies() -> None:
    assert set(additive_names()) <= set(METRIC_KEYS)
    for key in ("guest_stall_s", "moves", "migration_bytes", "churn_moves", "downtime_s"):
        assert key in additive_names()
    for key in ("imbalance_mean", "max_moves_one_guest", "evacuation_latency_s"):
        assert key not in additive_names()


def test_check_weights_names_the_key() -> None:
    assert check_weights({"moves": 2}, "w") == {"moves": 2.0}
    with pytest.raises(ConfigError, match=r"^w\.mvoes"):
        check_weights({"mvoes": 1.0}, "w")
    with pytest.raises(ConfigError, match=r"w\.imbalance_mean"):
        check_weights({"imbalance_mean": 1.0}, "w", additive_only=True)
    assert check_weights({"imbalance_mean": 1.0}, "w") == {"imbalance_mean": 1.0}
    with pytest.raises(ConfigError, match=r"w\.moves"):
        check_weights({"moves": math.inf}, "w")
    with pytest.raises(ConfigError, match=r"w\.moves"):
        check_weights({"moves": True}, "w")


def test_weighted_cost_counts_a_missing_latency_as_the_episode() -> None:
    metrics = {"sim_seconds": 600.0, "evacuation_latency_s": None, "moves": 3}
    assert weighted_cost({"evacuation_latency_s": 2.0, "moves": 10.0}, metrics) == 1230.0


def test_running_cost_after_every_round_equals_the_final_formula() -> None:
    """Every additive metric, weighted: after each round the running cost equals the weighted sum
    of ``sim.result()`` at that point (a migration in flight counts as far as it went)."""
    weights = {k: float(i + 1) for i, k in enumerate(additive_names())}
    weights["migration_bytes"] = 3.0 / GiB
    running = RunningCost(weights)
    sim = Simulation(catalog.scenario("nonconverging-migration"), 0)
    policy = make_policy("upstream")
    policy.reset(0)
    view = sim.reset()
    in_flight = 0
    for _ in range(round(1200 / sim.round_s)):
        view = sim.step(policy.decide(view))
        in_flight += sim.transfer_in_flight()[0] > 0
        expect = weighted_cost(weights, sim.result()["metrics"])
        assert running(sim) == pytest.approx(expect, rel=1e-12, abs=1e-9)
    assert in_flight > 0 and sim.result()["metrics"]["moves"] > 0


def test_tune_patched_objective_is_the_balancer_cost() -> None:
    """The study's objective and the environment's default reward are the same cost."""
    cfg = load_study_config(ROOT / "experiments" / "tune-patched.toml")
    assert cfg.objectives[0].terms() == BALANCER_COST
    assert COSTS["balancer"] is BALANCER_COST


def test_named_cost_in_a_study_objective() -> None:
    from pvegym.tuning.study_config import ObjectiveSpec

    obj = ObjectiveSpec(cost="balancer")
    obj.validate("objectives[0]")
    assert obj.terms() == BALANCER_COST
    with pytest.raises(ConfigError, match=r"objectives\[0\]\.cost"):
        ObjectiveSpec(cost="nope").validate("objectives[0]")
    with pytest.raises(ConfigError, match="exactly one"):
        ObjectiveSpec(cost="balancer", metric="moves").validate("objectives[0]")
    metrics = {k: 0.0 for k in METRIC_KEYS} | {"guest_stall_s": 5.0, "moves": 1, "churn_moves": 1}
    assert np.isclose(weighted_cost(obj.terms(), metrics), 125.0)
