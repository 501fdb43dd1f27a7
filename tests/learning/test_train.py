"""``pvegym train``: every algorithm trains, saves, loads as a balancer and acts reproducibly; a killed
run resumes from its checkpoint; bad train files fail with the key path.

Budgets are tiny (a few hundred to ~1k steps on a 5-minute episode of a 3-node scenario): these
check the plumbing, not learning.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sb3_contrib")

import torch
from stable_baselines3.common.callbacks import BaseCallback

from pvegym.cli import main
from pvegym.errors import ConfigError
from pvegym.experiments.record import play
from pvegym.learning.train import train
from pvegym.learning.train_config import parse_train_config
from pvegym.policies.learned import Config, LearnedPolicy
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.simulation import Simulation

torch.set_num_threads(1)

SCENARIO = "contended-3node"  # 3 nodes, 10 HA guests: a small observation, real contention
HYPER: dict[str, dict[str, Any]] = {
    "PPO": {"n_steps": 256, "batch_size": 64, "n_epochs": 1, "policy_kwargs": {"net_arch": [32]}},
    "MaskablePPO": {
        "n_steps": 256,
        "batch_size": 64,
        "n_epochs": 1,
        "policy_kwargs": {"net_arch": [32]},
    },
    "A2C": {"n_steps": 16, "policy_kwargs": {"net_arch": [32]}},
    "DQN": {
        "buffer_size": 2_000,
        "learning_starts": 200,
        "train_freq": 4,
        "batch_size": 32,
        "policy_kwargs": {"net_arch": [32]},
    },
}


def _data(algo: str, **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": f"t-{algo.lower()}",
        "algo": algo,
        "total_timesteps": 512,
        "hyperparams": HYPER[algo],
        "eval_seeds": [1_000_000],
        "env": {"scenario": SCENARIO, "episode_seconds": "5m", "train_seeds": [0, 1, 2]},
    }
    data.update(extra)
    return data


def _episode(policy: Any, seed: int) -> tuple[dict[str, Any], list[Any]]:
    sim = Simulation(catalog.scenario(SCENARIO), seed)
    policy.reset(seed)
    return play(sim, policy.decide, 300.0)


@pytest.mark.parametrize("algo", ["PPO", "MaskablePPO", "DQN", "A2C"])
def test_train_save_load_and_act_as_a_balancer(algo: str, tmp_path: Path) -> None:
    cfg = parse_train_config(_data(algo))
    stats = train(cfg, tmp_path, progress=False)
    assert stats.timesteps >= cfg.total_timesteps
    for name in ("model.zip", "config.json", "manifest.json", "monitor.csv", "learning-curve.png"):
        assert (tmp_path / name).is_file(), name
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config_sha256"] == cfg.config_hash() and manifest["seed"] == 0
    assert manifest["model_bytes"] < 2 * 2**20
    with (tmp_path / "monitor.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows and set(METRIC_KEYS) <= set(rows[0])  # the metrics per training episode
    with (tmp_path / "evaluations.csv").open() as fh:
        assert int(next(csv.DictReader(fh))["timesteps"]) == stats.timesteps

    # loads by path through the registry and acts through the Balancer protocol, reproducibly
    a = make_policy("learned", model=str(tmp_path))
    b = LearnedPolicy(Config(model=str(tmp_path / "model.zip")))
    result_a, motions_a = _episode(a, 7)
    result_b, motions_b = _episode(b, 7)
    assert motions_a == motions_b and result_a["metrics"] == result_b["metrics"]


class _Kill(BaseCallback):  # type: ignore[misc]
    """Stands in for ``kill -9`` part-way through a run (after the 2nd checkpoint)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.at:
            raise KeyboardInterrupt("killed")
        return True


