"""``pvegym tune``: reproducible sequential studies, resume, failed trials kept, Wilcoxon pruning.

Tiny budgets and short episodes (failure-loop for 3 min, one `small` instance for 5 min): the point
is the study machinery, not the tuned values.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from pvegym.cli import main
from pvegym.tuning import objective as objective_mod
from pvegym.tuning.study import FINISHED, count_finished, open_study, run_study
from pvegym.tuning.study_config import StudyConfig, load_study_config
from tests.conftest import write_study

ROOT = Path(__file__).resolve().parents[2]

STUDY = """
name = "{name}"
n_trials = {n_trials}
constraints = ["failed_repeats <= 0"]
[policy]
name = "patched"
[params.min_improvement]
low = 0.0
high = 0.3
[params.backoff_base_s]
low = 10.0
high = 300.0
log = true
[params.boost_factor]
target = "scenario.migration.boost_factor"
low = 1.1
high = 2.5
[[objectives]]
name = "cost"
weights = {{ guest_stall_s = 1.0, moves = 60.0, moves_failed = 120.0 }}
[sampler]
seed = 7
n_startup_trials = 2
[pruner]
type = "wilcoxon"
[report]
bootstrap_resamples = 200
[[train]]
name = "failure-loop"
seeds = [0, 1, 2]
duration = "3m"
[[train]]
name = "small"
seeds = [3]
duration = "5m"
[[test]]
name = "failure-loop"
seeds = [10, 11]
duration = "3m"
"""


def study_file(tmp_path: Path, name: str = "t-tiny", n_trials: int = 4, **extra: str) -> Path:
    return write_study(tmp_path, STUDY, name, n_trials, *extra.items())


def storage(tmp_path: Path, tag: str) -> str:
    (tmp_path / tag).mkdir(exist_ok=True)
    return f"sqlite:///{tmp_path / tag / 'study.db'}"


def summary(url: str, name: str) -> list[tuple[int, str, dict[str, Any], Any]]:
    study = optuna.load_study(study_name=name, storage=url)
    return [(t.number, t.state.name, t.params, t.values) for t in study.trials]


def test_same_file_and_seed_sequential_gives_the_same_trials(tmp_path: Path) -> None:
    cfg = load_study_config(study_file(tmp_path))
    a, b = storage(tmp_path, "a"), storage(tmp_path, "b")
    run_study(cfg, a, worker_id=0, progress=False)
    run_study(cfg, b, worker_id=0, progress=False)
    first, second = summary(a, cfg.name), summary(b, cfg.name)
    assert len(first) == cfg.n_trials
    assert first == second
    assert first[0][2] == {"min_improvement": 0.1, "backoff_base_s": 60.0, "boost_factor": 1.5}
    attrs = optuna.load_study(study_name=cfg.name, storage=a).user_attrs
    assert attrs["study_sha256"] == cfg.study_hash()
    assert attrs["config"]["name"] == cfg.name and "git_commit" in attrs


def test_a_study_split_across_runs_continues_and_adds_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = study_file(tmp_path, n_trials=5)
    url = storage(tmp_path, "s")
    assert main(["tune", str(path), "--storage", url, "--n-trials", "2", "--no-report"]) == 0
    assert len(summary(url, "t-tiny")) == 2
    # no --n-trials: up to the file's total of 5, then the held-out report
    assert main(["tune", str(path), "--storage", url, "--quiet"]) == 0
    trials = summary(url, "t-tiny")
    assert [t[0] for t in trials] == [0, 1, 2, 3, 4]
    assert len({repr(t[2]) for t in trials}) == 5  # a resumed sampler does not repeat samples
    out = capsys.readouterr().out
    assert "optuna-dashboard sqlite:///" in out
    # a worker whose file means another study is refused, naming the key
    other = study_file(tmp_path, n_trials=5, **{"high = 0.3": "high = 0.4"})
    assert main(["tune", str(other), "--storage", url, "--no-report"]) == 2
    assert "name" in capsys.readouterr().err


def test_a_new_study_writes_a_fresh_run_dir_and_resumes_only_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the working directory is tmp_path (conftest): nothing may land in results/
    path = study_file(tmp_path, n_trials=5)
    assert main(["tune", str(path), "--n-trials", "1", "--no-report", "--quiet"]) == 0
    assert "new run in runs/t-tiny/" in capsys.readouterr().out
    assert (tmp_path / "runs" / "t-tiny" / "study.db").is_file()
    assert main(["tune", str(path), "--n-trials", "1", "--no-report", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "resuming runs/t-tiny/" in out and "2 of 2 trials complete or pruned in the study" in out
    other = study_file(tmp_path, n_trials=5, **{"high = 0.3": "high = 0.4"})
    assert main(["tune", str(other), "--n-trials", "1", "--no-report", "--quiet"]) == 0
    assert "new run in runs/t-tiny-2/" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()


def test_a_killed_worker_is_resumed(tmp_path: Path) -> None:
    """A worker process killed midway (SIGKILL, no cleanup): the next run continues the study."""
    path = study_file(tmp_path, n_trials=60)
    url = storage(tmp_path, "k")
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-m", "pvegym.cli", "tune", str(path), "--storage", url]
    cmd += ["--out", str(tmp_path / "run")]
    proc = subprocess.Popen(
        [*cmd, "--no-report", "--quiet"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cfg = load_study_config(path)
    try:
        deadline = time.monotonic() + 60
        done = 0
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
            try:
                done = count_finished(optuna.load_study(study_name=cfg.name, storage=url))
            except (KeyError, ValueError):  # the study does not exist yet
                continue
            if done >= 2:
                break
        assert done >= 2, "the worker did not finish 2 trials within 60 s"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    killed_at = count_finished(optuna.load_study(study_name=cfg.name, storage=url))
    assert killed_at < cfg.n_trials
    # restart with a smaller total (the budget is not part of the study's identity)
    target = killed_at + 2
    small = load_study_config(study_file(tmp_path, n_trials=target))
    run_study(small, url, progress=False)
    study = optuna.load_study(study_name=cfg.name, storage=url)
    assert count_finished(study) == target
    states = [t.state for t in study.trials]
    # the trial the kill interrupted was failed at once (its process is gone) and retried
    assert states.count(TrialState.RUNNING) == 0
    assert sorted(t.number for t in study.trials) == list(range(len(study.trials)))
    assert any(t.user_attrs.get("role") == "defaults" for t in study.trials if t.state in FINISHED)


def test_a_trial_that_raises_is_recorded_failed_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_study_config(study_file(tmp_path, n_trials=3))
    real = objective_mod.evaluate_instance
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 6:  # the second instance of the second trial
            raise RuntimeError("simulated worker crash")
        return real(*args, **kwargs)

    monkeypatch.setattr(objective_mod, "evaluate_instance", flaky)
    url = storage(tmp_path, "f")
    run_study(cfg, url, worker_id=0, progress=False)
    study = optuna.load_study(study_name=cfg.name, storage=url)
    states = [t.state for t in study.trials]
    # a failed trial does not count towards the budget of 3: three finished trials besides it
    # (the sampled ones may be pruned by the Wilcoxon pruner: finished either way)
    assert states[0] == TrialState.COMPLETE  # the defaults trial
    assert states[1] == TrialState.FAIL
    assert len(states) == 4 and all(s in FINISHED for s in states[2:])
    failed = study.trials[1]
    assert failed.user_attrs["error"] == "RuntimeError: simulated worker crash"
    assert "simulated worker crash" in failed.user_attrs["traceback"]
    assert failed.user_attrs["failed_at_instance"] == 1


def test_a_hopeless_trial_is_pruned(tmp_path: Path) -> None:
    """Without outcome tracking the failure loop is back (a failed move every ~40 s): after a few
    instances the Wilcoxon test says it is worse than the defaults, and the trial stops."""
    path = study_file(
        tmp_path,
        n_trials=2,
        **{
            "[params.min_improvement]\nlow = 0.0\nhigh = 0.3": (
                "[params.outcome_tracking]\nchoices = [true, false]"
            ),
            'seeds = [0, 1, 2]\nduration = "3m"': 'seeds = [0, 1, 2, 3, 4, 5, 6, 7]\nduration = "5m"',
            "constraints = ": "# constraints = ",
        },
    )
    cfg: StudyConfig = load_study_config(path)
    url = storage(tmp_path, "p")
    study = open_study(cfg, url)  # creates it and enqueues the defaults (outcome tracking on)
    study.enqueue_trial({"outcome_tracking": False, "backoff_base_s": 60.0, "boost_factor": 1.5})
    run_study(cfg, url, progress=False)
    study = optuna.load_study(study_name=cfg.name, storage=url)
    good, hopeless = study.trials
    assert good.state == TrialState.COMPLETE and good.params["outcome_tracking"] is True
    assert hopeless.state == TrialState.PRUNED
    assert hopeless.user_attrs["pruned_after"] < len(objective_mod.suite_instances(cfg))
