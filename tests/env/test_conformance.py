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
