"""Train an agent in the proposal action space (issue 32, item 2): MaskablePPO choosing among
noop and the heuristics' motions, paid for beating ``patched-tuned`` on the same episode.

``python -m pvegym.learning.proposal_train experiments/train-proposals.toml [--out DIR]``

1. **Environment.** :class:`~pvegym.env.proposal_env.ProposalEnv` on the task's family with a
   :class:`~pvegym.policies.proposals.HeuristicProposer` (``patched`` with the constants of
   ``proposals_patched``, by default ``patched-tuned``'s, and ``guest-centric``'s best few) and a
   twin played by the ``baseline`` reference (``patched-tuned``): an episode's return is
   (baseline cost − agent cost) / ``reward_scale``.
2. **Instances.** Training draws from the task's ``train`` split only (0–8,999). With
   ``curriculum`` > 0, that share of episodes replays a training instance on which the baseline
   beat the agent (its latest episode there had a negative return) — Genet's idea of training
   where the heuristic wins; the rest are fresh draws.
3. **Selection.** Every ``eval_every`` steps the deterministic agent plays the first
   ``validation`` instances of the task's ``validation`` split (9,000 on: the family's train
   range) through the balancer interface (:func:`~pvegym.experiments.benchmark_episodes.balancer_episode`,
   exactly as ``pvegym benchmark`` scores); the checkpoint of least mean ``BALANCER_COST`` is kept.
   Test instances are never used here.
4. **Output** ``results/<name>/``: per training seed ``seed-<s>/`` (``model.zip`` of its best
   checkpoint, ``config.json`` the safe loader rebuilds it from, ``evaluations.csv``,
   ``episodes.csv``), and at the top the best seed's ``model.zip`` + ``config.json``,
   ``summary.json`` (validation costs per instance of the agent and the baseline, W/L/T, the mean
   paired difference with its bootstrap CI) and ``manifest.json`` (config hash, commit, wall and
   CPU time).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import io
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium
import numpy as np

from pvegym.config import check_name, field, load, read_toml
from pvegym.env.proposal_env import ProposalEnv
from pvegym.errors import ConfigError
from pvegym.experiments.benchmark_episodes import (
    REFERENCES,
    balancer_episode,
    make_reference,
)
from pvegym.experiments.files import write_bytes_durable, write_json_atomic
from pvegym.policies.learned import LearnedPolicy, ModelInfo
from pvegym.policies.proposals import (
    GLOBAL_FEATURES,
    MAX_CANDIDATES,
    SLOT_FEATURES,
    HeuristicProposer,
    ProposerConfig,
    proposer_config,
)
from pvegym.sim.cost import BALANCER_COST
from pvegym.sim.tasks import task as get_task

#: bootstrap resamples of the validation CI
RESAMPLES = 10_000
#: the held-out check's instances start this far into the validation split (9,500 on small)
HOLDOUT_OFFSET = 500


@dataclasses.dataclass(frozen=True)
class ProposalTrainConfig:
    """A training file (module doc). Hyperparameters are MaskablePPO's."""

    name: str
    description: str = ""
    task: str = "small"
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0], metadata={"max_items": 8})
    total_timesteps: int = field(20_000, ge=1, le=10_000_000)
    eval_every: int = field(5_000, ge=1, le=10_000_000)
    validation: int = field(30, ge=1, le=500)
    holdout: int = field(40, ge=0, le=500)
    n_envs: int = field(4, ge=1, le=64)
    reward_scale: float = field(1000.0, gt=0.0, le=1e9)
    curriculum: float = field(0.0, ge=0.0, le=1.0)
    baseline: str = field("patched-tuned", choices=tuple(r for r in REFERENCES if r != "noop"))
    proposals_patched: str = field("patched-tuned", choices=("patched", "patched-tuned"))
    candidates: int = field(3, ge=1, le=MAX_CANDIDATES)
    learning_rate: float = field(3e-4, gt=0.0, le=1.0)
    n_steps: int = field(256, ge=8, le=65_536)
    batch_size: int = field(64, ge=8, le=65_536)
    n_epochs: int = field(4, ge=1, le=100)
    gamma: float = field(0.99, ge=0.0, le=1.0)
    gae_lambda: float = field(0.95, ge=0.0, le=1.0)
    clip_range: float = field(0.2, gt=0.0, le=1.0)
    ent_coef: float = field(0.01, ge=0.0, le=1.0)
    net_arch: list[int] = dataclasses.field(
        default_factory=lambda: [64, 64], metadata={"max_items": 4}
    )
    warm_start: str = field("patched", choices=("none", "patched", "guest-centric"))
    bc_episodes: int = field(60, ge=1, le=10_000)
    bc_epochs: int = field(20, ge=1, le=1000)
    bc_learning_rate: float = field(1e-3, gt=0.0, le=1.0)

    def validate(self, path: str) -> None:
        check_name(self.name, f"{path}.name" if path else "name")
        get_task(self.task, f"{path}.task" if path else "task")
        for i, s in enumerate(self.seeds):
            if not 0 <= s < 2**31:
                raise ConfigError(f"seeds[{i}]", "must be in [0, 2^31)")
        for i, u in enumerate(self.net_arch):
            if not 1 <= u <= 1024:
                raise ConfigError(f"net_arch[{i}]", "must be in 1..1024")

    def proposer(self) -> ProposerConfig:
        patched = dict(REFERENCES[self.proposals_patched][1])
        return proposer_config({"candidates": self.candidates, "patched": patched})

    def hyperparams(self) -> dict[str, Any]:
        return {
            "learning_rate": self.learning_rate,
            "n_steps": self.n_steps,
            "batch_size": self.batch_size,
            "n_epochs": self.n_epochs,
            "gamma": self.gamma,
            "gae_lambda": self.gae_lambda,
            "clip_range": self.clip_range,
            "ent_coef": self.ent_coef,
            "policy_kwargs": {"net_arch": list(self.net_arch)},
        }

    def resolved(self) -> dict[str, Any]:
        """The ``config.json`` the safe loader reads (``pvegym.policies.learned``)."""
        t = get_task(self.task)
        return {
            "name": self.name,
            "description": self.description,
            "algo": "MaskablePPO",
            "policy": "MlpPolicy",
            "total_timesteps": self.total_timesteps,
            "hyperparams": self.hyperparams(),
            "env": {
                "version": "proposals",
                "scenario": t.family,
                "episode_seconds": t.episode_seconds,
                "proposals": self.proposer().as_dict(),
                "baseline": self.baseline,
                "reward_scale": self.reward_scale,
                "curriculum": self.curriculum,
                "train_seeds": [t.train.start, t.train.stop - 1],
            },
            "training": dataclasses.asdict(self),
        }


