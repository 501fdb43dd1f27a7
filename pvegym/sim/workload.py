"""Composable, seeded workload processes, evaluated for many entities at once.

A signal (a guest's CPU demand in cores, its host memory footprint in bytes, a node's base load) is
the sum of components, each one of:

* ``constant``  — ``level``.
* ``ou``        — Ornstein–Uhlenbeck noise around ``mean`` with stationary std ``sigma`` and
  correlation time ``tau`` seconds, advanced exactly as its AR(1) discretisation:
  ``x ← mean + (x − mean)·φ + sigma·√(1 − φ²)·ε``, ``φ = exp(−dt/tau)``; starts stationary.
* ``diurnal``   — ``amplitude · sin(2π (t + phase)/period)`` (period default one day).
* ``bursts``    — Poisson arrivals at ``rate_per_hour``; each adds ``height`` for ``duration`` s.
* ``steps``     — piecewise-constant level: ``at = [[t0, v0], [t1, v1], ...]`` adds ``v_i`` from
  ``t_i`` on (0 before the first step).
* ``trace``     — replay of a real per-VM series (``docs/model.md``), see :func:`load_trace`:
  ``{type = "trace", source = "planetlab/<file>" | "bitbrains/<vm-id>" | "rrd/<name>",
  field = "cpu" | "mem",
  scale = ..., offset = "2h", loop = true}`` adds ``scale · u(t + offset)``, where ``u`` is the
  traced VM's utilisation (0–1 of its capacity: PlanetLab CPU percent / 100, Bitbrains CPU MHz /
  its provisioned MHz, Bitbrains memory KB / its provisioned KB), linearly interpolated between
  the 5-min samples. ``scale`` is in the signal's unit: the guest's vCPUs for ``cpu`` (so CPU
  percent × vCPUs → cores), bytes for ``mem`` (``"8GiB"`` accepted). Without ``scale`` the traced
  VM's own capacity is used (Bitbrains: its cores / provisioned bytes; PlanetLab gives no VM size:
  one core). ``loop`` repeats the series (the last sample interpolates into the first); without
  it the series holds its first value before and its last value after. Files are read once per
  process and cached. ``trace_dir`` names a directory beside the scenario file (or under a
  ``--trace-dir``) instead of the bundled ``pvegym/data/traces``: where a trace may be read from is
  :mod:`pvegym.sim.trace_source`'s rule, checked when the scenario is validated.
  ``rrd/<name>`` reads ``<trace_dir>/rrd/<name>.csv``, a Proxmox VE RRD series resampled by
  ``pvegym import`` (:func:`_read_rrd`): a metadata line ``# pvegym-rrd interval_s=…
  cpu_capacity=… mem_capacity=…`` (cores, bytes), a header ``time,cpu,mem`` and one row per
  sample (unix seconds, evenly spaced by ``interval_s``; cpu and mem as fractions of the
  capacities) — its default ``scale`` is the capacity, so it replays cores and bytes.

A :class:`WorkloadBank` holds the signals of ``n`` entities and evaluates them in one compiled pass
per round. Randomness comes from one ``numpy.random.Generator`` per bank, drawn in a fixed order:
same seed, same signal.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from pvegym.config import field, load
from pvegym.errors import ConfigError, show
from pvegym.limits import (
    MAX_COMPONENTS,
    MAX_DURATION_S,
    MAX_SIGNAL,
    MAX_STEPS,
    MAX_TRACE_SAMPLES,
    check_number,
)
from pvegym.sim.trace_source import (
    TRACE_ROOT,
    TraceFile,
    read_trace_text,
    resolve_trace_source,
)

Kind = Literal["constant", "ou", "diurnal", "bursts", "steps", "trace"]

#: ``rrd`` trace files: the metadata line's tag and the columns after ``time``.
RRD_TAG = "pvegym-rrd"
RRD_COLUMNS = ("cpu", "mem")


@dataclass(frozen=True)
class Component:
    """One term of a workload signal (units are those of the signal: cores or bytes)."""

    type: Kind
    level: float = field(0.0, ge=-MAX_SIGNAL, le=MAX_SIGNAL)
    mean: float = field(0.0, ge=-MAX_SIGNAL, le=MAX_SIGNAL)
    sigma: float = field(0.0, ge=0.0, le=MAX_SIGNAL)
    tau: float = field(60.0, gt=0.0, le=MAX_DURATION_S, unit="duration")
    amplitude: float = field(0.0, ge=-MAX_SIGNAL, le=MAX_SIGNAL)
    period: float = field(86400.0, ge=1.0, le=MAX_DURATION_S, unit="duration")
    phase: float = field(0.0, ge=-MAX_DURATION_S, le=MAX_DURATION_S, unit="duration")
    rate_per_hour: float = field(0.0, ge=0.0, le=3600.0)  # arrivals per hour: at most one a second
    height: float = field(0.0, ge=-MAX_SIGNAL, le=MAX_SIGNAL)
    duration: float = field(60.0, gt=0.0, le=MAX_DURATION_S, unit="duration")
    at: tuple[tuple[float, float], ...] = field((), max_items=MAX_STEPS)
    # trace replay (``type = "trace"``); ``field`` last: it shadows the ``field`` helper below it
    source: str = ""
    scale: float | None = field(None, ge=0.0, le=MAX_SIGNAL)
    offset: float = field(0.0, ge=-MAX_DURATION_S, le=MAX_DURATION_S, unit="duration")
    loop: bool = True
    trace_dir: str = ""
    # the file ``source`` resolved to when the scenario was validated (not a config key)
    trace_file: str = dataclasses.field(default="", init=False, repr=False, compare=False)
    field: Literal["cpu", "mem"] = "cpu"

    def validate(self, path: str) -> None:
        times = [t for t, _ in self.at]
        if times != sorted(times):
            raise ConfigError(f"{path}.at", "step times must be in increasing order")
        for j, (t, v) in enumerate(self.at):
            check_number(t, f"{path}.at[{j}][0]", ge=-MAX_DURATION_S, le=MAX_DURATION_S)
            check_number(v, f"{path}.at[{j}][1]", ge=-MAX_SIGNAL, le=MAX_SIGNAL)
        if self.type == "trace":
            if self.scale is not None and not (math.isfinite(self.scale) and self.scale >= 0):
                raise ConfigError(
                    f"{path}.scale", f"must be a finite number ≥ 0, not {self.scale!r}"
                )
            tf = resolve_trace_source(self.source, self.trace_dir, path=f"{path}.source")
            _read_trace(tf, self.field, f"{path}.source")
            object.__setattr__(self, "trace_file", str(tf.file))


@dataclass(frozen=True)
class Trace:
    """One replayable series: ``values`` are utilisation (0–1 of ``capacity``) every ``interval_s``
    seconds from t = 0; ``capacity`` is the traced VM's size in the signal's unit (cores or bytes),
    the default ``scale``."""

    values: NDArray[np.float64]
    interval_s: float
    capacity: float


def _bad(where: str, message: str) -> ConfigError:
    return ConfigError("", f"{where}: {message}")


def _parse_meta(
    text: str,
    file: str,
    required: tuple[str, ...] = ("interval_s", "cpu_count", "cpu_capacity_mhz", "mem_capacity_kb"),
    labels: tuple[str, ...] = ("id",),
) -> dict[str, float]:
    """The ``key=value`` items of a metadata line: numbers, except the ``labels`` (skipped);
    every ``required`` key a positive finite number, ``interval_s`` at least a second."""
    meta: dict[str, float] = {}
    for item in text.split():
        key, sep, value = item.partition("=")
        if not sep:
            raise _bad(f"{file}:1", f"malformed metadata item {show(item, 40)} (want key=value)")
        if key in labels:
            continue
        try:
            meta[key] = float(value)
        except ValueError:
            raise _bad(
                f"{file}:1", f"metadata {show(key, 40, quote=False)} is not a number"
            ) from None
    for key in required:
        if not (meta.get(key, 0.0) > 0.0 and math.isfinite(meta[key])):
            raise _bad(f"{file}:1", f"metadata needs a positive finite {key}=")
    if meta["interval_s"] < 1.0:
        raise _bad(f"{file}:1", "metadata interval_s must be ≥ 1 (seconds between samples)")
    return meta


def _csv_rows(lines: list[str], header: list[str], file: str) -> Iterator[tuple[int, list[str]]]:
    """The data rows of a CSV trace (from line 3) as ``(line number, cells)``: blank lines
    skipped, a row with another number of cells than the header an error naming its line."""
    for no, line in enumerate(lines[2:], 3):
        if not line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(header):
            raise _bad(f"{file}:{no}", f"{len(cells)} columns, expected {len(header)}")
        yield no, cells


def _read_trace(tf: TraceFile, col: str, path: str) -> Trace:
    """The series of a resolved trace file (cached: each file and column is read once per
    process); a malformed file is a one-line ConfigError at ``path`` naming the file and line."""
    try:
        return _parse_trace(tf, col)
    except ConfigError as err:
        raise ConfigError(path, err.message) from None


@functools.cache
def _parse_trace(tf: TraceFile, col: str) -> Trace:
    file = str(tf.file.relative_to(TRACE_ROOT) if TRACE_ROOT in tf.file.parents else tf.file)
    file = show(file, 120, quote=False)
    lines = read_trace_text(tf, "").splitlines()
    if not any(line.strip() for line in lines):
        raise _bad(f"{file}:1", "empty trace file (no samples)")
    if len(lines) > MAX_TRACE_SAMPLES + 2:
        raise _bad(file, f"more than {MAX_TRACE_SAMPLES} samples")
    if tf.format == "planetlab":
        if col != "cpu":
            raise _bad(file, 'PlanetLab traces have no memory series (field = "cpu" only)')
        vals: list[float] = []
        for no, line in enumerate(lines, 1):
            text = line.strip()
            if not text:
                continue
            try:
                v = float(text)
            except ValueError:
                raise _bad(f"{file}:{no}", f"not a CPU percentage: {show(text, 20)}") from None
            if not (0.0 <= v <= 100.0):
                raise _bad(
                    f"{file}:{no}", f"CPU percentage {show(text, 20, quote=False)} outside 0–100"
                )
            vals.append(v / 100.0)
        return Trace(_frozen(vals), 300.0, 1.0)
    if tf.format == "rrd":
        return _read_rrd(lines, file, col)
    # bitbrains: "# id=… interval_s=… cpu_count=… cpu_capacity_mhz=… mem_capacity_kb=…", a header
    if not lines[0].startswith("#"):
        raise _bad(f"{file}:1", "missing '# interval_s=… cpu_count=… …' metadata line")
    meta = _parse_meta(lines[0].lstrip("#"), file)
    header = [h.strip() for h in lines[1].split(",")] if len(lines) > 1 else []
    want = "cpu_mhz" if col == "cpu" else "mem_kb"
    if want not in header:
        columns = show(", ".join(header) or "none", 60, quote=False)
        raise _bad(f"{file}:2", f"no {want!r} column (columns: {columns})")
    j = header.index(want)
    cap = meta["cpu_capacity_mhz"] if col == "cpu" else meta["mem_capacity_kb"]
    vals = []
    for no, cells in _csv_rows(lines, header, file):
        try:
            v = float(cells[j])
        except ValueError:
            raise _bad(
                f"{file}:{no}", f"{want} is not a number: {show(cells[j].strip(), 20)}"
            ) from None
        if not (math.isfinite(v) and v >= 0.0):
            raise _bad(f"{file}:{no}", f"{want} must be a finite number ≥ 0, not {show(v)}")
        vals.append(v / cap)
    if not vals:
        raise _bad(f"{file}:3", "empty trace (a header but no samples)")
    native = meta["cpu_count"] if col == "cpu" else meta["mem_capacity_kb"] * 1024.0
    if not math.isfinite(native):
        raise _bad(f"{file}:1", "metadata capacity is too large")
    return Trace(_frozen(vals), meta["interval_s"], native)


def _read_rrd(lines: list[str], file: str, col: str) -> Trace:
    """An ``rrd`` trace (see the module docstring): the ``col`` column as fractions of its
    capacity, every ``interval_s`` seconds; rows must be evenly spaced (``pvegym import`` fills
    RRD gaps before writing, so a gap here is a damaged file)."""
    head = lines[0].split()
    if len(head) < 2 or head[0] != "#" or head[1] != RRD_TAG:
        raise _bad(f"{file}:1", f"missing '# {RRD_TAG} interval_s=… cpu_capacity=… …' line")
    meta = _parse_meta(
        " ".join(head[2:]),
        file,
        ("interval_s", "cpu_capacity", "mem_capacity"),
        ("timeframe", "cf"),
    )
    header = [h.strip() for h in lines[1].split(",")] if len(lines) > 1 else []
    if header[:1] != ["time"] or col not in header:
        got = lines[1] if len(lines) > 1 else "nothing"
        raise _bad(f"{file}:2", f"header must be time,{','.join(RRD_COLUMNS)}, not {show(got, 60)}")
    j = header.index(col)
    step = meta["interval_s"]
    vals: list[float] = []
    t_prev: float | None = None
    for no, cells in _csv_rows(lines, header, file):
        try:
            t, v = float(cells[0]), float(cells[j])
        except ValueError:
            raise _bad(
                f"{file}:{no}", f"not a number in {show(','.join(cells).strip(), 60)}"
            ) from None
        if not (math.isfinite(v) and v >= 0.0):
            raise _bad(f"{file}:{no}", f"{col} must be a finite number ≥ 0, not {show(v)}")
        if t_prev is not None and abs(t - t_prev - step) > 1e-6:
            raise _bad(f"{file}:{no}", f"time {t:g} is not {step:g} s after {t_prev:g}")
        t_prev = t
        vals.append(v)
    if not vals:
        raise _bad(f"{file}:3", "empty trace (a header but no samples)")
    native = meta["cpu_capacity"] if col == "cpu" else meta["mem_capacity"]
    return Trace(_frozen(vals), step, native)


def _frozen(vals: list[float]) -> NDArray[np.float64]:
    arr = np.asarray(vals, dtype=np.float64)
    arr.flags.writeable = False
    return arr


def load_trace(source: str, col: str = "cpu", trace_dir: str = "", path: str = "source") -> Trace:
    """The (cached) series of ``source`` under ``trace_dir`` (resolved by
    :func:`~pvegym.sim.trace_source.resolve_trace_source`); a missing, misplaced, empty or
    malformed file is a one-line :class:`ConfigError` naming ``path`` (the key), the file and the
    line."""
    return _read_trace(resolve_trace_source(source, trace_dir, path=path), col, path)


def _number(value: Any, path: str, unit: str | None) -> float:
    """A signal's number: finite, at most :data:`~pvegym.limits.MAX_SIGNAL` in magnitude; a
    string with its unit where the signal has one (``"8GiB"``)."""
    from pvegym.units import parse_quantity

    if isinstance(value, str) and unit in ("size", "duration"):
        value = parse_quantity(unit, value, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, f"must be a number, not {show(value)}")
    if isinstance(value, int) and abs(value) > MAX_SIGNAL:
        raise ConfigError(path, f"must be ≤ {MAX_SIGNAL:g} in magnitude, not {show(value)}")
    return check_number(float(value), path, ge=-MAX_SIGNAL, le=MAX_SIGNAL)


def parse_signal(value: Any, path: str, unit: str | None = None) -> tuple[Component, ...]:
    """A signal spec: a number (constant), a component table, or a list of component tables.

    ``unit="size"`` lets byte-valued levels be written as ``"8GiB"``.
    """
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        return (Component(type="constant", level=_number(value, path, unit)),)
    items = value if isinstance(value, list | tuple) else [value]
    if len(items) > MAX_COMPONENTS:
        raise ConfigError(path, f"at most {MAX_COMPONENTS} components, not {len(items)}")
    comps = []
    for i, item in enumerate(items):
        sub = f"{path}[{i}]" if isinstance(value, list | tuple) else path
        if not isinstance(item, dict):
            raise ConfigError(sub, f"must be a number or a component table, not {show(item)}")
        if unit == "size":
            item = dict(item)
            for key in ("level", "mean", "sigma", "amplitude", "height", "scale"):
                if isinstance(item.get(key), str):
                    item[key] = _number(item[key], f"{sub}.{key}", "size")
            if "at" in item and isinstance(item["at"], list):
                item["at"] = [
                    [s[0], _number(s[1], f"{sub}.at[{j}][1]", "size")]
                    if isinstance(s, list) and len(s) == 2
                    else s
                    for j, s in enumerate(item["at"])
                ]
        if isinstance(item.get("at"), list):
            for j, s in enumerate(item["at"]):
                if not (isinstance(s, list | tuple) and len(s) == 2):
                    raise ConfigError(f"{sub}.at[{j}]", "must be a pair [time_s, value]")
        comps.append(load(Component, item, sub))
    return tuple(comps)


def _by_type(
    specs: list[tuple[Component, ...]],
) -> tuple[
    NDArray[np.float64],
    list[tuple[int, float, float, float]],
    list[tuple[int, float, float, float]],
    list[tuple[int, float, float, float]],
    list[tuple[int, tuple[tuple[float, float], ...]]],
    list[tuple[int, Trace, float, float, bool]],
]:
    """The components of every entity by type: the constant sums, then one row per OU, diurnal,
    burst, step and trace component (entity index first), traces read once here."""
    const = np.zeros(len(specs))
    ou: list[tuple[int, float, float, float]] = []
    di: list[tuple[int, float, float, float]] = []
    bu: list[tuple[int, float, float, float]] = []
    st: list[tuple[int, tuple[tuple[float, float], ...]]] = []
    tr: list[tuple[int, Trace, float, float, bool]] = []
    for i, comps in enumerate(specs):
        for c in comps:
            if c.type == "constant":
                const[i] += c.level
            elif c.type == "ou":
                ou.append((i, c.mean, c.sigma, c.tau))
            elif c.type == "diurnal":
                di.append((i, c.amplitude, c.period, c.phase))
            elif c.type == "bursts":
                bu.append((i, c.rate_per_hour, c.height, c.duration))
            elif c.type == "trace":
                if c.trace_file:  # resolved when its scenario was validated
                    tf = TraceFile(Path(c.trace_file), c.source.partition("/")[0], Path("/"))
                    trace = _read_trace(tf, c.field, "trace")
                else:
                    trace = load_trace(c.source, c.field, c.trace_dir, "trace")
                scale = trace.capacity if c.scale is None else c.scale
                tr.append((i, trace, scale, c.offset, c.loop))
            else:
                st.append((i, c.at))
    return const, ou, di, bu, st, tr


def _flat_traces(
    tr: list[tuple[int, Trace, float, float, bool]],
) -> tuple[list[NDArray[np.float64]], list[int], int]:
    """Each distinct trace series once in one flat array (many guests may replay one file): the
    chunks to concatenate, each trace component's start in it, and the total length."""
    starts: dict[int, int] = {}
    chunks: list[NDArray[np.float64]] = []
    lo: list[int] = []
    size = 0
    for _, trace, _, _, _ in tr:
        key = id(trace)
        if key not in starts:
            starts[key] = size
            chunks.append(trace.values)
            size += trace.values.size
        lo.append(starts[key])
    return chunks, lo, size


