"""``pvegym run EXPERIMENT.toml``: evaluate an experiment and write its report (``docs/experiments.md``).

Results go to ``results/<output>/`` (or ``--out DIR``). Finished cells are kept, so running the same
command again after an interruption only evaluates what is missing; ``--fresh`` recomputes all.
A run's ``manifest.json`` can be given instead of the TOML file to rerun exactly that config.
``--executor ray`` runs the cells as tasks on a local Ray instance, ``--executor ray:ADDRESS`` on an
existing Ray cluster (``ray:auto`` on one of its nodes); the report is byte-identical to a local run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pvegym.limits import MAX_WORKERS, whole_number


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="evaluate an experiment (policies × scenarios × seeds)")
    p.add_argument("experiment", help="an experiment file (experiments/*.toml) or a manifest.json")
    p.add_argument("--out", default=None, help="output directory (default: results/<output>)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="parallel worker processes (default: 1); with --executor ray: the local instance's "
        "CPUs, or for ray:ADDRESS a cap on the cells in flight (default: the cluster's CPUs)",
    )
    p.add_argument(
        "--executor",
        default="local",
        metavar="local|ray|ray:ADDRESS",
        help="where the cells run: local processes (default) or a Ray cluster (extra 'ray')",
    )
    p.add_argument("--fresh", action="store_true", help="recompute every cell, even finished ones")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite summary.md and the comparison plots from the run's metrics.csv, no simulation",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.experiments.config import load_experiment
    from pvegym.experiments.executor import parse_executor
    from pvegym.experiments.runner import rerender, run_experiment

    if args.workers is not None:
        whole_number(args.workers, "--workers", ge=1, le=MAX_WORKERS)
    executor = parse_executor(args.executor, args.workers)
    exp = load_experiment(args.experiment)
    if args.report_only:
        out = rerender(exp, Path(args.out) if args.out else None)
        print(f"{exp.name}: report rewritten from metrics.csv → {out}/summary.md")
        return 0
    with executor:
        stats = run_experiment(
            exp,
            Path(args.out) if args.out else None,
            fresh=args.fresh,
            command=["pvegym", *sys.argv[1:]] if sys.argv and "pvegym" in sys.argv[0] else None,
            progress=not args.quiet,
            executor=executor,
        )
    print(
        f"{exp.name}: {stats.computed} cells evaluated, {stats.cached} reused, "
        f"{stats.wall_s:.1f} s → {stats.out_dir}/summary.md (plots in {stats.out_dir}/plots/)"
    )
    return 0
