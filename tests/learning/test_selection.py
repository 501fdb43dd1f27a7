"""Validation selection: the batched evaluation is the balancer's, and the score orders right."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch as th

from pvegym.errors import ConfigError
from pvegym.learning.recipe import make_model
from pvegym.learning.selection import Selector, evaluate_batched, order_key, score
from pvegym.learning.train import evaluate_policy, model_info
from pvegym.learning.train_config import parse_train_config
from pvegym.policies.learned import LearnedPolicy
from pvegym.policies.registry import make_policy

th.set_num_threads(1)


def _cfg(**selection: Any) -> Any:
    return parse_train_config(
        {
            "name": "t",
            "algo": "MaskablePPO",
            "policy": "PairScorer",
            "total_timesteps": 64,
            "hyperparams": {"n_steps": 32, "policy_kwargs": {"hidden": 16}},
            "env": {
                "version": "v1",
                "scenario": "small",
                "train_seeds": {"start": 0, "count": 100},
                "episode_seconds": "30m",
                "mask_unmigratable": True,
            },
            "selection": {"seeds": [9000, 9001, 9002], **selection},
        }
    )


def test_batched_evaluation_equals_the_balancer_path() -> None:
    """A policy that moves often (random weights, low no-motion score): the lockstep evaluation in
    the environment gives the metrics of the balancer path, episode by episode."""
    cfg = _cfg()
    model = make_model(cfg, cfg.env_class()(**cfg.env_kwargs()), 0)
    g = th.Generator().manual_seed(0)
    with th.no_grad():
        for p in model.policy.mlp_extractor.parameters():
            p.copy_(th.randn(p.shape, generator=g) * 0.3)
        model.policy.mlp_extractor.noop_bias.fill_(-8.0)
    seeds = cfg.selection.seeds
    batched, env_s = evaluate_batched(model.policy, cfg, seeds)
    balancer = evaluate_policy(LearnedPolicy.from_model(model, model_info(cfg)), cfg, seeds)
    assert env_s > 0
    assert sum(r["moves"] for r in batched) > 10
    for a, b in zip(batched, balancer, strict=True):
        assert a["seed"] == b["seed"]
        for key, value in a.items():
            assert value == b[key], (a["seed"], key)


def _rows(stall: list[float], failed: int = 0) -> list[dict[str, float]]:
    return [
        {
            "guest_stall_s": s,
            "cpu_shortfall_core_s": 0.0,
            "moves": 1,
            "moves_failed": failed,
            "oscillations": 0,
            "churn_moves": 0,
            "migration_bytes": 0.0,
            "downtime_s": 0.0,
            "evacuation_latency_s": None,  # no value: left out of the sums
        }
        for s in stall
    ]


def test_score_counts_paired_wins_and_puts_infeasible_last() -> None:
    cfg = _cfg(constraints=["moves_failed <= 0"], objective="wins")
    ref = _rows([10.0, 10.0, 10.0])
    good = score(_rows([5.0, 10.0, 20.0]), ref, cfg)
    assert (good["wins"], good["losses"], good["feasible"]) == (1, 1, True)
    better = score(_rows([5.0, 5.0, 20.0]), ref, cfg)
    failing = score(_rows([1.0, 1.0, 1.0], failed=1), ref, cfg)
    assert failing["violation"] == pytest.approx(3.0) and not failing["feasible"]
    ranked = sorted([good, failing, better], key=order_key)
    assert ranked == [better, good, failing]
    cost_cfg = _cfg(objective="cost", weights={"guest_stall_s": 1.0})
    cheap = score(_rows([1.0, 1.0, 30.0]), ref, cost_cfg)  # one win, lower mean cost
    winner = score(_rows([9.0, 9.0, 30.0]), ref, cost_cfg)  # two wins, higher mean cost
    assert order_key(cheap) < order_key(winner)


def test_relative_constraints_bound_a_mean_by_the_references() -> None:
    cfg = _cfg(relative={"guest_stall_s": 1.1})
    ref = _rows([10.0, 10.0])
    assert score(_rows([11.0, 11.0]), ref, cfg)["feasible"]
    over = score(_rows([12.0, 12.0]), ref, cfg)
    assert not over["feasible"] and over["violation"] == pytest.approx(0.1)


def test_reference_params_are_the_references_constants(tmp_path: Path) -> None:
    """``reference_params`` select against the heuristic with given constants (a study's best):
    the validation reference is that policy's episodes, cached under a key naming them."""
    params = {"threshold": 0.15, "min_pressure_pct": 5.0}
    cfg = _cfg(reference_params=params)
    rows = Selector(cfg, tmp_path / "seed-0").reference()
    seeds = cfg.selection.seeds
    assert rows == evaluate_policy(make_policy("patched", **params), cfg, seeds)
    assert rows != evaluate_policy(make_policy("patched"), cfg, seeds)  # the constants matter
    doc = json.loads((tmp_path / "validation-reference.json").read_text())
    assert doc["key"]["params"] == dict(sorted(params.items()))
    with pytest.raises(ConfigError) as err:
        _cfg(reference_params={"no_such_constant": 1.0})
    assert err.value.path == "selection.reference_params.no_such_constant"
