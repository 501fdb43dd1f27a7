"""Create or join a study in an RDB and run workers on it — one machine or many.

**Storage.** Every study lives in Optuna's RDB storage: ``sqlite:///results/<study>/study.db`` by
default, or any SQLAlchemy URL given with ``--storage`` (``postgresql+psycopg://user:pw@host/db``).
Several worker processes — on this machine (``--workers N``) or on others pointing at the same
PostgreSQL — share one study: each asks Optuna's sampler for the next candidate against the trials
all workers have stored, and writes its results back. Nothing else is distributed: no home-made
queue, no result files to merge.

**Identity.** The first worker stores the resolved study config, its hashes, the git commit and the
pvegym version in the study's user attrs. A worker whose study file means something else (another
search space, suite or objective: :meth:`StudyConfig.study_hash`) is refused rather than mixed in;
changing only the budget or the report settings is fine.

**Budget and resume.** ``n_trials`` in the file is the study's total: a run (re)started on a study
that already holds k finished trials (complete, pruned or failed) runs only the rest, so a study
stopped midway — Ctrl-C, a killed worker, a rebooted machine — continues where it stopped and the
trial count adds up. ``--n-trials N`` instead asks for N more. With several workers Optuna's
:class:`~optuna.study.MaxTrialsCallback` stops them all at the total (at most one extra trial per
worker that was already running). A worker killed mid-trial leaves a RUNNING trial; the storage's
heartbeat (:data:`HEARTBEAT_S`) lets any live worker mark it FAILED after :data:`GRACE_S`.

**On Ray** (``--executor ray[:ADDRESS]``): the ``--workers`` workers are Ray actors, each a full
worker as above on the same storage — Ray only places them. A PostgreSQL storage lets them run on
any node. A SQLite file exists on this machine only, so with a SQLite URL the actors are pinned to
this node (they share the file as local processes do) and a note says so when the cluster has
other nodes: use ``--storage postgresql+psycopg://…`` to spread them.

**Determinism.** The sampler's seed is derived from the study seed, the worker id and the number of
trials the study held when the worker started. A sequential study (one worker, ``--worker-id 0``)
is therefore reproducible trial by trial, also when split into several runs at the same points;
workers started at the same moment on other machines must get distinct ``--worker-id``s so that
their random start-up trials differ (a worker that finds trials RUNNING at start mixes its process
id in as well).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import RDBStorage
from optuna.study import MaxTrialsCallback
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

import pvegym
from pvegym.errors import ConfigError
from pvegym.experiments.executor import RayExecutor
from pvegym.provenance import git_commit
from pvegym.tuning.objective import Objective
from pvegym.tuning.study_config import StudyConfig

HEARTBEAT_S = 30  # a running trial's worker writes a heartbeat this often (s)
GRACE_S = 120  # a RUNNING trial without heartbeat for this long is failed by the next worker (s)
SQLITE_TIMEOUT_S = 60  # how long a SQLite writer waits for the lock held by another worker (s)
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def results_dir(cfg: StudyConfig, root: Path | str = "results") -> Path:
    return Path(root) / cfg.out_name


def default_storage(cfg: StudyConfig, root: Path | str = "results") -> str:
    """``sqlite:///results/<study>/study.db`` (relative to the working directory)."""
    return f"sqlite:///{results_dir(cfg, root) / 'study.db'}"


def make_storage(url: str) -> RDBStorage:
    """Optuna's RDB storage for ``url``, with heartbeats; SQLite waits for other writers' locks
    instead of failing at once, PostgreSQL connections are checked before reuse."""
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        if path.parent and str(path) != ":memory:":
            path.parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
            )
    except Exception as err:  # bad URL, unreachable server, missing driver
        raise ConfigError("--storage", f"cannot open {redact(url)}: {err}") from None


def redact(url: str) -> str:
    """The URL with its password shown as ``***`` (for messages and the study's user attrs), as
    SQLAlchemy renders it; a URL SQLAlchemy cannot parse shows only its scheme."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return f"{url.split('://', 1)[0]}://…" if "://" in url else "<storage URL>"


def derive_seed(*parts: Any) -> int:
    """A 32-bit seed from any JSON-able parts (stable across processes and machines)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def make_sampler(cfg: StudyConfig, seed: int) -> optuna.samplers.BaseSampler:
    s = cfg.sampler
    if s.type == "nsga2":
        return optuna.samplers.NSGAIISampler(population_size=s.population_size, seed=seed)
    with warnings.catch_warnings():  # multivariate TPE is "experimental" since Optuna 2.2
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            n_startup_trials=s.n_startup_trials, multivariate=s.multivariate, seed=seed
        )