class WorkloadBank:
    """One signal for ``n`` entities at round time ``t``.

    The components are flattened into two buffers at construction (step events in CSR form). Each
    round :meth:`draw` takes all of its random numbers with two NumPy calls; the compiled pass
    (:func:`pvegym.sim.kernel.sample_signals`) then sums the components — inside the cluster's
    round kernel, which gets :attr:`kernel_args`. :meth:`sample` does both, for standalone use.
    """

    def __init__(self, specs: list[tuple[Component, ...]], rng: np.random.Generator) -> None:
        self.n = len(specs)
        self._rng = rng
        self._const, ou, di, bu, st, tr = _by_type(specs)
        chunks, lo, size = _flat_traces(tr)
        # Everything the compiled pass reads or writes lives in one float64 and one int64 buffer
        # (a NumPy array costs ~75–150 ns to hand to numba, whatever its size); ``layout`` says
        # where each part starts. The attributes below are views into the buffers.
        n, k_ou, k_di, k_bu, k_tr = self.n, len(ou), len(di), len(bu), len(tr)
        m_st = sum(len(x[1]) for x in st)
        float_sizes = (n, n, 5 * k_ou, 3 * k_di, 5 * k_bu, 2 * m_st, 3 * k_tr, size)
        int_parts: tuple[list[int], ...] = (
            [x[0] for x in ou],  # ou_idx
            [x[0] for x in di],  # di_idx
            [x[0] for x in bu],  # bu_idx
            [x[0] for x in st],  # st_idx
            np.cumsum([0] + [len(x[1]) for x in st]).tolist(),  # st_ptr
            [x[0] for x in tr],  # tr_idx
            lo,  # tr_lo
            [x[1].values.size for x in tr],  # tr_n
            [int(x[4]) for x in tr],  # tr_loop (0/1)
        )
        int_ptr = np.cumsum([0] + [len(part) for part in int_parts])
        float_ptr = np.cumsum([0, *float_sizes])
        self._layout = np.concatenate([int_ptr, float_ptr]).astype(np.int64)
        self._ints = np.array([v for part in int_parts for v in part], dtype=np.int64)
        self._floats = np.zeros(int(float_ptr[-1]))
        f = [self._floats[float_ptr[i] : float_ptr[i + 1]] for i in range(len(float_sizes))]
        self.out, const = f[0], f[1]  # the signals of the last round | constant parts
        const[:] = self._const
        self._const = const
        self._ou = f[2].reshape(5, k_ou)  # mean, phi, innov, state, normals
        self._ou_mean, self._phi, self._innov, self._ou_state, self._normals = self._ou
        self._ou_mean[:] = [x[1] for x in ou]
        self._ou_sigma = np.array([x[2] for x in ou], dtype=np.float64)
        self._ou_tau = np.array([x[3] for x in ou], dtype=np.float64)
        di_rows = f[3].reshape(3, k_di)  # amplitude, angular frequency, phase
        di_rows[0] = [x[1] for x in di]
        di_rows[1] = [2 * math.pi / x[2] for x in di]
        di_rows[2] = [x[3] for x in di]
        self._bu = f[4].reshape(5, k_bu)  # time left, p(start), duration, height, uniforms
        self._bu_left, self._p_burst, bu_dur, bu_height, self._uniforms = self._bu
        bu_dur[:] = [x[3] for x in bu]
        bu_height[:] = [x[2] for x in bu]
        self._bu_rate = np.array([x[1] / 3600.0 for x in bu], dtype=np.float64)
        st_rows = f[5].reshape(2, m_st)  # step times, step values (CSR rows by st_ptr)
        st_rows[0] = [p[0] for x in st for p in x[1]]
        st_rows[1] = [p[1] for x in st for p in x[1]]
        tr_rows = f[6].reshape(3, k_tr)  # sample interval, offset, scale
        tr_rows[0] = [x[1].interval_s for x in tr]
        tr_rows[1] = [x[3] for x in tr]
        tr_rows[2] = [x[2] for x in tr]
        if chunks:
            f[7][:] = np.concatenate(chunks)  # the trace samples
        self._dt = -1.0
        # the compiled pass's arguments, bound once: the buffers are updated in place
        self._args = (self._floats, self._ints, self._layout)
        self.reset()

    def reset(self) -> None:
        """Start OU terms in their stationary distribution and clear bursts."""
        self._ou_state[:] = self._ou_mean + self._ou_sigma * self._rng.standard_normal(
            self._ou_mean.size
        )
        self._bu_left[:] = 0.0

    def _prepare(self, dt: float) -> None:
        self._dt = dt
        # libm's exp/expm1, element by element: NumPy's are CPU-dependent in the last bits
        # (SVML/AVX-512 code on some machines; see pvegym.sim.psi._mmc_table)
        self._phi[:] = [math.exp(x) for x in (-dt / self._ou_tau).tolist()]
        self._innov[:] = self._ou_sigma * np.sqrt(1.0 - self._phi**2)
        self._p_burst[:] = [-math.expm1(x) for x in (-self._bu_rate * dt).tolist()]

    def draw(self, dt: float) -> None:
        """The random numbers and per-``dt`` factors of a round of ``dt`` seconds, in place: what
        :func:`~pvegym.sim.kernel.sample_signals` then reads from :attr:`kernel_args`."""
        if dt != self._dt:
            self._prepare(dt)
        # the same draws, in the same order, as ``standard_normal(n)`` then ``random(m)``
        self._rng.standard_normal(out=self._normals)
        self._rng.random(out=self._uniforms)

    @property
    def kernel_args(self) -> tuple[NDArray[Any], ...]:
        """:func:`~pvegym.sim.kernel.sample_signals`' array arguments, in order, without ``t``
        and ``dt`` (which come first: ``sample_signals(t, dt, *kernel_args)``)."""
        return self._args

    def sample(self, t: float, dt: float) -> NDArray[np.float64]:
        """Values at time ``t`` (s) after advancing stochastic terms by ``dt`` (s), in the reused
        buffer :attr:`out`."""
        from pvegym.sim.kernel import sample_signals  # lazily: the numba kernel costs ~0.3 s

        self.draw(dt)
        sample_signals(t, dt, *self._args)  # standalone use (tests): the cluster runs the
        # workloads inside its round kernel
        return self.out
