"""``--executor ray``: the same cells and a byte-identical report as the local pool, resume, and a
study whose workers are Ray actors reaching its budget — on a real local Ray cluster.

Ray binds and dials the machine's primary address even when told 127.0.0.1, so the cluster runs in
a private network namespace with only the loopback interface up (``unshare -n``, root; CI runs as
root). Where that is impossible (no Ray, not root) the tests are skipped with the reason — except
under ``PVEGYM_REQUIRE_RAY=1`` (set by ``.ci/run``), where they fail instead of passing unseen.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from pvegym.experiments.config import load_experiment
from pvegym.experiments.executor import LocalPool, RayExecutor, parse_executor
from pvegym.experiments.runner import run_experiment
from pvegym.tuning.study_config import load_study_config
from tests.conftest import TWO_SCENARIOS_TWO_SEEDS, tiny_experiment

ROOT = Path(__file__).resolve().parents[2]

EXPERIMENT = tiny_experiment(
    "tiny-ray",
    metrics=("moves", "moves_failed", "stall_cpu_s", "guest_stall_s"),
    duration="3m",
    timeline_seeds=1,
    bootstrap_resamples=200,
    scenarios=TWO_SCENARIOS_TWO_SEEDS,
    policies=("upstream", "patched"),
)
N_CELLS = 8  # 2 scenarios × 2 seeds × 2 policies

STUDY = """
name = "ray-study"
n_trials = 8
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
weights = { guest_stall_s = 1.0, moves = 60.0, moves_failed = 120.0 }
[sampler]
seed = 3
n_startup_trials = 2
[[train]]
name = "failure-loop"
seeds = [0, 1, 2]
duration = "10m"
[[test]]
name = "failure-loop"
seeds = [10]
duration = "3m"
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("PVEGYM_REQUIRE_RAY") == "1":
        pytest.fail(f"PVEGYM_REQUIRE_RAY=1 but {reason}")
    pytest.skip(reason)


def in_loopback_namespace(args: list[str], timeout: float = 300) -> str:
    """Run ``python -m pvegym ARGS`` in a private network namespace with only ``lo`` up; its
    stdout (fails the test with its stderr on a non-zero exit)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        _unavailable("Ray is not installed (the 'ray' extra)")
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        _unavailable("a private network namespace needs root, unshare and ip")
    cmd = shlex.join([sys.executable, "-m", "pvegym", *args])
    proc = subprocess.run(
        ["unshare", "-n", "bash", "-c", f"ip link set lo up && exec {cmd}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc.stdout


def test_ray_run_is_byte_identical_to_the_local_pool_and_resumes(tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT)
    local = run_experiment(load_experiment(path), tmp_path / "local", workers=1, progress=False)
    assert local.computed == N_CELLS
    out = tmp_path / "ray"
    run = ["run", str(path), "--out", str(out), "--quiet", "--executor", "ray", "--workers", "2"]
    stdout = in_loopback_namespace(run)
    assert f"{N_CELLS} cells evaluated, 0 reused" in stdout
    for name in ("metrics.csv", "summary.md"):
        assert (out / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    cells = sorted((out / "cells").glob("*.json"))
    assert sorted(p.name for p in cells) == sorted(
        p.name for p in (tmp_path / "local" / "cells").glob("*.json")
    )
    # resume: three cells lost (an interrupted run) are recomputed on Ray, the rest reused
    for p in cells[:3]:
        p.unlink()
    stdout = in_loopback_namespace(run)
    assert f"3 cells evaluated, {N_CELLS - 3} reused" in stdout
    assert (out / "metrics.csv").read_bytes() == (tmp_path / "local" / "metrics.csv").read_bytes()


def test_a_study_reaches_its_budget_with_two_ray_actors(tmp_path: Path) -> None:
    path = tmp_path / "study.toml"
    path.write_text(STUDY)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    args = ["tune", str(path), "--storage", url, "--workers", "2", "--executor", "ray"]
    in_loopback_namespace([*args, "--no-report", "--quiet"])
    cfg = load_study_config(path)
    study = optuna.load_study(study_name=cfg.name, storage=url)
    trials = study.get_trials(deepcopy=False)
    complete = [t.state for t in trials].count(TrialState.COMPLETE)
    # the budget, plus at most the trial the other worker was running when it was reached
    assert cfg.n_trials <= complete == len(trials) <= cfg.n_trials + 1
    assert len({t.user_attrs["worker"] for t in trials}) == 2  # both actors optimized it


def test_executor_specs() -> None:
    assert parse_executor("local", None) == LocalPool(1)
    assert parse_executor("local", 3) == LocalPool(3)
    ray = parse_executor("ray", 2)
    assert isinstance(ray, RayExecutor) and ray.address is None and ray.num_cpus == 2
    remote = parse_executor("ray:auto", 4)
    assert isinstance(remote, RayExecutor)
    assert remote.address == "auto" and remote.max_in_flight == 4 and remote.num_cpus is None


@pytest.mark.parametrize(
    ("spec", "needle"),
    [("dask", "allowed: local, ray, ray:ADDRESS"), ("ray:", "needs an address")],
)
def test_bad_executor_is_a_one_line_error(
    spec: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pvegym.cli import main

    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT)
    assert main(["run", str(path), "--executor", spec, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--executor" in err and needle in err


def test_without_ray_the_error_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pvegym.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    path = tmp_path / "tiny.toml"
    path.write_text(EXPERIMENT)
    assert main(["run", str(path), "--executor", "ray", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pvegym[ray]" in err
    assert not (tmp_path / "o").exists()  # refused before anything ran
