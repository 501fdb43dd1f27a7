"""Train a stable-baselines3 / sb3-contrib agent on ``pvegym/Cluster-v0`` (``pvegym train``).

Read :func:`train` top to bottom; it is the whole story:

1. **config** — the validated :class:`TrainConfig`, written resolved to ``results/<name>/config.json``
   (with the padded space sizes a loader needs) and hashed for the manifest.
2. **envs** — ``n_envs`` copies of ``ClusterEnv`` stepped together in one process
   (:class:`pvegym.vector.sb3.ClusterSB3VecEnv`; ``vec_env = "subproc"``: a process each),
   each wrapped as ``Monitor(TrainSeeds(TimedEnv(ClusterEnv)))``: ``TimedEnv`` measures the time
   spent inside the environment (step, reset, action mask) in each worker, ``TrainSeeds`` draws
   family instances from the configured training seeds, ``Monitor`` writes one row of
   metrics (``docs/metrics.md``) per episode.
3. **model** — a new one, or the latest checkpoint of an interrupted run: learning then continues
   with ``reset_num_timesteps=False`` up to the same ``total_timesteps``.
4. **learn** — with a progress bar, checkpoints every ``checkpoint_every`` steps and an evaluation
   on held-out (test) seeds every ``eval_every`` steps. Evaluation runs the agent through the
   :class:`~pvegym.sim.view.Balancer` interface with exactly the loop the heuristics are scored
   with (:func:`pvegym.experiments.record.play`), so its numbers are comparable with ``pvegym run``.
5. **report** — ``model.zip``, ``monitor.csv`` (all episodes, with the timestep at which each ended),
   ``evaluations.csv``, ``learning-curve.png`` and ``manifest.json`` (config hash, seed, git commit,
   package versions, steps/s and the environment's share of the wall time).

Timing, so that "is the simulator the bottleneck?" has a measured answer: ``env_seconds`` is the
time spent inside the environments summed over workers; ``env_share`` divides it by the learning
wall time (with several workers running in parallel it can exceed 1/n_envs of a core's time, which is
why ``vec_wait_share`` — the time the learner is blocked in ``VecEnv.step`` — is reported too).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib.util
import json
import math
import multiprocessing
import platform
import re
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from numpy.typing import NDArray
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper

from pvegym.config import check_out_dir
from pvegym.env.observation_layout import Layout
from pvegym.errors import ConfigError
from pvegym.experiments.executor import ignore_interrupt
from pvegym.experiments.files import write_bytes_durable
from pvegym.learning.train_config import TrainConfig, algo_class
from pvegym.policies import agent_spec
from pvegym.sim.cost import weighted_cost
from pvegym.sim.metrics import METRIC_KEYS

CHECKPOINT_PREFIX = "ckpt"
#: metrics drawn in the learning curve (besides the episode return)
CURVE_METRICS = ("moves", "moves_failed", "stall_cpu_s", "cpu_shortfall_core_s", "imbalance_mean")
#: heuristics evaluated once on the held-out seeds, as reference lines in the learning curve
REFERENCE_POLICIES = ("noop", "upstream")


# ------------------------------------------------------------------------------------------ envs
class TimedEnv(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Accumulates the wall time (s) spent inside the environment: step, reset, action mask.

    The first reset of a process also loads the compiled (numba) kernels from their cache — a
    one-off start-up cost of about a second that says nothing about the simulator's speed in a
    long run — so it is kept apart in ``warmup_seconds``.
    """

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self.env_seconds = 0.0
        self.warmup_seconds: float | None = None

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        t0 = time.perf_counter()
        out = self.env.step(action)
        self.env_seconds += time.perf_counter() - t0
        return out

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        t0 = time.perf_counter()
        out = self.env.reset(**kwargs)
        if self.warmup_seconds is None:
            self.warmup_seconds = time.perf_counter() - t0
        else:
            self.env_seconds += time.perf_counter() - t0
        return out

    def action_masks(self) -> NDArray[np.bool_]:
        t0 = time.perf_counter()
        mask: NDArray[np.bool_] = self.env.unwrapped.action_masks()  # type: ignore[attr-defined]
        self.env_seconds += time.perf_counter() - t0
        return mask


