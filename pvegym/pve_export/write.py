"""Writing an import: the scenario file (its header states the window and every note), its
``rrd`` traces beside it (``<stem>-traces/rrd/*.csv``) and ``<stem>.import.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pvegym.pve_export.to_scenario import TRACE_DIR_PLACEHOLDER, Import, TraceData
from pvegym.pve_export.window import Window
from pvegym.sim.workload import RRD_TAG


def traces_dir_name(scenario_path: Path) -> str:
    return f"{scenario_path.stem}-traces"


def write_trace(path: Path, data: TraceData, window: Window) -> None:
    lines = [
        f"# {RRD_TAG} interval_s={window.step} cpu_capacity={data.cpu_capacity:g} "
        f"mem_capacity={data.mem_capacity:.0f} timeframe={window.timeframe} cf={window.cf}",
        "time,cpu,mem",
    ]
    for t, c, m in zip(window.times.tolist(), data.cpu.tolist(), data.mem.tolist(), strict=True):
        lines.append(f"{t},{max(c, 0.0):.6g},{max(m, 0.0):.6g}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)


def _with_trace_dir(data: Any, trace_dir: str) -> Any:
    if isinstance(data, dict):
        return {
            k: (trace_dir if v == TRACE_DIR_PLACEHOLDER else _with_trace_dir(v, trace_dir))
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [_with_trace_dir(v, trace_dir) for v in data]
    return data


def scenario_text(data: dict[str, Any], imp: Import, trace_dir: str) -> str:
    """The scenario as TOML, with a header that states the window and every note."""
    import tomli_w

    head = [
        f"# pvegym scenario imported by `pvegym import` from {imp.meta['export']}",
        f"# PVE {imp.meta['pve_version']} ({imp.meta['rrd_format']} RRD format)",
        f"# window: {imp.window.describe()}",
        f"# traces: {trace_dir}/rrd/*.csv (read from beside this file)",
        "# What the scenario cannot represent or had to assume:",
    ]
    head += [f"#   {n.line()}" for n in imp.notes if n.kind != "info"]
    head += ["# Other facts of the import:"] + [
        f"#   {n.line()}" for n in imp.notes if n.kind == "info"
    ]
    body = tomli_w.dumps(_with_trace_dir(data, trace_dir))
    return "\n".join(head) + "\n\n" + body


def write_import(imp: Import, out: Path, validation_out: Path | None = None) -> list[Path]:
    """Write the scenario (``out``), its traces (``<stem>-traces/rrd/``), ``<stem>.import.json``
    and, if asked, the validation scenario; returns the files written."""
    trace_dir = traces_dir_name(out)
    written: list[Path] = []
    traces = dict(imp.traces)
    if validation_out is not None:
        traces.update(imp.validation_traces)
    for name, trace in sorted(traces.items()):
        p = out.parent / trace_dir / "rrd" / f"{name}.csv"
        write_trace(p, trace, imp.window)
        written.append(p)
    docs = [(out, imp.scenario)]
    if validation_out is not None:
        docs.append((validation_out, imp.validation))
    for path, data in docs:
        rel = trace_dir if path.parent == out.parent else str((out.parent / trace_dir).resolve())
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(scenario_text(data, imp, rel))
        tmp.replace(path)
        written.append(path)
    meta = out.with_name(f"{out.stem}.import.json")
    tmp = meta.with_name(f".{meta.name}.tmp")
    tmp.write_text(json.dumps(imp.meta, indent=1, sort_keys=True, default=str) + "\n")
    tmp.replace(meta)
    written.append(meta)
    return written


def write_scenario(imp: Import, out: Path, data: dict[str, Any], traces_of: Path) -> Path:
    """Write ``data`` (a variant of the imported scenario) as the scenario file ``out``, reading
    the traces :func:`write_import` wrote beside ``traces_of``."""
    trace_dir = traces_dir_name(traces_of)
    rel = (
        trace_dir
        if out.parent == traces_of.parent
        else str((traces_of.parent / trace_dir).resolve())
    )
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(scenario_text(data, imp, rel))
    tmp.replace(out)
    return out
