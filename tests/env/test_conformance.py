"""The conformance module on every named scenario and on the ``small`` and ``medium`` families."""

import pytest

from pvegym.sim import scenarios
from pvegym.testing import check_scenario


@pytest.mark.parametrize("scenario", [*scenarios.names(), "small", "medium"])
def test_conformance(scenario: str) -> None:
    report = check_scenario(scenario, seeds=(0,), steps=12)
    assert report["steps"] == 12
    assert report["step_us"] > 0


def test_conformance_with_skip_idle_rounds() -> None:
    check_scenario("small", seeds=(4,), steps=20, skip_idle_rounds=True)


def test_sampled_mask_check_takes_pairs_not_action_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above FULL_MASK_CHECK_PAIRS (bench-large: 128,000 pairs) the mask is checked on a sample
    of actions; action 0 (always valid, no pair) once slipped in and failed every large family."""
    from pvegym import testing
    from pvegym.env.cluster_env import ClusterEnv

    monkeypatch.setattr(testing, "FULL_MASK_CHECK_PAIRS", 10)  # small's 160 pairs: sampled
    env, twin = ClusterEnv("small"), ClusterEnv("small")
    testing.check_masks(env, twin, seed=0, steps=3)
