"""Port of ``PVE::HA::Rules::ResourceAffinity`` (pve-ha-manager 5.2.0,
``src/PVE/HA/Rules/ResourceAffinity.pm``): rules keeping HA resources together (``positive``) or
apart (``negative``), plus ``PVE::HA::Usage::get_used_service_nodes`` which it calls.

Public API:

* ``ResourceAffinity`` — the plugin (``type() == "resource-affinity"``; ``get_plugin_check_arguments``
  → ``resource_affinity_rules``, ``positive_rules``, ``negative_rules`` of the enabled rules;
  ``plugin_compile`` → ``{"positive": {sid: {sid2: 1}}, "negative": {...}}``).
* Checks: ``check_resource_affinity_resources_count``, ``check_negative_resource_affinity_resources_count``,
  ``check_inter_resource_affinity_rules_consistency``; transforms:
  ``merge_connected_positive_resource_affinity_rules`` (new id ``_merged-<id1>-<id2>...``),
  ``create_implicit_negative_resource_affinity_rules`` (new ids
  ``_implicit-negative-<positive id>-<sid>-<sid2>``).
* What the Manager calls:

  - ``get_affinitive_resources(resource_affinity, sid) -> (together, separate)`` — the sids ``sid``
    is in positive / negative affinity with. These are the compiled dicts themselves (or fresh
    empty ones): do not modify them.
  - ``get_resource_affinity(resource_affinity, sid, ss, online_nodes) -> (together, separate)`` —
    ``together``: online node → how many of ``sid``'s positive partners use it (a moving partner
    counts on its target only); ``separate``: online node → 1 for every node a negative partner is
    on or moving to. ``ss`` is the Manager's service status ``{sid: {"state", "node", "target"}}``.
  - ``is_allowed_on_node(together, separate, node) -> bool``.
  - ``apply_positive_resource_affinity(together, allowed_nodes)`` — keeps in ``allowed_nodes``
    only the allowed node most partners use (ties: alphabetically first); drops the disallowed
    nodes from ``together``. No partner placed on an allowed node: nothing changes.
  - ``apply_negative_resource_affinity(separate, allowed_nodes)`` — removes ``separate``'s nodes.
  - ``get_used_service_nodes(online_nodes, sd) -> (current_node, target_node)`` — the online
    nodes a service puts load on (``Usage.pm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pvegym.sim.ha.perl import truthy
from pvegym.sim.ha.rules_base import (
    CheckArguments,
    ResourceAffinityCompiled,
    Rule,
    Rules,
    RulesConfig,
    collect_conflicts,
    collect_rules,
    foreach_rule,
    get_next_ordinal,
)
from pvegym.sim.ha.rules_helpers import HashSet, find_disjoint_rules_resource_sets, set_intersect
from pvegym.sim.ha.section_config import PropertySchema


class ResourceAffinity(Rules):
    """The ``resource-affinity`` rule plugin."""

    @classmethod
    def type(cls) -> str:
        return "resource-affinity"

    @classmethod
    def properties(cls) -> dict[str, PropertySchema]:
        return {
            "affinity": {
                "description": "Describes whether the HA resources are supposed to"
                " be kept on the same node ('positive'), or are supposed to"
                " be kept on separate nodes ('negative').",
                "type": "string",
                "enum": ["positive", "negative"],
                "optional": 0,
            }
        }

    @classmethod
    def options(cls) -> dict[str, dict[str, Any]]:
        return {
            "resources": {"optional": 0},
            "affinity": {"optional": 0},
            "disable": {"optional": 1},
            "comment": {"optional": 1},
        }

    @classmethod
    def get_plugin_check_arguments(cls, rules: RulesConfig) -> CheckArguments:
        resource_affinity_rules: dict[str, Rule] = {}
        positive_rules: dict[str, Rule] = {}
        negative_rules: dict[str, Rule] = {}

        def collect(rule: Rule, ruleid: str) -> None:
            resource_affinity_rules[ruleid] = rule
            if rule["affinity"] == "positive":
                positive_rules[ruleid] = rule
            if rule["affinity"] == "negative":
                negative_rules[ruleid] = rule

        foreach_rule(rules, collect, type="resource-affinity", exclude_disabled_rules=True)
        return {
            "resource_affinity_rules": resource_affinity_rules,
            "positive_rules": positive_rules,
            "negative_rules": negative_rules,
        }

    @classmethod
    def plugin_compile(cls, rules: RulesConfig, nodes: list[str]) -> ResourceAffinityCompiled:
        positive: dict[str, HashSet] = {}
        negative: dict[str, HashSet] = {}

        def compile_rule(rule: Rule, _ruleid: str) -> None:
            affinity_set = positive if rule["affinity"] == "positive" else negative
            for sid in rule["resources"]:
                for csid in rule["resources"]:
                    if csid != sid:
                        affinity_set.setdefault(sid, {})[csid] = 1

        foreach_rule(rules, compile_rule, type="resource-affinity", exclude_disabled_rules=True)
        return {"positive": positive, "negative": negative}


# --- checks ----------------------------------------------------------------------------------------


def check_resource_affinity_resources_count(
    resource_affinity_rules: Mapping[str, Rule],
) -> list[str]:
    """Rules with fewer than two resources (ineffective)."""
    return sorted(r for r, rule in resource_affinity_rules.items() if len(rule["resources"]) < 2)


def check_negative_resource_affinity_resources_count(
    negative_rules: Mapping[str, Rule], nodes: list[str]
) -> list[str]:
    """Negative rules with more resources than the cluster has nodes."""
    return sorted(r for r, rule in negative_rules.items() if len(rule["resources"]) > len(nodes))


def check_inter_resource_affinity_rules_consistency(
    positive_rules: Mapping[str, Rule], negative_rules: Mapping[str, Rule]
) -> list[tuple[str, str]]:
    """(type, ruleid) for each negative rule sharing two or more resources with a connected set
    of positive rules, and for those positive rules (once per such negative rule)."""
    conflicts: list[tuple[str, str]] = []
    for entry in find_disjoint_rules_resource_sets(positive_rules):
        for negativeid, negative in negative_rules.items():
            if len(set_intersect(entry["resources"], negative["resources"])) < 2:
                continue
            conflicts.append(("negative", negativeid))
            conflicts.extend(("positive", r) for r in entry["ruleids"])
    return sorted(conflicts)


ResourceAffinity.register_check(
    lambda args: check_resource_affinity_resources_count(args["resource_affinity_rules"]),
    collect_rules("rule is ineffective as there are less than two resources"),
)
ResourceAffinity.register_check(
    lambda args: check_negative_resource_affinity_resources_count(
        args["negative_rules"], args["nodes"]
    ),
    collect_rules("rule defines more resources than available nodes"),
)
ResourceAffinity.register_check(
    lambda args: check_inter_resource_affinity_rules_consistency(
        args["positive_rules"], args["negative_rules"]
    ),
    collect_conflicts(
        {
            "positive": "rule shares two or more resources with a negative resource affinity rule",
            "negative": "rule shares two or more resources with a positive resource affinity rule",
        }
    ),
)


# --- transforms ------------------------------------------------------------------------------------


def merge_connected_positive_resource_affinity_rules(
    rules: RulesConfig, positive_rules: Mapping[str, Rule]
) -> None:
    """Replace each connected set of two or more positive rules by one ``_merged-...`` rule that
    takes the first rule's ``order`` (and loses ``comment``)."""
    for entry in find_disjoint_rules_resource_sets(positive_rules):
        ruleids = entry["ruleids"]
        if len(ruleids) < 2:
            continue
        new_ruleid = "_merged-" + "-".join(ruleids)
        rules["ids"][new_ruleid] = {
            "type": "resource-affinity",
            "affinity": "positive",
            "resources": entry["resources"],
        }
        first_order = rules["order"].get(ruleids[0])
        if first_order is not None:
            rules["order"][new_ruleid] = first_order
        for ruleid in ruleids:
            rules["ids"].pop(ruleid, None)
            rules["order"].pop(ruleid, None)


