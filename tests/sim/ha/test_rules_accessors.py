"""The rules API the Manager calls, case by case, with expectations read off the Perl.

Each test cites the upstream lines it follows (pve-ha-manager 5.2.0); ``test_rules_oracle.py``
runs the same functions against upstream's code on larger cases.
"""

from __future__ import annotations

from typing import Any

import pytest

from pvegym.sim.ha.perl import PerlDie
from pvegym.sim.ha.rules import (
    CompiledRules,
    Rule,
    Rules,
    RulesConfig,
    foreach_rule,
    get_next_ordinal,
)
from pvegym.sim.ha.rules_helpers import find_disjoint_rules_resource_sets
from pvegym.sim.ha.rules_node_affinity import get_node_affinity
from pvegym.sim.ha.rules_resource_affinity import (
    apply_negative_resource_affinity,
    apply_positive_resource_affinity,
    get_affinitive_resources,
    get_resource_affinity,
    get_used_service_nodes,
    is_allowed_on_node,
)
from pvegym.sim.ha.section_config import decode_text, encode_text, split_list

NODES = ["node1", "node2", "node3"]


def _compile(text: str, nodes: list[str] = NODES) -> tuple[RulesConfig, CompiledRules, list[str]]:
    rules = Rules.parse_config("rules.cfg", text)
    messages = Rules.transform(rules, nodes)
    return rules, Rules.compile(rules, nodes), messages


# --- NodeAffinity.pm get_node_affinity (L268-290) and plugin_compile (L163-186) ------------------


def test_a_resource_without_rule_may_use_every_online_node_and_gets_the_same_hash_twice() -> None:
    online = {"node1": 1, "node3": 1}
    allowed, preferred = get_node_affinity({}, "vm:100", online)
    # `return ($online_nodes, $online_nodes)`: one hash, so pruning one prunes both
    assert allowed is online and preferred is online


def test_preferred_nodes_are_the_online_rule_nodes_of_the_highest_priority() -> None:
    _, compiled, _ = _compile(
        "node-affinity: prio\n\tresources vm:100\n\tnodes node1:2,node2:1,node3:1\n\tstrict 1\n"
    )
    na = compiled["node-affinity"]
    assert get_node_affinity(na, "vm:100", {"node1": 1, "node2": 1, "node3": 1}) == (
        {"node1": 1, "node2": 1, "node3": 1},
        {"node1": 1},
    )
    # node1 offline: the next priority class (two nodes) is preferred
    assert get_node_affinity(na, "vm:100", {"node2": 1, "node3": 1}) == (
        {"node2": 1, "node3": 1},
        {"node2": 1, "node3": 1},
    )
    # no rule node online: nothing (Manager::select_service_node then returns undef)
    assert get_node_affinity(na, "vm:100", {"node4": 1}) == ({}, {})


def test_a_non_strict_rule_falls_back_to_the_other_cluster_nodes_at_priority_minus_one() -> None:
    _, compiled, _ = _compile("node-affinity: loose\n\tresources vm:100,vm:101\n\tnodes node2\n")
    entry = compiled["node-affinity"]["vm:100"]
    assert entry["nodes"] == {
        "node2": {"priority": 0},
        "node1": {"priority": -1},
        "node3": {"priority": -1},
    }
    # all resources of a rule share one compiled node hash ($effective_nodes)
    assert compiled["node-affinity"]["vm:101"]["nodes"] is entry["nodes"]
    na = compiled["node-affinity"]
    assert get_node_affinity(na, "vm:100", {"node1": 1, "node3": 1})[1] == {"node1": 1, "node3": 1}


def test_disabled_rules_are_not_compiled_whatever_the_value_of_disable() -> None:
    # foreach_rule: `exists($rule->{disable})`, so `disable 0` disables too
    _, compiled, _ = _compile(
        "node-affinity: off\n\tresources vm:100\n\tnodes node1\n\tstrict 1\n\tdisable 0\n"
    )
    assert compiled["node-affinity"] == {}


# --- ResourceAffinity.pm (L402-566) and Usage.pm get_used_service_nodes (L106-133) ------------


@pytest.mark.parametrize(
    ("sd", "online", "expected"),
    [
        ({"state": "stopped", "node": "node1"}, {"node1": 1}, (None, None)),
        ({"state": "request_start", "node": "node1"}, {"node1": 1}, (None, None)),
        ({"state": "started", "node": "node1"}, {"node1": 1}, ("node1", None)),
        ({"state": "started", "node": "node1"}, {"node2": 1}, (None, None)),
        ({"state": "freeze", "node": "node1"}, {"node1": 1}, ("node1", None)),
        ({"state": "fence", "node": "node1"}, {"node1": 1}, ("node1", None)),
        ({"state": "migrate", "node": "n1", "target": "n2"}, {"n1": 1, "n2": 1}, ("n1", "n2")),
        ({"state": "relocate", "node": "n1", "target": "n2"}, {"n1": 1}, ("n1", None)),
        (
            {"state": "request_start_balance", "node": "n1", "target": "n2"},
            {"n1": 1, "n2": 1},
            (None, "n2"),
        ),
        ({"state": "ignored", "node": "node1"}, {"node1": 1}, (None, None)),
    ],
)
def test_used_service_nodes(
    sd: dict[str, str], online: dict[str, int], expected: tuple[str | None, str | None]
) -> None:
    assert get_used_service_nodes(online, sd) == expected


