"""One trial: a candidate's constants on every training instance, scored from the metrics.

A *training instance* is one scenario entry × seed of the study's ``[[train]]`` suite: one episode
of :class:`~pvegym.sim.simulation.Simulation` (named scenario: episode seed; family: instance and
episode seed, as in the experiments runner). For each instance the per-instance value of every
objective is ``Σ weight × metric``; the trial's value is the mean over instances.

Single-objective trials report each instance's value as an intermediate value (step = the
instance's index in the suite), in a per-trial shuffled order, so that
:class:`optuna.pruners.WilcoxonPruner` can stop a trial as soon as a signed-rank test over the
instances seen so far says it is worse than the best trial — instead of spending the full suite on
a hopeless candidate. The shuffle is seeded by (study seed, trial number): a sequential study is
reproducible, and the early instances differ from trial to trial so the pruner does not always
judge on the same two scenarios.

Constraints are set with :meth:`optuna.trial.Trial.set_constraint` (Optuna 5 deprecates the
samplers' ``constraints_func`` in its favour; the samplers read the values from the trial) and are
also kept in the trial's user attrs. A trial that raises is marked FAILED by Optuna and its error
(type, message, traceback) is stored in the trial's user attrs before it propagates — the study
(``catch=(Exception,)``) goes on with the next trial.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from pvegym.experiments.config import build_policy
from pvegym.sim import catalog
from pvegym.sim.cost import metric_value, weighted_cost
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import Scenario
from pvegym.sim.simulation import Simulation
from pvegym.tuning.study_config import ObjectiveSpec, ParamSpec, StudyConfig

TRACEBACK_CHARS = 4000  # of a failed trial's traceback kept in its user attrs (RDB text column)


@dataclass(frozen=True)
class Instance:
    """One training (or test) episode: a scenario with its entry's overrides, a seed, a length (s)."""

    label: str  # "failure-loop#3": the entry's label or name, and the seed
    scenario: Scenario
    seed: int
    duration: float


def suite_instances(cfg: StudyConfig, split: str = "train") -> list[Instance]:
    """The instances of the ``train`` (or ``test``) suite, in file order."""
    entries = cfg.train if split == "train" else cfg.test
    out = []
    for k, entry in enumerate(entries):
        overrides = entry.overrides()
        for seed in entry.seeds:
            where = f"{split}[{k}]"
            scn = catalog.resolve(
                entry.name, seed, overrides, name_key=f"{where}.name", set_key=f"{where}.set"
            ).scenario
            duration = entry.duration or cfg.episode.duration or scn.duration
            out.append(Instance(f"{entry.key}#{seed}", scn, seed, float(duration)))
    return out


def with_overrides(scn: Scenario, overrides: dict[str, Any]) -> Scenario:
    """``scn`` with candidate migration settings (``{"migration.boost_factor": 2.0}``).

    The values were validated against :class:`~pvegym.sim.scenario.MigrationSettings` when the
    study file was loaded (both bounds of every range), so a frozen-dataclass ``replace`` suffices
    — re-validating a 40-guest family instance through the generic loader would cost as much as
    simulating it.
    """
    if not overrides:
        return scn
    fields = {key.split(".", 1)[1]: value for key, value in overrides.items()}
    return dataclasses.replace(scn, migration=dataclasses.replace(scn.migration, **fields))


def evaluate_instance(
    inst: Instance, policy_name: str, policy_params: dict[str, Any], overrides: dict[str, Any]
) -> dict[str, Any]:
    """The metrics of one episode of the candidate on ``inst`` (simulated seconds, counts, …)."""
    policy = build_policy(policy_name, policy_params)
    sim = Simulation(with_overrides(inst.scenario, overrides), inst.seed)
    metrics: dict[str, Any] = sim.run(policy, inst.duration)["metrics"]
    return metrics


def instance_value(obj: ObjectiveSpec, metrics: dict[str, Any]) -> float:
    """Per-instance value of one objective: ``Σ weight × metric`` (:func:`pvegym.sim.cost.weighted_cost`,
    the definition the environment's reward shares)."""
    return weighted_cost(obj.terms(), metrics)


