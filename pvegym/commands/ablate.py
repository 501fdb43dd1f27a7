"""``pvegym ablate``: the field scenarios under ``upstream``, ``patched`` and ``patched`` minus
each single patch — which patch removes which pathology (:mod:`pvegym.experiments.ablation`)."""

from __future__ import annotations

import argparse
import json

from pvegym.config import check_out_file
from pvegym.limits import MAX_SEEDS, whole_number
from pvegym.sim.scenarios import FIELD_SCENARIOS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ablate",
        help="field scenarios under upstream, patched and patched minus each patch",
    )
    p.add_argument("--seeds", type=int, default=10, help="seeds 0…N−1 per scenario (default 10)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--out", default=None, metavar="FILE.md", help="also write the table here")
    p.add_argument(
        "--scenario",
        action="append",
        default=None,
        choices=FIELD_SCENARIOS,
        help="only these field scenarios (repeatable; default: all of them)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.experiments.ablation import ablate, markdown

    whole_number(args.seeds, "--seeds", ge=1, le=MAX_SEEDS)
    if args.out:
        check_out_file(args.out, "--out")
    scenarios = tuple(args.scenario) if args.scenario else FIELD_SCENARIOS
    rows = ablate(args.seeds, scenarios)
    table = markdown(rows)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(f"# pvegym ablate --seeds {args.seeds}\n\n{table}\n")
    if args.json:
        print(json.dumps(rows, sort_keys=True))
    else:
        print(table)
    return 0
