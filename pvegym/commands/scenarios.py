"""``pvegym scenarios``: list the named scenarios."""

from __future__ import annotations

import argparse

from pvegym.sim import scenarios


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("scenarios", help="list the named scenarios")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name in scenarios.names():
        print(f"{name:28s} {scenarios.describe(name)}")
    return 0