POSITIVE_AND_NEGATIVE = (
    "resource-affinity: together\n\tresources vm:1,vm:2,vm:3\n\taffinity positive\n\n"
    "resource-affinity: apart\n\tresources vm:1,vm:9\n\taffinity negative\n"
)


def test_affinitive_resources_include_the_inferred_negative_ones() -> None:
    _, compiled, _ = _compile(POSITIVE_AND_NEGATIVE)
    ra = compiled["resource-affinity"]
    assert get_affinitive_resources(ra, "vm:2") == ({"vm:1": 1, "vm:3": 1}, {"vm:9": 1})
    assert get_affinitive_resources(ra, "vm:9") == ({}, {"vm:1": 1, "vm:2": 1, "vm:3": 1})
    # the compiled hashes themselves, not copies
    assert get_affinitive_resources(ra, "vm:2")[0] is ra["positive"]["vm:2"]
    assert get_affinitive_resources(ra, "vm:404") == ({}, {})


def test_resource_affinity_counts_a_moving_positive_partner_on_its_target_only() -> None:
    _, compiled, _ = _compile(POSITIVE_AND_NEGATIVE)
    ss: dict[str, dict[str, Any]] = {
        "vm:2": {"state": "migrate", "node": "node1", "target": "node2"},
        "vm:3": {"state": "started", "node": "node2"},
        "vm:9": {"state": "relocate", "node": "node3", "target": "node1"},
    }
    online = {"node1": 1, "node2": 1, "node3": 1}
    together, separate = get_resource_affinity(compiled["resource-affinity"], "vm:1", ss, online)
    assert together == {"node2": 2}  # see #6801: the source of vm:2 does not count
    assert separate == {"node3": 1, "node1": 1}  # a negative partner blocks source and target
    # partners without service status, and offline nodes, do not count
    together, separate = get_resource_affinity(
        compiled["resource-affinity"], "vm:1", {"vm:3": {"state": "started", "node": "node2"}}, {}
    )
    assert (together, separate) == ({}, {})


def test_allowed_on_node_where_partners_are_even_if_a_negative_partner_is_there() -> None:
    assert is_allowed_on_node({"node1": 1}, {"node1": 1}, "node1")
    assert not is_allowed_on_node({}, {"node1": 1}, "node1")
    assert is_allowed_on_node({}, {"node1": 1}, "node2")


def test_positive_affinity_keeps_the_allowed_node_with_most_partners_ties_alphabetically() -> None:
    allowed = {"node1": 1, "node2": 1, "node3": 1}
    together = {"node3": 2, "node2": 1, "node4": 5}
    apply_positive_resource_affinity(together, allowed)
    assert allowed == {"node3": 1}
    assert together == {"node3": 2, "node2": 1}  # node4 is not allowed: dropped from together
    allowed = {"node1": 1, "node2": 1, "node3": 1}
    apply_positive_resource_affinity({"node3": 1, "node2": 1}, allowed)
    assert allowed == {"node2": 1}
    allowed = {"node1": 1, "node2": 1}
    apply_positive_resource_affinity({"node3": 4}, allowed)  # no partner on an allowed node
    assert allowed == {"node1": 1, "node2": 1}


def test_negative_affinity_removes_the_partners_nodes() -> None:
    allowed = {"node1": 1, "node2": 1}
    apply_negative_resource_affinity({"node2": 1, "node3": 1}, allowed)
    assert allowed == {"node1": 1}


# --- Rules.pm: foreach_rule (L438-456), get_next_ordinal (L466-472), transform (L381-409) --------


def test_foreach_rule_filters_and_sorts_by_order() -> None:
    rules: RulesConfig = {
        "ids": {
            "b": {"type": "node-affinity", "resources": {"vm:1": 1}, "disable": 0},
            "a": {"type": "resource-affinity", "resources": {"vm:1": 1, "vm:2": 1}},
            "broken": None,
            "c": {"type": "node-affinity", "resources": {"vm:2": 1}},
        },
        "order": {"b": 1, "a": 3, "broken": 2, "c": 2},
    }
    seen: list[str] = []

    def visit(_rule: Rule, ruleid: str) -> None:
        seen.append(ruleid)

    foreach_rule(rules, visit, sorted=True)
    assert seen == ["b", "c", "a"]
    seen.clear()
    foreach_rule(rules, visit, sid="vm:1", exclude_disabled_rules=True)
    assert seen == ["a"]
    seen.clear()
    foreach_rule(rules, visit, type="node-affinity", sorted=True)
    assert seen == ["b", "c"]


