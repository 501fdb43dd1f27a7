"""``pvegym policies``: list the named policies."""

from __future__ import annotations

import argparse

from pvegym.policies import available


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("policies", help="list the named policies")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for name in available():
        print(name)
    return 0