class TrainSeeds(gymnasium.Wrapper[Any, Any, Any, Any]):
    """Each episode on a training seed drawn from ``seeds``: a family instance (the episode seed
    stays random) or, for a fixed scenario, the episode seed. ``None`` = the environment's own
    draw from the whole training range."""

    def __init__(self, env: gymnasium.Env[Any, Any], seeds: Sequence[int] | None, family: bool):
        super().__init__(env)
        self.seeds = None if seeds is None else np.asarray(seeds, dtype=np.int64)
        self.family = family
        self.rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        if self.seeds is None:
            return self.env.reset(seed=seed, options=options)
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        pick = int(self.seeds[self.rng.integers(self.seeds.size)])
        if self.family:
            return self.env.reset(seed=seed, options={**(options or {}), "instance_seed": pick})
        return self.env.reset(seed=pick, options=options)

    def action_masks(self) -> NDArray[np.bool_]:
        mask: NDArray[np.bool_] = self.env.get_wrapper_attr("action_masks")()
        return mask


def make_env_fn(cfg: TrainConfig, monitor_file: Path | None) -> Any:
    """A picklable constructor of one wrapped training environment (for the vector env)."""
    from stable_baselines3.common.monitor import Monitor

    from pvegym.sim import catalog

    def make() -> gymnasium.Env[Any, Any]:
        if multiprocessing.parent_process() is not None:  # a SubprocVecEnv worker
            ignore_interrupt()  # Ctrl-C: one line from the parent, not a traceback per worker
        env: gymnasium.Env[Any, Any] = TimedEnv(cfg.env_class()(**cfg.env_kwargs()))
        family = catalog.is_family(cfg.env.scenario)
        env = TrainSeeds(env, cfg.env.train_seeds, family)
        return Monitor(
            env, str(monitor_file) if monitor_file else None, info_keywords=tuple(METRIC_KEYS)
        )

    return make


def make_vec_env(kind: str, fns: Sequence[Any]) -> VecEnv:
    """The SB3 vector env of ``fns``: ``"vector"`` (and ``"auto"``) steps them together in this
    process (:class:`~pvegym.vector.sb3.ClusterSB3VecEnv`: one (N, ·) batch, masks included);
    ``"subproc"`` runs one process each (SubprocVecEnv), ``"dummy"`` SB3's DummyVecEnv."""
    if kind == "subproc":
        return SubprocVecEnv(list(fns))
    if kind == "dummy":
        return DummyVecEnv(list(fns))
    from pvegym.vector.sb3 import ClusterSB3VecEnv

    return ClusterSB3VecEnv(fns)


