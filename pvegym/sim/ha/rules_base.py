"""The base plugin of ``PVE::HA::Rules`` (pve-ha-manager 5.2.0, ``src/PVE/HA/Rules.pm``) and the
types, checks and transforms its plugins share.

Use :mod:`pvegym.sim.ha.rules`, which registers the plugins (``NodeAffinity``,
``ResourceAffinity``) on this base as ``PVE::HA::Sim::Env`` does; the plugins import this module,
and this module knows none of them (``Rules.pm`` does not either), so no import cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypedDict, cast

from pvegym.sim.ha.perl import truthy
from pvegym.sim.ha.rules_formats import HA_RESOURCE_ID_LIST, HA_RULE_ID, pve_verify_ha_resource_id
from pvegym.sim.ha.rules_helpers import (
    HashSet,
    find_disjoint_rules_resource_sets,
    set_intersect,
    set_union,
    sets_are_disjoint,
)
from pvegym.sim.ha.section_config import (
    ConfigData,
    ParseError,
    PluginData,
    SectionConfig,
    Warn,
    decode_text,
    encode_text,
    split_list,
)


class NodePriority(TypedDict):
    priority: int | float  # higher is preferred; −1 for the nodes a non-strict rule adds


class Rule(TypedDict, total=False):
    """One rule as parsed (``type`` plus the properties the file sets)."""

    type: str  # "node-affinity" | "resource-affinity"
    resources: HashSet  # sid → 1
    nodes: dict[str, NodePriority]  # node-affinity only
    strict: int | None  # node-affinity only: 1 strict, 0 (or unset) non-strict
    affinity: str  # resource-affinity only: "positive" | "negative"
    disable: int  # present (any value, even 0) = the rule is disabled
    comment: str | None


class RulesConfig(TypedDict, total=False):
    ids: dict[str, Rule | None]  # None: a section whose check failed (Perl undef)
    order: dict[str, int]
    digest: str
    errors: list[ParseError]


class NodeAffinityEntry(TypedDict):
    nodes: dict[str, NodePriority]


class ResourceAffinityCompiled(TypedDict):
    positive: dict[str, HashSet]  # sid → the sids it must be together with
    negative: dict[str, HashSet]  # sid → the sids it must be apart from


CompiledRules = TypedDict(
    "CompiledRules",
    {"node-affinity": dict[str, NodeAffinityEntry], "resource-affinity": ResourceAffinityCompiled},
)


class CheckArguments(TypedDict, total=False):
    """What checks and transforms receive: subsets of the enabled rules, and the nodes."""

    node_affinity_rules: dict[str, Rule]
    resource_affinity_rules: dict[str, Rule]
    positive_rules: dict[str, Rule]
    negative_rules: dict[str, Rule]
    nodes: list[str]


#: ruleid → property → messages
RuleErrors = dict[str, dict[str, list[str]]]
CheckFunc = Callable[[CheckArguments], Any]
CollectFunc = Callable[[Any, RuleErrors], None]
TransformFunc = Callable[[RulesConfig, CheckArguments], None]

_DEFAULT_DATA = PluginData(
    property_list={
        "type": {"description": "HA rule type."},
        "rule": {**HA_RULE_ID, "optional": 0},
        "disable": {
            "description": "Whether the HA rule is disabled.",
            "type": "boolean",
            "optional": 1,
        },
        "resources": {**HA_RESOURCE_ID_LIST, "optional": 0},
        "comment": {
            "description": "HA rule description.",
            "type": "string",
            "maxLength": 4096,
            "optional": 1,
        },
    }
)

# registered plugin types in registration order, and checks/transforms per type (or "global")
_types: list[str] = []
_checkdef: dict[str, list[tuple[CheckFunc, CollectFunc]]] = {}
_transformdef: dict[str, list[TransformFunc]] = {}


class Rules(SectionConfig):
    """The base plugin of HA rules: shared properties, value coding, checks, transforms."""

    _pdata: ClassVar[PluginData] = _DEFAULT_DATA

    @classmethod
    def private(cls) -> PluginData:
        return _DEFAULT_DATA

    @classmethod
    def register(cls) -> None:
        super().register()
        _types.append(cls.type())  # the order checks and transforms run in

    # --- values --------------------------------------------------------------------------------

    @classmethod
    def decode_plugin_value(cls, kind: str, key: str, value: Any) -> Any:
        return value

    @classmethod
    def decode_value(cls, kind: str, key: str, value: Any) -> Any:
        if key == "resources":
            return {sid: 1 for sid in split_list(value) if pve_verify_ha_resource_id(sid)}
        if key == "comment":
            return decode_text(value)
        plugin = cast(type[Rules], cls.lookup(kind))
        return plugin.decode_plugin_value(kind, key, value)

    @classmethod
    def encode_plugin_value(cls, kind: str, key: str, value: Any) -> Any:
        return value

    @classmethod
    def encode_value(cls, kind: str, key: str, value: Any) -> Any:
        if key == "resources":
            for sid in value:
                pve_verify_ha_resource_id(sid)
            return ",".join(sorted(value))
        if key == "comment":
            return encode_text(value)
        plugin = cast(type[Rules], cls.lookup(kind))
        return plugin.encode_plugin_value(kind, key, value)

    @classmethod
    def parse_section_header(cls, line: str) -> tuple[str, str, str | None, dict[str, Any]] | None:
        return cls.parse_configid_section_header(line)

    @classmethod
    def parse_config(cls, filename: str, raw: bytes | str, warn: Warn | None = None) -> RulesConfig:
        return cast(RulesConfig, super().parse_config(filename, raw, warn))

    @classmethod
    def write_config(cls, filename: str, cfg: ConfigData | RulesConfig) -> str:
        return super().write_config(filename, cast(ConfigData, cfg))

    @classmethod
    def set_rule_defaults(cls, rule: Rule | None) -> None:
        """Set the optional properties with a (truthy) default the rule does not set."""
        if not rule or not truthy(rule.get("type")):
            return
        plugin = cls.lookup(rule["type"])
        raw = cast(dict[str, Any], rule)
        for prop, schema in plugin.properties().items():
            if raw.get(prop) is not None:
                continue
            if not truthy(schema.get("default")) or not truthy(schema.get("optional")):
                continue
            raw[prop] = schema["default"]

    # --- checks and transforms -----------------------------------------------------------------

    @classmethod
    def _check_type(cls) -> str:
        try:
            return cls.type()
        except NotImplementedError:
            return "global"  # registered by the base plugin: checks between rule types

    @classmethod
    def register_check(cls, check: CheckFunc, collect_errors: CollectFunc) -> None:
        _checkdef.setdefault(cls._check_type(), []).append((check, collect_errors))

    @classmethod
    def register_transform(cls, transform: TransformFunc) -> None:
        _transformdef.setdefault(cls._check_type(), []).append(transform)

    @classmethod
    def get_plugin_check_arguments(cls, rules: RulesConfig) -> CheckArguments:
        return {}

    @classmethod
    def get_check_arguments(cls, rules: RulesConfig) -> CheckArguments:
        """The union of every plugin's check arguments."""
        args: CheckArguments = {}
        for kind in _registered_types():
            plugin = cast(type[Rules], cls.lookup(kind))
            args.update(plugin.get_plugin_check_arguments(rules))
        return args

    @classmethod
    def check_feasibility(cls, rules: RulesConfig, nodes: list[str]) -> RuleErrors:
        """Run every check (plugin types in registration order, then global) on ``rules``."""
        errors: RuleErrors = {}
        args = cls.get_check_arguments(rules)
        args["nodes"] = nodes
        for kind in [*_registered_types(), "global"]:
            for check, collect_errors in _checkdef.get(kind, []):
                collect_errors(check(args), errors)
        return errors

    @classmethod
    def transform(cls, rules: RulesConfig, nodes: list[str]) -> list[str]:
        """Drop the infeasible rules, then run the transforms; returns the drop messages."""
        errors = cls.check_feasibility(rules, nodes)
        for ruleid in errors:
            rules["ids"].pop(ruleid, None)
            rules["order"].pop(ruleid, None)
        messages = [
            f"Drop rule '{ruleid}', because {message}.\n"
            for ruleid in sorted(errors)
            for opt in sorted(errors[ruleid])
            for message in errors[ruleid][opt]
        ]
        for kind in [*_registered_types(), "global"]:
            for transform in _transformdef.get(kind, []):
                transform(rules, cls.get_check_arguments(rules))
        return messages

    @classmethod
    def plugin_compile(cls, rules: RulesConfig, nodes: list[str]) -> Mapping[str, Any]:
        raise NotImplementedError("implement in subclass")

    @classmethod
    def compile(cls, rules: RulesConfig, nodes: list[str]) -> CompiledRules:
        """Each plugin's compact representation of its enabled rules, by plugin type."""
        compiled: dict[str, Any] = {}
        for kind in _registered_types():
            plugin = cast(type[Rules], cls.lookup(kind))
            compiled[kind] = plugin.plugin_compile(rules, nodes)
        return cast(CompiledRules, compiled)


