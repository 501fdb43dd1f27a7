"""``pvegym scenarios``: list the scenario catalog — named scenarios and randomized families."""

from __future__ import annotations

import argparse

from pvegym.sim import catalog


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("scenarios", help="list the named scenarios and families")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    entries = catalog.entries()
    print("named scenarios (the seed drives workload noise and LRM timing):")
    for e in entries:
        if e.kind == "scenario":
            print(f"  {e.name:32s} {e.description}")
    print("families (the seed also picks the instance; train and test seeds are disjoint):")
    for e in entries:
        if e.kind == "family":
            assert e.train_seeds is not None and e.test_seeds is not None
            print(f"  {e.name:32s} {e.description}")
            print(
                f"  {'':32s} train seeds {_span(e.train_seeds)}, test seeds {_span(e.test_seeds)}"
            )
    print("or a scenario file: --scenario path/to/scenario.toml")
    return 0


def _span(r: range) -> str:
    return f"{r.start}..{r.stop - 1}"
