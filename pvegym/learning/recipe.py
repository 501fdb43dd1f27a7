"""The learned-balancer recipe: clone, fine-tune, select on validation — for several seeds.

``pvegym train`` runs this when a train file has an ``[imitation]`` or ``[selection]`` table or a
``seeds`` list. Read :func:`run_recipe` top to bottom; per training seed it does:

1. **model** — the algorithm (MaskablePPO) with the configured policy (``PairScorer``) on
   ``n_envs`` training environments (``Cluster-v1``, the metric-aligned reward).
2. **clone** — :func:`pvegym.learning.imitation.dagger`: behaviour cloning of the expert with
   learner-collected data, then the critic fitted to the cloned policy's returns. Saved as
   ``bc.zip``; a rerun loads it instead of cloning again.
3. **fine-tune** — PPO for ``total_timesteps`` steps; every ``selection.every`` steps (and at
   the end) a checkpoint is saved and evaluated.
4. **select** — every candidate (the clone and each checkpoint) is scored on the validation
   instances (:mod:`pvegym.learning.selection`): deterministic actions through the balancer
   interface, as the benchmark runs it. The best is the seed's ``model.zip``.

Then the best seed's model (by the same score) is copied to the run directory's ``model.zip``
(``runs/<name>/`` or ``--out``) with the resolved ``config.json``, and ``manifest.json`` records
per seed what ran and how long: the wall time of cloning (collection in the environment, the
expert's decisions, training), of PPO (with the environment's share) and of validation, and the
totals.

A seed whose ``done.json`` exists is not run again; a seed interrupted during PPO restarts its
PPO from ``bc.zip`` (the clone is kept).
"""

from __future__ import annotations

import json
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.errors import ConfigError
from pvegym.learning.train import TimedVecEnv, write_json
from pvegym.learning.train_config import ImitationOptions, TrainConfig, algo_class
from pvegym.sim import catalog


def make_model(cfg: TrainConfig, venv: Any, seed: int) -> Any:
    """A new model of ``cfg``'s algorithm and policy on ``venv``."""
    algo = algo_class(cfg.algo)
    kwargs = cfg.algo_kwargs()
    if cfg.policy == "PairScorer":
        from pvegym.env.observation_layout import Layout
        from pvegym.learning.pair_policy import policy_class

        pk = dict(kwargs.pop("policy_kwargs", None) or {})
        pk["layout"] = Layout(*cfg.env.sizes()).as_dict()
        cls = policy_class("PairScorer", cfg.algo == "MaskablePPO")
        return algo(cls, venv, seed=seed, device="cpu", verbose=0, policy_kwargs=pk, **kwargs)
    return algo(cfg.policy, venv, seed=seed, device="cpu", verbose=0, **kwargs)


def load_into(model: Any, path: Path) -> None:
    """Copy the policy weights saved in ``path`` into ``model`` (same architecture)."""
    import zipfile

    import torch as th

    with zipfile.ZipFile(path) as zf, zf.open("policy.pth") as fh:
        state = th.load(fh, map_location="cpu", weights_only=True)
    model.policy.load_state_dict(state)


def calibrate(model: Any, selector: Any, cfg: TrainConfig, out: Path) -> None:
    """Evaluate the clone at each ``selection.noop_offsets`` (added to its no-motion score) and
    leave ``model`` at the best; every offset is a candidate (``clone+<offset>.zip``)."""
    import torch as th

    from pvegym.learning.selection import order_key

    offsets = cfg.selection.noop_offsets if cfg.selection else (0.0,)
    net = model.policy.mlp_extractor
    base = float(net.noop_bias.detach())
    best: tuple[tuple[float, ...], float] | None = None
    for delta in offsets:
        with th.no_grad():
            net.noop_bias.fill_(base + delta)
        path = out / f"clone{delta:+g}.zip"
        model.save(str(path))
        cand = selector.consider(model, 0, path, f"clone{delta:+g}")
        if best is None or order_key(cand) < best[0]:
            best = (order_key(cand), delta)
    assert best is not None
    with th.no_grad():
        net.noop_bias.fill_(base + best[1])


