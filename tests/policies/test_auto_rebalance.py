"""The HA resource's ``auto-rebalance`` flag: a guest with it off (or in a positive-affinity
group with one) is never a balancer candidate — for every policy, the environments' masks and
the deployed agents' view masks — and a scenario states it (typed, validated)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pvegym.env.cluster_env import ClusterEnv
from pvegym.env.cluster_env_v1 import ClusterEnvV1
from pvegym.env.view_encoding import mask_from_view
from pvegym.errors import ConfigError
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.affinity import rebalance_movable
from pvegym.sim.scenario import Scenario
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ResourceAffinityRule, Rules
from pvegym.testing import check_scenario

POLICIES = ("upstream", "patched", "guest-centric")


def _failure_loop(**sets: Any) -> Scenario:
    return catalog.resolve("failure-loop", 0, sets).scenario


@pytest.mark.parametrize("policy", POLICIES)
def test_flag_off_guest_is_never_moved(policy: str) -> None:
    """Each policy's first choice on failure-loop (vm:101's CD-ROM ejected, so each has a
    successful first move), flagged off: that guest is never moved, the others still are."""
    sets: dict[str, Any] = {"guests[0].local_resources": False}
    scn = _failure_loop(**sets)
    before = Simulation(scn, 0).run(make_policy(policy))["moves"]
    assert before
    first = before[0]["guest"]
    k = [g.sid for g in scn.guests].index(first)
    flagged = _failure_loop(**sets, **{f"guests[{k}].auto_rebalance": False})
    moves = Simulation(flagged, 0).run(make_policy(policy))["moves"]
    assert moves, "the other guests are still candidates"
    assert all(m["guest"] != first for m in moves)


def test_upstream_no_longer_retries_the_cdrom_guest() -> None:
    """The field report's loop: upstream retries vm:101 (local CD-ROM) every ~40 s; with
    ``auto-rebalance`` off on it, never."""
    before = Simulation(_failure_loop(), 0).run(make_policy("upstream"))["moves"]
    assert sum(m["guest"] == "vm:101" for m in before) >= 20
    after = Simulation(_failure_loop(**{"guests[0].auto_rebalance": False}), 0).run(
        make_policy("upstream")
    )["moves"]
    assert all(m["guest"] != "vm:101" for m in after)


def test_flag_absent_changes_nothing() -> None:
    """All flags on, stated: the same episode as with no flag in the scenario."""
    base = Simulation(_failure_loop(), 3).run(make_policy("upstream"))
    on = Simulation(_failure_loop(**{"guests[0].auto_rebalance": True}), 3).run(
        make_policy("upstream")
    )
    assert on == base


def test_scenario_key_is_typed_and_validated() -> None:
    with pytest.raises(ConfigError, match=r"guests\[0\]\.auto_rebalance"):
        _failure_loop(**{"guests[0].auto_rebalance": "no"})
    with pytest.raises(ConfigError, match="needs ha = true"):
        _failure_loop(**{"guests[0].auto_rebalance": False, "guests[0].ha": False})


def test_positive_group_with_one_flag_off_is_pinned_whole() -> None:
    sids = ("vm:101", "vm:102", "vm:103", "vm:104")
    rules = Rules(
        resource_affinity=(
            ResourceAffinityRule("a", ("vm:101", "vm:102"), True),
            ResourceAffinityRule("b", ("vm:102", "vm:103"), True),  # merges with a
            ResourceAffinityRule("c", ("vm:103", "vm:104"), False),  # negative: no bundle
        )
    )
    assert rebalance_movable(rules, sids, None) is None
    flags = np.array([True, True, False, True])
    assert rebalance_movable(rules, sids, flags).tolist() == [False, False, False, True]
    assert flags.tolist() == [True, True, False, True]  # not modified


@pytest.mark.parametrize("env_class", [ClusterEnv, ClusterEnvV1])
def test_environment_masks_the_flagged_guest(env_class: type[ClusterEnv]) -> None:
    scn = _failure_loop(**{"guests[0].auto_rebalance": False})
    env = env_class(scn)
    env.reset(seed=0)
    g = env.view.sids.index("vm:101")
    mn = env.max_nodes
    assert not env.action_masks()[1 + g * mn : 1 + (g + 1) * mn].any()
    other = env.view.sids.index("vm:102")
    assert env.action_masks()[1 + other * mn : 1 + (other + 1) * mn].any()
    # the view's mask (a deployed agent's) agrees with the environment's
    assert np.array_equal(mask_from_view(env.view, mn, env.max_guests), env.action_masks())
    # choosing it anyway is a counted no-op
    target = 1 - int(env.view.guest_node[g])
    _, _, _, _, info = env.step(1 + g * mn + target)
    assert info["invalid_action"] == 1
    assert env.view.guest_state[g] == "started" and int(env.view.guest_node[g]) != target


@pytest.mark.parametrize("env_class", [ClusterEnv, ClusterEnvV1])
def test_conformance_with_a_flagged_guest(env_class: type[ClusterEnv]) -> None:
    """Mask = motion_possible minus what the flag keeps; masked actions are no-ops."""
    check_scenario(_failure_loop(**{"guests[0].auto_rebalance": False}), (0,), 20, env_class)
