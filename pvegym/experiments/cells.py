"""One evaluation cell of the experiment runner: what it is, the row of the report it feeds, and
its files.

A cell is one episode (scenario, seed, overrides, duration, policy, constants) keyed by the SHA-256
of its resolved config; a finished cell is ``cells/<key>.json`` (and ``cells/<key>.trace.npz``
when a timeline plot needs its per-round trace), written atomically. The runner
(:mod:`pvegym.experiments.runner`) plans and evaluates cells; the report
(:mod:`pvegym.experiments.report`) and the plots (:mod:`pvegym.experiments.plots`) read rows and
cells — and none of them imports the runner.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.experiments.record import write_json_atomic


@dataclass(frozen=True)
class Cell:
    """One episode to evaluate. ``config`` is what determines its result; ``key`` hashes it."""

    key: str
    config: dict[str, Any]
    trace: bool  # record per-round traces (for a timeline plot); not part of the key


@dataclass(frozen=True)
class Row:
    """One line of ``metrics.csv``: a scenario entry, a policy entry, a seed — and its cell."""

    scenario: str  # the scenario entry's label (or name)
    policy: str  # the policy entry's label (or name)
    seed: int
    cell: Cell


@dataclass
class RunStats:
    """What a run did: cells evaluated now vs. found finished, wall time (s), output directory."""

    out_dir: Path
    computed: int = 0
    cached: int = 0
    wall_s: float = 0.0


def cell_path(cells_dir: Path, key: str) -> Path:
    return cells_dir / f"{key}.json"


def trace_path(cells_dir: Path, key: str) -> Path:
    return cells_dir / f"{key}.trace.npz"


def is_finished(cells_dir: Path, cell: Cell) -> bool:
    """A cell is done when its result file exists (and its trace, if a timeline needs it)."""
    if not cell_path(cells_dir, cell.key).is_file():
        return False
    return not cell.trace or trace_path(cells_dir, cell.key).is_file()


def read_cell(cells_dir: Path, key: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cell_path(cells_dir, key).read_text())
    return doc


def read_trace(cells_dir: Path, key: str) -> dict[str, np.ndarray]:
    with np.load(trace_path(cells_dir, key)) as z:
        return {k: z[k] for k in z.files}


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, path)


def save_cell(cells_dir: Path, key: str, doc: dict[str, Any], trace: Any) -> None:
    """Write one finished cell's files atomically: the trace first (if any), then the result that
    marks the cell as finished (:func:`is_finished`)."""
    if trace is not None:
        save_npz_atomic(trace_path(cells_dir, key), trace)
    write_json_atomic(cell_path(cells_dir, key), doc)
