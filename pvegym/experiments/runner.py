"""The experiment runner: every policy × scenario × seed ("cell"), resumable and parallel, then a report.

Read top to bottom, :func:`run_experiment` is the whole story:

1. **plan** — expand the experiment into cells. A cell is one episode: (scenario, seed, overrides,
   duration, policy, constants). Its *key* is the SHA-256 of that resolved config, the resolved
   scenario data and the model's source code, so a cell's result depends only on its key, never on
   which worker ran it or when.
2. **skip** what is already done: a finished cell is a file ``cells/<key>.json``, written atomically
   (temporary file + ``os.replace``) the moment the cell ends. An interrupted run resumes where it
   stopped; a changed experiment recomputes only the cells whose config changed.
3. **evaluate** the rest — in ``workers`` processes when asked, or as tasks on a Ray cluster
   (:mod:`pvegym.experiments.executor`) — with a progress bar on stderr. Workers only compute; this
   process writes each result the moment it arrives (:func:`~pvegym.experiments.cells.save_cell`).
   The cells that feed a timeline plot also record per-round traces (``cells/<key>.trace.npz``).
4. **report** into ``results/<name>/``: ``metrics.csv``, ``summary.md``, ``plots/*.png``,
   ``records/<scenario>/<policy>/seed-<n>.json`` (replayable with ``pvegym replay``) and
   ``manifest.json`` (the resolved config and everything needed to rerun it).
"""

from __future__ import annotations

import csv
import functools
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from pvegym.config import check_out_dir, path_component
from pvegym.errors import ConfigError, show
from pvegym.experiments import plots, report
from pvegym.experiments.cells import (
    Cell,
    Row,
    RunStats,
    cell_path,
    cell_problem,
    read_cell,
    read_trace,
    save_cell,
)
from pvegym.experiments.config import Experiment, build_policy, sha256_json
from pvegym.experiments.executor import Executor, LocalPool
from pvegym.experiments.files import clean_stale_tmp
from pvegym.experiments.record import EpisodeRecord, model_fingerprint, play, save_record
from pvegym.policies.registry import artifact_fingerprint
from pvegym.sim import catalog
from pvegym.sim.layout import T_IMBALANCE
from pvegym.sim.metrics import extra_metrics
from pvegym.sim.simulation import Simulation

CELL_FORMAT = "pvegym-cell/1"  # bump to invalidate every finished cell (e.g. a new cell layout)


# ------------------------------------------------------------------------------------------ plan
def plan(exp: Experiment) -> list[Row]:
    """Every scenario entry × seed × policy entry, in the experiment's order (the CSV's order)."""
    code = model_fingerprint()
    extra = extra_metrics()
    rows: list[Row] = []
    for s_idx, entry in enumerate(exp.scenarios):
        overrides = entry.overrides()
        for k, seed in enumerate(entry.seeds):
            where = f"scenarios[{s_idx}]"
            res = catalog.resolve(
                entry.name, seed, overrides, name_key=f"{where}.name", set_key=f"{where}.set"
            )
            scn, data = res.scenario, res.data
            duration = entry.duration or exp.episode.duration or scn.duration
            base = {
                "format": CELL_FORMAT,
                "code_sha256": code,
                "scenario": entry.name,
                "scenario_sha256": sha256_json(data),
                "seed": seed,
                "overrides": overrides,
                "duration": float(duration),
            }
            if extra:  # metrics registered at run time: a cell computed without them lacks them
                base["extra_metrics"] = list(extra)
            for pol in exp.policies:
                params = dict(sorted(pol.params.items()))
                config = {**base, "policy": pol.name, "params": params}
                artifact = artifact_fingerprint(pol.name, params, f"policies[{pol.key}]")
                if artifact:  # e.g. a trained model's file: retrained → recomputed
                    config["artifact_sha256"] = artifact
                cell = Cell(sha256_json(config)[:20], config, k < exp.report.timeline_seeds)
                rows.append(Row(entry.key, pol.key, seed, cell))
    return rows


def unique_cells(rows: list[Row]) -> list[Cell]:
    """Cells in plan order, each once (two labels with identical configs share one cell); a cell
    records traces if any of its rows wants a timeline."""
    cells: dict[str, Cell] = {}
    for row in rows:
        prev = cells.get(row.cell.key)
        if prev is None or (row.cell.trace and not prev.trace):
            cells[row.cell.key] = row.cell
    return list(cells.values())


