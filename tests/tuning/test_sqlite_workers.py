"""Workers sharing a SQLite study never run the same trial twice: each of 30 enqueued trials is
popped by exactly one of 4 processes asking at once (SQLite transactions begin IMMEDIATE)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import optuna

from pvegym.tuning.study import make_storage


def _ask(url: str, asks: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="race", storage=make_storage(url))
    got = []
    for _ in range(asks):
        trial = study.ask()
        got.append(trial.user_attrs.get("i"))
        study.tell(trial, 0.0)
    out.put(got)


def test_enqueued_trials_are_popped_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    study = optuna.create_study(study_name="race", storage=make_storage(url))
    for i in range(30):
        study.enqueue_trial({}, user_attrs={"i": i})
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_ask, args=(url, 12, out)) for _ in range(4)]
    for p in procs:
        p.start()
    popped = [i for _ in procs for i in out.get(timeout=120) if i is not None]
    for p in procs:
        p.join()
    assert sorted(popped) == list(range(30))  # every enqueued trial once, none twice