def _registered_types() -> list[str]:
    return _types


def foreach_rule(
    rules: RulesConfig,
    func: Callable[[Rule, str], None],
    sid: str | None = None,
    type: str | None = None,
    exclude_disabled_rules: bool = False,
    sorted: bool | None = None,
) -> None:
    """Call ``func(rule, ruleid)`` for the rules matching the options.

    ``sid``: rules with this resource; ``type``: rules of this type; ``exclude_disabled_rules``:
    skip rules with a ``disable`` property (whatever its value); ``sorted`` (upstream tests
    ``defined``, so even ``False`` sorts): by ``order``. Rules that failed to parse are skipped.
    """
    ruleids = list(rules["ids"])
    if sorted is not None:
        order = rules["order"]
        ruleids.sort(key=lambda r: order.get(r) or 0)
    for ruleid in ruleids:
        rule = rules["ids"].get(ruleid)
        if not rule:
            continue
        if sid is not None and rule["resources"].get(sid) is None:
            continue
        if type is not None and rule["type"] != type:
            continue
        if exclude_disabled_rules and "disable" in rule:
            continue
        func(rule, ruleid)


def get_next_ordinal(rules: RulesConfig) -> int:
    """Upstream's ordinal for a new rule: the lowest ``order`` in use + 1 (1 if none)."""
    values = [v for v in rules["order"].values()]
    current = min(values) if values else 0
    return int(current or 0) + 1


