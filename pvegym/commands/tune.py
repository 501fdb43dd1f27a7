"""``pvegym tune STUDY.toml``: tune a balancer's constants with Optuna, then report (``docs/experiments.md``).

A run writes to ``runs/<study>/`` (:mod:`pvegym.experiments.rundir`: resumed when it holds this
study, else the next free ``runs/<study>-2``, …) or to ``--out DIR``. The study lives in
``sqlite:///<run dir>/study.db`` unless ``--storage URL`` names another RDB (PostgreSQL:
``postgresql+psycopg://user:password@host:5432/db``); every worker started with the same file and
storage — here with ``--workers N``, or on other machines — joins the same study. Running the
command again resumes: ``n_trials`` in the file is the study's total, ``--n-trials N`` asks for N
more. After optimizing, the best (or Pareto-optimal) trials are re-evaluated on the held-out test
suite and ``summary.md``, ``best_params.json`` and ``plots/`` are written to the run directory;
``--report-only`` does only that, ``--no-report`` only optimizes (extra workers on other machines).
``--executor ray[:ADDRESS]`` runs the ``--workers`` workers as Ray actors (and the held-out cells as
Ray tasks); with a SQLite storage the actors stay on this node (:mod:`pvegym.tuning.study`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from pvegym.errors import ConfigError
from pvegym.limits import MAX_TRIALS, MAX_WORKERS, whole_number


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="tune a policy's constants with Optuna (one machine or many)")
    p.add_argument("experiment", help="a study file (experiments/*.toml)")
    p.add_argument(
        "--out",
        default=None,
        help="run directory (default: runs/<study>/, resumed when it holds this study)",
    )
    p.add_argument("--fresh", action="store_true", help="start over in --out (deletes it)")
    p.add_argument(
        "--storage",
        default=None,
        help="Optuna RDB URL shared by all workers (default: sqlite:///<run dir>/study.db)",
    )
    p.add_argument(
        "--n-trials", type=int, default=None, help="run N more trials (default: up to n_trials)"
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes, or Ray actors with --executor ray (default: 1)",
    )
    p.add_argument(
        "--executor",
        default="local",
        metavar="local|ray|ray:ADDRESS",
        help="where the workers run: local processes (default) or a Ray cluster (extra 'ray')",
    )
    p.add_argument(
        "--worker-id",
        type=int,
        default=None,
        help="a fixed sampler seed component: with one worker, --worker-id 0 reproduces a study "
        "trial by trial (default: unique per process, so concurrent workers never repeat samples)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument("--report-only", action="store_true", help="only (re)write the report")
    g.add_argument("--no-report", action="store_true", help="only optimize, no held-out report")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    from pvegym.config import check_out_dir
    from pvegym.experiments.executor import RayExecutor, parse_executor
    from pvegym.experiments.rundir import choose
    from pvegym.tuning.study import storage_error
    from pvegym.tuning.study_config import load_study_config

    whole_number(args.workers, "--workers", ge=1, le=MAX_WORKERS)
    if args.n_trials is not None:
        whole_number(args.n_trials, "--n-trials", ge=0, le=MAX_TRIALS)
    if args.worker_id is not None:
        whole_number(args.worker_id, "--worker-id", ge=0, le=2**31 - 1)
    if args.fresh and args.out is None:
        raise ConfigError("--fresh", "needs --out DIR (a new run gets a fresh directory anyway)")
    if args.storage is not None and not args.storage.strip():
        # an empty URL used to fall through to the library's default storage, outside the run dir
        raise ConfigError(
            "--storage",
            "is empty (allowed: an RDB URL such as sqlite:///FILE or "
            "postgresql+psycopg://…; without --storage: the run directory's study.db)",
        )
    if args.out is not None:
        check_out_dir(Path(args.out))
    executor = parse_executor(args.executor, None)
    if isinstance(executor, RayExecutor) and executor.address is None:
        # a local instance: room for every actor, and the whole machine for the held-out cells
        executor.num_cpus = max(args.workers, os.cpu_count() or 1)
    cfg = load_study_config(args.experiment)
    run_dir = choose("tune", cfg.out_name, cfg.study_hash(), args.out, args.fresh)
    url = args.storage if args.storage is not None else f"sqlite:///{run_dir.path / 'study.db'}"
    print(f"{cfg.name}: {'resuming' if run_dir.resumed else 'new run in'} {run_dir.path}/")
    try:
        with executor:
            ray = executor if isinstance(executor, RayExecutor) else None
            return _run(args, cfg, url, run_dir.path, ray)
    except (SQLAlchemyError, optuna.exceptions.StorageInternalError) as err:
        raise storage_error(url, err) from None


def _run(args: argparse.Namespace, cfg: Any, url: str, out: Path, ray: Any) -> int:
    from pvegym.tuning.report import write_report
    from pvegym.tuning.study import redact, run_study

    started = time.perf_counter()
    tune_wall = None
    if not args.report_only:
        info = run_study(
            cfg,
            url,
            n_trials=args.n_trials,
            workers=args.workers,
            worker_id=args.worker_id,
            progress=not args.quiet,
            executor=ray,
        )
        tune_wall = info.wall_s if info.after > info.before else None
        print(
            f"{cfg.name}: {info.after} of {info.target} trials complete or pruned in the study "
            f"({info.after - info.before} during this run, by all its workers), {info.wall_s:.1f} s"
        )
        if info.failed:
            where = "stopped" if info.after < info.target else "finished"
            print(
                f"pvegym tune: {info.failed} trial(s) failed during this run ({info.error}); "
                f"{where} — failed trials do not count towards the budget",
                file=sys.stderr,
            )
            if info.after < info.target:
                return 1
    if not args.no_report:
        rep = write_report(
            cfg,
            url,
            out_dir=out,
            workers=ray if ray is not None else args.workers,
            progress=not args.quiet,
            tune_wall_s=tune_wall,
        )
        verdicts = ", ".join(f"{k}: {v}" for k, v in rep.verdicts.items()) or "no feasible trial"
        print(
            f"{cfg.name}: held-out vs defaults — {verdicts}; report {rep.wall_s:.1f} s → "
            f"{rep.out_dir}/summary.md (total {time.perf_counter() - started:.1f} s)"
        )
    print(f"dashboard: optuna-dashboard {redact(url)}")
    return 0
