"""Port of ``PVE::HA::Rules::Helpers`` and ``PVE::HA::HashTools`` (pve-ha-manager 5.2.0,
``src/PVE/HA/Rules/Helpers.pm``, ``src/PVE/HA/HashTools.pm``).

Upstream keeps sets as Perl "hash sets" ``{key => 1}``; so does this port (``HashSet``, a
``dict[str, int]``), because the compiled rules and ``to_json`` output are made of them.

Public API:

* ``set_intersect(a, b) -> HashSet``, ``set_union(a, b) -> HashSet``,
  ``sets_are_disjoint(a, b) -> bool`` — on hash sets (a missing ``a`` counts as empty in
  ``set_union``, as Perl's autovivification makes it).
* ``find_disjoint_rules_resource_sets(rules) -> list[DisjointRuleSet]`` — groups the rules
  ``{ruleid: rule}`` into connected components by shared resources: each entry has the ``ruleids``
  (in the order they joined) and the union of their ``resources``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from pvegym.sim.ha.perl import truthy

#: a Perl hash set: key → 1
HashSet = dict[str, int]


class DisjointRuleSet(TypedDict):
    ruleids: list[str]
    resources: HashSet


def set_intersect(hash1: Mapping[str, Any], hash2: Mapping[str, Any]) -> HashSet:
    """The keys set (truthy) in both."""
    return {k: 1 for k in hash1 if truthy(hash1[k]) and truthy(hash2.get(k))}


def set_union(hash1: Mapping[str, Any] | None, hash2: Mapping[str, Any] | None) -> HashSet:
    """The keys of either (``None`` is the empty set)."""
    return {k: 1 for k in [*(hash1 or {}), *(hash2 or {})]}


def sets_are_disjoint(hash1: Mapping[str, Any], hash2: Mapping[str, Any]) -> bool:
    """No key of ``hash1`` is set (truthy) in ``hash2``."""
    return not any(truthy(hash2.get(k)) for k in hash1)


def _sort_by_lowest_resource_id(rules: Mapping[str, Mapping[str, Any]]) -> list[str]:
    # rules with the lowest-named resource first; ties (and rules without resources, whose
    # lowest id is Perl's undef, i.e. "") keep the sorted rule id order (Perl's sort is stable)
    lowest = {ruleid: min(rule["resources"], default="") for ruleid, rule in rules.items()}
    return sorted(sorted(rules), key=lowest.__getitem__)


def find_disjoint_rules_resource_sets(
    rules: Mapping[str, Mapping[str, Any]],
) -> list[DisjointRuleSet]:
    """Connected rule sets by shared resources (``Helpers.pm`` ``find_disjoint_rules_resource_sets``).

    Like upstream, one pass in order of each rule's lowest resource id, a rule joining the first
    set it overlaps: rules are merged into an earlier set only, never two sets into one.
    """
    disjoint: list[DisjointRuleSet] = []
    for ruleid in _sort_by_lowest_resource_id(rules):
        rule = rules[ruleid]
        for entry in disjoint:
            if sets_are_disjoint(rule["resources"], entry["resources"]):
                continue
            entry["ruleids"].append(ruleid)
            for sid in rule["resources"]:
                entry["resources"][sid] = 1
            break
        else:
            disjoint.append({"ruleids": [ruleid], "resources": dict(rule["resources"])})
    return disjoint
