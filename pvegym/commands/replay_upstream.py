"""``pvegym replay-upstream DIR... [--log | --json]``: replay upstream pve-ha-manager test directories.

The directory runs on upstream's test hardware (:mod:`pvegym.harness`) with pvegym's HA stack
(:mod:`pvegym.sim.ha`) and upstream's balancer.

* ``--log`` prints the simulated log in ``log.expect``'s format, so that
  ``diff DIR/log.expect <(pvegym replay-upstream DIR --log)`` is the check.
* ``--json`` prints the balancer's decisions: ``{"decisions": [{"t", "sid", "target",
  "imbalance_before", "imbalance_after"}]}``.
* Without either it says whether the log matches ``log.expect`` and shows the first difference
  (exit code 1 if it differs). Several directories (``pvegym replay-upstream src/test/test-*``)
  are checked one after the other, one line each, and a last line counts the matches: the whole
  suite, or a set of directories kept back from the project, in one command.

A file or command upstream's harness does not understand is an error naming it (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from pvegym.errors import ConfigError

if TYPE_CHECKING:  # the harness (the HA stack, NumPy) is imported when the command runs (cli.py)
    from pvegym.harness import TestDir


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay-upstream",
        help="replay an upstream HA test directory on pvegym's HA stack and compare its log",
    )
    parser.add_argument(
        "dirs", metavar="DIR", nargs="+", help="pve-ha-manager src/test/test-* directories"
    )
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--log", action="store_true", help="print the log in log.expect's format")
    out.add_argument("--json", action="store_true", help='print {"decisions": [...]} as JSON')
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.log or args.json) and len(args.dirs) > 1:
        raise ConfigError(
            "--log" if args.log else "--json",
            f"takes one DIR (got {len(args.dirs)}); without it, several DIRs are each compared "
            "with their log.expect",
        )
    if len(args.dirs) == 1:
        return _one(args, args.dirs[0])
    testdirs = [_read_named(d) for d in args.dirs]  # every directory read before any replay
    outcomes = [_compare(td) for td in testdirs]
    matched, differ = outcomes.count(MATCH), outcomes.count(DIFFERS)
    unchecked = len(outcomes) - matched - differ
    tail = f" ({unchecked} without a log.expect)" if unchecked else ""
    print(f"{matched} of {matched + differ} directories match their log.expect{tail}")
    return 1 if differ else 0


def _read_named(path: str) -> TestDir:
    """:func:`read_testdir`, its errors naming the directory too (one of several)."""
    from pvegym.harness import read_testdir

    try:
        return read_testdir(path)
    except ConfigError as err:
        where = err.path if err.path.startswith(str(path)) else f"{path}/{err.path}"
        raise ConfigError(where, err.message) from None


def _one(args: argparse.Namespace, path: str) -> int:
    """One directory: its log (``--log``), its decisions (``--json``) or the comparison."""
    from pvegym.harness import read_testdir, replay

    td = read_testdir(path)
    if args.log:
        result = replay(td)
        sys.stdout.write(result.log_text())
        return 0
    if args.json:
        result = replay(td)
        print(json.dumps({"decisions": [d.as_dict() for d in result.decisions]}, indent=2))
        return 0
    return 1 if _compare(td) == DIFFERS else 0


MATCH, DIFFERS, UNCHECKED = "match", "differs", "unchecked"


def _compare(td: TestDir) -> str:
    """Replay ``td`` and say whether its log matches ``log.expect`` (:data:`MATCH`), where it first
    differs (:data:`DIFFERS`) or that it has none to compare with (:data:`UNCHECKED`)."""
    from pvegym.harness import first_difference, replay

    result = replay(td)
    lines = len(result.log_text().splitlines())
    if td.log_expect is None:
        print(f"{td.path.name}: {lines} log lines, no log.expect to compare with")
        return UNCHECKED
    diff = first_difference(td.log_expect, result.log_text())
    if diff is None:
        print(f"{td.path.name}: log matches log.expect ({lines} lines)")
        return MATCH
    lineno, expected, got = diff
    print(f"{td.path.name}: log differs from log.expect at line {lineno}")
    print(f"  expected: {expected if expected is not None else '(end of log.expect)'}")
    print(f"  got:      {got if got is not None else '(end of the simulated log)'}")
    return DIFFERS
