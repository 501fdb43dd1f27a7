"""``pvegym scenarios``: list the scenario catalog — named scenarios, randomized families and the
benchmark's tasks with their splits."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("scenarios", help="list the named scenarios and families")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here, not by `pvegym --help` (cli.py): the catalog loads the model
    from pvegym.registration import task_ids
    from pvegym.sim import catalog
    from pvegym.sim.tasks import RESERVED_SEEDS, SPLITS, TASKS

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
    print("benchmark tasks (docs/benchmark.md; pvegym benchmark TASK --policy SPEC --out DIR):")
    ids = task_ids()
    for name, t in TASKS.items():
        print(f"  {name:32s} {ids[name]}: {t.description}, {t.episode_steps} steps")
        splits = ", ".join(f"{s} {_span(t.split(s))}" for s in SPLITS)
        print(f"  {'':32s} {splits} (family {t.family}; seeds {_span(RESERVED_SEEDS)} reserved)")
    return 0


def _span(r: range) -> str:
    return f"{r.start}..{r.stop - 1}"
