"""Parsing of human quantities: sizes (``24GiB``), rates (``430MiB/s``), durations (``20m``).

Binary prefixes (KiB, MiB, GiB, TiB) are powers of 1024; decimal ones (kB, MB, GB, TB) powers of
1000, as in IEC 80000-13. A bare number is bytes, bytes per second or seconds.
"""

from __future__ import annotations

import re

from pvegym.errors import ConfigError

#: Binary size units in bytes: the one definition the project uses (``from pvegym.units import
#: GiB``).
KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

_SIZE_UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
_TIME_UNITS: dict[str, float] = {
    "": 1.0,
    "s": 1.0,
    "ms": 1e-3,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z/]*)\s*$")


def _split(text: str, path: str, what: str) -> tuple[float, str]:
    match = _NUMBER.match(str(text))
    if not match:
        raise ConfigError(path, f"{text!r} is not a {what}")
    return float(match.group(1)), match.group(2).lower()


def parse_size(text: str | float | int, path: str = "size") -> float:
    """Bytes from ``24GiB``, ``512MiB``, ``4096`` (bytes). Allowed units: B, KiB..TiB, kB..TB."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    value, unit = _split(str(text), path, "size (e.g. 24GiB)")
    if unit not in _SIZE_UNITS:
        raise ConfigError(
            path, f"unknown size unit {unit!r} (allowed: B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
        )
    return value * _SIZE_UNITS[unit]


def parse_rate(text: str | float | int, path: str = "rate") -> float:
    """Bytes per second from ``430MiB/s`` or ``1GiB/s``; a bare number is bytes per second."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    value, unit = _split(str(text), path, "rate (e.g. 430MiB/s)")
    if unit.endswith("/s"):
        unit = unit[:-2]
    elif unit:
        raise ConfigError(path, f"rate {text!r} needs a '/s' unit (e.g. 430MiB/s)")
    if unit not in _SIZE_UNITS:
        raise ConfigError(
            path, f"unknown rate unit {unit!r}/s (allowed: B/s, KiB/s..TiB/s, kB/s..TB/s)"
        )
    return value * _SIZE_UNITS[unit]


def parse_duration(text: str | float | int, path: str = "duration") -> float:
    """Seconds from ``20m``, ``100ms``, ``8h``, ``1d``; a bare number is seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    value, unit = _split(str(text), path, "duration (e.g. 20m, 100ms)")
    if unit not in _TIME_UNITS:
        raise ConfigError(path, f"unknown time unit {unit!r} (allowed: ms, s, m, min, h, d)")
    return value * _TIME_UNITS[unit]
