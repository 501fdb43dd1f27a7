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


def test_help_loads_no_model() -> None:
    """``pvegym --help`` builds every sub-command's parser without importing the model (NumPy,
    numba: ~2 s of imports) or the package metadata: command modules import them in ``run``.
    A module that imports them at the top fails this (the names of what it loaded are shown)."""
    probe = (
        "import sys\n"
        "from pvegym.cli import build_parser\n"
        "build_parser().format_help()\n"
        "heavy = ('numpy', 'numba', 'importlib.metadata', 'pvegym.sim.simulation')\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
