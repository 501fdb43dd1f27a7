"""Upper bounds on every input that costs memory or time, and the checks that enforce them.

A few bytes of config must never ask for gigabytes or for a run that never ends: every count,
size, duration or rate a user can give is bounded here, once, with the reason for the bound.
Validators (:mod:`pvegym.config`'s field metadata, the CLI's flag parsers, the file readers)
refer to these names; the messages say the bound ("must be ≤ 1024"). The bounds are generous for
real clusters and real experiments — raise one here, with its reason, if a real input needs it.

| quantity | bound | why |
|---|---|---|
| nodes in a scenario | 1,024 | PVE clusters are corosync-bound to a few dozen nodes; cost ∝ nodes per round |
| guests in a scenario | 100,000 | VMIDs of a large cluster; cost ∝ guests per round and per decision |
| cores of a node or guest (``maxcpu``) | 1,024 | largest x86 hosts have ≤ 960 threads; PSI's M/M/c table is cores × 1,999 floats |
| memory of a node or guest | 1 PiB | largest hosts have 32 TiB |
| a rate (migration bandwidth, dirty rate) | 1 PiB/s | 800 Gb/s links move 0.1 TB/s |
| a workload signal's value (cores or bytes) | 2⁶⁰ | above every memory size; sums of 10⁵ of them stay finite |
| a reward or objective weight | 10¹² in magnitude | weighted sums of metrics stay finite |
| simulated duration (episode, event time, workload period) | 31 days | cost ∝ rounds: 267,840 rounds of 10 s |
| workload components of one signal | 64 | each is evaluated every round |
| steps of a ``steps`` component, events of a scenario | 100,000 | |
| a seed | 2³² − 1 | NumPy's legacy and PyTorch's seeding take 32-bit seeds |
| seeds of one entry (``count``) | 100,000 | one episode each |
| episodes of one experiment (cells) | 1,000,000 | one result file each |
| bootstrap resamples | 100,000, and resamples × seeds ≤ 2 × 10⁷ | memory ∝ resamples × seeds (16 bytes each) |
| timeline plots per scenario | 100 | a PNG each |
| Optuna trials (``n_trials``, ``--n-trials``) | 1,000,000 | |
| worker processes (``--workers``) | 256 | one process each |
| training steps (``total_timesteps``) | 10⁹ | ~12 days at 1,000 steps/s |
| parallel environments (``n_envs``) | 64 | one process each |
| a rollout or replay buffer | 1 GiB | estimated as transitions × observation bytes |
| torch threads | 256 | OpenMP aborts when it cannot start them |
| network layers × units | 16 layers of ≤ 4,096 units | ≤ 2.7 × 10⁸ weights |
| a TOML or JSON input file | 16 MiB | pvegym's largest is < 1 MB |
| a trace file | 64 MiB, 10⁶ samples | the bundled ones are < 1 MB |
| a file or directory name | 255 bytes (UTF-8) | POSIX ``NAME_MAX`` |
| a free-text value (name, label, description) | 10,000 characters | |
"""

from __future__ import annotations

import math
from typing import Any

from pvegym.errors import ConfigError, show
from pvegym.units import format_quantity

MAX_NODES = 1024
MAX_GUESTS = 100_000
MAX_CORES = 1024
MAX_MEMORY_BYTES = float(2**50)
MAX_RATE = float(2**50)
MAX_SIGNAL = float(2**60)
MAX_WEIGHT = 1e12
MAX_DURATION_S = 31 * 86400.0
MAX_COMPONENTS = 64
MAX_STEPS = 100_000
MAX_EVENTS = 100_000
MAX_SEED = 2**32 - 1
MAX_SEEDS = 100_000
MAX_CELLS = 1_000_000
MAX_RESAMPLES = 100_000
MAX_BOOTSTRAP_DRAWS = 20_000_000
MAX_TIMELINES = 100
MAX_TRIALS = 1_000_000
MAX_WORKERS = 256
MAX_TIMESTEPS = 10**9
MAX_ENVS = 64
MAX_BUFFER_BYTES = 2**30
MAX_THREADS = 256
MAX_LAYERS = 16
MAX_UNITS = 4096
MAX_FILE_BYTES = 16 * 2**20
MAX_TRACE_BYTES = 64 * 2**20
MAX_TRACE_SAMPLES = 10**6
MAX_NAME_BYTES = 255
MAX_TEXT_CHARS = 10_000


def check_number(
    value: float,
    path: str,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    unit: str | None = None,
) -> float:
    """``value`` if it is finite and within the bounds given, else a one-line ConfigError at
    ``path`` saying what is allowed. NaN and ±infinity are never allowed. With ``unit``
    (``"duration"``, ``"size"``, ``"rate"``) the message says bounds and value in a unit
    (``must be ≤ 31 d, not 40 d``)."""
    if not math.isfinite(value):
        raise ConfigError(path, f"must be a finite number, not {show(value)}")
    for op, bound, bad in (
        ("≥", ge, ge is not None and value < ge),
        (">", gt, gt is not None and value <= gt),
        ("≤", le, le is not None and value > le),
        ("<", lt, lt is not None and value >= lt),
    ):
        if bad:
            raise ConfigError(path, bound_message(op, bound, value, unit))
    return value


def bound_message(op: str, bound: Any, value: Any, unit: str | None = None) -> str:
    """``must be ≤ 2.5, not 3.0``; with a ``unit`` both in it (``must be ≤ 31 d, not 40 d``)."""
    if unit is None:
        return f"must be {op} {bound:g}, not {show(value)}"
    return f"must be {op} {format_quantity(unit, bound)}, not {format_quantity(unit, value)}"


def whole_number(value: Any, path: str, *, ge: int = 0, le: int) -> int:
    """``value`` as an int if it is a whole number (not a bool) in ``[ge, le]``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(path, f"must be a whole number, not {show(value)}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ConfigError(path, f"must be a whole number, not {show(value)}")
    n = int(value)
    if not ge <= n <= le:
        raise ConfigError(path, f"must be a whole number in {ge}..{le}, not {show(value)}")
    return n
