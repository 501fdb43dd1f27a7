"""Cost in the metrics' vocabulary: ``Σ weight × metric``, weights keyed by metric name.

One definition serves three users, so that what an agent is rewarded for, what a study tunes and
what a benchmark reports are the same number:

* a tuning objective (``[[objectives]] weights = {guest_stall_s = 1, moves = 60}``) scores an
  episode with :func:`weighted_cost` of its final metrics;
* the environment's reward is minus what a round *added* to that cost: :class:`RunningCost` reads
  the metrics of a running :class:`~pvegym.sim.simulation.Simulation` so far, and the reward is
  minus its change over the step. The rewards of an episode therefore sum to minus
  :func:`weighted_cost` of its final metrics — exactly, not approximately;
* training reports the same :func:`weighted_cost` of its evaluation episodes.

Only metrics that add up round by round (the metric registry's ``additive`` flag,
:func:`additive_names`: integrals, byte and move counts) may weigh in a reward: a mean
(``imbalance_mean``), a maximum (``max_moves_one_guest``) or a latency has no per-round increment.
A tuning objective may use any metric.

Units: a weight is in cost units per unit of its metric (``guest_stall_s``: per second,
``migration_bytes``: per byte — ``2**-30`` is one cost unit per GiB).

:data:`BALANCER_COST` is the objective ``experiments/tune-patched.toml`` tunes and the benchmark
reports: the environment's default reward weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pvegym.errors import ConfigError, show
from pvegym.limits import MAX_WEIGHT, check_number
from pvegym.sim.metrics import METRIC_KEYS, additive_metrics, metric_spec

if TYPE_CHECKING:
    from pvegym.sim.simulation import Simulation


def additive_names() -> tuple[str, ...]:
    """The registered metrics that add up round by round (``MetricSpec.additive``): the only
    ones a reward may weigh."""
    return tuple(spec.name for spec in additive_metrics())


#: The balancer's cost in guest-stall-second equivalents — the benchmark's one score, the
#: environment's default reward and a study's default objective. Settled (issue 30): changing a
#: weight invalidates every committed score, so it means regenerating the reference table
#: (``python -m pvegym.experiments.benchmark_references``) and bumping every task's version.
#: ``docs/benchmark.md`` (*The score*) argues each weight: the workload's stall and lost CPU, a
#: minute per move, two more per failed move, five per oscillation, one more per churn move.
BALANCER_COST: dict[str, float] = {
    "guest_stall_s": 1.0,
    "cpu_shortfall_core_s": 1.0,
    "moves": 60.0,
    "moves_failed": 120.0,
    "oscillations": 300.0,
    "churn_moves": 60.0,
}

#: Named costs: a study's objective may name one (``cost = "balancer"``) instead of its weights.
COSTS: dict[str, dict[str, float]] = {"balancer": BALANCER_COST}


def check_weights(
    weights: Mapping[str, Any], path: str, additive_only: bool = False
) -> dict[str, float]:
    """``weights`` as ``{metric: float}``; an unknown metric, a non-finite weight or (for a reward,
    ``additive_only``) a metric that does not add up round by round is a :class:`ConfigError`
    naming ``path.<metric>``."""
    allowed = additive_names() if additive_only else tuple(METRIC_KEYS)
    out: dict[str, float] = {}
    for key, value in weights.items():
        if key not in allowed:
            what = "metric that adds up round by round" if additive_only else "metric"
            raise ConfigError(f"{path}.{key}", f"not a {what} (allowed: {', '.join(allowed)})")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{path}.{key}", f"must be a number, not {show(value)}")
        if isinstance(value, int) and abs(value) > MAX_WEIGHT:  # float() of a huge int overflows
            raise ConfigError(f"{path}.{key}", f"must be ≤ {MAX_WEIGHT:g} in magnitude")
        out[key] = check_number(float(value), f"{path}.{key}", ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    return out


def metric_value(metrics: Mapping[str, Any], key: str) -> float:
    """A metric as a number; a missing one (``evacuation_latency_s`` when nothing moved off the
    hot node) counts as the whole episode (``sim_seconds``): "never" is as late as it gets."""
    v = metrics.get(key)
    if v is None:
        return float(metrics.get("sim_seconds", math.nan))
    return float(v)


def weighted_cost(weights: Mapping[str, float], metrics: Mapping[str, Any]) -> float:
    """``Σ weight × metric`` of an episode's final metrics."""
    return float(sum(w * metric_value(metrics, m) for m, w in weights.items()))


class RunningCost:
    """:func:`weighted_cost` of a running simulation's metrics so far (additive metrics only).

    ``cost(sim)`` after any round equals ``weighted_cost(weights, sim.result()["metrics"])`` at
    that point: each term is its metric's registered ``measure`` on the running
    :class:`~pvegym.sim.metrics.Metrics` (bytes and seconds of a migration still in flight count
    as far as they went).
    """

    def __init__(self, weights: Mapping[str, float], path: str = "reward_weights") -> None:
        self.weights = check_weights(weights, path, additive_only=True)
        self._terms = tuple(
            (metric_spec(k).measure, w) for k, w in self.weights.items() if w != 0.0
        )

    def __call__(self, sim: Simulation) -> float:
        m = sim.metrics
        total = 0.0
        for measure, w in self._terms:
            total += w * float(measure(m) or 0.0)
        return total


__all__ = [
    "BALANCER_COST",
    "COSTS",
    "RunningCost",
    "additive_names",
    "check_weights",
    "metric_value",
    "weighted_cost",
]
