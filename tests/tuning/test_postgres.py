"""Two worker processes optimize one study in PostgreSQL at the same time (``PVEGYM_TEST_PG_URL``).

``scripts/postgres.sh`` starts a local server and prints the URL; CI exports it. Without the variable,
or when the server does not answer, the test is *skipped* with the reason — never passed silently.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from pvegym.tuning.study import open_study
from pvegym.tuning.study_config import load_study_config
from tests.conftest import write_study

ROOT = Path(__file__).resolve().parents[2]
N_TRIALS = 8

STUDY = """
name = "{name}"
n_trials = {n_trials}
[policy]
name = "patched"
[params.min_improvement]
low = 0.0
high = 0.3
[params.cooldown_s]
low = 30.0
high = 3600.0
log = true
[params.abort_factor]
target = "scenario.migration.abort_factor"
low = 2.5
high = 8.0
[[objectives]]
weights = {{ guest_stall_s = 1.0, moves = 60.0 }}
[sampler]
n_startup_trials = 3
[[train]]
name = "failure-loop"
seeds = [0, 1]
duration = "3m"
[[test]]
name = "failure-loop"
seeds = [10]
duration = "3m"
"""


def pg_url() -> str:
    url = os.environ.get("PVEGYM_TEST_PG_URL", "")
    if not url:
        pytest.skip('PVEGYM_TEST_PG_URL is not set (eval "$(bash scripts/postgres.sh)")')
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(url, connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
    except Exception as err:  # no driver, no server, bad credentials
        pytest.skip(f"PostgreSQL at PVEGYM_TEST_PG_URL is unreachable: {type(err).__name__}: {err}")
    return url


def test_two_workers_share_one_study_in_postgres(tmp_path: Path) -> None:
    url = pg_url()
    name = f"pg-{uuid.uuid4().hex[:12]}"
    path = write_study(tmp_path, STUDY, name, N_TRIALS)
    cmd = [sys.executable, "-m", "pvegym.cli", "tune", str(path), "--storage", url]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    # create the study here, then two independent worker processes join it (as on two machines)
    open_study(load_study_config(path), url)
    workers = [
        subprocess.Popen(
            [*cmd, "--no-report", "--quiet", "--worker-id", str(k)],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (1, 2)
    ]
    try:
        results = [w.communicate(timeout=240) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
    for w, (_, err) in zip(workers, results, strict=True):
        assert w.returncode == 0, err
    try:
        study = optuna.load_study(study_name=name, storage=url)
        trials = study.trials
        finished = [t for t in trials if t.state == TrialState.COMPLETE]
        # the budget is the study's total; each worker may finish the trial it had started
        assert N_TRIALS <= len(finished) <= N_TRIALS + 1, [t.state for t in trials]
        # a trial that found the budget taken at its start (two workers asking at once) ends FAIL
        # without running (``over_budget``): the only other state a trial may end in
        others = [t for t in trials if t.state != TrialState.COMPLETE]
        assert all(
            t.state == TrialState.FAIL and t.user_attrs.get("over_budget") for t in others
        ), [(t.state, t.user_attrs) for t in others]
        assert sorted(t.number for t in trials) == list(range(len(trials)))
        params = [tuple(sorted(t.params.items())) for t in finished]
        assert len(set(params)) == len(params), "two workers evaluated the same candidate"
        hosts = {t.user_attrs["worker"] for t in finished}
        assert len(hosts) == 2, f"both workers should have run trials: {hosts}"
        assert study.user_attrs["config"]["name"] == name
    finally:
        optuna.delete_study(study_name=name, storage=url)
