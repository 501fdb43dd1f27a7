"""Randomized scenario families: sizes within bounds, determinism, validity, disjoint seed sets."""

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.sim import families
from pvegym.sim.scenario import scenario_from_dict
from pvegym.sim.simulation import Simulation


@pytest.mark.parametrize(
    ("name", "seeds"),
    [("small", range(40)), ("medium", range(3)), ("bench-small", range(3)), ("bench-large", [0])],
)
def test_sizes_within_family_bounds(name: str, seeds: range) -> None:
    max_nodes, max_guests = families.family_max_sizes(name)
    spec = families.FAMILIES[name]
    for seed in seeds:
        scn = families.family_scenario(name, seed)
        assert spec.nodes[0] <= len(scn.nodes) <= max_nodes
        assert spec.guests[0] <= len(scn.guests) <= max_guests
        assert all(g.ha for g in scn.guests)


def test_max_sizes() -> None:
    assert families.family_max_sizes("small") == (4, 40)
    assert families.family_max_sizes("medium") == (8, 100)
    assert families.family_max_sizes("bench-small") == (8, 64)
    assert families.family_max_sizes("bench-large") == (64, 2000)
    with pytest.raises(ConfigError, match="unknown family"):
        families.family_max_sizes("huge")


def test_same_seed_same_instance_and_seeds_differ() -> None:
    assert families.family_data("small", 5) == families.family_data("small", 5)
    assert families.family_data("small", 5) != families.family_data("small", 6)
    assert families.family_data("medium", 1) == families.family_data("medium", 1)


@pytest.mark.parametrize("name", ["small", "medium", "bench-small"])
def test_fast_build_equals_validated_loader(name: str) -> None:
    for seed in range(4):
        data = families.family_data(name, seed)
        assert families.build_scenario(data) == scenario_from_dict(data)


def test_train_and_test_seeds_are_disjoint() -> None:
    train, test = families.TRAIN_SEEDS, families.TEST_SEEDS
    assert train.stop <= test.start or test.stop <= train.start
    assert families.require_train_seed(train.start) == train.start
    with pytest.raises(ConfigError, match="test"):
        families.require_train_seed(test.start)
    assert families.is_test_seed(test.stop - 1) and not families.is_test_seed(train.stop - 1)


def test_instances_mix_the_features_the_family_promises() -> None:
    kinds = {"ct": 0, "local": 0, "positive": 0, "negative": 0, "pressure": 0, "steps": 0}
    types: set[str] = set()
    for seed in range(60):
        scn = families.family_scenario("small", seed)
        kinds["ct"] += sum(g.sid.startswith("ct:") for g in scn.guests)
        kinds["local"] += sum(g.local_resources for g in scn.guests)
        kinds["pressure"] += sum(e.type == "pressure-onset" for e in scn.events)
        node_of = {g.sid: g.node for g in scn.guests}
        for rule in scn.resource_affinity:
            kinds[rule.affinity] += 1
            nodes = {node_of[s] for s in rule.resources}
            assert len(nodes) == (1 if rule.affinity == "positive" else len(rule.resources))
        for g in scn.guests:
            types.update(c.type for c in g.cpu)
        cores = {n.maxcpu for n in scn.nodes}
        kinds["steps"] += any(c.type == "steps" for g in scn.guests for c in g.cpu)
    assert all(v > 0 for v in kinds.values()), kinds
    assert types == {"constant", "ou", "diurnal", "bursts", "steps"}
    assert len(cores) >= 1


def test_instances_simulate() -> None:
    for name in ("small", "medium"):
        sim = Simulation(families.family_scenario(name, 2), seed=0)
        sim.reset()
        for _ in range(5):
            sim.step(None)
        m = sim.result()["metrics"]
        assert m["sim_seconds"] == 60.0
        assert np.isfinite(m["stall_cpu_s"])


def test_bench_large_builds() -> None:
    scn = families.family_scenario("bench-large", 0)
    assert (len(scn.nodes), len(scn.guests)) == (64, 2000)
