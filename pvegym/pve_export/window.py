"""The window an import replays: the finest exported RRD series that covers it, on one grid.

A timeframe name (``hour``, ``day``, ``week``) takes that series' whole span; a duration takes
the finest timeframe whose series of every node and guest cover it, ending at the last row they
all have (:func:`choose_window`). Rows are interval averages stamped at the interval's end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.pve_export.cluster import ClusterExport
from pvegym.pve_export.files import ExportError
from pvegym.pve_export.notes import utc
from pvegym.pve_export.rrd import RESOLUTION, TIMEFRAMES, Series
from pvegym.units import parse_duration

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class Window:
    """``(start, end]`` in unix seconds, rows every ``step`` s stamped at the interval's end."""

    timeframe: str
    cf: str
    step: int
    start: int
    end: int

    @property
    def duration(self) -> int:
        return self.end - self.start

    @property
    def n(self) -> int:
        return self.duration // self.step

    @property
    def times(self) -> NDArray[np.int64]:
        return self.start + self.step * np.arange(1, self.n + 1, dtype=np.int64)

    def describe(self) -> str:
        return (
            f"{utc(self.start)} – {utc(self.end)} ({self.duration / 3600:g} h), "
            f"the {self.timeframe} series at {self.step} s resolution ({self.cf})"
        )


def _entities(export: ClusterExport) -> list[tuple[str, str, dict[tuple[str, str], Series]]]:
    """``(name, directory, series)`` of the nodes and the running-or-recorded guests whose series
    decide the window."""
    out = [
        (f"node {n.name}", f"nodes/{n.name}", n.series) for n in export.nodes.values() if n.series
    ]
    out += [
        (g.sid, f"nodes/{g.node}/{g.kind}/{g.vmid}", g.series)
        for g in export.guests.values()
        if not g.template and (g.series or g.status == "running")
    ]
    return out


def choose_window(export: ClusterExport, spec: str, cf: str = "AVERAGE") -> Window:
    """The window for ``spec``: a timeframe name or a duration (``36h``), see the module doc."""
    table = RESOLUTION[export.rrd_format]
    entities = _entities(export)
    if spec in TIMEFRAMES:
        candidates = [spec]
        want: float | None = None
    else:
        try:
            want = parse_duration(spec, "--window")
        except ConfigError:
            raise ConfigError(
                "--window", f"{spec!r} is not hour, day, week or a duration (e.g. 36h)"
            ) from None
        if want <= 0:
            raise ConfigError("--window", "must be positive")
        candidates = sorted(TIMEFRAMES, key=lambda tf: (table[tf][0], -table[tf][1]))
    spans: list[str] = []
    for tf in candidates:
        step = table[tf][0]
        start, end = -math.inf, math.inf
        lacking = [(name, where) for name, where, series in entities if (tf, cf) not in series]
        if lacking and want is None:  # the timeframe asked for: name the file that is missing
            name, where = lacking[0]
            raise ExportError(
                f"{where}/rrddata-{tf}-{cf}.json", "", f"is missing ({name} has no {tf} series)"
            )
        if lacking:
            spans.append(f"{tf}: no {cf} series of {', '.join(n for n, _ in lacking[:3])}")
            continue
        for _, _, series in entities:
            s0, s1 = series[(tf, cf)].span
            start, end = max(start, s0), min(end, s1)
        if end - start < 2 * step:
            spans.append(f"{tf}: the series do not overlap")
            continue
        if want is None:
            return Window(tf, cf, step, int(start), int(end))
        rows = math.ceil(want / step)
        if end - start >= rows * step:
            return Window(tf, cf, step, int(end) - rows * step, int(end))
        spans.append(f"{tf}: covers {(end - start) / 3600:g} h")
    raise ConfigError(
        "--window", f"no exported series covers {spec!r} ({'; '.join(spans) or 'no series'})"
    )


def on_grid(s: Series, name: str, window: Window) -> FloatArray:
    """Field ``name`` at the window's row times (NaN where the series has no such row)."""
    out = np.full(window.n, np.nan)
    k = (s.times - window.start) // window.step - 1
    ok = (k >= 0) & (k < window.n) & ((s.times - window.start) % window.step == 0)
    out[k[ok]] = s.get(name)[ok]
    return out


def rows_empty(s: Series, window: Window) -> NDArray[np.bool_]:
    empty = np.ones(window.n, dtype=bool)
    k = (s.times - window.start) // window.step - 1
    ok = (k >= 0) & (k < window.n) & ((s.times - window.start) % window.step == 0)
    empty[k[ok]] = s.empty_rows()[ok]
    return empty
