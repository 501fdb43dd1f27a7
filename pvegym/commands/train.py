"""``pvegym train EXPERIMENT.toml``: train an agent and write ``results/<name>/`` (``MODEL.md`` §11).

An interrupted run resumes from its latest checkpoint when the same command is run again (same
total budget); ``--fresh`` deletes the run's directory and starts over.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a learned balancer (stable-baselines3)")
    p.add_argument("experiment", help="a train file (experiments/train-*.toml) or a config.json")
    p.add_argument("--out", default=None, help="output directory (default: results/<name>)")
    p.add_argument("--fresh", action="store_true", help="discard checkpoints and start over")
    p.add_argument(
        "--vec-env",
        choices=("auto", "subproc", "dummy"),
        default="auto",
        help="vector env (default auto: subprocesses when n_envs > 1)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.learning.train import train
    from pvegym.learning.train_config import load_train_config

    cfg = load_train_config(args.experiment)
    command = ["pvegym", *sys.argv[1:]] if sys.argv and "pvegym" in sys.argv[0] else None
    if cfg.imitation is not None or cfg.selection is not None or cfg.seeds is not None:
        from pvegym.learning.recipe import run_recipe

        doc = run_recipe(
            cfg,
            Path(args.out) if args.out else None,
            progress=not args.quiet,
            fresh=args.fresh,
            command=command,
        )
        t = doc["time"]
        sel = doc["selected"]
        print(
            f"{cfg.name}: {len(doc['seeds'])} seeds in {t['train_wall_s']:.0f} s "
            f"(env share {100 * t['env_share']:.1f} %); selected seed {doc['selected_seed']} "
            f"{sel['phase']} at {sel['timesteps']} steps → results/{cfg.out_name}/model.zip"
        )
        return 0
    stats = train(
        cfg,
        Path(args.out) if args.out else None,
        progress=not args.quiet,
        fresh=args.fresh,
        vec_env=args.vec_env,
        command=command,
    )
    resumed = f" (resumed at {stats.start_timesteps})" if stats.resumed_from else ""
    print(
        f"{cfg.name}: {stats.timesteps} steps{resumed} in {stats.wall_s:.1f} s, "
        f"{stats.steps_per_s:.0f} steps/s, env share {100 * stats.env_share:.1f} % "
        f"(learner waiting on envs {100 * stats.vec_wait_share:.1f} %) → {stats.out_dir}/"
    )
    return 0