def test_next_ordinal_is_the_lowest_order_plus_one() -> None:
    assert get_next_ordinal({"ids": {}, "order": {"a": 3, "b": 5}}) == 4
    assert get_next_ordinal({"ids": {}, "order": {}}) == 1


def test_connected_sets_are_found_in_one_pass_not_transitively() -> None:
    rules: dict[str, Rule] = {
        "a": {"resources": {"vm:1": 1, "vm:5": 1}},
        "b": {"resources": {"vm:2": 1, "vm:6": 1}},
        "c": {"resources": {"vm:5": 1, "vm:6": 1}},
    }
    sets = find_disjoint_rules_resource_sets(rules)
    # sorted by lowest resource: a (vm:1), b (vm:2), c (vm:5); c joins a's set, b stays apart
    assert sets == [
        {"ruleids": ["a", "c"], "resources": {"vm:1": 1, "vm:5": 1, "vm:6": 1}},
        {"ruleids": ["b"], "resources": {"vm:2": 1, "vm:6": 1}},
    ]


def test_check_feasibility_reports_without_changing_transform_drops() -> None:
    text = "resource-affinity: lonely\n\tresources vm:1\n\taffinity negative\n"
    rules = Rules.parse_config("rules.cfg", text)
    assert Rules.check_feasibility(rules, NODES) == {
        "lonely": {"resources": ["rule is ineffective as there are less than two resources"]}
    }
    assert "lonely" in rules["ids"]
    assert Rules.transform(rules, NODES) == [
        "Drop rule 'lonely', because rule is ineffective as there are less than two resources.\n"
    ]
    assert rules["ids"] == {} and rules["order"] == {}


def test_negative_rule_limited_by_the_cluster_size() -> None:
    text = "resource-affinity: spread\n\tresources vm:1,vm:2,vm:3\n\taffinity negative\n"
    assert _compile(text, ["node1", "node2"])[2] == [
        "Drop rule 'spread', because rule defines more resources than available nodes.\n"
    ]
    assert _compile(text, NODES)[2] == []


def test_set_rule_defaults_sets_nothing_in_5_2_0() -> None:
    # strict's default is 0 and set_rule_defaults skips falsy defaults (Rules.pm L246)
    rules = Rules.parse_config("rules.cfg", "node-affinity: na\n\tresources vm:1\n\tnodes node1\n")
    rule = rules["ids"]["na"]
    assert rule is not None
    Rules.set_rule_defaults(rule)
    assert "strict" not in rule


# --- SectionConfig write_config and the value codings -------------------------------------------


def test_written_rules_parse_back_to_the_same_rules() -> None:
    text = (
        "node-affinity: na\n\tresources vm:2,vm:1\n\tnodes node2:3,node1\n\tstrict 0\n"
        "\tcomment web: 100% \xc3\xa9t\xc3\xa9\n\n"
        "resource-affinity: ra\n\tresources vm:3,vm:4\n\taffinity negative\n\tdisable\n"
    )
    rules = Rules.parse_config("rules.cfg", text.encode("latin-1"))
    written = Rules.write_config("rules.cfg", rules)
    assert written == (
        "node-affinity: na\n\tcomment web%3A 100%25 %C3%A9t%C3%A9\n\tnodes node1,node2:3\n"
        "\tresources vm:1,vm:2\n\tstrict 0\n\n"
        "resource-affinity: ra\n\tdisable\n\taffinity negative\n\tresources vm:3,vm:4\n\n"
    )
    again = Rules.parse_config("rules.cfg", written)
    assert again["ids"] == rules["ids"] and again["order"] == rules["order"]


def test_writing_drops_a_disable_0_which_enables_the_rule_again() -> None:
    rules = Rules.parse_config(
        "rules.cfg", "node-affinity: na\n\tresources vm:1\n\tnodes node1\n\tdisable 0\n"
    )
    written = Rules.write_config("rules.cfg", rules)
    assert "disable" not in written


def test_writing_a_section_that_failed_to_parse_dies() -> None:
    rules = Rules.parse_config("rules.cfg", "node-affinity: na\n\tresources vm:1\n")
    assert rules["ids"] == {"na": None}
    with pytest.raises(PerlDie, match="unknown section type ''"):
        Rules.write_config("rules.cfg", rules)


def test_split_list_and_text_coding() -> None:
    assert split_list("vm:1, vm:2;vm:3  vm:4 ") == ["vm:1", "vm:2", "vm:3", "vm:4"]
    assert split_list("a b\0c") == ["a b", "c"]
    assert split_list("") == []
    assert encode_text("a:b%c \u00e9") == "a%3Ab%25c %C3%A9"
    assert decode_text("a%3Ab%25c %C3%A9") == "a:b%c \u00e9"
