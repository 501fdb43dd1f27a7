"""The shipped reference table: every reference heuristic and the oracle on every task's test split.

``python -m pvegym.experiments.benchmark_references`` (``docs/benchmark.md``) re-simulates
``noop``, the reference heuristics (:data:`~pvegym.experiments.benchmark_episodes.REFERENCES`)
and the oracle on every test instance of every task and writes
``pvegym/data/benchmark/references.json``: per task, label and seed the episode's BALANCER_COST
and its moves and constraint counts. Scoring a new agent reads this table (no oracle run);
``tests/experiments/test_benchmark.py`` re-simulates two instances per task and compares bit for
bit, so a change of the model cannot leave the table stale — rerun this command then.

Each episode is kept as it finishes under ``--cache`` (one JSON file, keyed by the model's source
fingerprint and the policy's definition), so an interrupted run resumes; ``--labels`` and
``--tasks`` restrict what is computed, and the table says which (task, label) is incomplete.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from pvegym.experiments.benchmark_episodes import (
    ORACLE,
    ORACLE_LABEL,
    REFERENCE_LABELS,
    REFERENCE_TABLE,
    REFERENCES,
    balancer_episode,
    make_reference,
)
from pvegym.experiments.files import write_json_atomic
from pvegym.experiments.record import model_fingerprint
from pvegym.sim.cost import BALANCER_COST
from pvegym.sim.tasks import TASKS, task


def definition(label: str) -> dict[str, Any]:
    """What a reference label runs: a registered policy and its constants, or the oracle's."""
    if label == ORACLE_LABEL:
        return {"policy": "lookahead", "params": ORACLE}
    name, params = REFERENCES[label]
    return {"policy": name, "params": params}


def _key(label: str) -> str:
    """The cache key of ``label``'s episodes: the model code, the policy's definition and (for
    the oracle) the look-ahead's own source."""
    h = hashlib.sha256(model_fingerprint().encode())
    h.update(json.dumps(definition(label), sort_keys=True).encode())
    if label == ORACLE_LABEL:
        from pvegym.learning import lookahead

        h.update(Path(lookahead.__file__).read_bytes())
    return h.hexdigest()


def compute(
    tasks: list[str], labels: list[str], cache: Path, limit: int | None = None, quiet: bool = False
) -> None:
    """Every missing (task, label, seed) episode into ``cache`` (seed order; ``limit``: only the
    first ``limit`` test seeds of each task)."""
    for label in labels:
        key = _key(label)
        for name in tasks:
            t = task(name)
            seeds = list(t.test)[:limit]
            for seed in seeds:
                path = cache / name / label / f"{seed}.json"
                if path.is_file() and json.loads(path.read_text()).get("key") == key:
                    continue
                res = balancer_episode(t, seed, make_reference(label))
                path.parent.mkdir(parents=True, exist_ok=True)
                write_json_atomic(path, {"key": key, "record": res.record(), "wall_s": res.wall_s})
                if not quiet:
                    print(
                        f"{name} {label} {seed}: cost {res.cost:.1f} ({res.wall_s:.1f} s)",
                        file=sys.stderr,
                        flush=True,
                    )


def assemble(cache: Path) -> dict[str, Any]:
    """The reference table from ``cache`` (current keys only; incomplete labels are marked)."""
    keys = {label: _key(label) for label in REFERENCE_LABELS}
    doc: dict[str, Any] = {
        "cost": dict(BALANCER_COST),
        "model_fingerprint": model_fingerprint(),
        "definitions": {label: definition(label) for label in REFERENCE_LABELS},
        "command": "python -m pvegym.experiments.benchmark_references",
        "tasks": {},
    }
    for name, t in TASKS.items():
        policies: dict[str, dict[str, Any]] = {}
        walls: dict[str, float] = {}
        for label in REFERENCE_LABELS:
            rows: dict[str, Any] = {}
            wall = 0.0
            for seed in t.test:
                path = cache / name / label / f"{seed}.json"
                if not path.is_file():
                    continue
                rec = json.loads(path.read_text())
                if rec.get("key") != keys[label]:
                    continue
                rows[str(seed)] = rec["record"]
                wall += float(rec["wall_s"])
            if rows:
                policies[label] = rows
                walls[label] = round(wall / len(rows), 2)
        doc["tasks"][name] = {
            "test_seeds": [t.test.start, t.test.stop - 1],
            "policies": policies,
            "complete": {lab: len(rows) == len(t.test) for lab, rows in policies.items()},
            "mean_wall_s": walls,
        }
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m pvegym.experiments.benchmark_references",
        description="re-simulate the benchmark's reference table (docs/benchmark.md)",
    )
    p.add_argument("--out", type=Path, default=REFERENCE_TABLE)
    p.add_argument("--cache", type=Path, default=Path("runs/benchmark-references"))
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated task names")
    p.add_argument("--labels", default=",".join(REFERENCE_LABELS), help="comma-separated labels")
    p.add_argument("--limit", type=int, default=None, help="only the first N test seeds")
    p.add_argument("--assemble-only", action="store_true", help="write the table from the cache")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    tasks = [task(n, "--tasks").name for n in args.tasks.split(",") if n]
    labels = [lab for lab in args.labels.split(",") if lab]
    for lab in labels:
        if lab not in REFERENCE_LABELS:
            print(f"--labels: unknown {lab!r} (allowed: {', '.join(REFERENCE_LABELS)})")
            return 2
    started = time.perf_counter()
    if not args.assemble_only:
        compute(tasks, labels, args.cache, args.limit, args.quiet)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out, assemble(args.cache))
    print(f"reference table → {args.out} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
