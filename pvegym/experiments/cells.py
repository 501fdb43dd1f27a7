"""One evaluation cell of the experiment runner: what it is, the row of the report it feeds, and
its files.

A cell is one episode (scenario, seed, overrides, duration, policy, constants) keyed by the SHA-256
of its resolved config; a finished cell is ``cells/<key>.json`` (and ``cells/<key>.trace.npz``
when a timeline plot needs its per-round trace), written durably and atomically, and checked
before a resumed run trusts it (:func:`cell_problem`). The runner
(:mod:`pvegym.experiments.runner`) plans and evaluates cells; the report
(:mod:`pvegym.experiments.report`) and the plots (:mod:`pvegym.experiments.plots`) read rows and
cells — and none of them imports the runner.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.experiments.files import write_bytes_durable, write_json_atomic
from pvegym.sim.metrics import METRIC_KEYS


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


#: what a cell's per-round trace holds (the runner's ``Trace.arrays``)
TRACE_KEYS = frozenset(
    {
        "t",
        "node_names",
        "cpu_pct",
        "mem_pct",
        "cpu_some",
        "mem_some",
        "imbalance",
        "move_t",
        "move_t_end",
        "move_outcome",
        "move_label",
    }
)


def cell_problem(cells_dir: Path, cell: Cell) -> str | None:
    """Why the files of ``cell`` cannot be trusted (None: they can, or there are none). A
    finished cell is a result file that parses, belongs to this cell (same key and config) and
    holds every metric — and, when a timeline needs it, a trace that loads with every array. A
    file that exists but fails this (zero bytes after a crash, a truncated or edited file) is
    recomputed, with a warning."""
    path = cell_path(cells_dir, cell.key)
    if not path.is_file():
        return None if not path.exists() else "not a file"
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        return f"unreadable ({type(err).__name__})"
    if not isinstance(doc, dict) or doc.get("key") != cell.key or doc.get("config") != cell.config:
        return "another cell's result"
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict) or not set(METRIC_KEYS) <= set(metrics):
        return "metrics missing"
    if not isinstance(doc.get("motions"), list) or not isinstance(doc.get("moves"), list):
        return "motions missing"
    if cell.trace:
        tpath = trace_path(cells_dir, cell.key)
        if not tpath.is_file():
            return "trace missing"
        try:
            with np.load(tpath) as z:
                if set(z.files) != TRACE_KEYS:
                    return "trace incomplete"
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            return f"trace unreadable ({type(err).__name__})"
    return None


def is_finished(cells_dir: Path, cell: Cell) -> bool:
    """A cell is done when its files exist and can be trusted (:func:`cell_problem`)."""
    return cell_path(cells_dir, cell.key).exists() and cell_problem(cells_dir, cell) is None


def read_cell(cells_dir: Path, key: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cell_path(cells_dir, key).read_text())
    return doc


def read_trace(cells_dir: Path, key: str) -> dict[str, np.ndarray]:
    with np.load(trace_path(cells_dir, key)) as z:
        return {k: z[k] for k in z.files}


def save_npz_atomic(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays durably and atomically (:func:`~pvegym.experiments.files.write_bytes_durable`)."""
    write_bytes_durable(path, lambda fh: np.savez_compressed(fh, **arrays))  # type: ignore[arg-type]


def save_cell(cells_dir: Path, key: str, doc: dict[str, Any], trace: Any) -> None:
    """Write one finished cell's files atomically: the trace first (if any), then the result that
    marks the cell as finished (:func:`is_finished`)."""
    if trace is not None:
        save_npz_atomic(trace_path(cells_dir, key), trace)
    write_json_atomic(cell_path(cells_dir, key), doc)
