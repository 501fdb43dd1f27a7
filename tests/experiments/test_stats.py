"""The reports' statistics (SciPy): BCa intervals that cover, paired Wilcoxon tests, verdicts."""

import numpy as np
import pytest
from scipy import stats as sps

from pvegym.experiments import stats


def test_bca_interval_is_scipys_and_reproducible() -> None:
    v = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0])
    e = stats.bootstrap(v, 2000, 7, "x")
    assert e is not None and e.mean == v.mean() and e.lo < e.mean < e.hi
    ref = sps.bootstrap((v,), np.mean, n_resamples=2000, rng=stats.rng(7, "x"))
    assert (e.lo, e.hi) == (ref.confidence_interval.low, ref.confidence_interval.high)
    assert stats.bootstrap(v, 2000, 7, "x") == e
    assert stats.bootstrap(v, 2000, 7, "y") != e  # the name seeds the generator


def test_paired_difference_carries_the_wilcoxon_p_value() -> None:
    x = np.array([10.0, 12.0, 9.0, 11.0, 13.0, 10.0, 12.0, 14.0, 9.0, 11.0])
    ref = x + np.array([1.0, 2.0, 0.5, 1.5, 2.5, 1.3, 0.7, 1.2, 0.9, 1.1])
    d = stats.paired_difference(x, ref, 999, 0, "d")
    assert d is not None and d.mean < 0 and d.hi < 0
    assert d.p == pytest.approx(sps.wilcoxon(x - ref, method="exact").pvalue)
    assert d.p == pytest.approx(2 / 2**10)  # exact: all 10 differences negative, no ties
    assert stats.verdict(d, "lower") == "better" and stats.verdict(d, "higher") == "worse"


def test_tied_differences_use_the_normal_approximation() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    ref = x - np.array([1.0, 1.0, 2.0, 0.0, -1.0, 3.0])  # |d| ties; one seed without a difference
    p = stats.paired_test(x, ref)
    d = np.array([1.0, 1.0, 2.0, -1.0, 3.0])
    assert p == pytest.approx(sps.wilcoxon(d, method="approx").pvalue)


def test_identical_policies_and_no_difference() -> None:
    x = np.array([1.0, 2.0, 3.0])
    d = stats.paired_difference(x, x.copy(), 999, 0, "same")
    assert d is not None and d.p is None and stats.verdict(d, "lower") == "identical"
    noisy = stats.paired_difference(x, x[::-1].copy(), 999, 0, "noisy")
    assert noisy is not None and stats.verdict(noisy, "lower") == "no significant difference"


def test_relative_change_is_paired_and_undefined_for_a_zero_reference() -> None:
    x = np.array([2.0, 4.0, 6.0, 8.0])
    ref = np.array([1.0, 2.0, 3.0, 4.0])
    c = stats.bootstrap_change(x, ref, 999, 0, "c")
    assert c is not None and c.mean == pytest.approx(1.0)
    assert c.lo == pytest.approx(1.0) and c.hi == pytest.approx(1.0)  # paired: every resample
    assert stats.bootstrap_change(x, np.zeros(4), 999, 0, "z") is None


def test_constant_values_have_a_point_interval() -> None:
    e = stats.bootstrap(np.full(10, 2.5), 999, 0, "k")
    assert e == stats.Estimate(2.5, 2.5, 2.5, 10)
    assert stats.bootstrap(np.array([np.nan, np.nan]), 999, 0, "n") is None


def test_no_relative_change_when_a_resampled_reference_mean_is_zero() -> None:
    # noop's cpu shortfall on the small family: 0 on 6 of 10 seeds, so ~0.6 % of resamples have
    # a reference mean of 0 and the ratio is undefined there (the report shows the difference)
    ref = np.array([0.0, 1815.4, 0.0, 1058.2, 518.5, 0.0, 0.0, 3882.4, 0.0, 0.0])
    x = np.array([0.0, 1815.4, 0.8, 63.4, 0.8, 0.0, 0.0, 3882.4, 1.8, 0.0])
    assert stats.bootstrap_change(x, ref, 2000, 0, "small|upstream-noop|shortfall") is None
    assert stats.paired_difference(x, ref, 2000, 0, "d") is not None
