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

A :class:`WorkloadBank` holds the signals of ``n`` entities and evaluates them in one compiled pass
per round. Randomness comes from one ``numpy.random.Generator`` per bank, drawn in a fixed order:
same seed, same signal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from pvegym.config import field, load
from pvegym.errors import ConfigError
from pvegym.sim.kernel import sample_signals

Kind = Literal["constant", "ou", "diurnal", "bursts", "steps"]


@dataclass(frozen=True)
class Component:
    """One term of a workload signal (units are those of the signal: cores or bytes)."""

    type: Kind
    level: float = 0.0
    mean: float = 0.0
    sigma: float = field(0.0, ge=0.0)
    tau: float = field(60.0, gt=0.0, unit="duration")
    amplitude: float = 0.0
    period: float = field(86400.0, gt=0.0, unit="duration")
    phase: float = field(0.0, unit="duration")
    rate_per_hour: float = field(0.0, ge=0.0)
    height: float = 0.0
    duration: float = field(60.0, gt=0.0, unit="duration")
    at: tuple[tuple[float, float], ...] = ()

    def validate(self, path: str) -> None:
        times = [t for t, _ in self.at]
        if times != sorted(times):
            raise ConfigError(f"{path}.at", "step times must be in increasing order")


def _number(value: Any, path: str, unit: str | None) -> float:
    from pvegym.units import parse_duration, parse_size

    if isinstance(value, str) and unit == "size":
        return parse_size(value, path)
    if isinstance(value, str) and unit == "duration":
        return parse_duration(value, path)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, f"must be a number, not {value!r}")
    return float(value)


def parse_signal(value: Any, path: str, unit: str | None = None) -> tuple[Component, ...]:
    """A signal spec: a number (constant), a component table, or a list of component tables.

    ``unit="size"`` lets byte-valued levels be written as ``"8GiB"``.
    """
    if isinstance(value, int | float | str) and not isinstance(value, bool):
        return (Component(type="constant", level=_number(value, path, unit)),)
    items = value if isinstance(value, list | tuple) else [value]
    comps = []
    for i, item in enumerate(items):
        sub = f"{path}[{i}]" if isinstance(value, list | tuple) else path
        if not isinstance(item, dict):
            raise ConfigError(sub, f"must be a number or a component table, not {item!r}")
        if unit == "size":
            item = dict(item)
            for key in ("level", "mean", "sigma", "amplitude", "height"):
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


class WorkloadBank:
    """One signal for ``n`` entities: ``sample(t, dt)`` returns its values at round time ``t``.

    The components are flattened into arrays at construction (step events in CSR form), and each
    round draws all of its random numbers with two NumPy calls before one compiled pass
    (:func:`pvegym.sim.kernel.sample_signals`) sums the components.
    """

    def __init__(self, specs: list[tuple[Component, ...]], rng: np.random.Generator) -> None:
        self.n = len(specs)
        self._rng = rng
        self._const = np.zeros(self.n)
        ou: list[tuple[int, float, float, float]] = []
        di: list[tuple[int, float, float, float]] = []
        bu: list[tuple[int, float, float, float]] = []
        st: list[tuple[int, tuple[tuple[float, float], ...]]] = []
        for i, comps in enumerate(specs):
            for c in comps:
                if c.type == "constant":
                    self._const[i] += c.level
                elif c.type == "ou":
                    ou.append((i, c.mean, c.sigma, c.tau))
                elif c.type == "diurnal":
                    di.append((i, c.amplitude, c.period, c.phase))
                elif c.type == "bursts":
                    bu.append((i, c.rate_per_hour, c.height, c.duration))
                else:
                    st.append((i, c.at))
        self._ou_idx = np.array([x[0] for x in ou], dtype=np.int64)
        self._ou_mean = np.array([x[1] for x in ou], dtype=np.float64)
        self._ou_sigma = np.array([x[2] for x in ou], dtype=np.float64)
        self._ou_tau = np.array([x[3] for x in ou], dtype=np.float64)
        self._di_idx = np.array([x[0] for x in di], dtype=np.int64)
        self._di_amp = np.array([x[1] for x in di], dtype=np.float64)
        self._di_w = np.array([2 * math.pi / x[2] for x in di], dtype=np.float64)
        self._di_phase = np.array([x[3] for x in di], dtype=np.float64)
        self._bu_idx = np.array([x[0] for x in bu], dtype=np.int64)
        self._bu_rate = np.array([x[1] / 3600.0 for x in bu], dtype=np.float64)
        self._bu_height = np.array([x[2] for x in bu], dtype=np.float64)
        self._bu_dur = np.array([x[3] for x in bu], dtype=np.float64)
        self._st_idx = np.array([x[0] for x in st], dtype=np.int64)
        self._st_ptr = np.cumsum([0] + [len(x[1]) for x in st]).astype(np.int64)
        self._st_times = np.array([p[0] for x in st for p in x[1]], dtype=np.float64)
        self._st_vals = np.array([p[1] for x in st for p in x[1]], dtype=np.float64)
        self._ou_state = np.zeros(len(ou))
        self._bu_left = np.zeros(len(bu))
        self._dt = -1.0
        self._phi = np.zeros(len(ou))
        self._innov = np.zeros(len(ou))
        self._p_burst = np.zeros(len(bu))
        self._out = np.zeros(self.n)
        self.reset()

    def reset(self) -> None:
        """Start OU terms in their stationary distribution and clear bursts."""
        self._ou_state = self._ou_mean + self._ou_sigma * self._rng.standard_normal(
            self._ou_idx.size
        )
        self._bu_left[:] = 0.0

    def _prepare(self, dt: float) -> None:
        self._dt = dt
        self._phi = np.exp(-dt / self._ou_tau)
        self._innov = self._ou_sigma * np.sqrt(1.0 - self._phi**2)
        self._p_burst = -np.expm1(-self._bu_rate * dt)

    def sample(self, t: float, dt: float) -> NDArray[np.float64]:
        """Values at time ``t`` (s) after advancing stochastic terms by ``dt`` (s). Reused buffer."""
        if dt != self._dt:
            self._prepare(dt)
        normals = self._rng.standard_normal(self._ou_idx.size)
        uniforms = self._rng.random(self._bu_idx.size)
        sample_signals(
            t, self._out, self._const,
            self._ou_idx, self._ou_mean, self._phi, self._innov, self._ou_state, normals,
            self._di_idx, self._di_amp, self._di_w, self._di_phase,
            self._bu_idx, self._bu_left, self._p_burst, self._bu_dur, self._bu_height, uniforms, dt,
            self._st_idx, self._st_ptr, self._st_times, self._st_vals,
        )  # fmt: skip
        return self._out