def _venv(cfg: TrainConfig, n_envs: int, monitor_dir: Path | None) -> Any:
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from pvegym.learning.train import make_env_fn

    fns = [
        make_env_fn(cfg, (monitor_dir / f"rank-{i}") if monitor_dir else None)
        for i in range(n_envs)
    ]
    use_subproc = cfg.vec_env == "subproc" or (cfg.vec_env == "auto" and n_envs > 1)
    return TimedVecEnv(SubprocVecEnv(fns) if use_subproc else DummyVecEnv(fns))


def _clone(
    model: Any, cfg: TrainConfig, options: ImitationOptions, seed: int, out: Path, progress: bool
) -> dict[str, Any]:
    """Step 2: imitate the teacher into ``model`` (DAgger), or reuse the clone saved in ``out``;
    returns the imitation report."""
    from pvegym.learning.imitation import dagger

    bc_path = out / "bc.zip"
    if bc_path.is_file():
        load_into(model, bc_path)
        reused: dict[str, Any] = json.loads((out / "bc.json").read_text())
        reused["reused"] = True
        return reused
    else:
        instances = np.asarray(
            cfg.env.train_seeds or catalog.seeds(cfg.env.scenario, "train"), dtype=np.int64
        )
        clone_env = cfg.env_class()

        def make_env() -> Any:
            kwargs = {**cfg.env_kwargs(), "skip_idle_rounds": False}
            return clone_env(**kwargs)

        gamma = float(cfg.hyperparams.get("gamma", 0.99))
        imitation = dagger(
            model.policy,
            make_env,
            options,
            instances,
            gamma,
            seed,
            log=(lambda row: print(f"  seed {seed} clone: {row}", file=sys.stderr))
            if progress
            else None,
        )
        model.save(str(bc_path))
        write_json(out / "bc.json", imitation)
        return imitation


def _fine_tune(
    model: Any, venv: Any, selector: Any, cfg: TrainConfig, ckpts: Path, progress: bool
) -> dict[str, Any]:
    """Step 3: PPO from the clone, checkpoints into ``ckpts`` for the selector; returns the PPO
    report (wall time net of the selector's validation)."""
    t_ppo = time.perf_counter()
    ppo: dict[str, Any] = {"timesteps": 0}
    if cfg.total_timesteps > 0:
        callback = selector.callback(ckpts, progress)
        model.learn(total_timesteps=cfg.total_timesteps, callback=callback)
        path = ckpts / f"ckpt_{model.num_timesteps}_steps.zip"
        if not path.is_file():
            model.save(str(path))
            selector.consider(model, int(model.num_timesteps), path, "ppo")
        ppo = {
            "timesteps": int(model.num_timesteps),
            "env_s": float(sum(venv.get_attr("env_seconds"))),
            "env_warmup_s": float(sum(w or 0.0 for w in venv.get_attr("warmup_seconds"))),
            "vec_wait_s": venv.wait_s,
        }
    ppo["wall_s"] = time.perf_counter() - t_ppo - selector.wall_s_since(t_ppo)
    return ppo


def train_seed(cfg: TrainConfig, seed: int, out: Path, progress: bool) -> dict[str, Any]:
    """Steps 1–4 for one training seed into ``out``; returns the seed's report."""
    import torch as th

    from pvegym.learning.selection import Selector

    t_seed = time.perf_counter()
    th.manual_seed(seed)
    out.mkdir(parents=True, exist_ok=True)
    ckpts = out / "checkpoints"
    if ckpts.exists():
        shutil.rmtree(ckpts)  # PPO restarts from the clone
    ckpts.mkdir()
    report: dict[str, Any] = {"seed": seed}
    monitor = out / "monitor"
    if monitor.exists():
        shutil.rmtree(monitor)
    monitor.mkdir()
    venv = _venv(cfg, cfg.n_envs, monitor)
    venv.seed(seed)
    selector = Selector(cfg, out)
    try:
        # 1. model ------------------------------------------------------------------------------
        model = make_model(cfg, venv, seed)
        # 2. clone ------------------------------------------------------------------------------
        if cfg.imitation is not None:
            report["imitation"] = _clone(model, cfg, cfg.imitation, seed, out, progress)
            calibrate(model, selector, cfg, out)
        # 3. fine-tune --------------------------------------------------------------------------
        report["ppo"] = _fine_tune(model, venv, selector, cfg, ckpts, progress)
    finally:
        venv.close()
    # 4. select ---------------------------------------------------------------------------------
    best = selector.best()
    shutil.copyfile(best["path"], out / "model.zip")
    report["selected"] = {k: v for k, v in best.items() if k != "rows"}
    report["candidates"] = [
        {k: v for k, v in c.items() if k != "rows"} for c in selector.candidates
    ]
    report["validation_wall_s"] = selector.wall_s
    report["validation_env_s"] = selector.env_s
    report["wall_s"] = time.perf_counter() - t_seed
    write_json(out / "done.json", report)
    return report


