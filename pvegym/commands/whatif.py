"""``pvegym whatif EXPORT --out DIR``: what PVE's balancer should be set to on your cluster.

Imports the export (like ``pvegym import``), recommends ``ha-auto-rebalance`` off or on with its
four knobs (a sweep over seeds, held out), lists the fixes the operator can make for guests whose
migrations would fail or loop (and replays the window after them), replays ``noop``, ``upstream``
(the cluster's configured CRS constants), ``patched`` (the field report's defaults),
``patched-tuned`` (with ``--study``: a study's best constants) and ``guest-centric``, checks the
model against the held-out part of the window, and writes ``DIR/report.md`` with its plots and
``DIR/whatif.json`` (:mod:`pvegym.experiments.whatif`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pvegym.commands.import_cluster import add_window_options, dirty_rate
from pvegym.errors import ConfigError
from pvegym.limits import MAX_SEED, MAX_WORKERS, whole_number


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "whatif", help="replay an exported cluster under each balancer and report what they did"
    )
    p.add_argument("export", help="the directory or tarball scripts/pve-export.sh wrote")
    p.add_argument("--out", required=True, help="the report directory (DIR/report.md)")
    add_window_options(p)
    p.add_argument(
        "--study",
        default=None,
        help="a study's results directory (best_params.json): adds patched with its constants",
    )
    p.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="RUN",
        help="add a learned agent (a pvegym train run name or model path; repeatable): "
        "reported with the balancers PVE does not have",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="first seed of the model's randomness (the sweep uses the next ones too)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes of the sweep (default: this machine's CPUs, at most 2)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.experiments.whatif import run_whatif
    from pvegym.experiments.whatif_report import write_report
    from pvegym.experiments.whatif_sweep import FIT_SEEDS, HELD_SEEDS

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError("--out", f"{args.out!r} exists and is not a directory")
    workers = (
        min(2, os.cpu_count() or 1)
        if args.workers is None
        else whole_number(args.workers, "--workers", ge=1, le=MAX_WORKERS)
    )
    # the sweep runs seeds seed … seed + FIT_SEEDS + HELD_SEEDS − 1
    whole_number(args.seed, "--seed", ge=0, le=MAX_SEED - FIT_SEEDS - HELD_SEEDS)
    study = Path(args.study) if args.study else None
    if study is not None and not study.exists():
        raise ConfigError("--study", f"no such study directory or file {args.study!r}")
    result = run_whatif(
        Path(args.export),
        out,
        args.window,
        args.fit_fraction,
        dirty_rate(args.dirty_rate),
        study,
        args.seed,
        crs_units=args.crs_units,
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        workers=workers,
        agents=tuple(args.agent),
    )
    write_report(result, out, study, args.seed)
    v = result.validation
    print(f"window: {result.imp.window.describe()}")
    for r in result.runs:
        m = r.metrics
        print(
            f"{r.entry.label:14s} moves {m['moves']:4d}  failed {m['moves_failed']:4d}  "
            f"oscillations {m['oscillations']:3d}  churn {m['churn_moves']:3d}  "
            f"guest stall {m['guest_stall_s']:12,.0f} s"
        )
    for tag, rec in (("recommendation", result.recommendation),) + (
        (("after the fixes", result.after.recommendation),) if result.after else ()
    ):
        opts = rec.options()
        print(f"{tag}: {rec.reason if opts is None else opts}")
    print(f"held-out node CPU error (MAE): {v.cpu_mae_pp:.2f} pp of a node, mean over nodes")
    print(f"wrote {out / 'report.md'}")
    return 0
