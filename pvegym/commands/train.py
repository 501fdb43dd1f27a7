"""``pvegym train EXPERIMENT.toml``: train an agent into a run directory (``docs/experiments.md``).

A run writes to ``runs/<name>/`` (:mod:`pvegym.experiments.rundir`: resumed from its latest
checkpoint when it holds the same config, else the next free ``runs/<name>-2``, …) or to
``--out DIR``; ``--fresh`` starts ``--out`` over. ``--total-timesteps N`` is the step budget
(the file's ``total_timesteps`` otherwise), like rl-zoo3's ``--n-timesteps``. With the
``tensorboard`` extra installed, SB3 also logs to ``<run dir>/tensorboard/``.

A train file with an ``[imitation]`` or ``[selection]`` table or a ``seeds`` list is a recipe
(:mod:`pvegym.learning.recipe`: clone, fine-tune for ``total_timesteps`` per seed, select on
validation instances, for every seed); it writes the same run directory, a rerun keeps the
finished seeds.
"""

from __future__ import annotations

import argparse
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from pvegym.errors import ConfigError
from pvegym.limits import MAX_TIMESTEPS, whole_number

if TYPE_CHECKING:
    from pvegym.learning.train_config import TrainConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a learned balancer (stable-baselines3)")
    p.add_argument("experiment", help="a train file (experiments/train-*.toml) or a config.json")
    p.add_argument(
        "--out",
        default=None,
        help="run directory (default: runs/<name>/, resumed when it holds the same config)",
    )
    p.add_argument("--fresh", action="store_true", help="start over in --out (deletes it)")
    p.add_argument(
        "--total-timesteps",
        type=int,
        default=None,
        metavar="N",
        help="environment steps to train for (default: the file's total_timesteps)",
    )
    p.add_argument(
        "--vec-env",
        choices=("auto", "vector", "subproc", "dummy"),
        default="auto",
        help="vector env (default auto: the train file's vec_env, else pvegym.vector in one "
        "process; subproc: one process per environment)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


RL_EXTRA = "needs the rl extra (PyTorch, stable-baselines3): .venv/bin/pip install -e '.[rl]'"


def run(args: argparse.Namespace) -> int:
    if find_spec("torch") is None or find_spec("stable_baselines3") is None:
        raise ConfigError("train", RL_EXTRA)
    from pvegym.config import check_out_dir
    from pvegym.experiments.rundir import choose
    from pvegym.learning.train import resume_identity, train
    from pvegym.learning.train_config import parse_train_config, train_data
    from pvegym.provenance import sha256_json

    if args.fresh and args.out is None:
        raise ConfigError("--fresh", "needs --out DIR (a new run gets a fresh directory anyway)")
    if args.out is not None:
        check_out_dir(Path(args.out))
    data = train_data(args.experiment)
    if args.total_timesteps is not None:
        steps = whole_number(args.total_timesteps, "--total-timesteps", ge=1, le=MAX_TIMESTEPS)
        data = {**data, "total_timesteps": steps}
    cfg = parse_train_config(data)
    # a larger budget (--total-timesteps) continues the same run; a recipe's budget is its own
    identity = cfg.resolved() if cfg.is_recipe else resume_identity(cfg.resolved())
    run_dir = choose("train", cfg.out_name, sha256_json(identity), args.out, args.fresh)
    print(f"{cfg.name}: {'resuming' if run_dir.resumed else 'new run in'} {run_dir.path}/")
    command = ["pvegym", *sys.argv[1:]] if sys.argv and "pvegym" in sys.argv[0] else None
    if cfg.is_recipe:
        return _run_recipe(cfg, run_dir.path, not args.quiet, command)
    stats = train(
        cfg,
        run_dir.path,
        progress=not args.quiet,
        vec_env=args.vec_env,
        command=command,
    )
    from pvegym.learning.train import tensorboard_dir

    tb = tensorboard_dir(run_dir.path)
    print(
        f"tensorboard --logdir {tb}"
        if tb
        else "(TensorBoard logging: .venv/bin/pip install -e '.[tensorboard]')"
    )
    resumed = f" (resumed at {stats.start_timesteps})" if stats.resumed_from else ""
    print(
        f"{cfg.name}: {stats.timesteps} steps{resumed} in {stats.wall_s:.1f} s, "
        f"{stats.steps_per_s:.0f} steps/s, env share {100 * stats.env_share:.1f} % "
        f"(learner waiting on envs {100 * stats.vec_wait_share:.1f} %) → {stats.out_dir}/"
    )
    return 0


def _run_recipe(cfg: TrainConfig, out: Path, progress: bool, command: list[str] | None) -> int:
    """The learned-balancer recipe (:mod:`pvegym.learning.recipe`): every training seed, then the
    best seed's selected model as ``<out>/model.zip``."""
    from pvegym.learning.recipe import run_recipe

    doc = run_recipe(cfg, out, progress=progress, command=command)
    t = doc["time"]
    sel = doc["selected"]
    print(
        f"{cfg.name}: {len(doc['seeds'])} seeds in {t['train_wall_s']:.0f} s "
        f"(env share {100 * t['env_share']:.1f} %); selected seed {doc['selected_seed']} "
        f"{sel['phase']} at {sel['timesteps']} steps → {out}/model.zip"
    )
    return 0
