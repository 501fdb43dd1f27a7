"""Writing result files so that nothing is lost or half-written, and cleaning up after a kill.

Every result file (cells, records, manifests) is written through :func:`write_bytes_durable`: a
temporary file ``.<name>.<pid>.tmp`` in the same directory, ``fsync``, ``os.replace`` into place,
``fsync`` of the directory. A reader — a resumed run — sees the old file or the whole new one, and
a file that exists survives a crash of the machine. A writer killed mid-write leaves its temporary
file behind; :func:`clean_stale_tmp` removes those of processes that no longer run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_bytes_durable(path: Path, write: Callable[[Any], None]) -> None:
    """Write ``path`` through ``write(file)`` into a temporary file (``.<name>.<pid>.tmp``),
    ``fsync`` it, ``os.replace`` it into place and ``fsync`` the directory: readers (and a resumed
    run) never see half a file, and a file that exists survives a crash of the machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, doc: Any) -> None:
    """Write JSON to ``path`` durably and atomically (:func:`write_bytes_durable`); NaN and
    infinity are refused (not JSON)."""
    text = json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n"
    write_bytes_durable(path, lambda fh: fh.write(text.encode()))


def clean_stale_tmp(root: Path, pattern: str = ".*.tmp", recursive: bool = True) -> list[Path]:
    """Remove the temporary files (``.<name>.<pid>.tmp``, or those matching ``pattern``) that
    writers killed mid-write left under ``root`` (or, not ``recursive``, directly in it); a file of
    a process that still runs is kept (it may be writing it now)."""
    removed = []
    for tmp in root.rglob(pattern) if recursive else root.glob(pattern):
        pid = tmp.name.rsplit(".", 2)[-2] if tmp.name.count(".") >= 3 else ""
        if pid.isdigit() and Path(f"/proc/{pid}").exists() and int(pid) != os.getpid():
            continue
        try:
            tmp.unlink()
            removed.append(tmp)
        except OSError:
            pass
    return removed
