"""The scenario catalog: one lookup for named scenarios, families and files, with overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvegym.errors import ConfigError
from pvegym.sim import catalog, families, scenarios
from pvegym.sim.scenario import scenario_from_dict


def test_names_are_named_scenarios_then_families() -> None:
    assert catalog.names() == [*scenarios.names(), *families.names()]
    kinds = {e.name: e.kind for e in catalog.entries()}
    assert kinds["failure-loop"] == "scenario" and kinds["small"] == "family"
    for e in catalog.entries():
        if e.kind == "family":
            assert e.train_seeds is not None and e.test_seeds is not None
            assert not set(e.train_seeds) & set(e.test_seeds)  # disjoint
            assert catalog.seeds(e.name, "test") == e.test_seeds


def test_a_family_seed_is_the_instance() -> None:
    a, b = catalog.resolve("small", 3), catalog.resolve("small", 4)
    assert a.scenario == families.family_scenario("small", 3)
    assert a.scenario.name == "small#3" and a.scenario != b.scenario
    # the fast path (no overrides) equals the generic loader
    assert a.scenario == scenario_from_dict(a.data)


def test_a_named_scenario_ignores_the_seed() -> None:
    assert catalog.scenario("idle-night", 0) == catalog.scenario("idle-night", 7)
    assert catalog.scenario("idle-night").name == "idle-night"


def test_overrides_apply_to_every_kind(tmp_path: Path) -> None:
    sets = {"migration.bandwidth": "1GiB/s", "nodes[0].maxcpu": 12}
    f = tmp_path / "mini.toml"
    f.write_text(
        'duration = "5m"\n[[nodes]]\nname = "n1"\nmaxcpu = 4\nmaxmem = "8GiB"\n'
        '[[nodes]]\nname = "n2"\nmaxcpu = 4\nmaxmem = "8GiB"\n'
    )
    for name, seed in (("failure-loop", 0), ("small", 1_000_002), (str(f), 0)):
        r = catalog.resolve(name, seed, sets)
        assert r.scenario.migration.bandwidth == 2**30
        nodes = sorted(r.scenario.nodes, key=lambda n: n.name)
        assert r.data["nodes"][0]["maxcpu"] == 12 and nodes[0].maxcpu == 12
    assert catalog.scenario(str(f)).name == "mini"  # a file's default name is its stem


def test_parse_overrides_reads_toml_values() -> None:
    assert catalog.parse_overrides(["a.b=8", "c=1GiB/s", 'd=["x", "y"]', "e = true"]) == {
        "a.b": 8,
        "c": "1GiB/s",
        "d": ["x", "y"],
        "e": True,
    }
    with pytest.raises(ConfigError, match="--set: 'nokey' is not KEY=VALUE"):
        catalog.parse_overrides(["nokey"])


@pytest.mark.parametrize(
    ("name", "sets", "path", "fragment"),
    [
        (
            "no-such",
            {},
            "--scenario",
            "unknown scenario 'no-such' (allowed: one of the",
        ),
        ("missing.toml", {}, "--scenario", "no such scenario file"),
        (
            "idle-night",
            {"nodes[5].maxcpu": 1},
            "--set nodes[5].maxcpu",
            "index 5 out of range: nodes has 2 (allowed: 0..1)",
        ),
        ("idle-night", {"nodez": 1}, "--set", "idle-night: nodez: unknown key"),
        ("small", {"nodes[0].maxcpu": 0}, "--set", "small (seed 3): nodes[0].maxcpu: must be ≥ 1"),
    ],
)
def test_errors_name_the_callers_key(
    name: str, sets: dict[str, int], path: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        catalog.resolve(name, 3, sets, name_key="--scenario", set_key="--set")
    assert info.value.path == path and fragment in info.value.message


def test_sizes_and_durations() -> None:
    assert catalog.max_sizes("small") == (4, 40)
    assert catalog.max_sizes("contended-3node") == (3, 10)
    assert catalog.duration("trace") == 7200.0
    assert catalog.duration("idle-night") == 8 * 3600.0
    with pytest.raises(ConfigError, match="not a family"):
        catalog.seeds("idle-night", "train")