def test_killed_run_resumes_from_its_latest_checkpoint(tmp_path: Path) -> None:
    cfg = parse_train_config(_data("MaskablePPO", total_timesteps=1024, checkpoint_every=256))
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path, progress=False, extra_callbacks=[_Kill(600)])
    assert not (tmp_path / "model.zip").exists()
    assert (tmp_path / "checkpoints" / "ckpt_512_steps.zip").is_file()

    stats = train(cfg, tmp_path, progress=False)
    assert stats.resumed_from is not None and stats.resumed_from.endswith("ckpt_512_steps.zip")
    assert stats.start_timesteps == 512 and stats.timesteps == 1024  # 512 + 512: same total
    model = LearnedPolicy(Config(model=str(tmp_path))).model
    assert model.num_timesteps == 1024
    with (tmp_path / "monitor.csv").open() as fh:
        steps = [int(r["timesteps"]) for r in csv.DictReader(fh)]
    assert steps == sorted(steps) and steps[-1] <= 1024  # the rolled-back episodes are dropped

    # a different config in the same directory is refused rather than mixed in (a larger
    # total_timesteps alone is not one: it extends the run)
    other = parse_train_config(
        _data("MaskablePPO", total_timesteps=1024, checkpoint_every=256, seed=7)
    )
    with pytest.raises(ConfigError, match="different config"):
        train(other, tmp_path, progress=False)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"algo": "SAC"}, "algo"),
        ({"hyperparams": {"n_stepz": 8}}, "hyperparams.n_stepz"),
        ({"hyperparams": {"buffer_size": 10}}, "hyperparams.buffer_size"),  # DQN's, not PPO's
        ({"env": {"scenario": "small", "train_seeds": [0, 1_000_001]}}, "env.train_seeds[1]"),
        ({"eval_seeds": [5], "env": {"scenario": "small"}}, "eval_seeds[0]"),  # a train seed
        ({"eval_seeds": [1]}, "eval_seeds[0]"),  # also in env.train_seeds
        (
            {"env": {"scenario": "small", "reward_weights": {"stal": 1.0}}},
            "env.reward_weights.stal",
        ),
        (
            {"env": {"scenario": "small", "reward_weights": {"imbalance_mean": 1.0}}},
            "env.reward_weights.imbalance_mean",
        ),
        ({"env": {"scenario": "small", "reward_baseline": "random"}}, "env.reward_baseline"),
        ({"n_envs": 0}, "n_envs"),
        (
            {"hyperparams": {"policy_kwargs": {"activation_fn": "gelu"}}},
            "hyperparams.policy_kwargs.activation_fn",
        ),
    ],
)
def test_bad_train_files_name_the_key(change: dict[str, Any], path: str) -> None:
    data = {**_data("PPO"), "eval_seeds": [1_000_000], **change}
    with pytest.raises(ConfigError) as err:
        parse_train_config(data)
    assert err.value.path == path


def test_cli_bad_train_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "bad.toml"
    f.write_text('algo = "PPO"\ntotal_timesteps = 100\n[hyperparams]\nn_stepz = 8\n')
    assert main(["train", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "hyperparams.n_stepz" in err


def test_cli_train_writes_a_fresh_run_dir_with_the_given_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # following the README never writes into results/: a new run goes to runs/<name>/, the same
    # config resumes there, another config gets runs/<name>-2; --total-timesteps is the budget
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "t.toml"
    hyper = HYPER["PPO"]
    f.write_text(
        'name = "t"\nalgo = "PPO"\ntotal_timesteps = 100000\neval_seeds = [1000000]\n'
        f"[hyperparams]\nn_steps = {hyper['n_steps']}\nbatch_size = {hyper['batch_size']}\n"
        "n_epochs = 1\npolicy_kwargs = {net_arch = [16]}\n"
        f'[env]\nscenario = "{SCENARIO}"\nepisode_seconds = "5m"\ntrain_seeds = [0]\n'
    )
    assert main(["train", str(f), "--total-timesteps", "256", "--quiet"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "runs" / "t"
    assert "new run in runs/t/" in out and not (tmp_path / "results").exists()
    assert json.loads((run / "config.json").read_text())["total_timesteps"] == 256
    assert (run / "model.zip").is_file() and (run / "monitor.csv").is_file()
    if importlib.util.find_spec("tensorboard"):  # the tensorboard extra (scripts/test.sh has it)
        assert list((run / "tensorboard").rglob("events.out.tfevents.*"))
        assert "tensorboard --logdir" in out

    # a finished run rerun is not retrained: it resumes at its final model with nothing to learn
    model_bytes = (run / "model.zip").read_bytes()
    assert main(["train", str(f), "--total-timesteps", "256", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "resuming runs/t/" in out and "256 steps (resumed at 256)" in out
    # ... and a larger budget extends it (issue 30 item 10), from its final model
    assert main(["train", str(f), "--total-timesteps", "512", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "resuming runs/t/" in out and "512 steps (resumed at 256)" in out
    assert (run / "model.zip").read_bytes() != model_bytes
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["session"]["start_timesteps"] == 256 and manifest["session"]["timesteps"] == 512

    other = tmp_path / "t2.toml"  # another config under the same name: a new run, never mixed
    other.write_text(f.read_text().replace("n_epochs = 1", "n_epochs = 2"))
    assert main(["train", str(other), "--total-timesteps", "256", "--quiet"]) == 0
    assert "new run in runs/t-2/" in capsys.readouterr().out
    assert main(["train", str(other), "--out", str(run), "--total-timesteps", "256"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "another config" in err
    assert main(["train", str(f), "--total-timesteps", "0"]) == 2
    assert "--total-timesteps" in capsys.readouterr().err
