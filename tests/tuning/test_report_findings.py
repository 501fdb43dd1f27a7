"""A study report says what it found (issue 30 item 9): a flat objective, infeasible defaults,
and how the winner compares with ``noop``."""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import create_trial

from pvegym.experiments.stats import Estimate
from pvegym.tuning.report import NOOP_LABEL, Candidate, Comparison, candidates, findings_lines
from pvegym.tuning.study_config import load_study_config
from tests.tuning.test_study_config import GOOD


def _trial(number: int, value: float, constraint: float = 0.0, role: str = "") -> object:
    t = create_trial(
        value=value,
        params={"x": 0.1 * number},
        distributions={"x": FloatDistribution(0.0, 10.0)},
        user_attrs={"role": role} if role else {},
        constraints={"failed_repeats <= 0": constraint},
    )
    t.number = number
    return t


def _cfg(tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "s.toml"
    path.write_text(GOOD)
    return load_study_config(path)


def test_flat_objective_infeasible_defaults_and_noop_tie_are_said(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    trials = [_trial(0, 50.0, constraint=1.0, role="defaults")]
    trials += [_trial(i, 10.0) for i in range(1, 15)] + [_trial(15, 12.0)]
    best = trials[1]
    tuned = [Candidate("tuned", "patched", {}, {}, best)]  # type: ignore[arg-type]
    cmp = Comparison({}, {("all", "tuned", NOOP_LABEL): Estimate(0.0, 0.0, 0.0, 20)}, {}, {})
    text = "\n".join(findings_lines(cfg, trials, tuned, cmp))  # type: ignore[arg-type]
    assert "flat at the optimum**: 14 of 16 complete trials tie" in text
    assert "defaults are infeasible** (trial 0 violates" in text
    assert "behaves exactly like `noop`" in text


def test_a_unique_winner_reports_its_difference_from_noop(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    trials = [_trial(0, 50.0, role="defaults"), _trial(1, 10.0), _trial(2, 12.0)]
    tuned = [Candidate("tuned", "patched", {}, {}, trials[1])]  # type: ignore[arg-type]
    cmp = Comparison({}, {("all", "tuned", NOOP_LABEL): Estimate(-30.0, -50.0, -10.0, 20)}, {}, {})
    text = "\n".join(findings_lines(cfg, trials, tuned, cmp))  # type: ignore[arg-type]
    assert "flat" not in text and "infeasible" not in text
    assert "tuned − `noop`" in text and "-30" in text


def test_noop_is_always_a_held_out_candidate(tmp_path: Path) -> None:
    labels = [c.label for c in candidates(_cfg(tmp_path), [])]
    assert NOOP_LABEL in labels


def test_a_reference_passed_as_tuned_is_refused_by_name(tmp_path: Path) -> None:
    """findings_lines checks its input (no ``assert``, which ``python -O`` strips): a candidate
    without a trial among the tuned ones is a ValueError naming it."""
    cfg = _cfg(tmp_path)
    trials = [_trial(0, 50.0, role="defaults"), _trial(1, 10.0)]
    ref = Candidate("defaults", "patched", {}, {}, None)
    with pytest.raises(ValueError, match="'defaults' is a reference"):
        findings_lines(cfg, trials, [ref], None)  # type: ignore[arg-type]
