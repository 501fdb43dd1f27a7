"""The value formats of HA rules and groups: the ``pve-ha-*`` formats and standard options of
``PVE::HA::Tools`` (pve-ha-manager 5.2.0, ``src/PVE/HA/Tools.pm``), registered with the ported
``PVE::JSONSchema`` (``pvegym.sim.ha.section_config.register_format``).

Public API:

* ``pve_verify_ha_resource_id(sid, noerr=False) -> str | None`` — ``<type>:<name>``, e.g. ``vm:100``.
* ``pve_verify_ha_node(node, noerr=False) -> str | None`` — a node name with an optional
  ``:<priority>``.
* ``parse_node_priority(value, noerr=False) -> tuple[str, int] | None`` — ``"node1:2"`` →
  ``("node1", 2)``; no priority means 0.
* ``HA_RESOURCE_ID_LIST``, ``HA_NODE_LIST``, ``HA_RULE_ID``, ``HA_GROUP_ID`` — the standard options
  (property schemas) ``Rules.pm`` and ``Groups.pm`` use.

Invalid values raise ``PerlDie`` with upstream's message unless ``noerr``.
"""

from __future__ import annotations

import re

from pvegym.sim.ha.perl import ASCII, PerlDie, perl_int
from pvegym.sim.ha.section_config import PropertySchema, register_format

_RESOURCE_ID = re.compile(r"[a-z]+:\S+", ASCII)
_NODE_PRIORITY = re.compile(r"([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)(:(\d+))?", ASCII)


def pve_verify_ha_resource_id(sid: str, noerr: bool = False) -> str | None:
    if not _RESOURCE_ID.fullmatch(sid):
        if noerr:
            return None
        raise PerlDie("value does not look like a valid ha resource id\n")
    return sid


def pve_verify_ha_node(node: str, noerr: bool = False) -> str | None:
    if not _NODE_PRIORITY.fullmatch(node):
        if noerr:
            return None
        raise PerlDie("value does not look like a valid ha node\n")
    return node


def parse_node_priority(value: str, noerr: bool = False) -> tuple[str, int | float] | None:
    """A node list entry → (node, priority); a node without priority has priority 0.

    The priority is Perl's ``int()`` of the digits: exact up to 2**64−1, a float beyond.
    """
    m = _NODE_PRIORITY.fullmatch(value)
    if m:
        return m.group(1), perl_int(m.group(4) or "0")
    if noerr:
        return None
    raise PerlDie(f"unable to parse HA node entry '{value}'\n")


register_format("pve-ha-resource-id", pve_verify_ha_resource_id)
register_format("pve-ha-node", pve_verify_ha_node)

HA_RESOURCE_ID_LIST: PropertySchema = {
    "description": "List of HA resource IDs. This consists of a list of resource types followed"
    " by a resource specific name separated with a colon (example: vm:100,ct:101).",
    "typetext": "<type>:<name>{,<type>:<name>}*",
    "type": "string",
    "format": "pve-ha-resource-id-list",
}
HA_NODE_LIST: PropertySchema = {
    "description": "List of cluster node names with optional priority.",
    "type": "string",
    "format": "pve-ha-node-list",
    "typetext": "<node>[:<pri>]{,<node>[:<pri>]}*",
}
HA_RULE_ID: PropertySchema = {
    "description": "HA rule identifier.",
    "type": "string",
    "format": "pve-configid",
}
HA_GROUP_ID: PropertySchema = {
    "description": "The HA group identifier.",
    "type": "string",
    "format": "pve-configid",
}
