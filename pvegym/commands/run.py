"""``pvegym run EXPERIMENT.toml``: evaluate an experiment and write its report (``MODEL.md`` §11).

Results go to ``results/<output>/`` (or ``--out DIR``). Finished cells are kept, so running the same
command again after an interruption only evaluates what is missing; ``--fresh`` recomputes all.
A run's ``manifest.json`` can be given instead of the TOML file to rerun exactly that config.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pvegym.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="evaluate an experiment (policies × scenarios × seeds)")
    p.add_argument("experiment", help="an experiment file (experiments/*.toml) or a manifest.json")
    p.add_argument("--out", default=None, help="output directory (default: results/<output>)")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (default: 1)")
    p.add_argument("--fresh", action="store_true", help="recompute every cell, even finished ones")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.experiments.config import load_experiment
    from pvegym.experiments.runner import run_experiment

    if args.workers < 1:
        raise ConfigError("--workers", f"must be ≥ 1, not {args.workers}")
    exp = load_experiment(args.experiment)
    stats = run_experiment(
        exp,
        Path(args.out) if args.out else None,
        workers=args.workers,
        fresh=args.fresh,
        command=["pvegym", *sys.argv[1:]] if sys.argv and "pvegym" in sys.argv[0] else None,
        progress=not args.quiet,
    )
    print(
        f"{exp.name}: {stats.computed} cells evaluated, {stats.cached} reused, "
        f"{stats.wall_s:.1f} s → {stats.out_dir}/summary.md"
    )
    return 0
