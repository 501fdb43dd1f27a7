"""``planner``: sees only telemetry (its imports; the same decisions on views that differ only in
what an HA manager cannot see), plans (moves off an overloaded node, never on an idle cluster),
validated constants."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pvegym.errors import ConfigError
from pvegym.policies.planner import PlannerPolicy
from pvegym.policies.registry import make_policy
from pvegym.sim.scenario import Scenario, scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion
from pvegym.units import GiB, MiB

ROOT = Path(__file__).resolve().parents[2]
#: what would rebuild the true instance, and the experiment layer (ARCHITECTURE.md)
FORBIDDEN = (
    "pvegym.sim.catalog",
    "pvegym.sim.families",
    "pvegym.sim.scenarios",
    "pvegym.experiments",
    "pvegym.learning",
    "pvegym.tuning",
    "pvegym.harness",
    "pvegym.commands",
    "pvegym.cli",
    "pvegym.pve_export",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _source(module: str) -> Path | None:
    for p in (
        ROOT / f"{module.replace('.', '/')}.py",
        ROOT / module.replace(".", "/") / "__init__.py",
    ):
        if p.is_file():
            return p
    return None


def test_imports_never_reach_the_true_instance() -> None:
    """Every pvegym module the planner imports, directly or through others (statically), is
    outside the catalog, the family generators, the named scenarios and the experiment layer;
    and it imports nothing dynamically."""
    seen: set[str] = set()
    todo = ["pvegym.policies.planner"]
    while todo:
        module = todo.pop()
        path = _source(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        todo += [m for m in _imports(path) if m.startswith("pvegym")]
    assert "pvegym.sim.simulation" in seen  # the walk follows imports
    bad = sorted(m for m in seen if m.startswith(FORBIDDEN))
    assert not bad, bad
    planner = _imports(ROOT / "pvegym/policies/planner.py")
    assert not planner & {"importlib", "builtins", "pickle"}
    text = (ROOT / "pvegym/policies/planner.py").read_text()
    assert "__import__" not in text and "import_module" not in text


def _scenario(dirty: float, wws: float, late_step: float) -> Scenario:
    """Three nodes, node1 overloaded by constant guests, node3 idle. ``dirty``/``wws`` (what only a
    migration could reveal) and a CPU step at 50 min (the future) are the hidden differences."""
    guests: list[dict[str, Any]] = [
        {"sid": f"vm:{100 + i}", "node": "node1", "maxcpu": 4, "maxmem": 4 * GiB,
         "cpu": [{"type": "constant", "level": 3.0},
                 {"type": "steps", "at": [[3000.0, late_step]]}],
         "memhost": 3 * GiB, "dirty_rate": dirty, "wws": wws}
        for i in range(6)
    ]  # fmt: skip
    guests.append({"sid": "vm:200", "node": "node2", "maxcpu": 2, "maxmem": 2 * GiB,
                   "cpu": 1.0, "memhost": GiB})  # fmt: skip
    nodes = [{"name": f"node{n}", "maxcpu": 8, "maxmem": 64 * GiB} for n in (1, 2, 3)]
    return scenario_from_dict({"name": "t", "nodes": nodes, "guests": guests, "duration": 3600})


def _views(scn: Scenario, rounds: int, plain: bool) -> list[ClusterView]:
    sim = Simulation(scn, 3)
    out = [sim.reset()]
    for _ in range(rounds - 1):
        out.append(sim.step(None))
    if plain:  # the ClusterView's fields only: nothing of the simulation behind it
        out = [
            ClusterView(**{f.name: getattr(v, f.name) for f in dataclasses.fields(ClusterView)})
            for v in out
        ]
    return out


_TELEMETRY = [f.name for f in dataclasses.fields(ClusterView)]


def _same(a: ClusterView, b: ClusterView) -> bool:
    import numpy as np

    for name in _TELEMETRY:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            if not np.array_equal(x, y, equal_nan=True):
                return False
        elif x != y:
            return False
    return True


def _decisions(views: list[ClusterView], seed: int) -> tuple[list[Motion | None], int]:
    pol = PlannerPolicy(PlannerPolicy.Config(futures=2, horizon_s=300.0))
    pol.reset(seed)
    return [pol.decide(v) for v in views], pol.planned


def test_same_decisions_when_only_what_the_ha_manager_cannot_see_differs() -> None:
    a = _views(_scenario(20 * MiB, 0.5 * GiB, 0.0), 40, plain=False)
    b = _views(_scenario(400 * MiB, 3 * GiB, 1.0), 40, plain=True)
    assert all(_same(x, y) for x, y in zip(a, b, strict=True))  # the difference is hidden
    da, planned = _decisions(a, seed=7)
    db, _ = _decisions(b, seed=7)
    assert planned > 0 and any(d is not None for d in da)  # it did plan and move
    assert da == db


def test_moves_off_an_overloaded_node_and_never_on_an_idle_cluster() -> None:
    cfg = {"futures": 2, "horizon_s": 300.0}
    hot = Simulation(_scenario(20 * MiB, 0.5 * GiB, 0.0), 1).run(make_policy("planner", **cfg))
    assert hot["metrics"]["moves"] >= 1
    assert all(m["target"] != "node1" for m in hot["moves"])
    idle = _scenario(20 * MiB, 0.5 * GiB, 0.0)
    idle = scenario_from_dict(
        {
            "name": "idle",
            "nodes": [{"name": f"node{n}", "maxcpu": 8, "maxmem": 64 * GiB} for n in (1, 2)],
            "guests": [
                {
                    "sid": f"vm:{100 + i}",
                    "node": "node1",
                    "maxcpu": 2,
                    "maxmem": 2 * GiB,
                    "cpu": 0.5,
                    "memhost": GiB,
                }
                for i in range(len(idle.guests))
            ],
            "duration": 1800,
        }
    )
    assert Simulation(idle, 1).run(make_policy("planner", **cfg))["metrics"]["moves"] == 0


def test_seed_only_seeds_its_generator() -> None:
    """Its futures depend on the seed through a hash; the same seed, the same decisions."""
    views = _views(_scenario(20 * MiB, 0.5 * GiB, 0.0), 30, plain=True)
    assert _decisions(views, 5) == _decisions(views, 5)


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"futures": 0}, "policy.futures"),
        ({"futures": 2.5}, "policy.futures"),
        ({"candidates": 17}, "policy.candidates"),
        ({"horizon_s": 1.0}, "policy.horizon_s"),
        ({"ema_alpha": 0.0}, "policy.ema_alpha"),
        ({"margin": float("nan")}, "policy.margin"),
        ({"patched": {"threshold": "x"}}, "planner.patched"),
        ({"guest_centric": {"bogus": 1}}, "planner.guest_centric.bogus"),
        ({"bogus": 1}, "policy.bogus"),
    ],
)
def test_constants_are_validated(params: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_policy("planner", **params)
    assert key in str(err.value)
