"""Port of ``PVE::HA::Groups`` (pve-ha-manager 5.2.0, ``src/PVE/HA/Groups.pm``): the older HA
groups config (``/etc/pve/ha/groups.cfg``, the test harness's ``groups``) and its migration to
node-affinity rules and to the resources' ``failback`` flag.

Each group is a section::

    group: group1
    \tnodes node1:2,node2       <- node[:priority], kept as given: {"node1:2": 1, "node2": 1}
    \trestricted 1              <- -> the rule's strict
    \tnofailback 1              <- -> the resources' failback 0

Public API:

* ``Groups.parse_config(filename, raw, warn=None) -> GroupsConfig`` — as
  ``pvegym.sim.ha.section_config.SectionConfig.parse_config``.
* ``migrate_groups_to_resources(groups, resources) -> None`` — sets ``failback`` (1, or 0 for a
  ``nofailback`` group) on every resource with a ``group``. The Manager calls it every round.
* ``migrate_groups_to_rules(rules, groups, resources) -> None`` — adds one node-affinity rule
  ``ha-group-<group>`` per group that has resources (``strict`` = ``restricted``, comment
  ``Generated from HA group '<group>'.`` unless the group has one). The Manager calls it
  whenever it recompiles the rules, before ``Rules.transform``.

``resources`` is the services config: ``{sid: {"group": ..., ...}}``.

Perl autovivification, reproduced: a resource naming a group that does not exist (or failed to
parse) makes ``migrate_groups_to_resources`` create it empty in ``groups`` — so a later
``migrate_groups_to_rules`` on the same ``groups`` adds an ``ha-group-<group>`` rule with no nodes,
which (non-strict) allows every node.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypedDict, cast

from pvegym.sim.ha.perl import to_str, truthy
from pvegym.sim.ha.rules import NodePriority, Rule, RulesConfig, get_next_ordinal
from pvegym.sim.ha.rules_formats import (
    HA_GROUP_ID,
    HA_NODE_LIST,
    parse_node_priority,
    pve_verify_ha_node,
)
from pvegym.sim.ha.section_config import (
    ParseError,
    PluginData,
    SectionConfig,
    Warn,
    split_list,
)


class Group(TypedDict, total=False):
    type: str  # "group"
    nodes: dict[str, int]  # "node" or "node:priority" → 1
    restricted: int
    nofailback: int
    comment: str


class GroupsConfig(TypedDict, total=False):
    ids: dict[str, Group | None]
    order: dict[str, int]
    digest: str
    errors: list[ParseError]


class Groups(SectionConfig):
    """The ``group`` section type; base plugin and only plugin of the groups config."""

    _pdata: ClassVar[PluginData] = PluginData(
        property_list={
            "type": {"description": "Group type.", "optional": 1},
            "group": dict(HA_GROUP_ID),
            "nodes": {**HA_NODE_LIST, "optional": 1},
            "restricted": {
                "description": "Resources bound to restricted groups may only run on nodes"
                " defined by the group.",
                "type": "boolean",
                "optional": 1,
                "default": 0,
            },
            "nofailback": {
                "description": "The CRM tries to run services on the node with the highest"
                " priority. If a node with higher priority comes online, the CRM migrates the"
                " service to that node. Enabling nofailback prevents that behavior.",
                "type": "boolean",
                "optional": 1,
                "default": 0,
            },
            "comment": {
                "description": "Description.",
                "type": "string",
                "optional": 1,
                "maxLength": 4096,
            },
        }
    )

    @classmethod
    def type(cls) -> str:
        return "group"

    @classmethod
    def options(cls) -> dict[str, dict[str, Any]]:
        return {
            "nodes": {"optional": 0},
            "comment": {"optional": 1},
            "nofailback": {"optional": 1},
            "restricted": {"optional": 1},
        }

    @classmethod
    def decode_value(cls, kind: str, key: str, value: Any) -> Any:
        if key == "nodes":
            return {node: 1 for node in split_list(value) if pve_verify_ha_node(node)}
        return value

    @classmethod
    def encode_value(cls, kind: str, key: str, value: Any) -> Any:
        if key == "nodes":
            return ",".join(value)  # upstream: Perl hash order
        return value

    @classmethod
    def parse_section_header(cls, line: str) -> tuple[str, str, str | None, dict[str, Any]] | None:
        return cls.parse_configid_section_header(line)

    @classmethod
    def parse_config(
        cls, filename: str, raw: bytes | str, warn: Warn | None = None
    ) -> GroupsConfig:
        return cast(GroupsConfig, super().parse_config(filename, raw, warn))


Groups.register()
Groups.init()


def migrate_groups_to_resources(groups: GroupsConfig, resources: dict[str, dict[str, Any]]) -> None:
    """Migrate the ``nofailback`` flag of each resource's group to the resource's ``failback``."""
    for sid in resources:
        if not truthy(resources[sid].get("group")):
            continue  # skip resources without groups
        groupid = to_str(resources[sid]["group"])
        group = groups["ids"].get(groupid)
        if not isinstance(group, dict):  # Perl autovivifies the missing (or undef) group
            group = groups["ids"][groupid] = {}
        resources[sid]["failback"] = int(not truthy(group.get("nofailback")))


def migrate_groups_to_rules(
    rules: RulesConfig, groups: GroupsConfig, resources: dict[str, dict[str, Any]]
) -> None:
    """Add a node-affinity rule ``ha-group-<group>`` for each group some resource uses."""
    group_resources: dict[str, dict[str, int]] = {}
    for sid in resources:
        if not truthy(resources[sid].get("group")):
            continue  # skip resources without groups
        groupid = to_str(resources[sid]["group"])
        group_resources.setdefault(groupid, {})[sid] = 1

    for groupid, members in group_resources.items():
        group = groups["ids"].get(groupid)
        if group is None:
            continue  # skip non-existent groups
        nodes: dict[str, NodePriority] = {}
        for entry in group.setdefault("nodes", {}):
            parsed = parse_node_priority(entry)
            assert parsed is not None  # without noerr it dies instead
            node, priority = parsed
            nodes[node] = {"priority": priority}
        new_ruleid = f"ha-group-{groupid}"
        rule: Rule = {
            "type": "node-affinity",
            "resources": members,
            "nodes": nodes,
            "strict": group.get("restricted"),
            "comment": group.get("comment"),
        }
        if not truthy(rule["comment"]):
            rule["comment"] = f"Generated from HA group '{groupid}'."
        rules["ids"][new_ruleid] = rule
        rules["order"][new_ruleid] = get_next_ordinal(rules)