def suggest(trial: optuna.Trial, params: dict[str, ParamSpec]) -> dict[str, Any]:
    """Sample every search dimension of the study file (Optuna's define-by-run API)."""
    values: dict[str, Any] = {}
    for name, spec in params.items():
        if spec.choices is not None:
            values[name] = trial.suggest_categorical(name, list(spec.choices))
        elif spec.int:
            step = int(spec.step) if spec.step is not None else 1
            values[name] = trial.suggest_int(
                name, int(spec.low or 0), int(spec.high or 0), step=step, log=spec.log
            )
        else:
            values[name] = trial.suggest_float(
                name, float(spec.low or 0.0), float(spec.high or 0.0), step=spec.step, log=spec.log
            )
    return values


def mean_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean of every metric over instances (missing values as in :func:`metric_value`)."""
    if not rows:
        return {}
    return {k: float(np.mean([metric_value(r, k) for r in rows])) for k in METRIC_KEYS}


def _start_ticks(pid: int) -> str:
    """A process's start time (clock ticks since boot, ``/proc/<pid>/stat`` field 22): with the
    pid it names one process, even after the pid is reused. "" where there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def worker_name() -> str:
    """``host:pid:start`` of this process: stored on every trial it runs, so that a later worker
    on the same host can tell a trial whose process died (killed, machine rebooted) at once."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_ticks(os.getpid())}"


def worker_is_dead(name: str) -> bool:
    """Whether ``name`` (a :func:`worker_name`) is a process of this host that no longer runs.
    Other hosts' workers are never judged here (their heartbeat is)."""
    host, _, rest = name.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit() or not start:
        return False
    return _start_ticks(int(pid_text)) != start


class Objective:
    """The callable handed to ``study.optimize``: returns the mean objective value(s).

    ``instances`` defaults to the study's training suite (built once per worker process).
    """

    def __init__(
        self,
        cfg: StudyConfig,
        instances: list[Instance] | None = None,
        git_commit: str = "",
    ) -> None:
        self.cfg = cfg
        self.instances = instances if instances is not None else suite_instances(cfg, "train")
        self.git_commit = git_commit

    def order(self, trial_number: int) -> list[int]:
        """The instances' evaluation order for a trial: a permutation seeded by the study seed and
        the trial number (reproducible, different per trial)."""
        rng = np.random.default_rng([self.cfg.sampler.seed, trial_number])
        return [int(i) for i in rng.permutation(len(self.instances))]

    def __call__(self, trial: optuna.Trial) -> float | tuple[float, ...]:
        cfg = self.cfg
        started = time.perf_counter()
        trial.set_user_attr("worker", worker_name())
        if self.git_commit:
            trial.set_user_attr("git_commit", self.git_commit)
        values = suggest(trial, cfg.params)
        policy_params, overrides = cfg.split_values(values)
        single = not cfg.multi_objective
        rows: list[dict[str, Any]] = []
        per_obj: list[list[float]] = [[] for _ in cfg.objectives]
        try:
            for idx in self.order(trial.number):
                metrics = evaluate_instance(
                    self.instances[idx], cfg.policy.name, policy_params, overrides
                )
                rows.append(metrics)
                vals = [instance_value(o, metrics) for o in cfg.objectives]
                for k, v in enumerate(vals):
                    per_obj[k].append(v)
                if single:
                    trial.report(vals[0], idx)
                    if trial.should_prune():
                        self._finish(trial, rows, per_obj, started)
                        trial.set_user_attr("pruned_after", len(rows))
                        raise optuna.TrialPruned(
                            f"worse than the best trial after {len(rows)} of "
                            f"{len(self.instances)} instances (Wilcoxon)"
                        )
        except optuna.TrialPruned:
            raise
        except Exception as err:
            trial.set_user_attr("error", f"{type(err).__name__}: {err}")
            trial.set_user_attr("traceback", traceback.format_exc()[-TRACEBACK_CHARS:])
            trial.set_user_attr("failed_at_instance", len(rows))
            raise
        means = self._finish(trial, rows, per_obj, started)
        return means[0] if single else tuple(means)

    def _finish(
        self,
        trial: optuna.Trial,
        rows: list[dict[str, Any]],
        per_obj: list[list[float]],
        started: float,
    ) -> list[float]:
        """User attrs and constraints from the instances evaluated so far; the objective means."""
        mm = mean_metrics(rows)
        trial.set_user_attr("metrics_mean", mm)
        trial.set_user_attr("instances", len(rows))
        trial.set_user_attr("wall_s", round(time.perf_counter() - started, 3))
        violations = {str(c): c.violation(mm[c.metric]) for c in self.cfg.constraints}
        for key, v in violations.items():
            trial.set_constraint(key, v)
        if violations:
            trial.set_user_attr("constraints", violations)
        return [float(np.mean(v)) for v in per_obj]
