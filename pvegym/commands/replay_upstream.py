"""``pvegym replay-upstream DIR [--log | --json]``: replay an upstream pve-ha-manager test directory.

The directory runs on upstream's test hardware (:mod:`pvegym.harness`) with pvegym's HA stack
(:mod:`pvegym.sim.ha`) and upstream's balancer.

* ``--log`` prints the simulated log in ``log.expect``'s format, so that
  ``diff DIR/log.expect <(pvegym replay-upstream DIR --log)`` is the check.
* ``--json`` prints the balancer's decisions: ``{"decisions": [{"t", "sid", "target",
  "imbalance_before", "imbalance_after"}]}``.
* Without either it says whether the log matches ``log.expect`` and shows the first difference
  (exit code 1 if it differs).

A file or command upstream's harness does not understand is an error naming it (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import sys

from pvegym.harness import first_difference, read_testdir, replay


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay-upstream",
        help="replay an upstream HA test directory on pvegym's HA stack and compare its log",
    )
    parser.add_argument("dir", metavar="DIR", help="a pve-ha-manager src/test/test-* directory")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--log", action="store_true", help="print the log in log.expect's format")
    out.add_argument("--json", action="store_true", help='print {"decisions": [...]} as JSON')
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    td = read_testdir(args.dir)
    result = replay(td)
    if args.log:
        sys.stdout.write(result.log_text())
        return 0
    if args.json:
        print(json.dumps({"decisions": [d.as_dict() for d in result.decisions]}, indent=2))
        return 0
    lines = len(result.log_text().splitlines())
    if td.log_expect is None:
        print(f"{td.path.name}: {lines} log lines, no log.expect to compare with")
        return 0
    diff = first_difference(td.log_expect, result.log_text())
    if diff is None:
        print(f"{td.path.name}: log matches log.expect ({lines} lines)")
        return 0
    lineno, expected, got = diff
    print(f"{td.path.name}: log differs from log.expect at line {lineno}")
    print(f"  expected: {expected if expected is not None else '(end of log.expect)'}")
    print(f"  got:      {got if got is not None else '(end of the simulated log)'}")
    return 1