def _get_negative_resource_affinity_for_resources(
    negative_rules: Mapping[str, Rule], resources: HashSet
) -> dict[str, HashSet]:
    # sid2 → the resources (of `resources`) a negative rule keeps apart from sid2
    separated_from: dict[str, HashSet] = {}
    for negative_rule in negative_rules.values():
        for sid in resources:
            if not truthy(negative_rule["resources"].get(sid)):
                continue
            for csid in negative_rule["resources"]:
                if csid != sid:
                    separated_from.setdefault(csid, {})[sid] = 1
    return separated_from


def create_implicit_negative_resource_affinity_rules(
    rules: RulesConfig, positive_rules: Mapping[str, Rule], negative_rules: Mapping[str, Rule]
) -> None:
    """If A and B are kept together and A apart from C, add a rule keeping B apart from C."""
    for positiveid, positive_rule in positive_rules.items():
        positive_resources = positive_rule["resources"]
        separated_from = _get_negative_resource_affinity_for_resources(
            negative_rules, positive_resources
        )
        for csid, separated in separated_from.items():
            for sid in positive_resources:
                if truthy(separated.get(sid)):
                    continue
                new_ruleid = f"_implicit-negative-{positiveid}-{sid}-{csid}"
                rules["ids"][new_ruleid] = {
                    "type": "resource-affinity",
                    "affinity": "negative",
                    "resources": {sid: 1, csid: 1},
                }
                rules["order"][new_ruleid] = get_next_ordinal(rules)


