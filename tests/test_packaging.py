"""What ``pip install <clone>`` puts into site-packages: one top-level package, ``pvegym``, with
dependency ranges another project can live beside (exact versions are ``constraints.txt``'s)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_core_dependencies_are_ranges_not_pins() -> None:
    pinned = [d for d in PYPROJECT["project"]["dependencies"] if "==" in d]
    assert not pinned, pinned


def test_every_declared_dependency_has_an_exact_version_in_the_constraints() -> None:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pins = {_name(x): x for x in lines if x and not x.startswith("#")}
    assert all("==" in p for p in pins.values()), [p for p in pins.values() if "==" not in p]
    declared = list(PYPROJECT["project"]["dependencies"])
    for extra in ("rl", "ray", "dev"):
        declared += PYPROJECT["project"]["optional-dependencies"][extra]
    missing = [d for d in declared if _name(d) not in pins]
    assert not missing, missing


def test_the_set_up_scripts_install_with_the_constraints() -> None:
    for script in ("scripts/main.sh", "scripts/test.sh"):
        installs = [
            line for line in (ROOT / script).read_text().splitlines() if "pip install" in line
        ]
        installs = [line for line in installs if not line.lstrip().startswith("echo")]
        assert installs and all("-c constraints.txt" in line for line in installs), script


@pytest.mark.slow
def test_the_wheel_has_one_top_level_package(tmp_path: Path) -> None:
    """Built as ``pip install <clone>`` builds it; ``policies`` ships as ``pvegym.policies``."""
    src = tmp_path / "src"  # a copy: pip builds in the source tree and would leave build/ there
    shutil.copytree(
        ROOT, src, ignore=shutil.ignore_patterns(".*", "build", "results", "runs", "*.egg-info")
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("pvegym-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert top == {"pvegym"}, top
    assert "pvegym/policies/upstream.py" in names
    assert any(n.startswith("pvegym/data/traces/") for n in names)
