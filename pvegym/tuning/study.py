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

**Budget and resume.** ``n_trials`` in the file is the study's total of *finished* trials —
COMPLETE or PRUNED, counted over the study, whichever worker ran them: a run (re)started on a
study that holds k runs only the rest, so a study stopped midway — Ctrl-C, a killed worker, a
rebooted machine — continues where it stopped and adds up to exactly ``n_trials``. ``--n-trials
N`` asks for N more. Before each trial a worker checks the study: it starts a trial only while
finished + running trials are below the budget, and a trial that finds itself past the budget
(two workers asked at the same moment) ends at once as FAIL (``over_budget``) without running —
so the budget never overshoots. A worker whose budget is taken by trials still running elsewhere
waits for them, so that it can take over a trial whose worker died.

**On Ray** (``--executor ray[:ADDRESS]``): the ``--workers`` workers are Ray actors, each a full
worker as above on the same storage — Ray only places them. A PostgreSQL storage lets them run on
any node. A SQLite file exists on this machine only, so with a SQLite URL the actors are pinned to
this node (they share the file as local processes do) and a note says so when the cluster has
other nodes: use ``--storage postgresql+psycopg://…`` to spread them.

**Failures.** A trial whose objective raises is recorded FAIL with its error and traceback; it
does not count towards the budget, and a worker stops after :data:`MAX_CONSECUTIVE_FAILS` failures
in a row (``tune`` then exits 1 naming the error) instead of spending the budget on a crash. A
worker killed mid-trial leaves a RUNNING trial: a worker on the same host sees at once that its
process is gone (:func:`~pvegym.tuning.objective.worker_is_dead`), any worker sees it once its
heartbeat (every :data:`HEARTBEAT_S`) is :data:`GRACE_S` old; either way it becomes FAIL and the
same parameters are enqueued again (:func:`retry_failed`). The defaults trial (``role =
defaults``) is enqueued again by every worker until one completes.

**Determinism.** A worker's sampler seed is derived from the study seed, its worker id and the
number of trials the study held when it started. ``--worker-id N`` makes that reproducible: a
sequential study with ``--worker-id 0`` gives the same trials, also when split into several runs at
the same points. Without it every worker gets a unique id (host, process id and start time), so
that workers started at the same moment on several machines never sample the same parameters.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import fcntl
import hashlib
import json
import multiprocessing
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial, TrialState
from tqdm import tqdm

import pvegym
from pvegym.errors import ConfigError, show
from pvegym.experiments.executor import RayExecutor
from pvegym.provenance import git_commit
from pvegym.tuning.objective import Objective, worker_is_dead, worker_name
from pvegym.tuning.study_config import StudyConfig

HEARTBEAT_S = 5  # a running trial's worker writes a heartbeat this often (s)
GRACE_S = 30  # a RUNNING trial without heartbeat for this long is failed by any worker (s)
SQLITE_TIMEOUT_S = 60  # how long a SQLite writer waits for the lock held by another worker (s)
POLL_S = 2.0  # how often a worker whose budget is taken by running trials checks them (s)
MAX_RETRIES = 3  # a trial whose worker died is retried this often with the same parameters
MAX_CONSECUTIVE_FAILS = 3  # a worker stops after this many failed trials in a row
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)  # what counts towards the budget

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def results_dir(cfg: StudyConfig, root: Path | str = "results") -> Path:
    return Path(root) / cfg.out_name


def default_storage(cfg: StudyConfig, root: Path | str = "results") -> str:
    """``sqlite:///results/<study>/study.db`` (relative to the working directory)."""
    return f"sqlite:///{results_dir(cfg, root) / 'study.db'}"


#: the first bytes of an SQLite database file
SQLITE_MAGIC = b"SQLite format 3\x00"


def storage_error(url: str, err: BaseException) -> ConfigError:
    """A storage failure as one line: the driver's first line, without SQLAlchemy's background
    links or the SQL it ran."""
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    text = text.split(" [SQL:")[0].split("(Background on this error")[0].strip()
    return ConfigError("--storage", f"cannot use {redact(url)}: {show(text, 160, quote=False)}")


