"""``pvegym tune`` with failing trials and with several workers (issue 18's reproducers): a study
whose every trial fails exits 1, two workers with the default worker id sample different
parameters, and two workers never overshoot the budget of finished trials."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from pvegym.cli import main
from pvegym.tuning import objective as objective_mod
from pvegym.tuning.study import MAX_CONSECUTIVE_FAILS, run_study
from pvegym.tuning.study_config import load_study_config
from tests.tuning.test_tune import storage, study_file


def _states(url: str, name: str) -> list[TrialState]:
    return [t.state for t in optuna.load_study(study_name=name, storage=url).trials]


def test_tune_exits_1_when_every_trial_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("every instance fails")

    monkeypatch.setattr(objective_mod, "evaluate_instance", broken)
    url = storage(tmp_path, "f")
    args = ["tune", str(study_file(tmp_path)), "--storage", url, "--no-report", "--quiet"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "failed" in err and "every instance fails" in err
    assert len(err.strip().splitlines()) == 1
    # the worker gives up after MAX_CONSECUTIVE_FAILS failures in a row; nothing counts
    assert _states(url, "t-tiny") == [TrialState.FAIL] * MAX_CONSECUTIVE_FAILS


def _worker(path: str, url: str, barrier: Any) -> None:
    cfg = load_study_config(path)
    barrier.wait(timeout=120)  # both join the study holding the same number of finished trials
    run_study(cfg, url, progress=False)  # the default worker id


def test_two_default_id_workers_sample_different_parameters(tmp_path: Path) -> None:
    path = study_file(tmp_path, n_trials=3)
    cfg = load_study_config(path)
    url = storage(tmp_path, "w")
    run_study(cfg, url, n_trials=1, worker_id=0, progress=False)  # the defaults trial
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=_worker, args=(str(path), url, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
        assert p.exitcode == 0
    trials = optuna.load_study(study_name=cfg.name, storage=url).trials
    sampled = [t for t in trials[1:] if t.state == TrialState.COMPLETE]
    assert len(sampled) == 2
    assert sampled[0].user_attrs["worker"] != sampled[1].user_attrs["worker"]
    assert sampled[0].params != sampled[1].params


def test_two_workers_do_not_overshoot_the_budget(tmp_path: Path) -> None:
    cfg = load_study_config(study_file(tmp_path, n_trials=3))
    url = storage(tmp_path, "b")
    info = run_study(cfg, url, workers=2, progress=False)
    states = _states(url, cfg.name)
    finished = [s for s in states if s in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == cfg.n_trials == info.after
    assert TrialState.RUNNING not in states
