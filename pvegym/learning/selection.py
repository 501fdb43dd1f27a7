"""Checkpoint selection on validation instances from the training seed range.

A checkpoint is judged as the benchmark will judge the final agent — deterministic actions through
the :class:`~pvegym.sim.view.Balancer` interface on whole episodes (``record.play``), paired with a
reference heuristic on the same instances and seeds — but on instances left out of training and
never on the benchmark's test instances (:class:`~pvegym.learning.train_config.SelectionOptions`).
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.learning.train import evaluate_policy, write_json
from pvegym.learning.train_config import TrainConfig
from pvegym.sim.cost import weighted_cost
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.tuning.study_config import parse_constraints

_METRICS = frozenset(METRIC_KEYS)
#: columns of ``selection.csv``
COLUMNS = (
    "phase",
    "timesteps",
    "feasible",
    "violation",
    "wins",
    "losses",
    "cost",
    "metric_mean",
    "reference_metric_mean",
    "moves",
    "moves_failed",
    "oscillations",
    "churn_moves",
    "migration_bytes",
    "downtime_s",
    "path",
)


def evaluate_batched(
    policy: Any, cfg: TrainConfig, seeds: Any, deterministic: bool = True
) -> tuple[list[dict[str, Any]], float]:
    """One episode per seed (family instance = episode seed, as the runner), all in lockstep in
    ``Cluster-v1`` environments with idle rounds skipped, the network asked once per step for all
    episodes that need a decision. Returns the final metrics per seed and the seconds spent in
    the environments.

    The same decisions as :func:`~pvegym.learning.train.evaluate_policy` (the balancer path): the
    observation and mask are the same bits (``tests/env/test_view_encoding_v1.py``), and a skipped
    round is one in which no motion is possible, where the balancer answers no motion without
    asking the network. ``tests/learning/test_selection.py`` checks the metrics agree.
    """
    import torch as th

    from pvegym.learning.imitation import learner_actions

    kwargs = {**cfg.env_kwargs(), "skip_idle_rounds": True, "reward_baseline": "none"}
    seeds = [int(s) for s in seeds]
    envs = [cfg.env_class()(**kwargs) for _ in seeds]
    env_s = 0.0
    t0 = time.perf_counter()
    obs = [env.reset(seed=s)[0] for env, s in zip(envs, seeds, strict=True)]
    env_s += time.perf_counter() - t0
    results: list[dict[str, Any] | None] = [None] * len(seeds)
    live = list(range(len(seeds)))
    while live:
        t0 = time.perf_counter()
        masks = np.stack([envs[i].action_masks() for i in live])
        env_s += time.perf_counter() - t0
        batch = np.stack([obs[i] for i in live])
        if deterministic:
            actions = learner_actions(policy, batch, masks)
        else:
            with th.no_grad():
                dist = policy.get_distribution(th.as_tensor(batch), masks)
                actions = dist.get_actions(deterministic=False).numpy()
        t0 = time.perf_counter()
        still = []
        for i, a in zip(live, actions, strict=True):
            obs[i], _, _, truncated, info = envs[i].step(int(a))
            if truncated:
                results[i] = {"seed": seeds[i], **{k: info[k] for k in info if k in _METRICS}}
            else:
                still.append(i)
        env_s += time.perf_counter() - t0
        live = still
    return [r for r in results if r is not None], env_s


def score(
    rows: list[dict[str, Any]], reference: list[dict[str, Any]], cfg: TrainConfig
) -> dict[str, Any]:
    """A candidate's validation score: constraint violation (sums over the episodes), wins and
    losses on the selection metric against the reference (paired by instance), mean cost, and
    the sort key of :func:`order_key`."""
    sel = cfg.selection
    assert sel is not None
    weights = sel.weights or cfg.env.weights()
    sums = {  # counts and totals (a metric without a value, such as a latency, is left out)
        k: float(sum(float(r[k]) for r in rows if r.get(k) is not None))
        for k in rows[0]
        if k != "seed"
    }
    violation = sum(
        max(c.violation(sums[c.metric]), 0.0)
        for c in parse_constraints(list(sel.constraints), "constraints")
    )
    for metric, factor in sel.relative.items():
        mine = float(np.mean([float(r[metric]) for r in rows]))
        theirs = float(np.mean([float(r[metric]) for r in reference]))
        if mine > factor * theirs:
            violation += (mine - factor * theirs) / max(abs(theirs), 1e-9)
    ours = np.array([float(r[sel.metric]) for r in rows])
    ref = np.array([float(r[sel.metric]) for r in reference])
    wins, losses = int(np.sum(ours < ref)), int(np.sum(ours > ref))
    cost = float(np.mean([weighted_cost(weights, r) for r in rows]))
    feasible = violation <= 0.0
    key = (
        [0 if feasible else 1, violation, -wins, cost]
        if sel.objective == "wins"
        else [0 if feasible else 1, violation, cost]
    )
    return {
        "feasible": feasible,
        "violation": violation,
        "wins": wins,
        "losses": losses,
        "cost": cost,
        "metric_mean": float(ours.mean()),
        "reference_metric_mean": float(ref.mean()),
        **{k: sums.get(k, 0.0) for k in ("moves", "moves_failed", "oscillations", "churn_moves")},
        "migration_bytes": sums.get("migration_bytes", 0.0) / len(rows),
        "downtime_s": sums.get("downtime_s", 0.0) / len(rows),
        "key": key,
    }


def order_key(candidate: dict[str, Any]) -> tuple[float, ...]:
    """Smaller is better: feasible first, then the least violation, then the objective."""
    return tuple(float(x) for x in candidate["key"])


class Selector:
    """Evaluates candidates of one training seed on the validation instances; keeps the best."""

    def __init__(self, cfg: TrainConfig, out: Path) -> None:
        self.cfg = cfg
        self.out = out
        self.candidates: list[dict[str, Any]] = []
        self.wall_s = 0.0
        self.env_s = 0.0
        self._runs: list[tuple[float, float]] = []
        self._reference: list[dict[str, Any]] | None = None

    def reference(self) -> list[dict[str, Any]]:
        """The reference heuristic on the validation instances (cached beside the seeds' dirs)."""
        if self._reference is None:
            sel = self.cfg.selection
            assert sel is not None
            path = self.out.parent / "validation-reference.json"
            key: dict[str, Any] = {
                "policy": sel.reference,
                "seeds": list(sel.seeds),
                "env": self.cfg.resolved()["env"],
            }
            if sel.reference_params:  # keys of runs without constants stay as they were
                key["params"] = dict(sorted(sel.reference_params.items()))
            if path.is_file():
                doc = json.loads(path.read_text())
                if doc.get("key") == key:
                    self._reference = list(doc["rows"])
            if self._reference is None:
                from pvegym.policies.registry import make_policy

                policy = make_policy(sel.reference, **sel.reference_params)
                self._reference = evaluate_policy(policy, self.cfg, sel.seeds)
                write_json(path, {"key": key, "rows": self._reference})
        return self._reference

    def consider(self, model: Any, timesteps: int, path: Path, phase: str) -> dict[str, Any]:
        """Score ``model`` (saved at ``path``) as a candidate."""
        cand: dict[str, Any] = {"phase": phase, "timesteps": timesteps, "path": str(path)}
        sel = self.cfg.selection
        if sel is None:
            cand["key"] = [-float(timesteps)]  # without validation: the latest
            self.candidates.append(cand)
            return cand
        reference = self.reference()
        t0 = time.perf_counter()
        rows, env_s = evaluate_batched(model.policy, self.cfg, sel.seeds)
        wall = time.perf_counter() - t0
        self._runs.append((t0, t0 + wall))
        self.wall_s += wall
        self.env_s += env_s
        cand.update(score(rows, reference, self.cfg))
        cand["rows"] = rows
        self.candidates.append(cand)
        self._write()
        return cand

    def _write(self) -> None:
        with (self.out / "selection.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(self.candidates)

    def wall_s_since(self, t: float) -> float:
        """Validation wall time spent after ``t`` (to keep it out of PPO's)."""
        return sum(b - a for a, b in self._runs if a >= t)

    def best(self) -> dict[str, Any]:
        if not self.candidates:
            raise RuntimeError("no candidate to select")
        return min(self.candidates, key=order_key)

    def callback(self, ckpts: Path, progress: bool) -> Any:
        """An SB3 callback: every ``selection.every`` steps, save a checkpoint and consider it."""
        from stable_baselines3.common.callbacks import BaseCallback

        selector = self
        every = self.cfg.selection.every if self.cfg.selection else 0

        class Validate(BaseCallback):
            def __init__(self) -> None:
                super().__init__()
                self.next = every if every else float("inf")

            def _on_step(self) -> bool:
                if self.model.num_timesteps >= self.next:
                    self.next += every
                    path = ckpts / f"ckpt_{self.model.num_timesteps}_steps.zip"
                    self.model.save(str(path))
                    c = selector.consider(self.model, int(self.model.num_timesteps), path, "ppo")
                    if progress:
                        shown = {k: c.get(k) for k in COLUMNS if k != "path"}
                        print(f"  {shown}", flush=True)
                return True

        return Validate()


__all__ = ["Selector", "order_key", "score"]
