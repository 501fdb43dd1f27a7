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
    # A killed run adds about one trial (the script kills it once it has finished one, if its
    # random delay has not run out first), at most two when trials are shorter than its polling:
    # 6 kills leave a study of 14 unfinished on a machine of any speed. Not quiet: on a failure
    # pytest shows the run's account.
    assert script.run(
        kills=6,
        n_trials=14,
        workers=1,
        seed=1,
        work=tmp_path,
        max_delay=6.0,
        targeted=True,
        quiet=False,
    )
