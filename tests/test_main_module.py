"""``python -m pvegym`` is the ``pvegym`` command (for environments without the console script)."""

import subprocess
import sys


def test_python_m_pvegym_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pvegym", "scenarios"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "failure-loop" in done.stdout


def test_python_m_pvegym_bad_input_exits_2() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pvegym", "simulate", "--scenario", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_version() -> None:
    from importlib.metadata import version

    done = subprocess.run(
        [sys.executable, "-m", "pvegym", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == f"pvegym {version('pvegym')}"