ResourceAffinity.register_transform(
    lambda rules, args: merge_connected_positive_resource_affinity_rules(
        rules, args["positive_rules"]
    )
)
# must come after merging connected positive rules (this transform assumes disjoint positive sets)
ResourceAffinity.register_transform(
    lambda rules, args: create_implicit_negative_resource_affinity_rules(
        rules, args["positive_rules"], args["negative_rules"]
    )
)


# --- what the Manager calls --------------------------------------------------------------------


def get_affinitive_resources(
    resource_affinity: ResourceAffinityCompiled, sid: str
) -> tuple[HashSet, HashSet]:
    """(sids ``sid`` must be together with, sids it must be apart from); do not modify them."""
    together = resource_affinity["positive"].get(sid)
    separate = resource_affinity["negative"].get(sid)
    return (together if together is not None else {}), (separate if separate is not None else {})


def get_used_service_nodes(
    online_nodes: Mapping[str, Any], sd: Mapping[str, Any]
) -> tuple[str | None, str | None]:
    """(current node, target node) a service in state ``sd`` puts load on, if online."""
    state, node, target = sd.get("state"), sd.get("node"), sd.get("target")
    if state in ("stopped", "request_start"):
        return None, None
    current_node = target_node = None
    if (
        state
        in (
            "started",
            "request_stop",
            "fence",
            "freeze",
            "error",
            "recovery",
            "migrate",
            "relocate",
        )
        and node is not None
        and truthy(online_nodes.get(node))
    ):
        current_node = node
    if (
        state in ("migrate", "relocate", "request_start_balance")
        and target is not None
        and truthy(online_nodes.get(target))
    ):
        target_node = target
    return current_node, target_node


def get_resource_affinity(
    resource_affinity: ResourceAffinityCompiled,
    sid: str,
    ss: Mapping[str, Mapping[str, Any]],
    online_nodes: Mapping[str, Any],
) -> tuple[dict[str, int], HashSet]:
    """(node → number of positive partners there, node → 1 where a negative partner is)."""
    together: dict[str, int] = {}
    separate: HashSet = {}
    positive, negative = get_affinitive_resources(resource_affinity, sid)

    def used_nodes(csid: str) -> tuple[str | None, str | None]:
        sd = ss.get(csid)
        if sd is None:
            return None, None
        return get_used_service_nodes(online_nodes, sd)

    for csid in positive:
        current_node, target_node = used_nodes(csid)
        # only the target of a moving partner counts, so that resources already moved do not
        # move back to the source node (upstream bug #6801)
        node = target_node if target_node is not None else current_node
        if node is not None:
            together[node] = together.get(node, 0) + 1
    for csid in negative:
        current_node, target_node = used_nodes(csid)
        if current_node is not None:
            separate[current_node] = 1
        if target_node is not None:
            separate[target_node] = 1
    return together, separate


def is_allowed_on_node(together: Mapping[str, int], separate: Mapping[str, int], node: str) -> bool:
    """``node`` is where partners are (positive), or no negative partner is there."""
    return truthy(together.get(node)) or not truthy(separate.get(node))


def apply_positive_resource_affinity(together: dict[str, int], allowed_nodes: HashSet) -> None:
    """Narrow ``allowed_nodes`` to the allowed node most positive partners use (in place)."""
    for node in list(together):
        if not truthy(allowed_nodes.get(node)):
            del together[node]
    possible_nodes = sorted(together)
    if not possible_nodes:
        return  # nothing to do if there is no positive resource affinity
    # the most populated node; Perl's stable sort keeps ties in alphabetical order
    majority_node = sorted(possible_nodes, key=lambda n: -together[n])[0]
    for node in list(allowed_nodes):
        if node != majority_node:
            del allowed_nodes[node]


def apply_negative_resource_affinity(separate: Mapping[str, int], allowed_nodes: HashSet) -> None:
    """Remove the nodes of negative partners from ``allowed_nodes`` (in place)."""
    for node in list(separate):
        allowed_nodes.pop(node, None)
