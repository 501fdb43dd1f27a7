"""``pvegym policies``: list the named policies."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("policies", help="list the named policies")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.policies import available  # not by `pvegym --help` (cli.py): loads the model

    for name in available():
        print(name)
    return 0
