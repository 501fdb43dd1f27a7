"""A proposal agent through the safe loader (``learned:PATH``): rebuilt from its config, it decides
on views exactly as it acted in its environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from pvegym.errors import ConfigError
from pvegym.learning.proposal_train import ProposalTrainConfig, make_env
from pvegym.sim.cost import weighted_cost
from pvegym.sim.tasks import TASKS


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ProposalTrainConfig, object]:
    from sb3_contrib import MaskablePPO

    cfg = ProposalTrainConfig(name="t", n_steps=32, batch_size=32, candidates=2)
    env = make_env(cfg)
    model = MaskablePPO(
        "MlpPolicy", env, n_steps=32, batch_size=32, seed=0, device="cpu",
        policy_kwargs={"net_arch": [16]},
    )  # fmt: skip
    model.learn(64)
    out = tmp_path_factory.mktemp("proposal-agent")
    model.save(out / "model.zip")
    resolved = cfg.resolved()
    resolved["hyperparams"]["policy_kwargs"] = {"net_arch": [16]}
    (out / "config.json").write_text(json.dumps(resolved))
    return out, cfg, model


def _env_cost(model: object, cfg: ProposalTrainConfig, seed: int) -> float:
    env = make_env(cfg)
    obs, info = env.reset(seed=seed)
    while True:
        action, _ = model.predict(obs, action_masks=info["action_mask"], deterministic=True)  # type: ignore[attr-defined]
        obs, _, _, done, info = env.step(action)
        if done:
            return weighted_cost(cfg_weights(), info)


def cfg_weights() -> dict[str, float]:
    from pvegym.sim.cost import BALANCER_COST

    return dict(BALANCER_COST)


def test_loader_round_trip_decides_as_in_the_environment(saved: tuple) -> None:
    """``learned:PATH`` rebuilds the proposer and the network from config.json; the benchmark's
    balancer episode then costs exactly what the model's own episode in ProposalEnv cost."""
    from pvegym.experiments.benchmark import parse_spec
    from pvegym.experiments.benchmark_episodes import balancer_episode

    out, cfg, model = saved
    spec = parse_spec(f"learned:{out}")
    for seed in (9000, 9003):
        res = balancer_episode(TASKS["small"], seed, spec.make())
        assert res.cost == _env_cost(model, cfg, seed)


def test_loader_refuses_a_bad_proposer_config(saved: tuple, tmp_path: Path) -> None:
    from pvegym.policies.registry import make_policy

    out, _, _ = saved
    (tmp_path / "model.zip").write_bytes((out / "model.zip").read_bytes())
    doc = json.loads((out / "config.json").read_text())
    doc["env"]["proposals"]["candidates"] = 0
    (tmp_path / "config.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"env\.proposals\.candidates"):
        make_policy("learned", "model", model=str(tmp_path))
    doc["env"]["proposals"] = {"candidates": 2, "patched": {"threshold": -1}}
    (tmp_path / "config.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=r"env\.proposals\.patched"):
        make_policy("learned", "model", model=str(tmp_path))


def test_a_network_of_another_slot_count_is_refused(saved: tuple, tmp_path: Path) -> None:
    """The config's candidates set the network's input and output: a mismatch is one line."""
    from pvegym.policies.registry import make_policy

    out, _, _ = saved
    (tmp_path / "model.zip").write_bytes((out / "model.zip").read_bytes())
    doc = json.loads((out / "config.json").read_text())
    doc["env"]["proposals"]["candidates"] = 3
    (tmp_path / "config.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="does not fit"):
        make_policy("learned", "model", model=str(tmp_path))
