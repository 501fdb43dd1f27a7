"""learning-curve.png (issue 30 item 10): a training return against the noop twin (noop cost −
cost) and a held-out return (−cost) are different quantities, so they never share an axis."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("stable_baselines3")

from pvegym.learning.train import CURVE_METRICS, learning_curve_figure
from pvegym.learning.train_config import load_train_config

ROOT = Path(__file__).resolve().parents[2]
EPISODES = [{"timesteps": 360 * k, "r": 100.0 * k} for k in range(1, 5)]
EVALS = [{"timesteps": "720", "return": "-20000", "seed": "1000000"}]


def _axes_of(fig, label_start: str):  # type: ignore[no-untyped-def]
    return [
        ax
        for ax in fig.axes
        for line in ax.get_lines()
        if str(line.get_label()).startswith(label_start)
    ]


@pytest.mark.parametrize("baseline", ["noop", "none"])
def test_training_and_held_out_returns_share_an_axis_only_when_comparable(baseline: str) -> None:
    cfg = load_train_config(ROOT / "experiments/train-ppo.toml")
    cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward_baseline=baseline))
    metrics = dict.fromkeys(CURVE_METRICS, 0.0)
    episodes = [{**metrics, **e} for e in EPISODES]
    evals = [{**dict.fromkeys(metrics, "0"), **e} for e in EVALS]
    fig = learning_curve_figure(cfg, episodes, evals, {"noop": -25000.0})
    (train_ax,) = set(_axes_of(fig, "training ("))
    (eval_ax,) = set(_axes_of(fig, "held-out eval"))
    assert (train_ax is eval_ax) == (baseline == "none")
    assert set(_axes_of(fig, "noop (held-out)")) == {eval_ax}
