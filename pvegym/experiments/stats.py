"""The reports' statistics, by SciPy: bootstrap confidence intervals and paired tests over seeds.

* :func:`bootstrap` — the mean over seeds with a 95 % **BCa** bootstrap interval
  (``scipy.stats.bootstrap``, bias-corrected and accelerated), where pvegym computed a percentile
  interval by hand before. Both under-cover with the ten seeds of a report and skewed costs; BCa
  less (measured on 1,000 samples of 10 exponential costs: the true mean inside 87.9 % of BCa
  intervals, 85.6 % of percentile ones; lognormal σ = 1: 82.2 % vs 79.9 %). Data on which BCa is
  undefined (its jackknife degenerates) fall back to the percentile interval.
* :func:`bootstrap_change` — the relative change of the mean, ``mean(x)/mean(ref) − 1``, with a
  **paired** bootstrap interval (seeds resampled together).
* :func:`paired_test` — the **Wilcoxon signed-rank** test of the paired differences
  (``scipy.stats.wilcoxon``; exact without ties, the normal approximation with tie correction
  otherwise): does a policy differ from the reference on the same seeds? Seeds with no
  difference are dropped (``zero_method="wilcox"``).

Every resampling generator is seeded from the report's seed and the quantity's name (e.g.
``failure-loop|upstream|moves``), so intervals are reproducible and independent of the order in
which anything else was computed.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE  # significance level of the paired tests


@dataclass(frozen=True)
class Estimate:
    """A statistic over ``n`` seeds with its 95 % CI; ``p`` is the Wilcoxon signed-rank p-value
    when the statistic is a paired difference (None otherwise, or when every difference is 0)."""

    mean: float
    lo: float
    hi: float
    n: int
    p: float | None = None


def rng(seed: int, name: str) -> np.random.Generator:
    tag = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little")
    return np.random.default_rng([seed, tag])


def _interval(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., np.ndarray],
    resamples: int,
    seed: int,
    name: str,
) -> tuple[float, float] | None:
    """BCa interval of ``statistic`` (paired over ``data``), percentile where BCa is undefined;
    None when neither is finite."""
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DegenerateDataWarning: handled by the fallback
            res = stats.bootstrap(
                data,
                statistic,
                n_resamples=resamples,
                confidence_level=CONFIDENCE,
                method=method,
                paired=len(data) > 1,
                vectorized=True,
                rng=rng(seed, name),
            )
        if not np.isfinite(res.bootstrap_distribution).all():
            return None  # e.g. a resample whose reference mean is 0: the ratio is undefined
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return lo, hi
    return None


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def bootstrap(values: np.ndarray, resamples: int, seed: int, name: str) -> Estimate | None:
    """Mean and 95 % bootstrap CI of the non-NaN ``values``; ``None`` if there are none."""
    v = values[~np.isnan(values)]
    if v.size == 0:
        return None
    mean = float(v.mean())
    if v.size == 1 or v.min() == v.max():
        return Estimate(mean, mean, mean, int(v.size))
    ci = _interval((v,), _mean, resamples, seed, name)
    lo, hi = ci if ci is not None else (mean, mean)
    return Estimate(mean, lo, hi, int(v.size))


def _change(x: np.ndarray, ref: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.mean(x, axis=axis) / np.mean(ref, axis=axis) - 1.0
    return out


def bootstrap_change(
    x: np.ndarray, ref: np.ndarray, resamples: int, seed: int, name: str
) -> Estimate | None:
    """Relative change of the mean, ``mean(x)/mean(ref) − 1``, with a paired bootstrap CI.
    ``None`` when a value is missing or the reference's mean is 0, or a resample's is (the
    interval is then undefined) — the report shows the absolute difference instead."""
    if np.isnan(x).any() or np.isnan(ref).any() or ref.mean() == 0:
        return None
    change = float(x.mean() / ref.mean() - 1.0)
    if x.size == 1 or ((x == x[0]).all() and (ref == ref[0]).all()):
        return Estimate(change, change, change, int(x.size))
    ci = _interval((x, ref), _change, resamples, seed, name)
    if ci is None:
        return None
    return Estimate(change, ci[0], ci[1], int(x.size))


def paired_test(x: np.ndarray, ref: np.ndarray) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of ``x − ref`` over the seeds where both have a
    value; None when no seed differs (the policies are identical there)."""
    d = (x - ref)[~(np.isnan(x) | np.isnan(ref))]
    d = d[d != 0]  # zero_method="wilcox": seeds without a difference carry no sign
    if d.size == 0:
        return None
    # exact null distribution without ties; with tied |differences| the normal approximation
    # with tie correction, as R's wilcox.test (SciPy's "auto" runs a permutation test there,
    # ~1 s a call: minutes for a report)
    method = "exact" if np.unique(np.abs(d)).size == d.size else "approx"
    return float(stats.wilcoxon(d, alternative="two-sided", method=method).pvalue)


def paired_difference(
    x: np.ndarray, ref: np.ndarray, resamples: int, seed: int, name: str
) -> Estimate | None:
    """Mean paired difference ``x − ref`` with its bootstrap CI and the Wilcoxon p-value."""
    e = bootstrap(x - ref, resamples, seed, name)
    if e is None:
        return None
    return Estimate(e.mean, e.lo, e.hi, e.n, paired_test(x, ref))


def verdict(d: Estimate | None, better: str | None) -> str:
    """``better``/``worse``/``no significant difference``/``identical`` for a paired difference
    (policy − reference), by the Wilcoxon test at :data:`ALPHA`, in the direction of the mean
    difference; ``better`` is the metric's (``"lower"``/``"higher"``, None: no direction)."""
    if d is None:
        return "no value"
    if d.p is None:
        return "identical"
    if d.p >= ALPHA or better is None or d.mean == 0:
        return "no significant difference"
    lower = d.mean < 0
    return "better" if lower == (better == "lower") else "worse"


def fmt_p(p: float | None) -> str:
    """``p=0.004``, ``p<0.001``; empty for None."""
    if p is None:
        return ""
    return "p<0.001" if p < 0.001 else f"p={p:.3f}" if p < 0.1 else f"p={p:.2f}"