def run_recipe(
    cfg: TrainConfig,
    out: Path,
    progress: bool = True,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """Every training seed into ``out`` (a run directory: ``pvegym train`` chooses it with
    :func:`pvegym.experiments.rundir.choose`), then the best seed's model as its ``model.zip``."""
    import torch

    from pvegym.learning.selection import order_key
    from pvegym.provenance import git_commit, package_versions

    t0, started = time.perf_counter(), time.time()
    torch.set_num_threads(cfg.torch_threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    old = out / "config.json"
    if old.is_file() and json.loads(old.read_text()) != cfg.resolved():
        raise ConfigError(
            "train",
            f"{out} holds a run of a different config; use --fresh to start over, or --out",
        )
    old.write_text(json.dumps(cfg.resolved(), indent=1) + "\n")
    seeds: list[dict[str, Any]] = []
    for seed in cfg.run_seeds:
        sdir = out / f"seed-{seed}"
        done = sdir / "done.json"
        if done.is_file():
            seeds.append(json.loads(done.read_text()))
            continue
        if progress:
            print(f"{cfg.name}: training seed {seed}", file=sys.stderr)
        seeds.append(train_seed(cfg, seed, sdir, progress))
    best = min(seeds, key=lambda r: order_key(r["selected"]))
    shutil.copyfile(out / f"seed-{best['seed']}" / "model.zip", out / "model.zip")
    import hashlib

    commit, dirty = git_commit()
    model = out / "model.zip"
    totals = _totals(seeds)
    doc = {
        "name": cfg.name,
        "config": cfg.resolved(),
        "config_sha256": cfg.config_hash(),
        "seeds": list(cfg.run_seeds),
        "selected_seed": best["seed"],
        "selected": best["selected"],
        "git_commit": commit,
        "git_dirty": dirty,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command if command is not None else sys.argv,
        "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
        "budget": {
            "seeds": len(cfg.run_seeds),
            "ppo_timesteps_per_seed": cfg.total_timesteps,
            "clone_episodes_per_seed": (
                cfg.imitation.iterations * cfg.imitation.episodes + cfg.imitation.value_episodes
                if cfg.imitation
                else 0
            ),
            "validation_instances": len(cfg.selection.seeds) if cfg.selection else 0,
        },
        "time": {**totals, "session_wall_s": time.perf_counter() - t0},
        "per_seed": seeds,
    }
    write_json(out / "manifest.json", doc)
    return doc


def _totals(seeds: list[dict[str, Any]]) -> dict[str, float]:
    """Wall time of all seeds and where it went (s); the environment's share of it."""
    wall = sum(r["wall_s"] for r in seeds)
    clone_env = sum(r.get("imitation", {}).get("env_s", 0.0) for r in seeds)
    clone_expert = sum(r.get("imitation", {}).get("expert_s", 0.0) for r in seeds)
    clone_wall = sum(r.get("imitation", {}).get("wall_s", 0.0) for r in seeds)
    ppo_env = sum(r["ppo"].get("env_s", 0.0) for r in seeds)
    ppo_wall = sum(r["ppo"].get("wall_s", 0.0) for r in seeds)
    val_wall = sum(r["validation_wall_s"] for r in seeds)
    val_env = sum(r["validation_env_s"] for r in seeds)
    env = clone_env + ppo_env + val_env
    return {
        "train_wall_s": wall,
        "clone_wall_s": clone_wall,
        "clone_env_s": clone_env,
        "clone_expert_s": clone_expert,
        "ppo_wall_s": ppo_wall,
        "ppo_env_s": ppo_env,
        "validation_wall_s": val_wall,
        "validation_env_s": val_env,
        "env_s": env,
        "env_share": env / wall if wall > 0 else 0.0,
    }


__all__ = ["load_into", "make_model", "run_recipe", "train_seed"]
