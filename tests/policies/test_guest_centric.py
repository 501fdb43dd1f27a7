"""``guest-centric``: never a motion that must fail for a local resource, the cheapest adequate
motion over the largest imbalance improvement, no churn, fail-open, learning, config checks."""

from __future__ import annotations

from typing import Any

import pytest

from pvegym.errors import ConfigError
from pvegym.policies.guest_centric import GuestCentricPolicy
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.families import family_scenario
from pvegym.sim.scenario import Scenario
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import MotionResult
from pvegym.units import GiB

LOCAL_FAILURES = {"local resource", "hugepage allocation failed"}


def _run(scn: Scenario, policy: str = "guest-centric", seed: int = 0, **kw: Any) -> dict:
    return Simulation(scn, seed).run(make_policy(policy), **kw)


def test_registered_with_a_validated_config() -> None:
    pol = make_policy("guest-centric", cost_factor=2.0)
    assert isinstance(pol, GuestCentricPolicy) and pol.name == "guest-centric"
    assert pol.config.cost_factor == 2.0
    with pytest.raises(ConfigError, match="cost_factor"):
        GuestCentricPolicy.Config(cost_factor=-1.0)
    with pytest.raises(ConfigError, match="abort_factor"):
        GuestCentricPolicy.Config(abort_factor=1.0)
    with pytest.raises(ConfigError, match="pressure_gate"):
        GuestCentricPolicy.Config(pressure_gate=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_failure_loop_never_tries_the_guest_with_a_local_cdrom(seed: int) -> None:
    result = _run(catalog.scenario("failure-loop"), seed=seed)
    moves = result["moves"]
    assert moves, "the pressure should still be relieved with other guests"
    assert all(m["guest"] != "vm:101" for m in moves)
    assert result["metrics"]["moves_failed"] == 0


@pytest.mark.parametrize(
    ("family", "seed", "duration"),
    [
        ("small", 1_000_001, 3600),
        ("small", 1_000_005, 3600),
        ("medium", 1_000_000, 1800),
        ("trace", 1_000_001, 1800),
        ("trace", 1_000_003, 1800),
    ],
)
def test_no_motion_fails_for_a_local_resource_on_families(
    family: str, seed: int, duration: int
) -> None:
    scn = family_scenario(family, seed)
    # instances where the property can fail: a guest that cannot migrate, and a balancer that moves
    assert any(g.local_resources for g in scn.guests)
    result = _run(scn, seed=seed, duration=duration)
    assert result["moves"]
    reasons = {m["reason"] for m in result["moves"] if m["outcome"] in ("failed", "aborted")}
    assert not reasons & LOCAL_FAILURES


@pytest.mark.parametrize("qemu", ["unpatched", "patched"])
def test_prefers_the_cheaper_adequate_motion(qemu: str) -> None:
    scn = catalog.scenario(
        "nonconverging-with-alternative", overrides={"migration.qemu_server": qemu}
    )
    ours = _run(scn)
    assert [(m["guest"], m["outcome"]) for m in ours["moves"]] == [("vm:121", "succeeded")]
    # the imbalance-driven balancers pick the 24 GiB VM that never converges
    theirs = _run(scn, "patched")
    assert theirs["moves"][0]["guest"] == "vm:120"
    assert ours["metrics"]["migration_bytes"] < 0.1 * theirs["metrics"]["migration_bytes"]
    assert ours["metrics"]["guest_stall_s"] < theirs["metrics"]["guest_stall_s"]


@pytest.mark.parametrize("name", ["idle-night", "dominant-oscillation"])
def test_no_churn_without_pressure(name: str) -> None:
    assert _run(catalog.scenario(name))["metrics"]["moves"] == 0


def test_pressure_evacuation_moves_once_off_the_hot_node() -> None:
    moves = _run(catalog.scenario("pressure-evacuation"))["moves"]
    assert len(moves) == 1 and moves[0]["source"] == "node1"


def test_fails_open_without_psi_telemetry() -> None:
    off = ["node_cpu_some", "node_mem_some", "node_mem_full", "guest_cpu_some", "guest_mem_some"]
    scn = catalog.scenario("failure-loop", overrides={"telemetry.disabled": off})
    result = _run(scn)
    assert result["moves"] and all(m["guest"] != "vm:101" for m in result["moves"])


def test_cost_prediction_and_learning_from_outcomes() -> None:
    pol = GuestCentricPolicy()
    ok = pol.predict("vm:1", 22 * GiB, 24 * GiB)
    assert ok.ok and 40 < ok.duration_s < 120 and ok.bytes >= 22 * GiB
    assert pol.predict("vm:2", 4 * GiB, 6 * GiB).duration_s < ok.duration_s
    # an abort for no convergence: the guest is predicted not to converge from now on
    pol._moved[10.0] = [("vm:1", 22 * GiB, 24 * GiB)]
    view = load_view()
    abort = MotionResult("vm:1", "node1", "node2", False, "no convergence", 10.0, 240.0)
    object.__setattr__(view, "results", (abort,))
    pol._learn(view)
    assert not pol.predict("vm:1", 22 * GiB, 24 * GiB).ok
    # a completed migration that took 120 s fits a dirty rate above the prior
    pol._moved[300.0] = [("vm:3", 8 * GiB, 8 * GiB)]
    done = MotionResult("vm:3", "node1", "node2", True, "", 300.0, 420.0)
    object.__setattr__(view, "results", (done,))
    pol._learn(view)
    assert pol.dirty_estimate["vm:3"][0] > pol.config.dirty_prior_bps
    assert pol.left_until[("vm:3", "node1")] > view.t


def load_view() -> Any:
    sim = Simulation(catalog.scenario("failure-loop"), 0)
    return sim.reset()
