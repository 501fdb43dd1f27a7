"""One benchmark episode of any policy on a task instance, and its cost (``docs/benchmark.md``).

Every score of the benchmark is :data:`~pvegym.sim.cost.BALANCER_COST` (``weighted_cost`` of the
episode's final metrics) of one deterministic episode per test instance: instance seed = episode
seed = ``seed``, the task's full episode. A :class:`~pvegym.sim.view.Balancer` plays on the
:class:`~pvegym.sim.simulation.Simulation` through the runner's loop (:func:`record.play`, as
``pvegym run`` does); an environment-level agent (``act(observation, action_mask) -> action``)
plays in the task's environment (``pvegym/Cluster-v1`` with the task's settings, no reward twin:
it changes nothing the agent sees). Both give the same metrics for the same decisions
(``tests/experiments/test_benchmark.py`` checks it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pvegym.sim import catalog
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.simulation import Simulation
from pvegym.sim.tasks import Task

#: the metrics every benchmark record keeps beside the cost: the moves and the constraint counts
RECORD_METRICS = ("moves", "moves_failed", "oscillations", "churn_moves")

#: the reference heuristics' constants. ``patched-tuned`` is the best trial of the tuning study
#: (``results/tune-patched/best_params.json``, trial 181; ``tests/experiments/test_benchmark.py``
#: checks this copy against that file): the balancer's constants only, not qemu-server's factors
PATCHED_TUNED: dict[str, Any] = {
    "backoff_base_s": 29.003602256611998,
    "backoff_cap_s": 951.9831187129865,
    "cooldown_s": 481.94056158723527,
    "ema_alpha": 0.026112538319038932,
    "hold_duration": 1,
    "margin": 0.023537372684580504,
    "min_improvement": 0.03958785572987304,
    "min_pressure_pct": 18.813583196137714,
    "threshold": 0.12604771098270665,
}


def planner_tuned() -> Any:
    """The ``planner`` with patched-tuned's constants for its ``patched`` proposer (as
    ``experiments/planner.toml``): ``--policy pvegym.experiments.benchmark_episodes:planner_tuned``."""
    from pvegym.policies.registry import make_policy

    return make_policy("planner", "planner", patched=dict(PATCHED_TUNED))


#: label → (registered policy, constants): the reference heuristics every score is compared with
REFERENCES: dict[str, tuple[str, dict[str, Any]]] = {
    "noop": ("noop", {}),
    "upstream": ("upstream", {}),
    "patched": ("patched", {}),
    "patched-tuned": ("patched", PATCHED_TUNED),
    "guest-centric": ("guest-centric", {}),
}
#: the oracle's frozen definition (``docs/benchmark.md``, *The oracle*): the clairvoyant look-ahead
#: minimising BALANCER_COST itself over a 1,200 s horizon, its options no motion, guest-centric's
#: three best candidates and every reference heuristic's motion (run in the shadow)
ORACLE: dict[str, Any] = {
    "horizon_s": 1200.0,
    "candidates": 3,
    "margin": 0.0,
    "weights": dict(BALANCER_COST),
    "shadows": [
        {"policy": name, **params} for name, params in REFERENCES.values() if name != "noop"
    ],
}
ORACLE_LABEL = "oracle"


@dataclass(frozen=True)
class EpisodeResult:
    """One episode's BALANCER_COST and its :data:`RECORD_METRICS` (counts), with its wall time."""

    cost: float
    counts: dict[str, int]
    wall_s: float

    def record(self) -> dict[str, Any]:
        return {"cost": self.cost, **self.counts}


def _result(metrics: dict[str, Any], started: float) -> EpisodeResult:
    counts = {k: int(metrics[k]) for k in RECORD_METRICS}
    return EpisodeResult(
        weighted_cost(BALANCER_COST, metrics), counts, time.perf_counter() - started
    )


def task_scenario(task: Task, seed: int) -> Any:
    """Instance ``seed`` of the task's family (a validated :class:`Scenario`)."""
    return catalog.resolve(task.family, seed).scenario


def balancer_episode(task: Task, seed: int, policy: Any) -> EpisodeResult:
    """``policy`` (a Balancer: ``reset(seed)``, ``decide(view)``) on instance ``seed``."""
    from pvegym.experiments.record import play

    started = time.perf_counter()
    sim = Simulation(task_scenario(task, seed), seed)
    bind = getattr(policy, "bind", None)
    if callable(bind):  # the privileged oracle reads the simulation it plays in
        bind(sim)
    reset = getattr(policy, "reset", None)
    if callable(reset):  # part of the Balancer protocol; a minimal MODULE:ATTR policy may lack it
        reset(seed)
    result, _ = play(sim, policy.decide, task.episode_seconds)
    return _result(result["metrics"], started)


def make_task_env(task: Task) -> Any:
    """The task's environment without the reward's twin (what an agent sees is the same)."""
    from pvegym.env.cluster_env_v1 import ClusterEnvV1

    kwargs = {**task.env_kwargs(), "reward_baseline": "none", "reward_weights": BALANCER_COST}
    return ClusterEnvV1(**kwargs)  # type: ignore[arg-type]


def agent_episode(task: Task, seed: int, agent: Any, env: Any | None = None) -> EpisodeResult:
    """An environment-level agent (``act(observation, action_mask) -> action``; ``reset(seed)``
    if it has one) on instance ``seed`` of the task's environment."""
    started = time.perf_counter()
    env = make_task_env(task) if env is None else env
    obs, info = env.reset(seed=seed)
    reset = getattr(agent, "reset", None)
    if callable(reset):
        reset(seed)
    while True:
        action = agent.act(obs, info["action_mask"])
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return _result(info, started)


def make_reference(label: str) -> Any:
    """A fresh reference heuristic (:data:`REFERENCES`) or the oracle (:data:`ORACLE_LABEL`)."""
    if label == ORACLE_LABEL:
        from pvegym.learning.lookahead import LookaheadExpert

        return LookaheadExpert(**json.loads(json.dumps(ORACLE)))  # a deep copy of its constants
    from pvegym.policies.registry import make_policy

    name, params = REFERENCES[label]
    return make_policy(name, f"references.{label}", **params)


#: the labels of the shipped reference table, in report order
REFERENCE_LABELS = (*REFERENCES, ORACLE_LABEL)

#: where the shipped reference table lives (package data)
REFERENCE_TABLE = Path(__file__).resolve().parents[1] / "data" / "benchmark" / "references.json"

EpisodeFn = Callable[[Task, int], EpisodeResult]

__all__ = [
    "ORACLE",
    "ORACLE_LABEL",
    "PATCHED_TUNED",
    "RECORD_METRICS",
    "REFERENCES",
    "REFERENCE_LABELS",
    "REFERENCE_TABLE",
    "EpisodeResult",
    "agent_episode",
    "balancer_episode",
    "make_reference",
    "make_task_env",
    "task_scenario",
]
