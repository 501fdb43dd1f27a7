"""The ``trace`` family: sizes, determinism, disjoint train/test *trace sets*, validity."""

from __future__ import annotations

import pytest

from pvegym.sim import families
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation


def _sources(data: dict) -> set[str]:
    return {c["source"] for g in data["guests"] for c in g["cpu"] if c["type"] == "trace"}


def test_max_sizes_and_other_families_unchanged() -> None:
    assert families.family_max_sizes("trace") == (8, 96)
    assert families.family_max_sizes("small") == (4, 40)
    assert "trace" in families.names()


def test_trace_sets_are_disjoint_and_non_empty() -> None:
    sets = families.trace_sets()
    assert len(sets["train"]) >= 20 and len(sets["test"]) >= 20
    assert not set(sets["train"]) & set(sets["test"])


@pytest.mark.parametrize("split", ["train", "test"])
def test_instances_draw_only_from_their_split(split: str) -> None:
    seeds = range(0, 6) if split == "train" else range(1_000_000, 1_000_006)
    allowed = set(families.trace_sets()[split])
    for seed in seeds:
        data = families.family_data("trace", seed)
        used = _sources(data)
        assert used and used <= allowed
        spec = families.FAMILIES["trace"]
        assert spec.nodes[0] <= len(data["nodes"]) <= spec.nodes[1]
        assert 1 <= len(data["guests"]) <= spec.guests[1]
        assert split in data["description"]


def test_deterministic_and_equal_to_the_generic_loader() -> None:
    a = families.family_data("trace", 1_000_003)
    assert a == families.family_data("trace", 1_000_003)
    assert a != families.family_data("trace", 1_000_004)
    assert families.build_scenario(a) == scenario_from_dict(a)


def test_packed_to_the_target_utilisation_with_contention() -> None:
    # mean demand over the episode reaches the drawn utilisation unless the 96-guest cap binds;
    # an episode has CPU pressure somewhere (the placement is skewed)
    scn = families.family_scenario("trace", 1_000_001)
    sim = Simulation(scn, 0)
    result = sim.run(lambda view: None, duration=1800)
    assert result["metrics"]["stall_cpu_s"] > 0
    util = sum(sim.cluster.node_cpu) / sum(sim.cluster.node_maxcpu)
    assert 0.3 < util <= 1.0