class Instances:
    """Training instances: fresh draws from the train split, or (``curriculum`` share) replays
    of one the baseline won. Shared by the environments of one process."""

    def __init__(self, train: range, curriculum: float, seed: int) -> None:
        self.train = train
        self.curriculum = curriculum
        self.rng = np.random.default_rng([seed, 32])
        self.lost: dict[int, float] = {}  # instance -> the latest return there (< 0)
        self.episodes: list[dict[str, Any]] = []

    def draw(self) -> tuple[int, bool]:
        if self.lost and self.rng.random() < self.curriculum:
            keys = sorted(self.lost)
            return int(keys[int(self.rng.integers(len(keys)))]), True
        return int(self.train[int(self.rng.integers(len(self.train)))]), False

    def record(self, instance: int, ret: float, replay: bool, step: int) -> None:
        if ret < 0:
            self.lost[instance] = ret
        else:
            self.lost.pop(instance, None)
        self.episodes.append(
            {"instance": instance, "return": ret, "replay": int(replay), "steps": step}
        )


class TrainInstances(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Resets on the instances :class:`Instances` draws; records each episode's return."""

    def __init__(self, env: ProposalEnv, instances: Instances) -> None:
        super().__init__(env)
        self.instances = instances
        self._current = (0, False)
        self._ret = 0.0
        self.steps = 0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._current = self.instances.draw()
        self._ret = 0.0
        return self.env.reset(seed=self._current[0])

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, r, term, trunc, info = self.env.step(action)
        self._ret += float(r)
        self.steps += 1
        if term or trunc:
            self.instances.record(*self._current[:1], self._ret, self._current[1], self.steps)
        return obs, r, term, trunc, info

    def action_masks(self) -> Any:
        return self.env.unwrapped.action_masks()  # type: ignore[attr-defined]


def make_env(
    cfg: ProposalTrainConfig, instances: Instances | None = None, twin: bool = True
) -> Any:
    """A training environment (``instances``: wrapped to draw from the train split; ``twin``:
    the baseline's twin, for the reward)."""
    t = get_task(cfg.task)

    def baseline() -> Any:
        return make_reference(cfg.baseline)

    env = ProposalEnv(
        t.family,
        HeuristicProposer(cfg.proposer()),
        baseline if twin else None,
        reward_weights=BALANCER_COST,
        reward_scale=cfg.reward_scale,
    )
    return env if instances is None else TrainInstances(env, instances)


def teacher_action(obs: np.ndarray, mask: np.ndarray, teacher: str) -> int:
    """The slot a heuristic teacher takes: ``patched`` its slot 1, ``guest-centric`` the slot its
    own choice is in (the ``gc_choice`` feature); else noop."""
    if teacher == "patched":
        return 1 if mask[1] else 0
    ng, nf = len(GLOBAL_FEATURES), len(SLOT_FEATURES)
    f = SLOT_FEATURES.index("gc_choice")
    for k in range(1, mask.size):
        if mask[k] and obs[ng + k * nf + f] == 1.0:
            return k
    return 0


def warm_start(model: Any, cfg: ProposalTrainConfig, seed: int) -> dict[str, Any]:
    """Behaviour cloning of ``cfg.warm_start``'s choices on ``bc_episodes`` training instances
    (decisions with more than one valid slot), so that PPO starts from a heuristic it can then
    improve on instead of from a random choice. Returns the data size and final accuracy."""
    import torch

    t = get_task(cfg.task)
    rng = np.random.default_rng([seed, 33])
    env = make_env(cfg, twin=False)
    xs, ms, ys = [], [], []
    for _ in range(cfg.bc_episodes):
        obs, info = env.reset(seed=int(t.train[int(rng.integers(len(t.train)))]))
        while True:
            mask = info["action_mask"]
            a = teacher_action(obs, mask, cfg.warm_start)
            if mask.sum() > 1:
                xs.append(obs)
                ms.append(mask)
                ys.append(a)
            obs, _, _, done, info = env.step(a)
            if done:
                break
    if not ys:
        return {"decisions": 0, "accuracy": None}
    x = torch.as_tensor(np.array(xs))
    m = torch.as_tensor(np.array(ms))
    y = torch.as_tensor(np.array(ys))
    policy = model.policy
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.bc_learning_rate)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(cfg.bc_epochs):
        for idx in torch.randperm(len(y), generator=gen).split(256):
            _, logp, _ = policy.evaluate_actions(x[idx], y[idx], action_masks=m[idx])
            loss = -logp.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        dist = policy.get_distribution(x, action_masks=m.numpy())
        pred = dist.distribution.probs.argmax(dim=1)
        accuracy = float((pred == y).float().mean())
        prob = float(dist.distribution.probs.gather(1, y[:, None]).mean())
    return {"decisions": len(ys), "accuracy": accuracy, "mean_teacher_prob": prob}