def check_sqlite(url: str) -> Path:
    """The database file of an ``sqlite:///PATH`` URL, made ready: an in-memory database (which
    keeps nothing) is refused, an existing file must be a regular SQLite file (or empty), and its
    directory is created."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        database = make_url(url).database
    except (ArgumentError, ValueError) as err:
        raise storage_error(url, err) from None
    if not database or database == ":memory:":
        raise ConfigError(
            "--storage",
            f"{redact(url)} is an in-memory database, which keeps nothing: name a file "
            "(sqlite:///results/<study>/study.db)",
        )
    if "\x00" in database or any(len(part.encode()) > 255 for part in Path(database).parts):
        raise ConfigError("--storage", f"{show(database)} is not a usable file name")
    path = Path(database)
    try:
        if path.exists() or path.is_symlink():
            if not path.is_file():
                raise ConfigError("--storage", f"{show(database)} is not a regular file")
            with path.open("rb") as fh:
                head = fh.read(len(SQLITE_MAGIC))
            if head and head != SQLITE_MAGIC:
                raise ConfigError("--storage", f"{show(database)} is not an SQLite database")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError("--storage", f"cannot use {show(database)}: {err.strerror}") from None
    return path


def make_storage(url: str) -> RDBStorage:
    """Optuna's RDB storage for ``url``, with heartbeats; SQLite waits for other writers' locks
    instead of failing at once, PostgreSQL connections are checked before reuse. A URL that
    names no usable database (malformed, a file that is not SQLite, an unreachable server, a
    missing driver) is one line at ``--storage``."""
    if not url or "\x00" in url or len(url) > 4096:
        raise ConfigError("--storage", f"{show(url)} is not a database URL")
    database: Path | None = None
    if url.startswith("sqlite:"):
        database = check_sqlite(url)
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    else:
        engine_kwargs = {"pool_pre_ping": True}
    try:
        with _schema_lock(url, database), warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = RDBStorage(
                url,
                engine_kwargs=engine_kwargs,
                heartbeat_interval=HEARTBEAT_S,
                grace_period=GRACE_S,
                heartbeat_stale_trial_callback=retry_failed,
            )
    except Exception as err:  # bad URL, unreachable server, missing driver, corrupt file
        raise storage_error(url, err) from None
    if url.startswith("sqlite:"):
        _serialize_sqlite(storage.engine)
    return storage


@contextlib.contextmanager
def _schema_lock(url: str, database: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the SQLite file while Optuna creates or checks its schema:
    two workers started at once on a new file both found the tables missing and the second died
    on ``table … already exists`` (Optuna creates the tables, its version row and the alembic
    stamp outside any transaction). ``flock`` does not interact with SQLite's own ``fcntl`` locks
    on Linux. Other databases serialize their DDL themselves."""
    if database is None:
        yield
        return
    try:
        fd = os.open(database, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as err:
        raise ConfigError("--storage", f"cannot use {redact(url)}: {err.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _serialize_sqlite(engine: Any) -> None:
    """Every SQLite transaction begins IMMEDIATE (takes the write lock first). Python's sqlite3
    otherwise reads outside a transaction and starts one only at the first write, so two workers
    can both read a WAITING trial and both mark it RUNNING — the same trial run twice (Optuna's
    ``for_update`` is a no-op on SQLite). PostgreSQL's ``SELECT … FOR UPDATE`` needs no help."""
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections made before the listeners would still read outside


def retry_failed(study: optuna.Study, trial: FrozenTrial) -> None:
    """A trial whose worker died (now FAIL): enqueue the same parameters again, keeping its role
    (the defaults trial stays the defaults trial), at most :data:`MAX_RETRIES` times."""
    retries = int(trial.user_attrs.get("retries", 0))
    if retries >= MAX_RETRIES or not trial.params:
        return
    attrs = {k: v for k, v in trial.user_attrs.items() if k in ("role",)}
    attrs.update(retries=retries + 1, retry_of=trial.number)
    study.enqueue_trial(dict(trial.params), user_attrs=attrs, skip_if_exists=False)


def reap_orphans(study: optuna.Study) -> int:
    """FAIL (and retry) the RUNNING trials whose worker is gone: a process of this host that no
    longer runs, a trial that never got a worker name within :data:`GRACE_S`, or (Optuna's
    heartbeat) any trial silent for :data:`GRACE_S`. Returns how many were failed here."""
    with warnings.catch_warnings():  # "experimental" since Optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    storage = study._storage
    now = datetime.datetime.now()
    failed = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        name = t.user_attrs.get("worker")
        if name is None:
            started = t.datetime_start or now
            dead = (now - started).total_seconds() > GRACE_S
        else:
            dead = worker_is_dead(str(name))
        if dead:
            try:
                updated = storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                updated = False  # another worker got there first
            if updated:
                study.set_user_attr("reaped", int(study.user_attrs.get("reaped", 0)) + 1)
                retry_failed(study, copy.deepcopy(study._storage.get_trial(t._trial_id)))
                failed += 1
    return failed


def ensure_defaults(cfg: StudyConfig, study: optuna.Study) -> None:
    """Enqueue the defaults trial unless one is finished, running or waiting (a kill during it,
    or before it was ever enqueued, must not lose it)."""
    if not cfg.enqueue_defaults:
        return
    live = (*FINISHED, TrialState.RUNNING, TrialState.WAITING)
    if any(t.user_attrs.get("role") == "defaults" for t in study.get_trials(False, states=live)):
        return
    defaults = cfg.defaults()
    fixed = {k: v for k, v in defaults.items() if _contains(cfg.params[k], v)}
    if fixed:
        study.enqueue_trial(fixed, user_attrs={"role": "defaults"})


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
    study scores the field report's defaults on the training suite, and TPE starts from them; every worker
    enqueues it again until it has run: :func:`ensure_defaults`).
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
    if created:
        ensure_defaults(cfg, study)
    return study


def count_finished(study: optuna.Study) -> int:
    """Trials that count towards the budget: COMPLETE or PRUNED."""
    return len(study.get_trials(deepcopy=False, states=FINISHED))


@dataclass
class RunInfo:
    """What a ``tune`` run did: finished trials in the study before/after, the budget, wall time
    (s), the storage URL, and trials that failed during the run (``error``: the last one's)."""

    storage: str
    before: int
    after: int
    target: int
    wall_s: float
    failed: int = 0
    error: str = ""


class _OverBudget(Exception):
    """A trial that found the budget already taken (raised before it runs anything)."""


class _Guarded:
    """The objective behind a budget check: a trial starts only if fewer than ``target`` trials
    with smaller numbers are finished or running (trial numbers are handed out in order by the
    storage, so two workers that asked at once cannot both take the last slot)."""

    def __init__(self, objective: Objective, target: int) -> None:
        self.objective = objective
        self.target = target
        self.over = False

    def __call__(self, trial: optuna.Trial) -> Any:
        states = (*FINISHED, TrialState.RUNNING)
        ahead = [t for t in trial.study.get_trials(False, states=states) if t.number < trial.number]
        if len(ahead) >= self.target:
            self.over = True
            trial.set_user_attr("over_budget", True)
            raise _OverBudget(f"budget of {self.target} trials already taken")
        return self.objective(trial)


def _worker(
    cfg: StudyConfig,
    storage_url: str,
    target: int,
    tag: list[Any],
    on_trial: Callable[[optuna.Study, FrozenTrial], None] | None = None,
    objective: Objective | None = None,
) -> tuple[int, str]:
    """One worker: join the study with its own sampler seed and run trials until the study holds
    ``target`` finished trials (or the file's ``timeout_s``, or too many failures in a row).
    Returns (failed trials, the last failure's error)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # a failed trial is reported by `tune`
    probe = open_study(cfg, storage_url)
    reap_orphans(probe)
    existing = count_finished(probe)
    study = open_study(cfg, storage_url, sampler_seed=derive_seed(cfg.sampler.seed, *tag, existing))
    commit, _ = git_commit()
    guarded = _Guarded(
        objective if objective is not None else Objective(cfg, git_commit=commit), target
    )
    started = time.monotonic()
    failed, in_a_row, error = 0, 0, ""
    # the trial each optimize call ran, as Optuna hands it to the callbacks (an enqueued trial —
    # the defaults, a retry — has a number below the trials that existed before: counting "new
    # numbers" missed it, and a defaults trial that failed every time looped for ever)
    ran: list[FrozenTrial] = []

    def record(_: optuna.Study, trial: FrozenTrial) -> None:
        ran.append(trial)

    while cfg.timeout_s is None or time.monotonic() - started < cfg.timeout_s:
        reap_orphans(study)
        ensure_defaults(cfg, study)
        done = count_finished(study)
        running = len(study.get_trials(False, states=(TrialState.RUNNING,)))
        waiting = len(study.get_trials(False, states=(TrialState.WAITING,)))
        if done >= target:
            break
        if done + running >= target and not waiting:
            time.sleep(POLL_S)  # the budget is taken by running trials: wait for them (or take
            continue  # over theirs, should their worker die)
        ran.clear()
        study.optimize(guarded, n_trials=1, catch=(Exception,), callbacks=[record])
        if guarded.over:
            guarded.over = False
            time.sleep(POLL_S)
            continue
        for t in ran:
            if on_trial is not None:
                on_trial(study, t)
            if t.state == TrialState.FAIL:
                failed += 1
                in_a_row += 1
                error = str(t.user_attrs.get("error", "unknown error"))
            else:
                in_a_row = 0
        if in_a_row >= MAX_CONSECUTIVE_FAILS:
            break
    return failed, error


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
    worker_id: int | None = None,
    progress: bool = True,
    objective: Objective | None = None,
    executor: RayExecutor | None = None,
) -> RunInfo:
    """Optimize until the study holds its budget of finished trials (``cfg.n_trials``), or
    ``n_trials`` more than it holds now; ``workers`` local processes share it through the storage
    (Ray actors with ``executor``). ``worker_id`` makes the sampler seeds reproducible (default:
    unique per process)."""
    url = storage_url or default_storage(cfg)
    started = time.perf_counter()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = open_study(cfg, url)
    reap_orphans(study)
    before = count_finished(study)
    # trials already over before this run (an enqueued trial that is still WAITING is not: its
    # failure during this run counts, as the defaults trial's does)
    over = {t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()}
    target = before + n_trials if n_trials is not None else cfg.n_trials
    info = RunInfo(url, before, before, target, 0.0)
    if target <= before:
        return info
    base: Any = worker_id if worker_id is not None else worker_name()
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
            _run_ray_actors(cfg, url, target, workers, base, study, bar, executor)
        elif workers <= 1:

            def tick(study: optuna.Study, trial: FrozenTrial) -> None:
                _show_progress(bar, study, target)

            _worker(cfg, url, target, [base, 0], tick, objective)
        else:
            _run_processes(cfg, url, target, workers, base, study, bar)
    info.after = count_finished(study)
    failures = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.number not in over and "error" in t.user_attrs
    ]
    info.failed = len(failures)
    if failures:
        info.error = f"trial {failures[-1].number}: {failures[-1].user_attrs['error']}"
    info.wall_s = time.perf_counter() - started
    return info


def _run_processes(
    cfg: StudyConfig,
    url: str,
    target: int,
    workers: int,
    base: Any,
    study: optuna.Study,
    bar: tqdm,
) -> None:
    """``workers`` local processes, each a full Optuna worker on the shared storage; the parent
    only polls the storage for the progress bar. A worker that died (killed, out of memory) is
    not an error here: its trial is failed and retried, and the study's count says what is done."""
    methods = multiprocessing.get_all_start_methods()
    ctx: Any = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    data = cfg.resolved()
    procs = [
        ctx.Process(target=_child, args=(data, url, target, [base, i]), daemon=False)
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


def _run_ray_actors(
    cfg: StudyConfig,
    url: str,
    target: int,
    workers: int,
    base: Any,
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
    args = [(cfg.resolved(), url, target, [base, i]) for i in range(workers)]
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
