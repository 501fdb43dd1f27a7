"""``pvegym replay RECORD``: re-run a recorded episode and check its metrics match exactly.

The recorded motions are fed to the simulation at their rounds (the policy is not run), so a match
means the model reproduces the episode bit for bit. Exit 0 with "metrics match", exit 1 with the
differing metrics otherwise; an unreadable record is exit 2.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay an episode record and check its metrics")
    p.add_argument("record", help="an episode record (e.g. results/<name>/records/…/seed-0.json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.experiments.record import load_record, metric_diff, model_fingerprint, replay

    record = load_record(args.record)
    diff = metric_diff(record.metrics, replay(record))
    where = f"{record.scenario} / {record.policy} / seed {record.seed}"
    if not diff:
        print(f"metrics match ({where}, {len(record.motions)} motions)")
        return 0
    print(f"metrics differ ({where}):")
    for line in diff:
        print(f"  {line}")
    if record.code_sha256 and record.code_sha256 != model_fingerprint():
        print("  (the model or policy code changed since this record was made)")
    return 1