def model_info(cfg: ProposalTrainConfig, path: Path) -> ModelInfo:
    t = get_task(cfg.task)
    return ModelInfo(
        path,
        "MaskablePPO",
        0,
        0,
        t.episode_seconds,
        "MlpPolicy",
        "proposals",
        hyperparams=cfg.hyperparams(),
        proposals=cfg.proposer(),
    )


def validation_costs(
    policy_factory: Any, cfg: ProposalTrainConfig, holdout: bool = False
) -> dict[int, float]:
    """Costs on the selection instances (the first ``validation`` of the validation split) or,
    ``holdout``, on ``holdout`` instances from its second half, never used for selection."""
    t = get_task(cfg.task)
    v = list(t.validation)
    seeds = v[HOLDOUT_OFFSET : HOLDOUT_OFFSET + cfg.holdout] if holdout else v[: cfg.validation]
    return {s: balancer_episode(t, s, policy_factory()).cost for s in seeds}


def compare(agent: dict[int, float], ref: dict[int, float], name: str) -> dict[str, Any]:
    """W/L/T of ``agent`` against ``ref`` per instance and the mean paired difference (agent −
    reference, cost units) with its bootstrap 95 % CI."""
    from pvegym.experiments.stats import paired_difference

    seeds = sorted(agent)
    a = np.array([agent[s] for s in seeds])
    r = np.array([ref[s] for s in seeds])
    d = paired_difference(a, r, RESAMPLES, 0, name)
    assert d is not None
    return {
        "instances": [seeds[0], seeds[-1]],
        "wins": int((a < r).sum()),
        "losses": int((a > r).sum()),
        "ties": int((a == r).sum()),
        "mean_cost": float(a.mean()),
        "reference_mean_cost": float(r.mean()),
        "mean_difference": d.mean,
        "ci95": [d.lo, d.hi],
        "wilcoxon_p": d.p,
    }


