"""Where a replayed trace file may come from: the bundled set, or a directory beside the scenario.

A scenario file is input from anyone (an operator's import, a shared experiment), so the trace
files it names are confined: a ``source`` is ``<format>/<name>`` with a plain ``name`` (no ``..``,
no absolute path, no backslash), the file must be a regular file (not a device or a FIFO) of at
most :data:`MAX_TRACE_BYTES`, and its real path (symlinks resolved) must stay inside its root. The
root is the bundled ``pvegym/data/traces`` directory, or ``trace_dir``: a relative ``trace_dir``
written in a scenario file is relative to that file's directory and may not leave it
(:func:`anchor_trace_dirs`, applied when the file is read), which is how ``pvegym import`` writes
its traces beside the scenario.

This is the minimal rule the import needs (issue 21); the reliability work (issue 18) owns trace
path confinement and may replace this module with its resolver — the rule above is the one
agreed for it.
"""

from __future__ import annotations

import stat
from pathlib import Path, PurePosixPath
from typing import Any

from pvegym.errors import ConfigError

#: The largest trace file read (bytes): a week of 1-minute samples is ~0.4 MB.
MAX_TRACE_BYTES = 64 * 2**20

#: Scenario keys that hold workload signals (a number, a component table or a list of them).
_SIGNAL_KEYS = {"nodes": ("base_cpu", "base_mem"), "guests": ("cpu", "memhost")}


def _plain_relative(text: str) -> bool:
    """A relative POSIX path without ``..``, ``.``-only tricks or backslashes."""
    if not text or "\\" in text or "\0" in text:
        return False
    p = PurePosixPath(text)
    return not p.is_absolute() and all(part not in ("..", "") for part in p.parts)


def resolve_trace_source(file: Path, root: Path, path: str) -> Path:
    """``file`` (built from a trace ``source`` under ``root``) after the confinement checks: its
    real path inside ``root``'s, a regular file, at most :data:`MAX_TRACE_BYTES`. A
    :class:`ConfigError` at ``path`` otherwise."""
    try:
        rel = file.relative_to(root)
    except ValueError:
        raise ConfigError(path, f"{str(file)!r} is not inside {str(root)!r}") from None
    if not _plain_relative(rel.as_posix()):
        raise ConfigError(path, f"{rel.as_posix()!r} is not a plain name (no '..', no '/x')")
    try:
        real, real_root = file.resolve(strict=True), root.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError(path, f"{file!s}: no such trace file") from None
    if not real.is_relative_to(real_root):
        raise ConfigError(path, f"{file!s}: a symlink out of {str(root)!r} is not allowed")
    st = real.stat()
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(path, f"{file!s}: not a regular file")
    if st.st_size > MAX_TRACE_BYTES:
        raise ConfigError(
            path, f"{file!s}: {st.st_size} bytes, larger than {MAX_TRACE_BYTES} allowed"
        )
    return real


def anchor_trace_dirs(data: dict[str, Any], scenario_file: Path) -> None:
    """Rewrite, in place, every relative ``trace_dir`` of the scenario data read from
    ``scenario_file`` to an absolute directory beside that file, refusing one that leaves it
    (a :class:`ConfigError` naming the key path). Absolute ``trace_dir`` values are left alone."""
    base = scenario_file.resolve().parent
    for section, keys in _SIGNAL_KEYS.items():
        entries = data.get(section)
        if not isinstance(entries, list):
            continue
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            for key in keys:
                signal = entry.get(key)
                items = signal if isinstance(signal, list) else [signal]
                for j, comp in enumerate(items):
                    if not isinstance(comp, dict):
                        continue
                    where = f"{section}[{i}].{key}" + (f"[{j}]" if isinstance(signal, list) else "")
                    _anchor(comp, base, where)


def _anchor(comp: dict[str, Any], base: Path, where: str) -> None:
    trace_dir = comp.get("trace_dir")
    if not isinstance(trace_dir, str) or not trace_dir or Path(trace_dir).is_absolute():
        return
    if not _plain_relative(trace_dir):
        raise ConfigError(
            f"{where}.trace_dir",
            f"{trace_dir!r} must be a directory beside the scenario file (no '..')",
        )
    target = base / trace_dir
    if target.exists() and not target.resolve().is_relative_to(base):
        raise ConfigError(f"{where}.trace_dir", f"{trace_dir!r} is a symlink out of {str(base)!r}")
    comp["trace_dir"] = str(target)
