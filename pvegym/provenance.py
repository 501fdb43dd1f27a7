"""Where a result came from: the git commit, package versions, canonical config hashes.

Every result pvegym writes (experiment manifests, study attributes, training manifests) records
these, so that anyone can rerun it exactly; one module keeps the three writers in agreement.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

#: packages whose versions a result depends on (absent ones are reported as "not installed")
PACKAGES = (
    "pvegym",
    "numpy",
    "numba",
    "scipy",
    "gymnasium",
    "optuna",
    "matplotlib",
    "torch",
    "stable-baselines3",
    "sb3-contrib",
)


def git_commit() -> tuple[str, bool | None]:
    """The checked-out commit of the tree pvegym runs from and whether tracked files outside
    ``results/`` have local changes (read-only git queries); ``("unknown", None)`` outside a
    checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            cwd=root,
        ).stdout.strip()
        status = subprocess.run(
            # results/ is what runs write, not what they ran: it does not make the code dirty
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            cwd=root,
        ).stdout
        return commit or "unknown", bool(status.strip())
    except (OSError, subprocess.SubprocessError):
        return "unknown", None


def package_versions(packages: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    out = {}
    for pkg in packages:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def machine() -> dict[str, Any]:
    """The machine a run ran on: OS and kernel, CPU model, and the SIMD extensions NumPy found.

    Results do not depend on these (the model uses libm, never NumPy's CPU-dispatched math, and
    kernels compiled without fastmath: ``tests/test_portability.py``); they are recorded so that a
    difference between machines can be traced. Volatile: they go to a run's untracked
    ``run.json``, not into its committed files."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    simd: list[str] = []
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features

        simd = sorted(k for k, v in features.items() if v)
    except ImportError:  # a NumPy without the private table: leave it out
        pass
    return {"platform": platform.platform(), "cpu": cpu, "numpy_simd": simd}


def plain(value: Any) -> Any:
    """Tuples → lists and keys → strings, recursively: the JSON form of a resolved config."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def sha256_json(data: Any) -> str:
    """SHA-256 of canonical JSON (sorted keys, no whitespace): the identity of a config."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
