"""``pvegym benchmark TASK --policy SPEC [--policy SPEC …] --out DIR`` (``docs/benchmark.md``).

Scores each policy on the task's test instances against the shipped reference table and writes
``DIR/report.md`` and ``DIR/scores.json``. SPEC: ``NAME[,key=value…]``, ``learned:PATH`` or
``MODULE:ATTR`` (:mod:`pvegym.experiments.benchmark`); a policy's label is its SPEC as typed.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("benchmark", help="score policies on a benchmark task's test split")
    # the task table (pvegym.sim.tasks) loads the model: `pvegym --help` does not (cli.py)
    p.add_argument("task", help="the task (`pvegym scenarios` lists them)")
    p.add_argument(
        "--policy",
        action="append",
        required=True,
        metavar="SPEC",
        help="NAME[,key=value...] | learned:PATH | MODULE:ATTR (repeatable)",
    )
    p.add_argument("--out", required=True, help="output directory (report.md, scores.json)")
    p.add_argument("--quiet", action="store_true", help="no progress")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.config import check_out_dir
    from pvegym.errors import ConfigError
    from pvegym.experiments.benchmark import parse_spec, run_benchmark
    from pvegym.sim.tasks import task

    t = task(args.task, "task")
    labels = list(args.policy)
    for i, label in enumerate(labels):
        if labels.index(label) != i:
            raise ConfigError(f"--policy {label}", "given twice (a label must be unique)")
    specs = [parse_spec(s) for s in labels]
    out = Path(args.out)
    check_out_dir(out, "--out")
    doc = run_benchmark(t, specs, out, progress=not args.quiet)
    for label, p in doc["policies"].items():
        score = p["normalized_score"]
        lo, hi = p["ci95"]
        print(f"{label}: normalized score {_fmt(score)} [{_fmt(lo)}, {_fmt(hi)}]")
    print(f"→ {out}/report.md, {out}/scores.json")
    return 0


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"
