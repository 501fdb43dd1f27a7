"""Human quantities, parsed by one parser: sizes (``24GiB``), rates (``430MiB/s``), durations
(``20m``, ``5 minutes``).

**A string carries its unit.** ``"20m"``, ``"5 minutes"``, ``"100ms"``, ``"24 GiB"``,
``"430MiB/s"``; a string without one (``"5"``) is refused — ``--duration 5`` is an error, not five
seconds. Every command-line value is a string, so flags always take a unit.
**A plain number is the field's unit**: seconds, bytes or bytes per second, as each field's
docstring says. That is what TOML/JSON numbers (``duration = 1200``, ``maxmem = 137438953472``)
and resolved configs (manifests) hold, and a ``--set`` value is a TOML value (``--set
duration=1200``: seconds; ``--set duration=20m``: a string with its unit).

Units: durations ``ms``, ``s``, ``m``/``min``, ``h``, ``d`` and their words (``millisecond(s)``,
``sec``/``second(s)``, ``minute(s)``, ``hr``/``hour(s)``, ``day(s)``); sizes ``B``
(``byte(s)``), binary ``KiB``–``PiB`` (powers of 1024) and decimal ``kB``–``PB`` (powers of 1000,
IEC 80000-13); rates a size unit per second (``/s``). Case does not matter; a space may separate
number and unit. NaN, infinity and numbers that overflow are refused (:func:`parse_quantity`).
Ranges (≥ 0, at most a bound) are the caller's: :mod:`pvegym.limits`.
"""

from __future__ import annotations

import math
import re

from pvegym.errors import ConfigError, show

#: Binary size units in bytes: the one definition the project uses (``from pvegym.units import
#: GiB``).
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

PiB = 1 << 50

_SIZE_UNITS: dict[str, float] = {
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "pib": PiB,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
}
_TIME_UNITS: dict[str, float] = {
    "ms": 1e-3,
    "millisecond": 1e-3,
    "milliseconds": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}
_KINDS = {
    "size": ("size", "24GiB", "B, KiB, MiB, GiB, TiB, PiB, kB, MB, GB, TB, PB"),
    "rate": ("rate", "430MiB/s", "B/s, KiB/s … PiB/s, kB/s … PB/s"),
    "duration": ("duration", "20m", "ms, s, m (min), h, d, or minutes, hours, …"),
}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*$")
_MAX_TEXT = 64  # characters of a quantity: anything longer is not one


def parse_quantity(kind: str, value: str | float | int, path: str) -> float:
    """``value`` as a number in the base unit of ``kind`` (``"size"``: bytes, ``"rate"``: bytes per
    second, ``"duration"``: seconds), by the rules of the module docstring. Errors are one-line
    :class:`ConfigError`\\s at ``path`` saying what is allowed."""
    what, example, units = _KINDS[kind]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(path, f"must be a {what} (e.g. {example}), not {show(value)}")
    if not isinstance(value, str):
        number = float(value)
        if not math.isfinite(number):
            raise ConfigError(path, f"must be a finite {what}, not {show(value)}")
        return number
    match = _NUMBER.match(value) if len(value) <= _MAX_TEXT else None
    if not match:
        raise ConfigError(path, f"{show(value)} is not a {what} (e.g. {example})")
    number, unit = float(match.group(1)), match.group(2).lower()
    if not unit:
        raise ConfigError(
            path,
            f"{show(value)} needs a unit (e.g. {example}; a plain number, not a string, is "
            f"{'seconds' if kind == 'duration' else 'bytes' if kind == 'size' else 'bytes/s'})",
        )
    if kind == "rate":
        if not unit.endswith("/s"):
            raise ConfigError(path, f"rate {show(value)} needs a '/s' unit (e.g. {example})")
        unit = unit[:-2]
    table = _TIME_UNITS if kind == "duration" else _SIZE_UNITS
    if unit not in table:
        raise ConfigError(path, f"unknown {what} unit in {show(value)} (allowed: {units})")
    out = number * table[unit]
    if not math.isfinite(out):
        raise ConfigError(path, f"{show(value)} is too large a {what}")
    return out


#: the units :func:`format_quantity` writes, largest first
_SHOW_UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "duration": (("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3)),
    "size": (("PiB", PiB), ("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB), ("B", 1)),
}
_SHOW_UNITS["rate"] = tuple((f"{u}/s", f) for u, f in _SHOW_UNITS["size"])


def format_quantity(kind: str, value: float) -> str:
    """``value`` (seconds, bytes or bytes/s for ``kind``) in the largest unit that keeps it ≥ 1,
    as an error message says it: ``2678400`` → ``"31 d"``, ``-2**30`` → ``"-1 GiB"``; a value
    below the smallest unit in that unit (``"0 s"``, ``"0.5 B"``)."""
    units = _SHOW_UNITS[kind]
    if not math.isfinite(value):
        return f"{value!r}"
    for name, factor in units:
        if abs(value) >= factor:
            return f"{value / factor:.6g} {name}"
    if value == 0:
        return "0 s" if kind == "duration" else f"0 {units[-1][0]}"
    name, factor = units[-1]
    return f"{value / factor:.6g} {name}"


def parse_size(text: str | float | int, path: str = "size") -> float:
    """Bytes from ``24GiB``, ``512 MiB``, or a plain number of bytes (:func:`parse_quantity`)."""
    return parse_quantity("size", text, path)


def parse_rate(text: str | float | int, path: str = "rate") -> float:
    """Bytes per second from ``430MiB/s``, ``1 GiB/s``, or a plain number of bytes per second."""
    return parse_quantity("rate", text, path)


def parse_duration(text: str | float | int, path: str = "duration") -> float:
    """Seconds from ``20m``, ``100ms``, ``8h``, ``5 minutes``, or a plain number of seconds."""
    return parse_quantity("duration", text, path)