def train_seed(
    cfg: ProposalTrainConfig, seed: int, out: Path, ref: dict[int, float]
) -> dict[str, Any]:
    """One training seed: learn, evaluate every ``eval_every`` steps, keep the best checkpoint."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    t = get_task(cfg.task)
    instances = Instances(t.train, cfg.curriculum, seed)
    venv = DummyVecEnv([lambda: make_env(cfg, instances) for _ in range(cfg.n_envs)])
    venv.seed(seed)
    hp = cfg.hyperparams()
    kwargs = {k: v for k, v in hp.items() if k != "policy_kwargs"}
    model = MaskablePPO(
        "MlpPolicy",
        venv,
        seed=seed,
        device="cpu",
        verbose=0,
        policy_kwargs=hp["policy_kwargs"],
        **kwargs,
    )
    info = model_info(cfg, out / "model.zip")
    rows: list[dict[str, Any]] = []
    best: dict[str, Any] = {"mean_cost": float("inf")}

    def evaluate(step: int) -> None:
        costs = validation_costs(lambda: LearnedPolicy.from_model(model, info), cfg)
        mean = float(np.mean(list(costs.values())))
        rows.append(
            {
                "timesteps": step,
                "mean_cost": mean,
                "baseline_mean_cost": float(np.mean([ref[s] for s in costs])),
                "episodes": len(instances.episodes),
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
        print(f"seed {seed} step {step}: validation mean cost {mean:.0f}", flush=True)
        if mean < best["mean_cost"]:
            best.update(mean_cost=mean, timesteps=step, costs=costs)
            write_bytes_durable(out / "model.zip", model.save)  # a kill keeps the last best

    class Every(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.next = cfg.eval_every

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next:
                self.next += cfg.eval_every
                evaluate(self.num_timesteps)
            return True

    started = time.perf_counter()
    bc = warm_start(model, cfg, seed) if cfg.warm_start != "none" else None
    evaluate(0)
    model.learn(cfg.total_timesteps, callback=Every())
    if not rows or rows[-1]["timesteps"] != model.num_timesteps:
        evaluate(model.num_timesteps)
    write_json_atomic(out / "config.json", {**cfg.resolved(), "seed": seed})
    _write_csv(out / "evaluations.csv", rows)
    _write_csv(out / "episodes.csv", instances.episodes)
    return {
        "seed": seed,
        "warm_start": bc,
        "best_timesteps": best["timesteps"],
        "best_mean_cost": best["mean_cost"],
        "costs": {str(k): v for k, v in best["costs"].items()},
        "evaluations": rows,
        "episodes": len(instances.episodes),
        "replayed": sum(e["replay"] for e in instances.episodes),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV, atomically (:func:`~pvegym.experiments.files.write_bytes_durable`)."""
    text = io.StringIO(newline="")
    if rows:
        w = csv.DictWriter(text, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    write_bytes_durable(path, lambda fh: fh.write(text.getvalue().encode()))


def train(cfg: ProposalTrainConfig, out: Path, command: list[str]) -> dict[str, Any]:
    """Every seed of ``cfg``; the best by validation mean cost is copied to ``out``."""
    from pvegym.provenance import git_commit, package_versions

    started = time.time()
    out.mkdir(parents=True, exist_ok=True)
    ref = validation_costs(lambda: make_reference(cfg.baseline), cfg)
    seeds = [train_seed(cfg, s, out / f"seed-{s}", ref) for s in cfg.seeds]
    best = min(seeds, key=lambda r: r["best_mean_cost"])
    src = out / f"seed-{best['seed']}"
    for name in ("model.zip", "config.json"):
        data = (src / name).read_bytes()
        write_bytes_durable(out / name, lambda fh: fh.write(data))  # noqa: B023 (called at once)
    costs = {int(k): v for k, v in best["costs"].items()}
    info = model_info(cfg, out / "model.zip")
    from pvegym.policies.learned import load_model

    agent = load_model(info)
    held: dict[str, Any] | None = None
    if cfg.holdout:
        mine = validation_costs(lambda: LearnedPolicy.from_model(agent, info), cfg, holdout=True)
        theirs = validation_costs(lambda: make_reference(cfg.baseline), cfg, holdout=True)
        held = compare(mine, theirs, f"proposals/{cfg.name}/holdout")
    summary = {
        "selected_seed": best["seed"],
        "selected_timesteps": best["best_timesteps"],
        "validation_vs_baseline": compare(costs, ref, f"proposals/{cfg.name}"),
        "holdout_vs_baseline": held,
        "baseline": cfg.baseline,
        "baseline_costs": {str(k): v for k, v in ref.items()},
        "seeds": seeds,
    }
    write_json_atomic(out / "summary.json", summary)
    commit, dirty = git_commit()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    manifest = {
        "name": cfg.name,
        "config": cfg.resolved(),
        "config_sha256": hashlib.sha256(
            json.dumps(cfg.resolved(), sort_keys=True).encode()
        ).hexdigest(),
        "git_commit": commit,
        "git_dirty": dirty,
        "packages": package_versions(),
        "command": command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_s": round(time.time() - started, 1),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
        "budget": {
            "total_timesteps_per_seed": cfg.total_timesteps,
            "seeds": list(cfg.seeds),
        },
        "model_sha256": hashlib.sha256((out / "model.zip").read_bytes()).hexdigest(),
        "model_bytes": (out / "model.zip").stat().st_size,
    }
    write_json_atomic(out / "manifest.json", manifest)
    return summary


def load_config(path: Path) -> ProposalTrainConfig:
    return load(ProposalTrainConfig, read_toml(path, "config", "proposal training file"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pvegym.learning.proposal_train")
    parser.add_argument("config", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="default: results/<name>")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
        out = args.out if args.out is not None else Path("results") / cfg.name
        summary = train(cfg, out, [sys.executable, "-m", __spec__.name, *(argv or sys.argv[1:])])
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    v = summary["validation_vs_baseline"]
    print(
        f"selected seed {summary['selected_seed']} at {summary['selected_timesteps']} steps: "
        f"W/L/T {v['wins']}/{v['losses']}/{v['ties']} vs {summary['baseline']}, "
        f"mean difference {v['mean_difference']:+.0f} [{v['ci95'][0]:+.0f}, {v['ci95'][1]:+.0f}]"
    )
    h = summary["holdout_vs_baseline"]
    if h is not None:
        print(
            f"held-out validation {h['instances'][0]}–{h['instances'][1]}: W/L/T "
            f"{h['wins']}/{h['losses']}/{h['ties']}, mean difference {h['mean_difference']:+.0f} "
            f"[{h['ci95'][0]:+.0f}, {h['ci95'][1]:+.0f}]"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
