"""Experiments: declarative TOML files, an evaluator over policy × scenario × seed, reports, replays.

* :mod:`pvegym.experiments.config` — the experiment file schema (``experiments/*.toml``).
* :mod:`pvegym.experiments.cells` — one evaluation cell: build, run (with per-round traces), key.
* :mod:`pvegym.experiments.runner` — the evaluator: plan the cells, run them (resumably, in
  parallel), then write the report.
* :mod:`pvegym.experiments.report` — ``metrics.csv``, ``summary.md`` (bootstrap CIs), manifest.
* :mod:`pvegym.experiments.plots` — timelines and metric comparison charts (PNG).
* :mod:`pvegym.experiments.record` — episode records and their exact replay.

This is the experiments layer: it may import the model (``pvegym.sim``) and ``policies``; nothing
below it imports this package.
"""