# ------------------------------------------------------------------------------------------ evaluate
@dataclass
class Trace:
    """Per-round true state for a timeline: node load (percent of cores / of memory), node PSI
    avg10 (percent) and the normalized imbalance of true node loads, at each round's end (s)."""

    t: list[float] = field(default_factory=list)
    cpu_pct: list[np.ndarray] = field(default_factory=list)
    mem_pct: list[np.ndarray] = field(default_factory=list)
    cpu_some: list[np.ndarray] = field(default_factory=list)
    mem_some: list[np.ndarray] = field(default_factory=list)
    imbalance: list[float] = field(default_factory=list)

    def __call__(self, sim: Simulation) -> None:
        cl = sim.cluster
        cpu_some, mem_some, _ = cl.node_avg10()
        self.t.append(sim.t)
        self.cpu_pct.append(100.0 * cl.node_cpu / cl.node_maxcpu)
        self.mem_pct.append(100.0 * cl.node_mem / cl.node_maxmem)
        self.cpu_some.append(cpu_some.copy())
        self.mem_some.append(mem_some.copy())
        self.imbalance.append(float(cl.totals[T_IMBALANCE]))

    def arrays(self, sim: Simulation) -> dict[str, np.ndarray]:
        moves = sim.metrics.moves
        return {
            "t": np.asarray(self.t),
            "node_names": np.asarray(sim.cluster.node_names),
            "cpu_pct": np.asarray(self.cpu_pct),
            "mem_pct": np.asarray(self.mem_pct),
            "cpu_some": np.asarray(self.cpu_some),
            "mem_some": np.asarray(self.mem_some),
            "imbalance": np.asarray(self.imbalance),
            "move_t": np.asarray([m.t for m in moves], dtype=float),
            "move_t_end": np.asarray(
                [np.nan if m.t_end is None else m.t_end for m in moves], dtype=float
            ),
            "move_outcome": np.asarray([m.outcome for m in moves], dtype=str),
            "move_label": np.asarray(
                [f"{m.guest} {m.source}→{m.target}" for m in moves], dtype=str
            ),
        }


@functools.cache
def _code_sha256() -> str:
    return model_fingerprint()


def evaluate_cell(cell: Cell) -> tuple[dict[str, Any], dict[str, np.ndarray] | None]:
    """Run one cell's episode: (the cell document, its per-round trace or None).

    Refuses a cell whose key was computed from other model code than this process runs (a worker
    node of a Ray cluster with another pvegym): its result would be filed under the wrong key."""
    c = cell.config
    if c.get("code_sha256", _code_sha256()) != _code_sha256():
        raise RuntimeError(
            f"cell {cell.key}: this worker runs other model code ({_code_sha256()[:12]}) than the "
            f"cell names ({str(c['code_sha256'])[:12]}): install the same pvegym on every node"
        )
    scn = catalog.scenario(c["scenario"], c["seed"], c["overrides"])
    policy = build_policy(c["policy"], c["params"])
    sim = Simulation(scn, c["seed"])
    trace = Trace() if cell.trace else None
    started = time.perf_counter()
    policy.reset(c["seed"])
    result, motions = play(sim, policy.decide, c["duration"], trace)
    doc = {
        "key": cell.key,
        "config": c,
        "metrics": result["metrics"],
        "moves": result["moves"],
        "motions": [list(m) for m in motions],
        "wall_s": round(time.perf_counter() - started, 3),
    }
    return doc, (trace.arrays(sim) if trace is not None else None)


Evaluated = tuple[dict[str, Any], dict[str, np.ndarray] | None]


def _evaluate(cell: Cell) -> tuple[Cell, Evaluated]:
    """What a worker runs (in a pool process or a Ray task): the cell and its result. Looks
    :func:`evaluate_cell` up at call time (tests replace it)."""
    return cell, evaluate_cell(cell)


def execute(cells: list[Cell], cells_dir: Path, executor: Executor) -> Iterator[str]:
    """Evaluate ``cells`` on ``executor``, saving each result as it arrives and yielding its key
    (any order; results are in files)."""
    for cell, (doc, trace) in executor.map_unordered(_evaluate, cells):
        save_cell(cells_dir, cell.key, doc, trace)
        yield cell.key


# ------------------------------------------------------------------------------------------ run
def evaluate_cells(
    cells: list[Cell],
    cells_dir: Path,
    executor: Executor | int,
    *,
    desc: str,
    progress: bool,
    fresh: bool = False,
    on_cell: Callable[[str], None] | None = None,
) -> tuple[int, int]:
    """Evaluate the ``cells`` not finished in ``cells_dir`` yet (all of them with ``fresh``), each
    written the moment it ends, with a progress bar; returns ``(reused, computed)``. ``executor``
    is where they run (an int: a local pool of that many processes)."""
    if isinstance(executor, int):
        executor = LocalPool(executor)
    cells_dir.mkdir(parents=True, exist_ok=True)
    clean_stale_tmp(cells_dir)
    todo = []
    for c in cells:
        if fresh or not cell_path(cells_dir, c.key).exists():
            todo.append(c)
            continue
        problem = cell_problem(cells_dir, c)
        if problem is not None:
            print(
                f"pvegym: warning: {cell_path(cells_dir, c.key)} is {problem}: recomputing it",
                file=sys.stderr,
            )
            todo.append(c)
    bar = tqdm(
        total=len(cells),
        initial=len(cells) - len(todo),
        desc=desc,
        unit="cell",
        file=sys.stderr,
        disable=not progress,
        dynamic_ncols=True,
    )
    computed = 0
    with bar:
        for key in execute(todo, cells_dir, executor):
            computed += 1
            bar.update()
            if on_cell is not None:
                on_cell(key)
    return len(cells) - len(todo), computed


