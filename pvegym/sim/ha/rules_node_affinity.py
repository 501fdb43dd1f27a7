"""Port of ``PVE::HA::Rules::NodeAffinity`` (pve-ha-manager 5.2.0,
``src/PVE/HA/Rules/NodeAffinity.pm``): rules binding HA resources to nodes.

A ``node-affinity`` rule lists ``resources`` and ``nodes`` (``node[:priority]``, priority 0 by
default, higher preferred). A *strict* rule restricts the resources to those nodes; a non-strict
one (the default) only prefers them: ``plugin_compile`` adds every other cluster node at priority −1.

Public API:

* ``NodeAffinity`` — the plugin (``type() == "node-affinity"``; ``properties``, ``options``,
  ``decode_plugin_value``/``encode_plugin_value`` for ``nodes``, ``get_plugin_check_arguments``
  → ``{"node_affinity_rules": {ruleid: rule}}`` of the enabled rules, ``plugin_compile`` →
  ``{sid: {"nodes": {node: {"priority": p}}}}``, where all sids of one rule share one ``nodes``).
* ``check_single_resource_reference(node_affinity_rules) -> list[tuple[ruleid, sid]]`` — every rule
  that shares a resource with another node-affinity rule (all of them are dropped).
* ``get_node_affinity(node_affinity, sid, online_nodes) -> (allowed_nodes, preferred_nodes)`` —
  what the Manager calls (``select_service_node``, ``get_resource_migration_candidates``): the
  online nodes ``sid`` may run on and those of the highest priority among them. For a sid without
  a rule both are ``online_nodes`` itself (the same dict object, as upstream returns the same hash
  twice); with a rule but no online rule node both are empty.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from pvegym.sim.ha.perl import truthy
from pvegym.sim.ha.rules_base import (
    CheckArguments,
    NodeAffinityEntry,
    NodePriority,
    Rule,
    RuleErrors,
    Rules,
    RulesConfig,
    foreach_rule,
)
from pvegym.sim.ha.rules_formats import HA_NODE_LIST, parse_node_priority
from pvegym.sim.ha.rules_helpers import HashSet
from pvegym.sim.ha.section_config import PropertySchema, split_list


class NodeAffinity(Rules):
    """The ``node-affinity`` rule plugin."""

    _STRICT_DESCRIPTION: ClassVar[str] = (
        "Describes whether the node affinity rule is strict or non-strict."
    )

    @classmethod
    def type(cls) -> str:
        return "node-affinity"

    @classmethod
    def properties(cls) -> dict[str, PropertySchema]:
        return {
            "nodes": {**HA_NODE_LIST, "optional": 0},
            "strict": {
                "description": cls._STRICT_DESCRIPTION,
                "type": "boolean",
                "optional": 1,
                "default": 0,
            },
        }

    @classmethod
    def options(cls) -> dict[str, dict[str, Any]]:
        return {
            "resources": {"optional": 0},
            "nodes": {"optional": 0},
            "strict": {"optional": 1},
            "disable": {"optional": 1},
            "comment": {"optional": 1},
        }

    @classmethod
    def decode_plugin_value(cls, kind: str, key: str, value: Any) -> Any:
        if key == "nodes":
            nodes: dict[str, NodePriority] = {}
            for entry in split_list(value):
                parsed = parse_node_priority(entry, noerr=True)
                if parsed is not None:
                    node, priority = parsed
                    nodes[node] = {"priority": priority}
            return nodes
        return value

    @classmethod
    def encode_plugin_value(cls, kind: str, key: str, value: Any) -> Any:
        if key == "nodes":
            entries = []
            for node in sorted(value):
                priority = value[node]["priority"]
                entries.append(f"{node}:{priority}" if truthy(priority) else node)
            return ",".join(entries)
        return value

    @classmethod
    def get_plugin_check_arguments(cls, rules: RulesConfig) -> CheckArguments:
        node_affinity_rules: dict[str, Rule] = {}

        def collect(rule: Rule, ruleid: str) -> None:
            node_affinity_rules[ruleid] = rule

        foreach_rule(rules, collect, type="node-affinity", exclude_disabled_rules=True)
        return {"node_affinity_rules": node_affinity_rules}

    @classmethod
    def plugin_compile(cls, rules: RulesConfig, nodes: list[str]) -> dict[str, NodeAffinityEntry]:
        node_affinity: dict[str, NodeAffinityEntry] = {}

        def compile_rule(rule: Rule, _ruleid: str) -> None:
            effective_nodes = copy.deepcopy(rule["nodes"])
            # add remaining nodes with low priority for non-strict node affinity
            if not truthy(rule.get("strict")):
                for node in nodes:
                    if effective_nodes.get(node) is None:
                        effective_nodes[node] = {"priority": -1}
            for sid in rule["resources"]:
                node_affinity[sid] = {"nodes": effective_nodes}

        foreach_rule(rules, compile_rule, type="node-affinity", exclude_disabled_rules=True)
        return node_affinity


def check_single_resource_reference(
    node_affinity_rules: Mapping[str, Rule],
) -> list[tuple[str, str]]:
    """(ruleid, sid) for each rule using a resource that another node-affinity rule also uses."""
    resource_ruleids: dict[str, list[str]] = {}
    for ruleid, rule in node_affinity_rules.items():
        for sid in rule["resources"]:
            resource_ruleids.setdefault(sid, []).append(ruleid)
    conflicts = [
        (ruleid, sid)
        for sid, ruleids in resource_ruleids.items()
        if len(ruleids) >= 2
        for ruleid in ruleids
    ]
    return sorted(conflicts)


def _collect_single_resource_reference(
    conflicts: list[tuple[str, str]], errors: RuleErrors
) -> None:
    for ruleid, sid in conflicts:
        errors.setdefault(ruleid, {}).setdefault("resources", []).append(
            f"resource '{sid}' is already used in another node affinity rule"
        )


NodeAffinity.register_check(
    lambda args: check_single_resource_reference(args["node_affinity_rules"]),
    _collect_single_resource_reference,
)


def get_node_affinity(
    node_affinity: Mapping[str, NodeAffinityEntry], sid: str, online_nodes: HashSet
) -> tuple[HashSet, HashSet]:
    """(allowed nodes, preferred nodes) of ``sid`` among ``online_nodes`` (see the module doc)."""
    entry = node_affinity.get(sid)
    if entry is None:
        return online_nodes, online_nodes
    allowed_nodes: HashSet = {}
    prioritized_nodes: dict[int | float, HashSet] = {}
    for node, props in entry["nodes"].items():
        if online_nodes.get(node) is None:
            continue  # node is offline
        priority = props.get("priority")
        allowed_nodes[node] = 1
        prioritized_nodes.setdefault(0 if priority is None else priority, {})[node] = 1
    if not prioritized_nodes:
        return allowed_nodes, {}
    return allowed_nodes, prioritized_nodes[max(prioritized_nodes)]
