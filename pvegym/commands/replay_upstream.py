"""``pvegym replay-upstream DIR [--json]``: replay an upstream pve-ha-manager test directory.

Prints the balancer's decisions and its upstream-format log lines (``MODEL.md`` §12), e.g.
``info     80    node1/crm: auto rebalance - migrate vm:101 to node2 (expected change for imbalance
from 1.41 to 0.94)``. With ``--json``: ``{"decisions": [{"t", "sid", "target", "imbalance_before",
"imbalance_after"}]}``. Warnings about files the replay does not use go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys

from pvegym.harness import replay_dir


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "replay-upstream", help="replay an upstream HA test directory with the upstream balancer"
    )
    parser.add_argument("dir", metavar="DIR", help="a pve-ha-manager src/test/test-* directory")
    parser.add_argument("--json", action="store_true", help='print {"decisions": [...]} as JSON')
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = replay_dir(args.dir)
    for warning in result.warnings:
        print(f"pvegym replay-upstream: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps({"decisions": [d.as_dict() for d in result.decisions]}, indent=2))
        return 0
    for d in result.decisions:
        print(
            f"decision t={d.t} {d.sid} -> {d.target} "
            f"(imbalance {d.imbalance_before:.6f} -> {d.imbalance_after:.6f})"
        )
    for line in result.log:
        print(line.format())
    return 0