# ------------------------------------------------------------------------------------------ eval
def evaluate_policy(policy: Any, cfg: TrainConfig, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """One episode per held-out seed, through the Balancer interface, with the experiment runner's
    loop (``record.play``): the metrics plus ``return`` (minus the weighted cost over the
    reward scale; without the noop baseline, which the runner does not run)."""
    from pvegym.experiments.record import play
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    rows = []
    for seed in seeds:
        scn = catalog.resolve(cfg.env.scenario, seed, name_key="env.scenario").scenario
        duration = cfg.env.episode_seconds or scn.duration
        sim = Simulation(scn, seed)
        policy.reset(seed)
        result, _ = play(sim, policy.decide, duration)
        m = result["metrics"]
        ret = -weighted_cost(cfg.env.weights(), m) / cfg.env.reward_scale
        rows.append({"seed": seed, "return": ret, **m})
    return rows


def reference_returns(cfg: TrainConfig, out: Path) -> dict[str, float]:
    """Mean held-out return of the reference heuristics (cached in ``eval-references.json``)."""
    path = out / "eval-references.json"
    key = {"seeds": list(cfg.eval_seeds), "env": dataclasses.asdict(cfg.env)}
    if path.is_file():
        doc = json.loads(path.read_text())
        if doc.get("key") == json.loads(json.dumps(key)):
            return {k: float(v) for k, v in doc["returns"].items()}
    from pvegym.policies.registry import make_policy

    returns = {
        name: float(
            np.mean([r["return"] for r in evaluate_policy(make_policy(name), cfg, cfg.eval_seeds)])
        )
        for name in REFERENCE_POLICIES
    }
    path.write_text(json.dumps({"key": key, "returns": returns}, indent=1))
    return returns


# ------------------------------------------------------------------------------------------ callbacks
def _callbacks(cfg: TrainConfig, out: Path, start: int, progress: bool) -> list[Any]:
    from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
    from tqdm import tqdm

    class Progress(BaseCallback):
        """A tqdm bar over environment steps (SB3's own needs ``rich``)."""

        def _on_training_start(self) -> None:
            self.bar = tqdm(
                total=cfg.total_timesteps,
                initial=start,
                desc=cfg.name,
                unit="step",
                file=sys.stderr,
                disable=not progress,
                dynamic_ncols=True,
            )

        def _on_step(self) -> bool:
            self.bar.update(self.model.num_timesteps - self.bar.n)
            return True

        def _on_training_end(self) -> None:
            self.bar.close()

    class Evaluate(BaseCallback):
        """Held-out evaluation every ``eval_every`` steps, appended to ``evaluations.csv``."""

        def __init__(self) -> None:
            super().__init__()
            every = cfg.eval_every
            self.next = (start // every + 1) * every if every else math.inf

        def _on_step(self) -> bool:
            if self.model.num_timesteps >= self.next:
                evaluate_model(self.model, cfg, out)
                self.next += cfg.eval_every
            return True

    callbacks: list[Any] = [Progress(), Evaluate()]
    if cfg.checkpoint_every:
        callbacks.append(
            CheckpointCallback(
                save_freq=max(cfg.checkpoint_every // cfg.n_envs, 1),
                save_path=str(out / "checkpoints"),
                name_prefix=CHECKPOINT_PREFIX,
            )
        )
    return callbacks


def model_info(cfg: TrainConfig, path: Path | None = None) -> Any:
    """The :class:`~pvegym.policies.learned.ModelInfo` of a model trained with ``cfg`` (what its
    ``config.json`` will say), for acting through the balancer interface before it is saved."""
    from pvegym.policies.learned import ModelInfo

    max_nodes, max_guests = cfg.env.sizes()
    return ModelInfo(
        path or Path("model.zip"),
        cfg.algo,
        max_nodes,
        max_guests,
        cfg.env.episode_seconds or _scenario_seconds(cfg),
        cfg.policy,
        cfg.env.version,
        cfg.env.mask_unmigratable,
        tuple(sorted(cfg.env.memory.items())),
        cfg.env.mask_headroom,
        cfg.resolved()["hyperparams"],
    )


def evaluate_model(model: Any, cfg: TrainConfig, out: Path) -> dict[str, float]:
    """Evaluate ``model`` on the held-out seeds; append per-seed rows to ``evaluations.csv``."""
    from pvegym.policies.learned import LearnedPolicy

    policy = LearnedPolicy.from_model(model, model_info(cfg))
    rows = evaluate_policy(policy, cfg, cfg.eval_seeds)
    path = out / "evaluations.csv"
    fields = ["timesteps", "seed", "return", *METRIC_KEYS]
    new = not path.is_file()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fields, extrasaction="ignore")
        if new:
            writer.writeheader()
        for r in rows:
            writer.writerow({"timesteps": model.num_timesteps, **r})
    return {
        "timesteps": float(model.num_timesteps),
        "return": float(np.mean([r["return"] for r in rows])),
    }


def _scenario_seconds(cfg: TrainConfig) -> float:
    from pvegym.sim import catalog

    return catalog.duration(cfg.env.scenario)


# ------------------------------------------------------------------------------------------ train
@dataclasses.dataclass
class TrainStats:
    """What a training session did. Times in seconds; ``env_share`` = env time / wall time."""

    out_dir: Path
    start_timesteps: int = 0
    timesteps: int = 0
    wall_s: float = 0.0
    learn_s: float = 0.0
    steps_per_s: float = 0.0
    env_seconds: float = 0.0
    env_warmup_s: float = 0.0
    env_share: float = 0.0
    vec_wait_s: float = 0.0
    vec_wait_share: float = 0.0
    resumed_from: str | None = None


def latest_checkpoint(ckpt_dir: Path) -> tuple[Path, int] | None:
    """The checkpoint with the most timesteps (``ckpt_<steps>_steps.zip``), if any."""
    best: tuple[Path, int] | None = None
    for p in ckpt_dir.glob(f"{CHECKPOINT_PREFIX}_*_steps.zip"):
        m = re.fullmatch(rf"{CHECKPOINT_PREFIX}_(\d+)_steps\.zip", p.name)
        if m and (best is None or int(m.group(1)) > best[1]):
            best = (p, int(m.group(1)))
    return best


def resume_identity(resolved: dict[str, Any]) -> dict[str, Any]:
    """What must match for a run directory to be continued: the resolved train config without
    its budget (``total_timesteps``), so that a larger budget extends a finished run."""
    return {k: v for k, v in resolved.items() if k != "total_timesteps"}


def finished_model(out: Path) -> tuple[Path, int] | None:
    """A finished run's ``model.zip`` and its timesteps, from the ``manifest.json`` that describes
    that very file (its SHA-256); None otherwise."""
    model, manifest = out / "model.zip", out / "manifest.json"
    if not model.is_file() or not manifest.is_file():
        return None
    try:
        doc = json.loads(manifest.read_text())
    except ValueError:
        return None
    steps = doc.get("session", {}).get("timesteps") if isinstance(doc, dict) else None
    if doc.get("model_sha256") != hashlib.sha256(model.read_bytes()).hexdigest():
        return None
    return (model, steps) if isinstance(steps, int) and steps > 0 else None


def tensorboard_dir(out: Path) -> str | None:
    """``<run dir>/tensorboard`` when the ``tensorboard`` extra is installed (SB3 then logs its
    training scalars there, beside ``monitor.csv``), else None: TensorBoard is optional."""
    return str(out / "tensorboard") if importlib.util.find_spec("tensorboard") else None


def _claim_out_dir(cfg: TrainConfig, out: Path, fresh: bool) -> tuple[Path, int] | None:
    """Step 1: make ``out`` ready for ``cfg`` (emptied when ``fresh``) and write its config;
    returns the checkpoint to resume from, if any. A directory holding another config's checkpoints
    is refused."""
    check_out_dir(out)
    if fresh and out.exists():
        shutil.rmtree(out)
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    found = latest_checkpoint(out / "checkpoints")
    final = finished_model(out)  # a finished run continues from its final model, not from 0
    if final is not None and (found is None or final[1] > found[1]):
        found = final
    old = out / "config.json"
    if (
        found
        and old.is_file()
        and resume_identity(json.loads(old.read_text())) != resume_identity(cfg.resolved())
    ):
        raise ConfigError(
            "train",
            f"{out} holds checkpoints of a different config; resume needs the same train file "
            "(use --fresh to start over, or another name/--out)",
        )
    old.write_text(json.dumps(cfg.resolved(), indent=1) + "\n")
    return found


def _build_model(
    cfg: TrainConfig, venv: Any, out: Path, found: tuple[Path, int] | None, start: int
) -> Any:
    """Step 3: the algorithm on ``venv``, restored from ``found`` when resuming (evaluations past
    the checkpoint's ``start`` timesteps are dropped)."""
    algo = algo_class(cfg.algo)
    kwargs = cfg.algo_kwargs()
    if cfg.policy in agent_spec.NAMED_POLICIES:  # built for the env's padded layout
        layout = Layout(*cfg.env.sizes()).as_dict()
        kwargs["policy_kwargs"] = {**kwargs.get("policy_kwargs", {}), "layout": layout}
    tb = tensorboard_dir(out)
    model = algo(
        agent_spec.policy_class(cfg.algo, cfg.policy),
        venv,
        seed=cfg.seed,
        device="cpu",
        verbose=0,
        tensorboard_log=tb,
        **kwargs,
    )
    if found:
        restore_checkpoint(model, found[0])
    _drop_evaluations_after(out / "evaluations.csv", start)
    return model


def _write_outputs(model: Any, cfg: TrainConfig, out: Path, stats: TrainStats) -> int:
    """Step 5: the model, its final evaluation, ``monitor.csv`` and the learning curve; returns the
    number of training episodes."""
    write_bytes_durable(out / "model.zip", model.save)
    if not _has_evaluation_at(out / "evaluations.csv", stats.timesteps):
        evaluate_model(model, cfg, out)
    episodes = merge_monitors(out / "monitor", out / "monitor.csv")
    refs = reference_returns(cfg, out)
    plot_learning_curve(
        out / "learning-curve.png", cfg, episodes, _read_csv(out / "evaluations.csv"), refs
    )
    return len(episodes)


def train(
    cfg: TrainConfig,
    out_dir: Path | None = None,
    progress: bool = True,
    fresh: bool = False,
    vec_env: str = "auto",
    extra_callbacks: Sequence[Any] = (),
    command: list[str] | None = None,
) -> TrainStats:
    """Train (or resume training) ``cfg`` into ``out_dir`` (default ``results/<name>``).

    ``vec_env``: ``"auto"`` (the config's ``vec_env``), ``"vector"`` (the default:
    :mod:`pvegym.vector`, all environments in this process), ``"subproc"`` or ``"dummy"``
    (:func:`make_vec_env`). ``extra_callbacks`` are SB3 callbacks (the
    tests use one to kill a run part-way).
    """
    import torch

    t_start, started = time.perf_counter(), time.time()
    torch.set_num_threads(cfg.torch_threads)

    # 1. config ---------------------------------------------------------------------------------
    out = Path(out_dir) if out_dir is not None else Path("results") / cfg.out_name
    found = _claim_out_dir(cfg, out, fresh)
    start = found[1] if found else 0
    stats = TrainStats(out, start_timesteps=start, resumed_from=str(found[0]) if found else None)

    # 2. envs -----------------------------------------------------------------------------------
    session = out / "monitor" / f"from-{start:09d}"
    if session.exists():
        shutil.rmtree(session)  # a session that restarts from the same checkpoint replaces it
    session.mkdir(parents=True)
    fns = [make_env_fn(cfg, session / f"rank-{i}") for i in range(cfg.n_envs)]
    if vec_env == "auto":
        vec_env = cfg.vec_env
    venv = TimedVecEnv(make_vec_env(vec_env, fns))
    venv.seed(cfg.seed + start)

    try:
        # 3. model ------------------------------------------------------------------------------
        model = _build_model(cfg, venv, out, found, start)

        # 4. learn ------------------------------------------------------------------------------
        callbacks = [*_callbacks(cfg, out, start, progress), *extra_callbacks]
        t_learn = time.perf_counter()
        remaining = cfg.total_timesteps - start
        if remaining > 0:
            model.learn(
                total_timesteps=remaining,
                callback=callbacks,
                reset_num_timesteps=not found,
                tb_log_name="sb3",  # a resumed run continues the same event files' series
            )
        stats.learn_s = time.perf_counter() - t_learn
        stats.timesteps = int(model.num_timesteps)
        stats.env_seconds = float(sum(venv.get_attr("env_seconds")))
        stats.env_warmup_s = float(sum(w or 0.0 for w in venv.get_attr("warmup_seconds")))
        stats.vec_wait_s = venv.wait_s
    finally:
        venv.close()
    learned = stats.timesteps - start
    stats.steps_per_s = learned / stats.learn_s if stats.learn_s > 0 else 0.0
    stats.env_share = stats.env_seconds / stats.learn_s if stats.learn_s > 0 else 0.0
    stats.vec_wait_share = stats.vec_wait_s / stats.learn_s if stats.learn_s > 0 else 0.0

    # 5. report ---------------------------------------------------------------------------------
    n_episodes = _write_outputs(model, cfg, out, stats)
    stats.wall_s = time.perf_counter() - t_start
    write_manifest(out / "manifest.json", cfg, stats, started, command, n_episodes)
    return stats


#: plain counters of an algorithm that a checkpoint's ``data`` restores (the rest of its state is
#: rebuilt from the train config; its pickled entries are never loaded)
_COUNTERS = ("num_timesteps", "_n_updates", "_episode_num", "_n_calls")


def restore_checkpoint(model: Any, path: Path) -> None:
    """Load a checkpoint into ``model`` — built from the train config exactly as a fresh run — with
    :func:`pvegym.policies.model_file.read_model_file` (weights-only, nothing unpickled): the state dicts
    of the policy and its optimizer, and the step counters. A file that does not fit is a one-line
    ConfigError."""
    import torch

    from pvegym.policies.model_file import (
        check_policy_class,
        load_state,
        plain_int,
        read_model_file,
    )

    where = "checkpoint"
    mf = read_model_file(path, where)
    check_policy_class(mf, type(model.policy), where)
    names, _variables = model._get_torch_save_params()
    if set(mf.params) != set(names):
        raise ConfigError(
            where,
            f"{path.name} holds {sorted(mf.params)}, the config's {type(model).__name__} needs "
            f"{sorted(names)}",
        )
    for name in names:
        target: Any = model
        for part in name.split("."):
            target = getattr(target, part)
        if isinstance(target, torch.optim.Optimizer):
            try:
                target.load_state_dict(mf.params[name])
            except (ValueError, KeyError, TypeError, RuntimeError) as err:
                raise ConfigError(where, f"{path.name}: {name}.pth does not fit ({err})") from None
        else:
            load_state(target, mf.params[name], f"{path.name}: {name}.pth", where)
    for key in _COUNTERS:
        if hasattr(model, key) and key in mf.data:
            setattr(model, key, plain_int(mf, key))


class TimedVecEnv(VecEnvWrapper):
    """Times the learner's wait in ``VecEnv.step`` (s): the environments' critical path as the
    learner sees it (with subprocesses: the slowest worker plus pipe transfers)."""

    def __init__(self, venv: VecEnv) -> None:
        super().__init__(venv)
        self.wait_s = 0.0

    def reset(self) -> Any:
        return self.venv.reset()

    def step_async(self, actions: np.ndarray) -> None:
        t0 = time.perf_counter()
        self.venv.step_async(actions)
        self.wait_s += time.perf_counter() - t0

    def step_wait(self) -> Any:
        t0 = time.perf_counter()
        out = self.venv.step_wait()
        self.wait_s += time.perf_counter() - t0
        return out


# ------------------------------------------------------------------------------------------ files
def write_json(path: Path, doc: Any) -> None:
    """Write ``doc`` as JSON atomically (a temporary file renamed over ``path``)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    tmp.replace(path)


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _has_evaluation_at(path: Path, timesteps: int) -> bool:
    return any(int(r["timesteps"]) == timesteps for r in _read_csv(path))


def _drop_evaluations_after(path: Path, timesteps: int) -> None:
    """A resumed run rolls back to its checkpoint: evaluations made after it are redone."""
    rows = _read_csv(path)
    keep = [r for r in rows if int(r["timesteps"]) <= timesteps]
    if len(keep) == len(rows):
        return
    if not keep:
        path.unlink()
        return
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, list(rows[0]))
        writer.writeheader()
        writer.writerows(keep)


def merge_monitors(monitor_dir: Path, out_csv: Path) -> list[dict[str, Any]]:
    """All Monitor files into one ``monitor.csv``: episodes in the order they ended, each with the
    training timestep at which it ended. Sessions (``from-<steps>``: a resume from a checkpoint)
    are chained; the episodes a killed session ran past the checkpoint it was resumed from are
    dropped, since training rolled them back."""
    sessions = sorted(monitor_dir.glob("from-*"))
    starts = [int(s.name.split("-")[1]) for s in sessions]
    episodes: list[dict[str, Any]] = []
    for k, sdir in enumerate(sessions):
        stop = starts[k + 1] if k + 1 < len(sessions) else math.inf
        rows: list[dict[str, Any]] = []
        for f in sorted(sdir.glob("*.monitor.csv")):
            with f.open() as fh:
                header = json.loads(fh.readline().lstrip("#"))
                for r in csv.DictReader(fh):
                    rows.append({**r, "wall_time": float(header["t_start"]) + float(r["t"])})
        rows.sort(key=lambda r: r["wall_time"])
        steps = starts[k]
        for r in rows:
            steps += int(r["l"])
            if steps > stop:
                break
            episodes.append({"timesteps": steps, **r})
    fields = ["timesteps", "r", "l", "t", "wall_time", *METRIC_KEYS]
    with out_csv.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(episodes)
    return episodes


def _rolling(values: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    if values.size == 0:
        return values
    w = max(1, min(window, values.size))
    c = np.cumsum(np.insert(values, 0, 0.0))
    head = c[1:w] / np.arange(1, w)
    return np.concatenate([head, (c[w:] - c[:-w]) / w])


def plot_learning_curve(
    path: Path,
    cfg: TrainConfig,
    episodes: list[dict[str, Any]],
    evaluations: list[dict[str, str]],
    references: dict[str, float],
) -> None:
    """:func:`learning_curve_figure` saved to ``path``."""
    learning_curve_figure(cfg, episodes, evaluations, references).savefig(path, dpi=100)


def learning_curve_figure(
    cfg: TrainConfig,
    episodes: list[dict[str, Any]],
    evaluations: list[dict[str, str]],
    references: dict[str, float],
) -> Any:
    """Episode return and key metrics vs training timesteps; held-out evaluations as points,
    the reference heuristics' held-out return as horizontal lines. Held-out returns are minus
    the episode's cost; a training return against the ``noop`` twin is noop cost − cost, another
    quantity: then the held-out points and the references get their own axis (right)."""
    from matplotlib.figure import Figure

    def num(v: Any) -> float:
        return float(v) if v not in ("", None) else math.nan

    steps = np.array([e["timesteps"] for e in episodes], dtype=float)
    window = max(1, len(episodes) // 30)
    panels = 1 + len(CURVE_METRICS)
    fig = Figure(figsize=(9, 2.2 * panels), layout="constrained")
    axes = fig.subplots(panels, 1, sharex=True)
    ax = axes[0]
    relative = cfg.env.reward_baseline == "noop"
    if episodes:
        ret = np.array([num(e["r"]) for e in episodes])
        ax.plot(steps, ret, ".", color="#bbbbbb", ms=2, label="training episode")
        ax.plot(steps, _rolling(ret, window), color="#1f77b4", label=f"training (mean of {window})")
    if relative:
        ax.set_ylabel("training return\n(noop cost − cost)", color="#1f77b4", fontsize=8)
        ax.legend(fontsize=7, loc="lower left")
        ax = ax.twinx()  # held-out returns and references: −cost, another scale
    if evaluations:
        ts = sorted({int(r["timesteps"]) for r in evaluations})
        means = [
            np.mean([num(r["return"]) for r in evaluations if int(r["timesteps"]) == t]) for t in ts
        ]
        ax.plot(
            ts, means, "o-", color="#d62728", label=f"held-out eval ({len(cfg.eval_seeds)} seeds)"
        )
    for (name, value), color in zip(references.items(), ("#7f7f7f", "#2ca02c"), strict=False):
        ax.axhline(value, color=color, ls="--", lw=1, label=f"{name} (held-out)")
    ax.set_ylabel(
        "held-out return\n(−weighted cost)" if relative else "episode return\n(−weighted cost)"
    )
    axes[0].set_title(f"{cfg.name}: {cfg.algo} on {cfg.env.scenario}")
    ax.legend(fontsize=7, loc="lower right")
    for ax, key in zip(axes[1:], CURVE_METRICS, strict=True):
        if episodes:
            vals = np.array([num(e[key]) for e in episodes])
            ax.plot(steps, vals, ".", color="#bbbbbb", ms=2)
            ax.plot(steps, _rolling(vals, window), color="#1f77b4")
        if evaluations:
            ts = sorted({int(r["timesteps"]) for r in evaluations})
            ax.plot(
                ts,
                [
                    np.mean([num(r[key]) for r in evaluations if int(r["timesteps"]) == t])
                    for t in ts
                ],
                "o-",
                color="#d62728",
            )
        ax.set_ylabel(key, fontsize=8)
    axes[-1].set_xlabel("training timesteps (agent decisions, all envs)")
    return fig


def write_manifest(
    path: Path,
    cfg: TrainConfig,
    stats: TrainStats,
    started: float,
    command: list[str] | None,
    n_episodes: int,
) -> None:
    """``manifest.json``: what ran (resolved config and its hash, seed, code, packages) and how fast."""
    from pvegym.provenance import git_commit, package_versions

    commit, dirty = git_commit()
    model = path.parent / "model.zip"
    doc = {
        "name": cfg.name,
        "config": cfg.resolved(),
        "config_sha256": cfg.config_hash(),
        "seed": cfg.seed,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command if command is not None else sys.argv,
        "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
        "model_bytes": model.stat().st_size,
        "episodes": n_episodes,
        "session": {
            k: (round(v, 4) if isinstance(v, float) else v)
            for k, v in dataclasses.asdict(stats).items()
            if k != "out_dir"
        },
    }
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")


__all__ = [
    "TrainStats",
    "evaluate_policy",
    "latest_checkpoint",
    "model_info",
    "train",
    "write_json",
]
