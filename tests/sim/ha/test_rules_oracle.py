"""The port against upstream's own Perl code, on cases beyond upstream's tests.

``tests/sim/ha/data/`` holds cases written for pvegym — malformed rule files, group migration,
the placement accessors — and, next to each, what pve-ha-manager 5.2.0's Perl code computes for
it (``oracle/generate.sh`` runs upstream's ``PVE::HA::Rules``, ``::Groups`` and pve-common's
``SectionConfig`` on them). So the expectations are upstream's, never this port's own output.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pvegym.sim.ha.groups import Groups, migrate_groups_to_resources, migrate_groups_to_rules
from pvegym.sim.ha.perl import PerlDie, to_json
from pvegym.sim.ha.rules import Rules
from pvegym.sim.ha.rules_check import check_cfg
from pvegym.sim.ha.rules_node_affinity import get_node_affinity
from pvegym.sim.ha.rules_resource_affinity import (
    apply_negative_resource_affinity,
    apply_positive_resource_affinity,
    get_affinitive_resources,
    get_resource_affinity,
    is_allowed_on_node,
)

DATA = Path(__file__).resolve().parent / "data"
RULE_CASES = sorted((DATA / "rules").glob("*.cfg"))
GROUP_CASES = sorted(p for p in (DATA / "groups").iterdir() if p.is_dir())
ACCESSOR_CASES = sorted(p for p in (DATA / "accessors").glob("*.json") if ".expect" not in p.name)
NODES = ["node1", "node2", "node3"]


def test_cases_are_present() -> None:
    assert len(RULE_CASES) >= 3 and len(GROUP_CASES) >= 2 and len(ACCESSOR_CASES) >= 3


def _as_json(value: object) -> Any:
    """Through Perl's JSON text and back: keeps 1 and "1" apart, as upstream's output does."""
    return json.loads(to_json(value))


@pytest.mark.parametrize("case", RULE_CASES, ids=[c.stem for c in RULE_CASES])
def test_rule_file_as_upstream_parses_checks_and_warns(case: Path) -> None:
    warnings: list[str] = []
    out = check_cfg(case.name, case.read_bytes(), warn=warnings.append)
    out += b"--- Warnings ---\n" + "".join(warnings).encode("latin-1")
    assert out.decode("latin-1") == case.with_name(case.name + ".expect").read_bytes().decode(
        "latin-1"
    )


def _sections(text: str) -> list[str]:
    # sections of equal order come out in Perl's hash order upstream, sorted by id here
    return sorted(s for s in text.split("\n\n") if s)


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c.name for c in GROUP_CASES])
def test_group_migration_as_the_manager_does_it(case: Path) -> None:
    warnings: list[str] = []
    groups = Groups.parse_config("groups", (case / "groups").read_bytes(), warnings.append)
    resources = json.loads((case / "service_config").read_text())
    rules_file = case / "rules_config"
    raw = rules_file.read_bytes() if rules_file.exists() else b""
    rules = Rules.parse_config("rules_config", raw, warnings.append)
    for rule in rules["ids"].values():
        Rules.set_rule_defaults(rule)
    result: dict[str, Any] = {"parsed_groups": copy.deepcopy(groups)}
    migrate_groups_to_resources(groups, resources)
    migrate_groups_to_rules(rules, groups, resources)
    result.update(groups=groups, resources=resources, rules=copy.deepcopy(rules))
    try:
        result["written"] = Rules.write_config("rules_config", copy.deepcopy(rules))
    except PerlDie as err:
        result["write_error"] = err.message
    result["messages"] = Rules.transform(rules, NODES)
    result["compiled"] = Rules.compile(rules, NODES)
    result["warnings"] = warnings

    mine = _as_json(result)
    expected = json.loads((case / "expect.json").read_text())
    assert _sections(mine.pop("written")) == _sections(expected.pop("written"))
    assert mine == expected


@pytest.mark.parametrize("case", ACCESSOR_CASES, ids=[c.stem for c in ACCESSOR_CASES])
def test_placement_accessors_as_upstream(case: Path) -> None:
    spec = json.loads(case.read_text())
    warnings: list[str] = []
    rules = Rules.parse_config("rules_config", spec["rules"], warnings.append)
    for rule in rules["ids"].values():
        Rules.set_rule_defaults(rule)
    messages = Rules.transform(rules, spec["nodes"])
    compiled = Rules.compile(rules, spec["nodes"])
    node_affinity, resource_affinity = compiled["node-affinity"], compiled["resource-affinity"]
    result: dict[str, Any] = {"messages": messages, "sids": {}, "warnings": warnings}
    for sid in spec["sids"]:
        online = {node: 1 for node in spec["online"]}
        allowed, preferred = get_node_affinity(node_affinity, sid, online)
        r: dict[str, Any] = {
            "allowed_nodes": copy.deepcopy(allowed),
            "preferred_nodes": copy.deepcopy(preferred),
        }
        positive, negative = get_affinitive_resources(resource_affinity, sid)
        r["affinitive"] = {"together": dict(positive), "separate": dict(negative)}
        together, separate = get_resource_affinity(resource_affinity, sid, spec["ss"], online)
        r["resource_affinity"] = {"together": dict(together), "separate": dict(separate)}
        r["is_allowed_on_node"] = {
            node: int(is_allowed_on_node(together, separate, node)) for node in spec["online"]
        }
        pri_nodes = copy.deepcopy(preferred)
        apply_negative_resource_affinity(separate, pri_nodes)
        r["after_negative"] = dict(pri_nodes)
        apply_positive_resource_affinity(together, pri_nodes)
        r["after_positive"] = pri_nodes
        r["together_after_positive"] = together
        result["sids"][sid] = r
    expected = json.loads(case.with_name(case.stem + ".expect.json").read_text())
    assert _as_json(result) == expected
