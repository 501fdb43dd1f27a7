"""Optuna tuning of a balancer's constants and of the migration patch's factors (``docs/experiments.md``).

* :mod:`~pvegym.tuning.study_config` — the study file (TOML in ``experiments/``): search space,
  disjoint train/test suites, objectives, constraints, sampler, pruner, budget.
* :mod:`~pvegym.tuning.objective` — one trial: the candidate on every training instance,
  metrics → objective value(s), per-instance reports for the Wilcoxon pruner, constraints.
* :mod:`~pvegym.tuning.study` — create/load the study in SQLite or any RDB (PostgreSQL), so many
  worker processes on one or many machines share it; resume; run workers.
* :mod:`~pvegym.tuning.report` — the held-out evaluation of the best (or Pareto-optimal) trials on
  the test suite through the experiments runner, with plots and ``summary.md``.
"""
