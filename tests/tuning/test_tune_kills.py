"""``pvegym tune`` killed (SIGKILL, whole process group) again and again, inside trials and at
random moments, then resumed: no RUNNING trial is left, exactly ``n_trials`` trials are COMPLETE
or PRUNED, and the defaults trial is among them (``scripts/tune_kill_test.py``, shorter)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tune_survives_kills_inside_trials_and_at_random(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "pvegym_tune_kill_test", ROOT / "scripts" / "tune_kill_test.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    # A run killed at random must not finish the study first: its start-up (≥ 3 s) plus the
    # trials still to run (~0.4 s each on an idle machine) must outlast max_delay (6 s). With 6
    # trials an idle CI machine could finish them all in one run (the script then fails: "killed
    # too rarely"); 12 leave ≥ 7.8 s. Not quiet: on a failure pytest shows the run's account.
    assert script.run(
        kills=6,
        n_trials=12,
        workers=1,
        seed=1,
        work=tmp_path,
        max_delay=6.0,
        targeted=True,
        quiet=False,
    )
