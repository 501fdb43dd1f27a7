"""The checked, canonical form of a rules file, exactly as upstream's rule-file test prints it
(``check_cfg`` of pve-ha-manager 5.2.0's ``src/test/test_rules_config.pl``, whose output the
``src/test/rules_cfgs/*.cfg.expect`` files hold)::

    --- Log ---
    Drop rule '<id>', because <reason>.        <- one line per rejected rule and reason
    --- Config ---
    { "digest" : ..., "ids" : {...}, "order" : {...} }    <- the rules after transform()
    --- Compiled Config ---
    { "node-affinity" : {...}, "resource-affinity" : {...} }

Public API:

* ``check_cfg(filename, raw, nodes=DEFAULT_NODES, warn=None) -> bytes`` — parse (``warn`` gets
  upstream's parser warnings), ``set_rule_defaults``, ``transform`` and ``compile`` against
  ``nodes``, and render. The bytes are upstream's: the drop messages as raw bytes, the JSON in
  UTF-8 (so a non-ASCII rule id appears UTF-8-encoded twice in the JSON, as Perl prints it).
* ``DEFAULT_NODES`` — the test's cluster, ``node1``, ``node2``, ``node3``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pvegym.sim.ha.perl import to_json
from pvegym.sim.ha.rules import Rules
from pvegym.sim.ha.section_config import Warn

DEFAULT_NODES: tuple[str, ...] = ("node1", "node2", "node3")


def check_cfg(
    filename: str,
    raw: bytes | str,
    nodes: Sequence[str] = DEFAULT_NODES,
    warn: Warn | None = None,
) -> bytes:
    """The ``--- Log --- / --- Config --- / --- Compiled Config ---`` report of a rules file."""
    node_list = list(nodes)
    cfg = Rules.parse_config(filename, raw, warn)
    for rule in cfg["ids"].values():
        Rules.set_rule_defaults(rule)
    messages = Rules.transform(cfg, node_list)
    compiled = Rules.compile(cfg, node_list)
    return b"".join(
        [
            b"--- Log ---\n",
            "".join(messages).encode("latin-1"),
            b"--- Config ---\n",
            to_json(cfg).encode("utf-8"),
            b"--- Compiled Config ---\n",
            to_json(compiled).encode("utf-8"),
        ]
    )
