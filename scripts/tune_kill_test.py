"""Kill ``pvegym tune`` at random moments, resume it, and check the study adds up.

    .venv/bin/python scripts/tune_kill_test.py [--kills 10] [--n-trials 30] [--workers 1] [--seed 0]
        [--max-delay 8] [--targeted]

Each round starts ``pvegym tune STUDY --storage sqlite:///…`` in its own process group and kills
the whole group with SIGKILL (no cleanup, as a crashed machine) after a random delay, uniform
in [0, ``--max-delay``] s, or as soon as the run has finished one more trial, whichever comes
first — so kills land during start-up, study creation, the defaults trial, mid-trial and between
trials, and a killed run adds about one trial however fast the machine is: a study of more than
twice ``--kills`` trials is still unfinished after ``--kills`` kills (else the run says so and
fails). With ``--targeted`` every other kill waits for the run to start a trial and lands 0–0.5 s
into it.
After ``--kills`` kills one last run is left to finish. Then the study must hold:

* no RUNNING trial,
* exactly ``n_trials`` trials COMPLETE or PRUNED,
* the defaults trial (``role = defaults``) among them.

Exit 0 when all hold, 1 otherwise; the per-round log and the final trial states are printed.
``tests/tuning/test_tune_kills.py`` runs a shorter version of this in CI.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

STUDY = """
name = "kill-test"
n_trials = {n_trials}
[policy]
name = "patched"
[params.min_improvement]
low = 0.0
high = 0.3
[params.hold_duration]
low = 1
high = 6
int = true
[[objectives]]
name = "cost"
weights = {{ guest_stall_s = 1.0, moves = 60.0 }}
[sampler]
n_startup_trials = 3
[[train]]
name = "failure-loop"
seeds = [0, 1]
duration = "6m"
[[test]]
name = "failure-loop"
seeds = [100]
duration = "2m"
"""


def pvegym() -> list[str]:
    exe = Path(sys.executable).with_name("pvegym")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pvegym"]


def run(
    kills: int,
    n_trials: int,
    workers: int,
    seed: int,
    work: Path,
    max_delay: float = 8.0,
    targeted: bool = False,
    quiet: bool = False,
) -> bool:
    import optuna
    from optuna.trial import TrialState

    rng = random.Random(seed)
    study_file = work / "study.toml"
    study_file.write_text(STUDY.format(n_trials=n_trials))
    url = f"sqlite:///{work / 'study.db'}"
    cmd = [*pvegym(), "tune", str(study_file), "--storage", url, "--no-report", "--quiet"]
    cmd += ["--workers", str(workers)]
    say = (lambda *a: None) if quiet else print

    killed = attempts = 0
    while killed < kills:
        attempts += 1
        mid_trial = targeted and killed % 2 == 1
        delay = rng.uniform(0.0, 0.5 if mid_trial else max_delay)
        started, since = time.monotonic(), datetime.datetime.now()
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        while mid_trial and proc.poll() is None and not _running_since(url, since):
            time.sleep(0.05)  # wait until this run is inside a trial
        deadline, budget = time.monotonic() + delay, _finished(url) + 1
        while proc.poll() is None and time.monotonic() < deadline and _finished(url) < budget:
            time.sleep(0.05)  # the delay, cut short once this run has finished a trial
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            killed += 1
        say(
            f"run {attempts:2d}: {'killed' if proc.returncode < 0 else 'finished'} after "
            f"{time.monotonic() - started:5.2f} s{' (inside a trial)' if mid_trial else ''}; "
            f"study: {dict(_states(url))}"
        )
        if proc.returncode >= 0:
            say("the study finished before it was killed often enough: raise --n-trials")
            return False
    t0 = time.monotonic()
    final = subprocess.run(cmd, cwd=work, capture_output=True)
    say(
        f"final run: exit {final.returncode} in {time.monotonic() - t0:.1f} s: "
        f"{final.stdout.decode().strip()} {final.stderr.decode().strip()}"
    )

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name="kill-test", storage=url)
    trials = study.get_trials(deepcopy=False)
    states = Counter(t.state.name for t in trials)
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    defaults = [t for t in finished if t.user_attrs.get("role") == "defaults"]
    say(
        f"trials: {dict(states)}; reaped {study.user_attrs.get('reaped', 0)} orphans; "
        f"defaults trial(s) finished: {[t.number for t in defaults]}"
    )
    checks = {
        "no RUNNING trial": states.get("RUNNING", 0) == 0,
        f"exactly {n_trials} COMPLETE or PRUNED": len(finished) == n_trials,
        "the defaults trial finished": bool(defaults),
        "the final run exits 0": final.returncode == 0,
    }
    for what, ok in checks.items():
        say(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return all(checks.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--n-trials", type=int, default=30)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-delay", type=float, default=8.0, help="seconds (default 8)")
    ap.add_argument(
        "--targeted",
        action="store_true",
        help="every other kill lands inside a trial (0–0.5 s after one starts running)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="pvegym-kill-") as tmp:
        ok = run(
            args.kills,
            args.n_trials,
            args.workers,
            args.seed,
            Path(tmp),
            args.max_delay,
            args.targeted,
        )
    return 0 if ok else 1


def _running_since(url: str, since: datetime.datetime) -> bool:
    """Whether a trial started at or after ``since`` is RUNNING."""
    import optuna
    from optuna.trial import TrialState

    try:
        study = optuna.load_study(study_name="kill-test", storage=url)
    except Exception:
        return False
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    return any(t.datetime_start is not None and t.datetime_start >= since for t in running)


def _finished(url: str) -> int:
    """How many trials of the study are COMPLETE or PRUNED (0 before it exists)."""
    states = _states(url)
    return states["COMPLETE"] + states["PRUNED"]


def _states(url: str) -> Counter[str]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        study = optuna.load_study(study_name="kill-test", storage=url)
    except (KeyError, ValueError, Exception):
        return Counter()
    return Counter(t.state.name for t in study.get_trials(deepcopy=False))


if __name__ == "__main__":
    sys.exit(main())
