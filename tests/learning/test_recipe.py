"""The recipe end to end through ``pvegym train``: clone, calibrate, fine-tune, select, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pvegym.cli import main
from pvegym.errors import ConfigError
from pvegym.learning.train_config import parse_train_config
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.simulation import Simulation

TRAIN = """
name = "tiny"
algo = "MaskablePPO"
policy = "PairScorer"
n_envs = 2
vec_env = "dummy"
total_timesteps = 32       # the tests give --total-timesteps 64
seeds = [0, 1]
eval_seeds = [1000000]

[hyperparams]
n_steps = 32
batch_size = 32
n_epochs = 1
policy_kwargs = { hidden = 16 }

[env]
version = "v1"
scenario = "small"
train_seeds = { start = 0, count = 50 }
episode_seconds = "10m"
mask_unmigratable = true
reward_baseline = "noop"
reward_scale = 100.0

[imitation]
iterations = 2
episodes = 1
epochs = 2
calm_keep = 0.5
move_weight = 5.0
value_episodes = 1
value_epochs = 1

[selection]
seeds = [9000, 9001]
every = 32
noop_offsets = [0.0, 2.0]
constraints = ["moves_failed <= 0"]
"""


def test_recipe_trains_selects_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(TRAIN)
    out = tmp_path / "run"
    args = ["train", str(path), "--out", str(out), "--total-timesteps", "64", "--quiet"]
    assert main(args) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seeds"] == [0, 1] and manifest["selected_seed"] in (0, 1)
    assert manifest["budget"]["ppo_timesteps_per_seed"] == 64  # --total-timesteps is the budget
    t = manifest["time"]
    assert t["train_wall_s"] > 0 and 0 < t["env_share"] < 1
    assert t["clone_env_s"] > 0 and t["ppo_env_s"] > 0 and t["validation_env_s"] > 0
    assert manifest["budget"]["clone_episodes_per_seed"] == 3
    for seed in (0, 1):
        done = json.loads((out / f"seed-{seed}" / "done.json").read_text())
        phases = [c["phase"] for c in done["candidates"]]
        # two calibrated clones, PPO at 32 and 64 steps
        assert phases[:2] == ["clone+0", "clone+2"] and phases.count("ppo") == 2
        assert (out / f"seed-{seed}" / "model.zip").is_file()
        assert len(done["imitation"]["iterations"]) == 2
    assert (out / "validation-reference.json").is_file()
    sha = manifest["model_sha256"]
    # a rerun finds every seed done: same selection, nothing retrained
    assert main(args) == 0
    assert json.loads((out / "manifest.json").read_text())["model_sha256"] == sha
    # the selected agent acts as a balancer, loaded by policy name (no pickled class)
    policy = make_policy("learned", model=str(out))
    scn = catalog.scenario("small", 1_000_001)
    policy.reset(1_000_001)
    result = Simulation(scn, 1_000_001).run(policy, 600.0)
    assert result["metrics"]["sim_seconds"] == 600.0


def _data(**changes: Any) -> dict[str, Any]:
    import tomllib

    data = tomllib.loads(TRAIN)
    for key, value in changes.items():
        section, _, name = key.rpartition(".")
        (data[section] if section else data)[name] = value
    return data


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"selection.seeds": [10]}, "selection.seeds[0]"),  # also a training instance
        ({"selection.seeds": [1_000_010]}, "selection.seeds[0]"),  # a benchmark test instance
        ({"env.version": "v0", "env.mask_unmigratable": False}, "env.version"),
        ({"imitation.expert": "nope"}, "imitation.expert_params"),
        ({"hyperparams.policy_kwargs": {"net_arch": [8]}}, "hyperparams.policy_kwargs.net_arch"),
        ({"selection.metric": "stall"}, "selection.metric"),
        ({"selection.constraints": ["moves <"]}, "selection.constraints[0]"),
        ({"seeds": [1, 1]}, "seeds"),
    ],
)
def test_bad_recipe_configs_name_the_key(changes: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_train_config(_data(**changes))
    assert err.value.path == path


def test_selection_needs_explicit_training_instances() -> None:
    data = _data()
    del data["env"]["train_seeds"]
    with pytest.raises(ConfigError) as err:
        parse_train_config(data)
    assert err.value.path == "env.train_seeds"
