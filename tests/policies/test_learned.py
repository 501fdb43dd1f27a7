"""``learned``: a trained agent as a balancer — never a masked motion, and every metric reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sb3_contrib")

import torch
from stable_baselines3 import PPO

from pvegym.env.cluster_env import ClusterEnv
from pvegym.env.view_encoding import mask_from_view
from pvegym.errors import ConfigError
from pvegym.experiments.record import play
from pvegym.learning.train import train
from pvegym.learning.train_config import parse_train_config
from pvegym.policies.learned import LearnedPolicy, ModelInfo
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("maskable")
    cfg = parse_train_config(
        {
            "name": "t-learned",
            "algo": "MaskablePPO",
            "total_timesteps": 1024,
            "hyperparams": {"n_steps": 256, "batch_size": 64, "n_epochs": 2},
            "eval_seeds": [1_000_000],
            "env": {"scenario": "small", "episode_seconds": "10m", "train_seeds": [0, 1, 2, 3]},
        }
    )
    train(cfg, out, progress=False)
    return out


def _checked_episode(
    policy: LearnedPolicy, scenario: str, seed: int, duration: float
) -> dict[str, Any]:
    scn = catalog.scenario(scenario, seed)
    sim = Simulation(scn, seed)
    issued = 0

    def decide(view: ClusterView) -> Motion | None:
        nonlocal issued
        motion = policy.decide(view)
        if motion is not None:
            issued += 1
            g, n = view.sid_index(motion.sid), view.node_index(motion.target)
            mask = mask_from_view(view, policy.max_nodes, policy.max_guests)
            assert mask[1 + g * policy.max_nodes + n], f"masked motion {motion} at t={view.t}"
            gi = sim.cluster.guest_index[motion.sid]
            assert sim.motion_possible(gi, n), f"impossible motion {motion} at t={view.t}"
        return motion

    policy.reset(seed)
    result, _ = play(sim, decide, duration)
    assert policy.masked_actions == 0
    return {**result["metrics"], "issued": issued}


def test_trained_maskable_agent_never_issues_a_masked_motion(trained: Path) -> None:
    policy = make_policy("learned", model=str(trained))
    assert isinstance(policy, LearnedPolicy) and policy.maskable
    episodes = [_checked_episode(policy, "small", s, 1200.0) for s in (1_000_000, 1_000_001)]
    episodes.append(_checked_episode(policy, "failure-loop", 0, 1200.0))
    for m in episodes:
        assert set(METRIC_KEYS) <= set(m)
        assert isinstance(m["failed_repeats"], int) and m["failed_repeats"] >= 0
    issued = sum(m["issued"] for m in episodes)
    assert issued > 0  # else the mask checks in decide() never ran
    assert issued == sum(m["moves"] for m in episodes)


def test_non_maskable_agent_maps_masked_actions_to_no_motion() -> None:
    """An untrained PPO picks masked actions often; each one becomes no motion and is counted."""
    env = ClusterEnv("small", episode_seconds=600.0)
    model = PPO("MlpPolicy", env, n_steps=64, seed=0, device="cpu")
    info = ModelInfo(Path("unused.zip"), "PPO", env.max_nodes, env.max_guests, 600.0)
    policy = LearnedPolicy.from_model(model, info)
    scn = catalog.scenario("small", 1_000_000)
    sim = Simulation(scn, 1_000_000)
    seen: list[bool] = []

    def decide(view: ClusterView) -> Motion | None:
        motion = policy.decide(view)
        if motion is not None:
            n = view.node_index(motion.target)
            seen.append(sim.motion_possible(sim.cluster.guest_index[motion.sid], n))
        return motion

    policy.reset(0)
    play(sim, decide, 600.0)
    assert seen and all(seen)
    assert policy.masked_actions > 0 and policy.decisions == 60


def test_learned_needs_a_model_and_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        make_policy("learned", "policies[3]")
    assert err.value.path == "params.model"
    with pytest.raises(ConfigError, match="no trained model"):
        make_policy("learned", model=str(tmp_path / "nothing"))


def _pair_scorer_run(tmp_path: Path, flat: bool = False) -> Path:
    """A saved v1 model trained on ``small`` (weights randomized so that it moves), with the
    resolved config ``pvegym train`` writes beside it."""
    import json

    import numpy as np
    from sb3_contrib import MaskablePPO

    from pvegym.env.cluster_env_v1 import ClusterEnvV1
    from pvegym.learning.pair_policy import policy_class

    env = ClusterEnvV1("small", episode_seconds=600.0)
    if flat:
        model = MaskablePPO("MlpPolicy", env, n_steps=64, seed=0, device="cpu")
    else:
        kwargs = {"layout": env.layout.as_dict(), "hidden": 16, "noop_prob": 0.5}
        model = MaskablePPO(
            policy_class("PairScorer", True), env, policy_kwargs=kwargs, n_steps=64, device="cpu"
        )
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in model.policy.parameters():
                p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    model.save(tmp_path / "model.zip")
    config = {
        "algo": "MaskablePPO",
        "policy": "MlpPolicy" if flat else "PairScorer",
        "spaces": {"max_nodes": env.max_nodes, "max_guests": env.max_guests},
        "env": {"scenario": "small", "version": "v1", "episode_seconds": 600.0},
    }
    if not flat:  # the network's size, as `pvegym train` records it: the loader rebuilds from it
        config["hyperparams"] = {"policy_kwargs": {"hidden": 16, "noop_prob": 0.5}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert (env.max_nodes, env.max_guests) == (4, 40)
    assert np.isfinite(env.layout.size)
    return tmp_path


@pytest.mark.parametrize("deterministic", [True, False])
def test_pair_scorer_acts_on_clusters_larger_than_its_padding(
    tmp_path: Path, deterministic: bool
) -> None:
    """A pair scorer trained on ``small`` (4 nodes / 40 guests of padding) runs a ``medium``
    instance (8 / 100): the layout is rebuilt for the view, every motion it issues is allowed, and
    back on ``small`` it uses its training layout again."""
    run = _pair_scorer_run(tmp_path)
    policy = make_policy("learned", model=str(run), deterministic=deterministic)
    assert isinstance(policy, LearnedPolicy)
    big = _checked_episode(policy, "medium", 1_000_000, 900.0)
    assert (policy.max_nodes, policy.max_guests) == catalog.max_sizes("medium") == (8, 100)
    assert big["issued"] > 0 and big["issued"] == big["moves"]
    small = _checked_episode(policy, "small", 1_000_000, 600.0)
    assert (policy.max_nodes, policy.max_guests) == (4, 40)
    assert small["issued"] == small["moves"]


def test_flat_v1_model_refuses_a_larger_cluster(tmp_path: Path) -> None:
    """A flat MLP has one output per padded slot: it cannot act on a larger cluster and says so."""
    policy = make_policy("learned", model=str(_pair_scorer_run(tmp_path, flat=True)))
    with pytest.raises(ValueError, match="more than the encoding's 4 / 40"):
        _checked_episode(policy, "medium", 1_000_000, 60.0)
