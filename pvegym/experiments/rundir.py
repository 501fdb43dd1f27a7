"""Where a new run writes when the command line names no directory: a fresh one under ``runs/``.

Following the README must never change a tracked file, and a run must never mix into another
run's files. So ``pvegym tune`` and ``pvegym train`` write to ``runs/<name>/`` by default (ignored
by git; ``results/`` holds the committed reports, regenerated with an explicit ``--out``):

* a directory that holds a run of the **same config** is resumed — an interrupted study or
  training continues where it stopped;
* one that holds a run of **another config** is left alone: the next free ``runs/<name>-2``,
  ``-3``, … is used (the command prints where it writes);
* ``--out DIR`` names the directory; a run of another config there is an error (one line), unless
  ``--fresh`` (start over there).

A run directory is marked by ``pvegym-run.json``: the kind of run, its name and the SHA-256 of
the config that decides whether it can be resumed (for a study its search space, suites and
objectives; for training the resolved train file). The mark is written durably and atomically
(:func:`~pvegym.experiments.files.write_json_atomic`); a process killed between creating the
directory and placing the mark leaves only the mark's temporary file, which the next run removes
(its writer is gone) — so the directory counts as empty and is claimed, not skipped as foreign.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pvegym.errors import ConfigError
from pvegym.experiments.files import clean_stale_tmp, write_json_atomic

RUNS = Path("runs")
MARK = "pvegym-run.json"


@dataclass(frozen=True)
class RunDir:
    path: Path
    resumed: bool  # the directory holds a run of the same config, which continues


def read_mark(directory: Path) -> dict[str, str] | None:
    try:
        doc = json.loads((directory / MARK).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _same(mark: dict[str, str] | None, kind: str, config_sha256: str) -> bool:
    return (
        mark is not None and mark.get("kind") == kind and mark.get("config_sha256") == config_sha256
    )


def _claim(directory: Path, kind: str, name: str, config_sha256: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    doc = {"kind": kind, "name": name, "config_sha256": config_sha256}
    write_json_atomic(directory / MARK, doc)


def _clean_stale_mark(directory: Path) -> None:
    """Remove the mark's temporary files (``.pvegym-run.json.<pid>.tmp``) whose writer no longer
    runs: a run killed between ``mkdir`` and placing its mark left one (the other files of the
    directory, a foreign run's included, are not touched)."""
    if directory.is_dir():
        clean_stale_tmp(directory, f".{MARK}.*.tmp", recursive=False)


def choose(
    kind: str,
    name: str,
    config_sha256: str,
    out: str | Path | None = None,
    fresh: bool = False,
    root: Path = RUNS,
) -> RunDir:
    """The directory a ``kind`` run (``"tune"``, ``"train"``) of ``name`` writes to, marked as
    its own (see the module docstring). ``fresh`` empties an explicit ``out`` first."""
    if out is not None:
        path = Path(out)
        _clean_stale_mark(path)
        mark = read_mark(path)
        if fresh and path.exists():
            shutil.rmtree(path)
            mark = None
        elif mark is not None and not _same(mark, kind, config_sha256):
            raise ConfigError(
                "--out",
                f"{path} holds a {mark.get('kind', '?')} run of another config "
                f"({mark.get('name', '?')}): choose another --out, or --fresh to start over there",
            )
        resumed = _same(mark, kind, config_sha256)
        _claim(path, kind, name, config_sha256)
        return RunDir(path, resumed)
    k = 1
    while True:
        path = root / (name if k == 1 else f"{name}-{k}")
        _clean_stale_mark(path)
        mark = read_mark(path)
        if _same(mark, kind, config_sha256):
            return RunDir(path, True)
        if not path.exists() or not any(path.iterdir()):
            _claim(path, kind, name, config_sha256)
            return RunDir(path, False)
        k += 1
