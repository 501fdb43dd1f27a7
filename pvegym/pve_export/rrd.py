"""Proxmox VE RRD series as ``GET …/rrddata`` returns them, for PVE 8 and PVE 9.

``PVE::RRD::create_rrd_data`` (pve-cluster ``src/PVE/RRD.pm``) answers a ``timeframe`` with one
row per consolidated point, ``{"time": <unix s>, <field>: <value>, …}``; a field the RRD has no
value for is left out of the row. The resolution depends on the format of the RRD files:

| timeframe | PVE 7 and 8 (``pve2-*``, 70 rows per RRA) | PVE 9 (``pve-*-9.0``) |
|---|---|---|
| hour | 60 s × 70 | 60 s × 60 |
| day | 1800 s × 70 | 60 s × 1440 |
| week | 10800 s × 70 | 1800 s × 336 |

(``$setup`` in PVE 7's and 8's ``create_rrd_data``, 70 rows for every timeframe; PVE 9's
``$setup_pve2`` and ``$setup`` since pve-cluster 1a483ba — PVE 9 answers 60 hour rows even from a
``pve2`` file not converted yet. A series is read by its row spacing, whatever its row count.
The RRAs in pve-cluster
``src/pmxcfs/status.c``: ``RRA:AVERAGE:0.5:1:70`` … for ``pve2``, ``RRA:AVERAGE:0.5:1:1440`` … for
9.0.) The data sources (``status.c``): nodes ``loadavg, maxcpu, cpu, iowait, memtotal, memused,
swaptotal, swapused, roottotal, rootused, netin, netout`` and, in 9.0, ``memavailable, arcsize,
pressurecpusome, pressureiosome, pressureiofull, pressurememorysome, pressurememoryfull``; guests
``maxcpu, cpu, maxmem, mem, maxdisk, disk, netin, netout, diskread, diskwrite`` and, in 9.0,
``memhost, pressurecpusome, pressurecpufull, pressureiosome, pressureiofull, pressurememorysome,
pressurememoryfull``. ``cpu`` is a fraction of ``maxcpu`` (cores busy = cpu × maxcpu, ``PVE2.pm``);
memory in bytes; pressure is PSI avg10 in percent, sampled every 10 s by pvestatd and averaged
into each point. RRDtool stamps a consolidated point with the *end* of the interval it averages,
so the point at ``T`` covers ``(T − step, T]``.

A node or pvestatd outage leaves whole rows empty (a *gap*); a stopped guest's rows keep
``maxcpu``/``maxmem`` but have no ``cpu``/``mem`` (pvestatd's ``update_qemu_status`` writes
``undef`` for them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pvegym.pve_export.files import Value

TIMEFRAMES = ("hour", "day", "week")
CFS = ("AVERAGE", "MAX")

#: timeframe -> (resolution s, rows): ``create_rrd_data``'s ``$setup`` of PVE 7/8 (``pve2``; PVE 9
#: answers 60 hour rows from a ``pve2`` file) and of PVE 9 (``pve9``).
RESOLUTION = {
    "pve2": {"hour": (60, 70), "day": (1800, 70), "week": (10800, 70)},
    "pve9": {"hour": (60, 60), "day": (60, 1440), "week": (1800, 336)},
}
#: The fields only PVE 9's RRD format records (status.c ``rrd_def_*_pve9_0``).
PVE9_NODE_FIELDS = (
    "memavailable",
    "arcsize",
    "pressurecpusome",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
)
PVE9_GUEST_FIELDS = (
    "memhost",
    "pressurecpusome",
    "pressurecpufull",
    "pressureiosome",
    "pressureiofull",
    "pressurememorysome",
    "pressurememoryfull",
)


@dataclass(frozen=True)
class Series:
    """One ``rrddata`` answer: rows at ``times`` (unix s, every ``step`` s), each field an array
    with NaN where the row has no value. ``head_dropped`` rows at the start had another
    resolution (an RRD stitched from PVE 8's and PVE 9's files) and were left out."""

    file: str
    timeframe: str
    cf: str
    step: int
    times: NDArray[np.int64]
    fields: dict[str, NDArray[np.float64]] = field(default_factory=dict)
    head_dropped: int = 0

    def get(self, name: str) -> NDArray[np.float64]:
        """The field's values (all NaN when the series never has it)."""
        return self.fields.get(name, np.full(self.times.size, np.nan))

    def has(self, name: str) -> bool:
        return name in self.fields and bool(np.isfinite(self.fields[name]).any())

    @property
    def span(self) -> tuple[int, int]:
        """``(start, end)``: the interval the rows cover, ``(first − step, last]``."""
        return int(self.times[0]) - self.step, int(self.times[-1])

    def empty_rows(self) -> NDArray[np.bool_]:
        """Rows without any value (a gap: node down, pvestatd not running)."""
        known = np.zeros(self.times.size, dtype=bool)
        for values in self.fields.values():
            known |= np.isfinite(values)
        return ~known


def parse_series(value: Value, timeframe: str, cf: str, step: int) -> Series:
    """Check and decode one ``rrddata`` answer expected at ``step`` seconds per row.

    The longest tail of rows each ``step`` after the previous one is kept (the rows before it,
    at another resolution, are counted in ``head_dropped``); a series with fewer than two such rows is an
    error naming the file."""
    rows = value.items()
    if len(rows) < 2:
        raise value.error(f"needs at least two rows, has {len(rows)}")
    times = np.array([r.get("time").int() for r in rows], dtype=np.int64)
    diffs = np.diff(times)
    if (diffs <= 0).any():
        i = int(np.argmax(diffs <= 0)) + 1
        raise (
            rows[i].get("time").error(f"{times[i]} is not after the previous row's {times[i - 1]}")
        )
    # a row averages the interval since the previous row: the first row of the regular tail
    # after another resolution covers that resolution's interval, so it goes too
    bad = np.flatnonzero(diffs != step)
    start = int(bad[-1]) + 2 if bad.size else 0
    if times.size - start < 2:
        raise value.error(
            f"rows are not {step} s apart (PVE's {timeframe} series has {step} s rows; "
            f"found steps of {sorted(set(diffs.tolist()))[:3]} s)"
        )
    names: set[str] = set()
    for r in rows[start:]:
        names.update(k for k in r.obj() if k != "time")
    fields: dict[str, NDArray[np.float64]] = {}
    for name in sorted(names):
        out = np.full(times.size - start, np.nan)
        for k, r in enumerate(rows[start:]):
            v = r.raw.get(name)
            if v is None:
                continue
            if isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v):
                out[k] = v
            else:  # a string number, or an error naming the row and field
                out[k] = r.get(name).num(None)
        fields[name] = out
    return Series(value.file, timeframe, cf, step, times[start:], fields, start)


def fill_gaps(values: NDArray[np.float64]) -> tuple[NDArray[np.float64], int]:
    """Linear interpolation over NaN runs (held at the ends); returns the filled copy and how many
    values were filled. An all-NaN series stays all NaN."""
    out = values.copy()
    nan = ~np.isfinite(out)
    n = int(nan.sum())
    if n == 0 or n == out.size:
        return out, n if n < out.size else 0
    idx = np.arange(out.size)
    out[nan] = np.interp(idx[nan], idx[~nan], out[~nan])
    return out, n