def collect_rules(message: str) -> CollectFunc:
    """A ``collect_errors`` for checks returning rule ids: each rule gets ``message``."""

    def collect(ruleids: list[str], errors: RuleErrors) -> None:
        for ruleid in ruleids:
            errors.setdefault(ruleid, {}).setdefault("resources", []).append(message)

    return collect


def collect_conflicts(messages: Mapping[str, str]) -> CollectFunc:
    """A ``collect_errors`` for checks returning ``(kind, ruleid)``: the rule gets
    ``messages[kind]`` (upstream files every rule check's message under ``resources``)."""

    def collect(conflicts: list[tuple[str, str]], errors: RuleErrors) -> None:
        for kind, ruleid in conflicts:
            if kind in messages:
                errors.setdefault(ruleid, {}).setdefault("resources", []).append(messages[kind])

    return collect


# --- inter-plugin rule checks --------------------------------------------------------------------


def _has_multiple_priorities(node_affinity_rule: Rule) -> bool:
    priorities = {node["priority"] for node in node_affinity_rule["nodes"].values()}
    return len(priorities) > 1


def _sorted_conflicts(conflicts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(conflicts)


def check_single_priority_node_affinity_in_resource_affinity_rules(
    resource_affinity_rules: Mapping[str, Rule], node_affinity_rules: Mapping[str, Rule]
) -> list[tuple[str, str]]:
    """(type, ruleid) of every resource-affinity rule with a resource in a node-affinity rule of
    several priorities, and of all node-affinity rules sharing a resource with it."""
    conflicts: list[tuple[str, str]] = []
    for resource_affinity_id, resource_affinity_rule in resource_affinity_rules.items():
        has_conflicts = False
        resources = resource_affinity_rule["resources"]
        paired: list[str] = []
        for node_affinity_id, node_affinity_rule in node_affinity_rules.items():
            if sets_are_disjoint(resources, node_affinity_rule["resources"]):
                continue
            if not has_conflicts:
                has_conflicts = _has_multiple_priorities(node_affinity_rule)
            paired.append(node_affinity_id)
        if has_conflicts:
            conflicts.append(("resource-affinity", resource_affinity_id))
            conflicts.extend(("node-affinity", r) for r in paired)
    return _sorted_conflicts(conflicts)


def check_single_node_affinity_per_positive_resource_affinity_rule(
    positive_rules: Mapping[str, Rule], node_affinity_rules: Mapping[str, Rule]
) -> list[tuple[str, str]]:
    """(type, ruleid) of the positive rules (per connected set) whose resources are in more than
    one node-affinity rule, and of those node-affinity rules."""
    conflicts: list[tuple[str, str]] = []
    for entry in find_disjoint_rules_resource_sets(positive_rules):
        positive_resources = entry["resources"]
        paired = [
            node_affinity_id
            for node_affinity_id, node_affinity_rule in node_affinity_rules.items()
            if not sets_are_disjoint(positive_resources, node_affinity_rule["resources"])
        ]
        if len(paired) > 1:
            conflicts.extend(("positive", r) for r in entry["ruleids"])
            conflicts.extend(("node-affinity", r) for r in paired)
    return _sorted_conflicts(conflicts)


def check_negative_resource_affinity_node_affinity_consistency(
    negative_rules: Mapping[str, Rule], node_affinity_rules: Mapping[str, Rule]
) -> list[tuple[str, str]]:
    """(type, ruleid) of the negative rules whose node-affinity-bound resources have fewer nodes
    (the union of those rules' nodes, strict or not) than resources, and of those rules."""
    conflicts: list[tuple[str, str]] = []
    for negativeid, negative_rule in negative_rules.items():
        allowed_nodes: HashSet = {}
        located_resources: HashSet | None = None
        resources = negative_rule["resources"]
        paired: list[str] = []
        for node_affinity_id, node_affinity_rule in node_affinity_rules.items():
            common = set_intersect(resources, node_affinity_rule["resources"])
            if len(common) < 1:
                continue
            located_resources = set_union(located_resources, common)
            allowed_nodes = set_union(allowed_nodes, node_affinity_rule["nodes"])
            paired.append(node_affinity_id)
        if len(allowed_nodes) < len(located_resources or {}):
            conflicts.append(("negative", negativeid))
            conflicts.extend(("node-affinity", r) for r in paired)
    return _sorted_conflicts(conflicts)


Rules.register_check(
    lambda args: check_single_priority_node_affinity_in_resource_affinity_rules(
        args["resource_affinity_rules"], args["node_affinity_rules"]
    ),
    collect_conflicts(
        {
            "node-affinity": "resources are in a resource affinity rule and cannot be in"
            " a node affinity rule with multiple priorities",
            "resource-affinity": "resources are in node affinity rules with multiple priorities",
        }
    ),
)
Rules.register_check(
    lambda args: check_single_node_affinity_per_positive_resource_affinity_rule(
        args["positive_rules"], args["node_affinity_rules"]
    ),
    collect_conflicts(
        {
            "positive": "resources are in multiple node affinity rules",
            "node-affinity": "at least one resource is in a positive resource affinity"
            " rule and there are other resources in at least one"
            " other node affinity rule already",
        }
    ),
)
Rules.register_check(
    lambda args: check_negative_resource_affinity_node_affinity_consistency(
        args["negative_rules"], args["node_affinity_rules"]
    ),
    collect_conflicts(
        {
            "negative": "two or more resources are restricted to less nodes than"
            " available to the resources",
            "node-affinity": "at least one resource is in a negative resource affinity"
            " rule and this rule would restrict these to less nodes"
            " than available to the resources",
        }
    ),
)


# --- inter-plugin rule transforms ----------------------------------------------------------------


def create_implicit_positive_resource_affinity_node_affinity_rules(
    rules: RulesConfig, positive_rules: Mapping[str, Rule], node_affinity_rules: Mapping[str, Rule]
) -> None:
    """Put every resource of a positive rule into the node-affinity rule one of them is in."""
    for positive_rule in positive_rules.values():
        positive_resources = positive_rule["resources"]
        for node_affinity_id in node_affinity_rules:
            node_affinity_rule = rules["ids"][node_affinity_id]
            assert node_affinity_rule is not None
            if sets_are_disjoint(positive_resources, node_affinity_rule["resources"]):
                continue
            # at most one node-affinity rule per positive rule (checked): take the first found
            for sid in positive_resources:
                node_affinity_rule["resources"][sid] = 1
            break


Rules.register_transform(
    lambda rules, args: create_implicit_positive_resource_affinity_node_affinity_rules(
        rules, args["positive_rules"], args["node_affinity_rules"]
    )
)
