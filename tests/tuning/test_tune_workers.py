"""Issue 18's tuning reproducers as regression tests:

* a study in which every trial fails ended with exit 0 — now ``tune`` stops after
  :data:`~pvegym.tuning.study.MAX_CONSECUTIVE_FAILS` failures in a row and exits 1 with one line;
* two workers started with the default worker id sampled identical parameters (the same sampler
  seed: study seed, worker id 0, trials finished at start) — now each process has its own id;
* two workers on one study overshot the budget (41 of 40) and each printed its own count — now
  the study ends with exactly ``n_trials`` finished trials and every worker prints the study's.

The concurrent workers are two ``python -m pvegym tune`` processes of the command line (no fork of
this process, which may hold numba or torch threads), started with the same arguments on one
SQLite storage, on a tiny study: the failure-loop scenario, one seed, one simulated minute.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from pvegym.tuning.study import FINISHED, MAX_CONSECUTIVE_FAILS

N_TRIALS = 4  # the study's budget, shared by the two workers
TIMEOUT_S = 180  # per worker process: a hang fails the test instead of blocking the suite

STUDY = f"""
name = "t-workers"
n_trials = {N_TRIALS}
[policy]
name = "patched"
[params.min_improvement]
low = 0.0
high = 0.3
[params.backoff_base_s]
low = 10.0
high = 300.0
log = true
[[objectives]]
name = "cost"
weights = {{ guest_stall_s = 1.0, moves = 60.0, moves_failed = 120.0 }}
[sampler]
seed = 7
n_startup_trials = {N_TRIALS}
[[train]]
name = "failure-loop"
seeds = [0]
duration = "1m"
[[test]]
name = "failure-loop"
seeds = [10]
duration = "1m"
"""


def _study_file(directory: Path) -> Path:
    path = directory / "t-workers.toml"
    path.write_text(STUDY)
    return path


# ``pvegym tune`` in which every episode crashes at trial time, as ``round_s = inf`` did (an
# OverflowError) before the study file's validation refused it at load
CRASHING_TUNE = """
import sys
from pvegym.cli import main
from pvegym.sim.simulation import Simulation

def crash(self, *args, **kwargs):
    raise OverflowError("cannot convert float infinity to integer")

Simulation.run = crash
sys.exit(main(sys.argv[1:]))
"""


def test_a_study_whose_every_trial_fails_exits_1(tmp_path: Path) -> None:
    """The worker stops after a few failed trials instead of spending the budget (or looping on
    the defaults trial, which is enqueued again after each failure), and ``tune`` says so in one
    line and exits 1 (it exited 0)."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    cmd = [sys.executable, "-c", CRASHING_TUNE, "tune", str(_study_file(tmp_path))]
    cmd += ["--storage", url, "--no-report", "--quiet"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 1, proc.stderr[-2000:]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert f"{MAX_CONSECUTIVE_FAILS} trial(s) failed" in err[0]
    assert "OverflowError: cannot convert float infinity to integer" in err[0]
    study = optuna.load_study(study_name="t-workers", storage=url)
    failed = study.get_trials(states=(TrialState.FAIL,))
    assert len(failed) == MAX_CONSECUTIVE_FAILS and not study.get_trials(states=FINISHED)
    # the defaults trial failed and counted: enqueued, its number is below the trials that
    # existed when it started, and a worker that looked only at new numbers looped for ever
    assert failed[0].user_attrs.get("role") == "defaults"
    assert all(t.user_attrs["error"].startswith("OverflowError") for t in failed)


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two ``pvegym tune`` processes with the same arguments (no ``--worker-id``) started at once
    on one SQLite study of ``N_TRIALS`` trials; their exit codes and output, and the study."""
    work = tmp_path_factory.mktemp("two-workers")
    url = f"sqlite:///{work / 'study.db'}"
    cmd = [sys.executable, "-m", "pvegym", "tune", str(_study_file(work)), "--storage", url]
    cmd += ["--out", str(work / "run"), "--no-report", "--quiet"]
    procs = [
        subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=TIMEOUT_S))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    study = optuna.load_study(study_name="t-workers", storage=url)
    return {"codes": [p.returncode for p in procs], "outputs": outputs, "study": study}


def test_two_workers_with_the_default_worker_id_sample_different_parameters(
    two_workers: dict[str, Any],
) -> None:
    assert two_workers["codes"] == [0, 0], two_workers["outputs"]
    trials = two_workers["study"].trials
    workers = {t.user_attrs.get("worker") for t in trials if t.state in FINISHED}
    assert len(workers) == 2, "one worker ran every trial: the test saw no concurrency"
    # every trial that ran (retries of a killed trial keep their parameters; none here) was
    # sampled once: the two sampler streams differ
    ran = [t for t in trials if t.params]
    assert not any("retry_of" in t.user_attrs for t in ran)
    params = [tuple(sorted(t.params.items())) for t in ran]
    assert len(set(params)) == len(params), params


def test_two_workers_end_with_exactly_the_budget_and_print_the_study_count(
    two_workers: dict[str, Any],
) -> None:
    assert two_workers["codes"] == [0, 0], two_workers["outputs"]
    states = [t.state for t in two_workers["study"].trials]
    assert sum(s in FINISHED for s in states) == N_TRIALS  # not N_TRIALS + 1
    assert TrialState.RUNNING not in states and TrialState.WAITING not in states
    for out, _ in two_workers["outputs"]:
        # the count is the study's (both workers'), not this process's
        assert f"{N_TRIALS} of {N_TRIALS} trials complete or pruned in the study" in out, out