def make_pruner(cfg: StudyConfig) -> optuna.pruners.BasePruner:
    p = cfg.pruner
    if p.type == "wilcoxon":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.pruners.WilcoxonPruner(
                p_threshold=p.p_threshold, n_startup_steps=p.n_startup_steps
            )
    return optuna.pruners.NopPruner()


def _contains(spec: Any, value: Any) -> bool:
    """Whether a default value lies in a search dimension (so it can be enqueued as is)."""
    if spec.choices is not None:
        return value in spec.choices
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if not spec.low <= value <= spec.high:
        return False
    if spec.int and float(value) != int(value):
        return False
    if spec.step is not None:
        k = (value - spec.low) / spec.step
        return abs(k - round(k)) < 1e-9
    return True


def open_study(
    cfg: StudyConfig,
    storage_url: str,
    sampler_seed: int | None = None,
    objective_values: bool = True,
) -> optuna.Study:
    """Create the study, or join it (``load_if_exists``) after checking it means the same thing.

    The worker that creates it stores the resolved config and provenance in the study's user
    attrs and, with ``enqueue_defaults``, enqueues the untuned constants as the first trial (so the
    study scores the seed's defaults on the training suite, and TPE starts from them).
    """
    storage = make_storage(storage_url)
    sampler = make_sampler(cfg, cfg.sampler.seed if sampler_seed is None else sampler_seed)
    directions = [o.direction for o in cfg.objectives]
    spec: dict[str, Any] = {
        "storage": storage,
        "study_name": cfg.name,
        "directions": directions,
        "sampler": sampler,
        "pruner": make_pruner(cfg),
    }
    try:
        study = optuna.create_study(**spec)
        created = True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.create_study(**spec, load_if_exists=True)
        created = False
    attrs = study.user_attrs
    if "study_sha256" in attrs:
        if attrs["study_sha256"] != cfg.study_hash():
            raise ConfigError(
                "name",
                f"the storage already holds a study {cfg.name!r} with another search space, "
                f"suite or objective (hash {attrs['study_sha256'][:12]} ≠ "
                f"{cfg.study_hash()[:12]}): rename the study, or use another storage",
            )
    else:
        commit, dirty = git_commit()
        study.set_user_attr("config", cfg.resolved())
        study.set_user_attr("config_sha256", cfg.config_hash())
        study.set_user_attr("study_sha256", cfg.study_hash())
        study.set_user_attr("git_commit", commit)
        study.set_user_attr("git_dirty", dirty)
        study.set_user_attr("pvegym_version", pvegym.__version__)
        study.set_user_attr("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        study.set_user_attr("objectives", [o.label for o in cfg.objectives])
    if created and cfg.enqueue_defaults:
        defaults = cfg.defaults()
        fixed = {k: v for k, v in defaults.items() if _contains(cfg.params[k], v)}
        if fixed:
            study.enqueue_trial(fixed, user_attrs={"role": "defaults"})
    return study


def count_finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED))


@dataclass
class RunInfo:
    """What a ``tune`` run did: trials before/after (finished), wall time (s), storage URL."""

    storage: str
    before: int
    after: int
    target: int
    wall_s: float


