"""The rules as the Manager applies them (TEMPORARY stand-in until the rules port lands).

The rules and groups are ported in ``rules*.py``/``groups.py`` (another workstream). Until then this
module gives the Manager the behaviour of an empty rules config and refuses any rule or group, so
no directory with rules can pass by accident.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pvegym.sim.ha.tools import HAError
from pvegym.sim.view import Rules


class RulesConfig:
    """A parsed rules (or groups) file: ``ids`` and the digest of its text."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.ids: dict[str, Any] = {}
        self.digest = hashlib.sha1(raw.encode()).hexdigest()
        if raw.strip():
            raise HAError("rules and groups are not supported yet")


def parse_config(raw: str) -> RulesConfig:
    return RulesConfig(raw)


def parse_groups(raw: str) -> RulesConfig:
    return RulesConfig(raw)


def write_config(rules: Any) -> str:
    return rules.raw


def digest(cfg: Any) -> str | None:
    return None if cfg is None else cfg.digest


def groups_ids(groups: Any) -> dict[str, Any]:
    return groups.ids


def empty_compiled() -> dict[str, Any]:
    return {"node-affinity": {}, "resource-affinity": {"positive": {}, "negative": {}}}


def transform(rules: Any, nodes: list[str]) -> list[str]:
    return []


def compile(rules: Any, nodes: list[str]) -> dict[str, Any]:
    return empty_compiled()


def migrate_groups_to_resources(groups: Any, resources: dict[str, Any]) -> None:
    return None


def migrate_groups_to_rules(rules: Any, groups: Any, resources: dict[str, Any]) -> None:
    return None


def get_node_affinity(
    node_affinity: dict[str, Any], sid: str, online_nodes: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    return online_nodes, online_nodes


def get_affinitive_resources(
    resource_affinity: dict[str, Any], sid: str
) -> tuple[dict[str, int], dict[str, int]]:
    return {}, {}


def get_resource_affinity(
    resource_affinity: dict[str, Any], sid: str, ss: dict[str, Any], online_nodes: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    return {}, {}


def is_allowed_on_node(together: dict[str, int], separate: dict[str, int], node: str) -> bool:
    return bool(together.get(node)) or not separate.get(node)


def apply_positive_resource_affinity(together: dict[str, int], allowed: dict[str, int]) -> None:
    return None


def apply_negative_resource_affinity(separate: dict[str, int], allowed: dict[str, int]) -> None:
    for node in list(separate):
        allowed.pop(node, None)


def view_rules(compiled: dict[str, Any] | None, node_names: tuple[str, ...]) -> Rules:
    return Rules()
