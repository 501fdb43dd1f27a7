"""Experiments: declarative TOML files, an evaluator over policy × scenario × seed, reports, replays.

* :mod:`pvegym.experiments.config` — the experiment file schema (``experiments/*.toml``).
* :mod:`pvegym.experiments.cells` — one evaluation cell: its key, its row of the report, its files.
* :mod:`pvegym.experiments.runner` — the evaluator: plan the cells, run them (resumably, in
  parallel), then write the report.
* :mod:`pvegym.experiments.report` — ``metrics.csv``, ``summary.md`` (bootstrap CIs), manifest.
* :mod:`pvegym.experiments.plots` — timelines and metric comparison charts (PNG).
* :mod:`pvegym.experiments.record` — episode records and their exact replay.
* :mod:`pvegym.experiments.ablation` — the field report's patches one by one (``pvegym ablate``).
* :mod:`pvegym.experiments.bench` — step cost against ``CartPole-v1`` and scaling (``pvegym bench``).

This is the experiments layer: it may import the model (``pvegym.sim``) and ``policies``; nothing
below it imports this package.
"""
