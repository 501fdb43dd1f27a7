"""Workload processes: each component's law, seeding, and validation."""

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.sim.workload import WorkloadBank, parse_signal


def _bank(specs: list, seed: int = 0) -> WorkloadBank:
    return WorkloadBank(
        [parse_signal(s, f"s[{i}]") for i, s in enumerate(specs)], np.random.default_rng(seed)
    )


def test_constant_and_steps() -> None:
    bank = _bank([2.5, {"type": "steps", "at": [[100, 1.0], [200, 3.0]]}])
    assert bank.sample(50, 10).tolist() == [2.5, 0.0]
    assert bank.sample(100, 10).tolist() == [2.5, 1.0]
    assert bank.sample(250, 10).tolist() == [2.5, 3.0]


def test_ou_is_stationary_with_given_mean_std_and_correlation() -> None:
    bank = _bank([{"type": "ou", "mean": 1.0, "sigma": 0.2, "tau": 50}] * 400, seed=3)
    xs = np.array([bank.sample(10 * k, 10.0).copy() for k in range(300)])
    assert xs.mean() == pytest.approx(1.0, abs=0.01)
    assert xs.std() == pytest.approx(0.2, rel=0.03)
    lag1 = np.corrcoef(xs[:-1].ravel(), xs[1:].ravel())[0, 1]
    assert lag1 == pytest.approx(np.exp(-10 / 50), abs=0.02)  # AR(1) coefficient exp(-dt/tau)


def test_diurnal() -> None:
    bank = _bank([{"type": "diurnal", "amplitude": 2.0, "period": 400, "phase": 0}])
    assert bank.sample(100, 10)[0] == pytest.approx(2.0)
    assert bank.sample(300, 10)[0] == pytest.approx(-2.0)


def test_bursts_rate_and_duration() -> None:
    bank = _bank(
        [{"type": "bursts", "rate_per_hour": 6, "height": 1.0, "duration": 60}] * 200, seed=1
    )
    on = np.array([bank.sample(10 * k, 10.0).copy() for k in range(3600)])  # 10 h
    # duty cycle of a Poisson burst train (rate λ, fixed duration d, bursts restart): 1 - exp(-λ d)
    assert on.mean() == pytest.approx(1 - np.exp(-6 / 3600 * 60), rel=0.1)


def test_same_seed_same_signal_different_seed_different_signal() -> None:
    spec = [
        {"type": "ou", "mean": 0, "sigma": 1, "tau": 30},
        {"type": "bursts", "rate_per_hour": 30, "height": 1},
    ]
    runs = [[_bank([spec], s).sample(10 * k, 10).copy() for k in range(50)] for s in (7, 7, 8)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_bad_component_names_the_path() -> None:
    with pytest.raises(ConfigError, match=r"^cpu\[0\]\.type: 'sine' is not allowed"):
        parse_signal([{"type": "sine"}], "cpu")
    with pytest.raises(ConfigError, match=r"^cpu\.sigma: must be ≥ 0"):
        parse_signal({"type": "ou", "sigma": -1}, "cpu")
    with pytest.raises(ConfigError, match=r"^mem\.at\[0\]: must be a pair"):
        parse_signal({"type": "steps", "at": [5]}, "mem")