def _worker(
    cfg: StudyConfig,
    storage_url: str,
    target: int,
    tag: list[Any],
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    objective: Objective | None = None,
) -> None:
    """One worker: join the study with its own sampler seed and optimize until ``target``
    finished trials (or the file's ``timeout_s``)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    probe = open_study(cfg, storage_url)
    existing = count_finished(probe)
    running = len(probe.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    seed_parts = [cfg.sampler.seed, *tag, existing]
    if running:
        seed_parts.append(os.getpid())  # somebody else works on it: never repeat their samples
    study = open_study(cfg, storage_url, sampler_seed=derive_seed(*seed_parts))
    remaining = target - existing
    if remaining <= 0:
        return
    commit, _ = git_commit()
    obj = objective if objective is not None else Objective(cfg, git_commit=commit)
    callbacks: list[Callable[[optuna.Study, FrozenTrial], None]] = [
        MaxTrialsCallback(target, states=FINISHED)
    ]
    if on_trial is not None:
        callbacks.append(on_trial)
    study.optimize(
        obj,
        n_trials=remaining,
        timeout=cfg.timeout_s,
        catch=(Exception,),
        callbacks=callbacks,
    )


def _child(cfg_data: dict[str, Any], storage_url: str, target: int, tag: list[Any]) -> None:
    from pvegym.experiments.executor import ignore_interrupt
    from pvegym.tuning.study_config import study_from_dict

    ignore_interrupt()  # Ctrl-C: the parent terminates the workers and prints one line
    _worker(study_from_dict(cfg_data), storage_url, target, tag)


def run_study(
    cfg: StudyConfig,
    storage_url: str | None = None,
    n_trials: int | None = None,
    workers: int = 1,
    worker_id: int = 0,
    progress: bool = True,
    objective: Objective | None = None,
    executor: RayExecutor | None = None,
) -> RunInfo:
    """Optimize until the study holds its budget of finished trials (``cfg.n_trials``), or
    ``n_trials`` more than it holds now; ``workers`` local processes share it through the storage
    (Ray actors with ``executor``)."""
    url = storage_url or default_storage(cfg)
    started = time.perf_counter()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(cfg, url)
    before = count_finished(study)
    target = before + n_trials if n_trials is not None else cfg.n_trials
    info = RunInfo(url, before, before, target, 0.0)
    if target <= before:
        return info
    bar = tqdm(
        total=target,
        initial=before,
        desc=cfg.name,
        unit="trial",
        file=sys.stderr,
        disable=not progress,
        dynamic_ncols=True,
    )
    with bar:
        if executor is not None:
            _run_ray_actors(cfg, url, target, workers, worker_id, study, bar, executor)
        elif workers <= 1:

            def tick(study: optuna.Study, trial: FrozenTrial) -> None:
                _show_progress(bar, study, target)

            _worker(cfg, url, target, [worker_id, 0], tick, objective)
        else:
            _run_processes(cfg, url, target, workers, worker_id, study, bar)
    info.after = count_finished(study)
    info.wall_s = time.perf_counter() - started
    return info


def _run_processes(
    cfg: StudyConfig,
    url: str,
    target: int,
    workers: int,
    worker_id: int,
    study: optuna.Study,
    bar: tqdm,
) -> None:
    """``workers`` local processes, each a full Optuna worker on the shared storage; the parent
    only polls the storage for the progress bar."""
    methods = multiprocessing.get_all_start_methods()
    ctx: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    data = cfg.resolved()
    procs = [
        ctx.Process(target=_child, args=(data, url, target, [worker_id, i]), daemon=False)
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(1.0)
            _show_progress(bar, study, target)
    except BaseException:
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise
    finally:
        for p in procs:
            p.join()
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise RuntimeError(f"{len(bad)} tuning worker(s) exited with codes {bad}")


def _run_ray_actors(
    cfg: StudyConfig,
    url: str,
    target: int,
    workers: int,
    worker_id: int,
    study: optuna.Study,
    bar: tqdm,
    executor: RayExecutor,
) -> None:
    """``workers`` Ray actors, each a full Optuna worker on the shared storage (pinned to this
    node for a SQLite file); the parent only polls the storage for the progress bar."""
    sqlite = url.startswith("sqlite:")
    if sqlite and executor.node_count() > 1:
        print(
            f"pvegym tune: SQLite storage is not shared between machines: the {workers} Ray "
            "worker(s) run on this node (use --storage postgresql+psycopg://… to spread them)",
            file=sys.stderr,
        )
    args = [(cfg.resolved(), url, target, [worker_id, i]) for i in range(workers)]
    executor.run_actors(
        _child, args, lambda: _show_progress(bar, study, target), pin_to_this_node=sqlite
    )
    _show_progress(bar, study, target)


def _show_progress(bar: tqdm, study: optuna.Study, target: int) -> None:
    """The finished trials the storage holds and the best value so far, on the progress bar."""
    bar.n = min(count_finished(study), target)
    bar.set_postfix_str(_best_text(study), refresh=False)
    bar.refresh()


def _best_text(study: optuna.Study) -> str:
    try:
        if len(study.directions) == 1:
            return f"best {study.best_value:.4g}"
        return f"{len(study.best_trials)} Pareto-optimal"
    except (ValueError, RuntimeError):
        return "no feasible trial yet"
