"""Run directories (:mod:`pvegym.experiments.rundir`): a run killed between creating its directory
and placing its mark leaves the mark's temporary file; the next run removes it and claims the
directory instead of treating it as another config's and moving on to ``runs/<name>-2``."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from pvegym.experiments.rundir import MARK, RunDir, choose, read_mark

ROOT = Path(__file__).resolve().parents[2]

# a process that claims runs/study and is SIGKILLed at the moment its mark would be placed: the
# directory exists and holds the mark's temporary file (written and fsynced), nothing else
KILLED_CLAIM = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from pvegym.experiments import rundir

    def die(src, dst):
        os.kill(os.getpid(), signal.SIGKILL)

    os.replace = die
    rundir.choose("tune", "study", "abc", out=sys.argv[2] if len(sys.argv) > 2 else None,
                  root=Path(sys.argv[1]))
    """
)


def _killed_claim(root: Path, out: Path | None = None) -> None:
    args = [sys.executable, "-c", KILLED_CLAIM, str(root), *([str(out)] if out else [])]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def test_a_claim_killed_before_its_mark_is_claimed_by_the_next_run(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _killed_claim(root)
    left = [p.name for p in (root / "study").iterdir()]
    assert len(left) == 1 and left[0].startswith(f".{MARK}.") and left[0].endswith(".tmp")
    run = choose("tune", "study", "abc", root=root)
    assert run.path == root / "study" and not run.resumed  # not runs/study-2
    assert sorted(p.name for p in run.path.iterdir()) == [MARK]  # the stale file is gone
    assert read_mark(run.path) == {"kind": "tune", "name": "study", "config_sha256": "abc"}
    assert not (root / "study-2").exists()
    # the run resumes there the next time
    assert choose("tune", "study", "abc", root=root) == RunDir(root / "study", True)


def test_a_stale_mark_file_in_out_is_removed(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    _killed_claim(tmp_path / "runs", out)
    run = choose("tune", "study", "abc", out=out)
    assert run.path == out and not run.resumed
    assert sorted(p.name for p in out.iterdir()) == [MARK]


def test_another_config_and_a_live_writer_are_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    choose("tune", "study", "other-config", root=root)
    busy = root / "study-2"
    busy.mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as writer:
        try:
            # a mark being written right now by a process that still runs
            (busy / f".{MARK}.{writer.pid}.tmp").write_text("{")
            run = choose("tune", "study", "abc", root=root)
        finally:
            writer.kill()
    assert run.path == root / "study-3" and not run.resumed
    assert (read_mark(root / "study") or {}).get("config_sha256") == "other-config"
    assert (busy / f".{MARK}.{writer.pid}.tmp").exists()
