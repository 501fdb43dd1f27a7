"""Port of ``PVE::HA::Rules`` (pve-ha-manager 5.2.0, ``src/PVE/HA/Rules.pm``): the HA rules config
(``/etc/pve/ha/rules.cfg``, the test harness's ``rules_config``), its feasibility checks and
transforms, and its compilation for the scheduler.

How the HA manager uses it (``Manager.pm`` ``manage``, ``Sim/Hardware.pm`` ``read_rules_config``)::

    rules = Rules.parse_config(filename, raw)            # section config → RulesConfig
    for rule in rules["ids"].values():
        Rules.set_rule_defaults(rule)
    migrate_groups_to_rules(rules, groups, services)     # pvegym.sim.ha.groups
    for message in Rules.transform(rules, nodes):        # drops infeasible rules, adds implied ones
        log("info", message)                             # "Drop rule 'x', because ...\\n"
    compiled = Rules.compile(rules, nodes)               # CompiledRules

Public API (class methods of ``Rules``; ``nodes`` is the cluster's node list):

* ``Rules.parse_config(filename, raw, warn=None) -> RulesConfig`` and
  ``Rules.write_config(filename, rules) -> str`` — see ``pvegym.sim.ha.section_config``.
* ``Rules.set_rule_defaults(rule) -> None`` — sets unset optional properties that have a truthy
  default (in 5.2.0 none has: ``strict``'s default is 0, so this changes nothing).
* ``Rules.check_feasibility(rules, nodes) -> RuleErrors`` — ``{ruleid: {"resources": [message]}}``
  for every rule some check rejects; ``rules`` is not modified.
* ``Rules.transform(rules, nodes) -> list[str]`` — removes the rejected rules, then runs the
  transforms (merge connected positive resource-affinity rules, add implicit negative ones, extend
  node-affinity rules to whole positive groups); returns one ``"Drop rule '<id>', because
  <message>.\\n"`` per error, sorted by rule id. Mutates ``rules``.
* ``Rules.compile(rules, nodes) -> CompiledRules`` — ``{"node-affinity": {sid: {"nodes": {node:
  {"priority": p}}}}, "resource-affinity": {"positive": {sid: {sid2: 1}}, "negative": {...}}}``;
  disabled rules are left out, non-strict node affinity adds the other nodes at priority −1.
* ``Rules.get_check_arguments(rules) -> CheckArguments``, ``Rules.register_check(check, collect)``,
  ``Rules.register_transform(transform)``, ``Rules.lookup(type)``, ``Rules.lookup_types()``.
* ``collect_rules(message)``, ``collect_conflicts({kind: message})`` — the ``collect_errors``
  functions of upstream's checks (every message is filed under the rule's ``resources``).
* ``foreach_rule(rules, func, sid=None, type=None, exclude_disabled_rules=False, sorted=None)`` —
  calls ``func(rule, ruleid)`` for each matching rule (by ``order`` if ``sorted`` is given).
* ``get_next_ordinal(rules) -> int`` — upstream's "next" ordinal: the *smallest* ``order`` + 1.
* The inter-plugin checks ``check_single_priority_node_affinity_in_resource_affinity_rules``,
  ``check_single_node_affinity_per_positive_resource_affinity_rule``,
  ``check_negative_resource_affinity_node_affinity_consistency`` and the transform
  ``create_implicit_positive_resource_affinity_node_affinity_rules``.
* Types: ``Rule``, ``NodePriority``, ``RulesConfig``, ``CompiledRules``, ``NodeAffinityEntry``,
  ``ResourceAffinityCompiled``, ``CheckArguments``, ``RuleErrors``.

The plugins (``rules_node_affinity.NodeAffinity``, ``rules_resource_affinity.ResourceAffinity``) are
registered in that order and ``init``-ed with property isolation when this module is imported, as
``PVE::HA::Sim::Env`` does; the base plugin and what the plugins share live in
:mod:`pvegym.sim.ha.rules_base` (which imports no plugin).
"""

from __future__ import annotations

from pvegym.sim.ha.rules_base import (
    CheckArguments,
    CheckFunc,
    CollectFunc,
    CompiledRules,
    NodeAffinityEntry,
    NodePriority,
    ResourceAffinityCompiled,
    Rule,
    RuleErrors,
    Rules,
    RulesConfig,
    TransformFunc,
    check_negative_resource_affinity_node_affinity_consistency,
    check_single_node_affinity_per_positive_resource_affinity_rule,
    check_single_priority_node_affinity_in_resource_affinity_rules,
    collect_conflicts,
    collect_rules,
    create_implicit_positive_resource_affinity_node_affinity_rules,
    foreach_rule,
    get_next_ordinal,
)
from pvegym.sim.ha.rules_node_affinity import NodeAffinity
from pvegym.sim.ha.rules_resource_affinity import ResourceAffinity

NodeAffinity.register()
ResourceAffinity.register()
Rules.init(property_isolation=True)

__all__ = [
    "CheckArguments",
    "CheckFunc",
    "CollectFunc",
    "CompiledRules",
    "NodeAffinity",
    "NodeAffinityEntry",
    "NodePriority",
    "ResourceAffinity",
    "ResourceAffinityCompiled",
    "Rule",
    "RuleErrors",
    "Rules",
    "RulesConfig",
    "TransformFunc",
    "check_negative_resource_affinity_node_affinity_consistency",
    "check_single_node_affinity_per_positive_resource_affinity_rule",
    "check_single_priority_node_affinity_in_resource_affinity_rules",
    "collect_conflicts",
    "collect_rules",
    "create_implicit_positive_resource_affinity_node_affinity_rules",
    "foreach_rule",
    "get_next_ordinal",
]
