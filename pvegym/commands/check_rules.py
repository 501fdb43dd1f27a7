"""``pvegym check-rules FILE [--nodes N1,N2,...]``: check and canonicalize an HA rules file.

Parses ``FILE`` (``/etc/pve/ha/rules.cfg`` format) as pve-ha-manager 5.2.0 does, drops the rules
it would drop, adds the rules it infers (merged positive, implicit negative resource affinity) and
prints the result exactly as upstream's ``src/test/rules_cfgs/*.cfg.expect`` files show it
(``pvegym.sim.ha.rules_check``): ``diff X.cfg.expect <(pvegym check-rules X.cfg)`` is empty for
every upstream case. ``--nodes`` is the cluster's node list (default: the test's
``node1,node2,node3``); it decides which negative rules have too many resources and which nodes a
non-strict rule adds.

Exit 0 when the file parses (dropped rules are part of the output, not an error). A file that
cannot be read, or that upstream's parser would warn about (a bad value, an unknown rule type or
property, an invalid rule id, a missing required property, a stray line) is bad input: one line
naming the file, line, rule and key, exit 2.
"""

from __future__ import annotations

import argparse
import sys

from pvegym.errors import ConfigError
from pvegym.sim.ha.rules_check import DEFAULT_NODES, check_cfg
from pvegym.sim.ha.rules_formats import pve_verify_ha_node


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "check-rules",
        help="check an HA rules file and print its canonical form as pve-ha-manager does",
    )
    parser.add_argument("file", metavar="FILE", help="an HA rules file (rules.cfg format)")
    parser.add_argument(
        "--nodes",
        default=",".join(DEFAULT_NODES),
        help="the cluster's nodes, comma-separated (default: %(default)s)",
    )
    parser.set_defaults(func=run)


def _nodes(text: str) -> list[str]:
    nodes = text.split(",")
    seen: set[str] = set()
    for node in nodes:
        if ":" in node or not pve_verify_ha_node(node, noerr=True):
            raise ConfigError(
                "--nodes",
                f"'{node}' is not a node name (letters, digits and '-', not starting or"
                " ending with '-'); give the nodes comma-separated, e.g. node1,node2",
            )
        if node in seen:
            raise ConfigError("--nodes", f"node '{node}' is listed twice")
        seen.add(node)
    return nodes


def run(args: argparse.Namespace) -> int:
    nodes = _nodes(args.nodes)
    try:
        with open(args.file, "rb") as fh:
            raw = fh.read()
    except OSError as err:
        raise ConfigError(args.file, f"cannot read the rules file: {err.strerror}") from None
    warnings: list[str] = []
    report = check_cfg(args.file, raw, nodes, warn=warnings.append)
    if warnings:
        # upstream's warnings start "file <FILE> line <n> ..."; keep the rest as the message
        first = warnings[0].strip().removeprefix(f"file {args.file} ")
        more = f" (and {len(warnings) - 1} more)" if len(warnings) > 1 else ""
        raise ConfigError(args.file, first + more)
    sys.stdout.flush()
    sys.stdout.buffer.write(report)
    sys.stdout.buffer.flush()
    return 0