def run_experiment(
    exp: Experiment,
    out_dir: Path | None = None,
    workers: int = 1,
    fresh: bool = False,
    command: list[str] | None = None,
    progress: bool = True,
    on_cell: Callable[[str], None] | None = None,
    executor: Executor | None = None,
) -> RunStats:
    """Evaluate the whole experiment into ``out_dir`` (default ``results/<output>``) and report.

    Cells run on ``executor`` (default: a local pool of ``workers`` processes); the report does
    not depend on where (byte-identical ``metrics.csv``)."""
    t0, started = time.perf_counter(), time.time()
    out = Path(out_dir) if out_dir is not None else Path("results") / exp.out_name
    check_out_dir(out)
    cells_dir = out / "cells"
    if out.is_dir():
        clean_stale_tmp(out)  # what a run killed while writing its report left behind
    stats = RunStats(out)

    # 1. plan: every scenario entry × seed × policy entry, keyed by its resolved config
    rows = plan(exp)
    cells = unique_cells(rows)

    # 2.–3. evaluate the cells no previous (interrupted or changed) run finished
    stats.cached, stats.computed = evaluate_cells(
        cells,
        cells_dir,
        executor if executor is not None else LocalPool(workers),
        desc=exp.name,
        progress=progress,
        fresh=fresh,
        on_cell=on_cell,
    )

    # 4. report: metrics.csv, records, summary.md, plots, manifest.json
    docs = {c.key: read_cell(cells_dir, c.key) for c in cells}
    report.write_metrics_csv(out / "metrics.csv", rows, docs)
    for row in rows:
        save_record(_record(row, docs[row.cell.key]), record_path(out, row))
    summary = report.summarize(exp, rows, docs)
    report.write_summary(out / "summary.md", exp, summary)
    timelines = [(row, read_trace(cells_dir, row.cell.key)) for row in rows if row.cell.trace]
    plots.write_plots(out / "plots", exp, summary, timelines)
    stats.wall_s = time.perf_counter() - t0
    report.write_manifest(out / "manifest.json", exp, rows, stats, started, command)
    return stats


def rerender(exp: Experiment, out_dir: Path | None = None) -> Path:
    """Rewrite ``summary.md`` and the comparison plots of a finished run from its ``metrics.csv``,
    without simulating (``pvegym run … --report-only``): how a change of the report's statistics
    reaches committed results whose cells are not committed. Timelines, records and the manifest
    stay as they are (they need the episodes); ``metrics.csv`` must hold every row of the plan."""
    out = Path(out_dir) if out_dir is not None else Path("results") / exp.out_name
    check_out_dir(out)
    rows = plan(exp)
    try:
        metrics = report.read_metrics_csv(out / "metrics.csv")
    except FileNotFoundError:
        raise ConfigError(
            "--report-only",
            f"{show(str(out / 'metrics.csv'), 100)} does not exist: run the experiment "
            "(without --report-only)",
        ) from None
    except (OSError, ValueError, KeyError, TypeError, csv.Error) as err:
        raise ConfigError(
            "--report-only",
            f"{show(str(out / 'metrics.csv'), 100)} is not a metrics.csv of a run "
            f"({show(str(err) or type(err).__name__, 80, quote=False)})",
        ) from None
    docs: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = (row.scenario, row.policy, row.seed)
        if key not in metrics:
            raise ConfigError(
                "--report-only",
                f"{out / 'metrics.csv'} has no row {row.scenario}/{row.policy}/"
                f"seed {row.seed}: run the experiment (without --report-only)",
            )
        docs[row.cell.key] = {"metrics": metrics[key], "config": row.cell.config}
    summary = report.summarize(exp, rows, docs)
    report.write_summary(out / "summary.md", exp, summary)
    plots.write_plots(out / "plots", exp, summary, [])
    return out


def record_path(out: Path, row: Row) -> Path:
    return (
        out
        / "records"
        / path_component(row.scenario)
        / path_component(row.policy)
        / f"seed-{row.seed}.json"
    )


def _record(row: Row, doc: dict[str, Any]) -> EpisodeRecord:
    c = doc["config"]
    return EpisodeRecord(
        scenario=c["scenario"],
        seed=c["seed"],
        duration=c["duration"],
        policy=c["policy"],
        params=c["params"],
        overrides=c["overrides"],
        motions=[(int(r), str(s), str(t)) for r, s, t in doc["motions"]],
        metrics=doc["metrics"],
        code_sha256=c.get("code_sha256", ""),
    )
