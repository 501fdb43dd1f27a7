"""Linux pressure stall information (PSI): the kernel's running averages and a contention model.

Averages (``kernel/sched/psi.c``): every ``PSI_FREQ`` = 2 s period the kernel folds the period's
stall percentage into three exponential averages, ``avg ← avg·e + pct·(1 − e)``, with the fixed-point
decay constants ``EXP_10s = 1677``, ``EXP_60s = 1981``, ``EXP_300s = 2034`` over ``FIXED_1 = 2048``.
:class:`PsiAverages` keeps them for many resources at once (NumPy arrays); a stall that is constant
over k periods is folded in closed form (``e**k``), exactly what k single updates give.

Contention model (``docs/model.md``, *Contention and PSI*; these are modelling choices, not kernel
code): a node's CPU *some* pressure blends a per-runqueue M/M/1 term (ρ²) and a pooled M/M/c term
for random load, plus the kernel's deterministic hog term min(max(N − P, 0)/P, 1) for demand beyond
the cores. Memory pressure rises once memory in use exceeds what the node has above its watermark.
System-level CPU *full* is always 0, as the kernel prints it.

Guest (cgroup) pressure (:func:`guest_pressure`) is the cgroup's own, as ``psi.c`` computes it: per
CPU the states are tested on the cgroup's tasks only (``test_state``: CPU_SOME when
``tasks[NR_RUNNING] > tasks[NR_ONCPU]``, CPU_FULL when ``tasks[NR_RUNNING] && !tasks[NR_ONCPU]``,
MEM_FULL when every runnable task of the cgroup is memstalled), and the per-CPU times are averaged
weighted by the cgroup's non-idle time. A vCPU thread that is runnable a share ``u`` of the time
(its demand over its vCPUs; a throttled or paused vCPU sleeps) waits as often as a runnable thread
on its node does — the node's stall per unit of busy CPU, ``node_some / ρ`` — so its guest sees
``u`` of the node's figure per busy CPU, never the node's own value: a guest that barely runs
barely waits. CPU *full* is the part of that wait behind other guests' tasks (the CPU runs another
cgroup's thread): ``some × (1 − the guest's share of the node's busy CPU)`` — the 257 hogs of one
cgroup on 256 CPUs have some = 1/256 and full = 0, as the kernel's own example. Memory stalls fall
on the tasks that run (reclaim, refaults of their own pages), in the same proportion; with its
vCPU threads on separate CPUs a stalled thread is its cgroup's only runnable task there, so a
guest's memory full equals its some.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numba import njit
from numpy.typing import NDArray

PERIOD_S = 2.0  # psi.c: PSI_FREQ = 2*HZ+1 jiffies — one averaging period (the +1 tick is ignored)
FIXED_1 = 2048  # psi.c / loadavg.h: FIXED_1 = 1 << FSHIFT (11)
EXP_10S = 1677 / FIXED_1  # psi.c EXP_10s: 1/exp(2s/10s) as fixed-point
EXP_60S = 1981 / FIXED_1  # psi.c EXP_60s: 1/exp(2s/60s)
EXP_300S = 2034 / FIXED_1  # psi.c EXP_300s: 1/exp(2s/300s)
PSI_DECAY = np.array([EXP_10S, EXP_60S, EXP_300S])  # per 2 s period, avg10/avg60/avg300
_DECAY = PSI_DECAY[:, None]


def decay_factors(periods: int) -> NDArray[np.float64]:
    """The avg10/avg60/avg300 decay over ``periods`` 2 s periods, ``e**periods``, by libm's
    ``pow`` (``PSI_DECAY ** k`` would be NumPy's, which is CPU-dependent: see :func:`_mmc_table`)."""
    return np.array([e**periods for e in (EXP_10S, EXP_60S, EXP_300S)])


class PsiAverages:
    """avg10/avg60/avg300 (percent, 0–100) for ``n`` resources, updated per 2 s period."""

    __slots__ = ("_avg",)

    def __init__(self, n: int) -> None:
        self._avg = np.zeros((3, n))

    def reset(self) -> None:
        self._avg[:] = 0.0

    def update(self, pct: NDArray[np.float64], periods: int = 1) -> None:
        """Fold ``periods`` consecutive 2 s periods, each with stall ``pct`` (percent 0–100)."""
        e = _DECAY if periods == 1 else decay_factors(periods)[:, None]
        self._avg *= e
        self._avg += (1.0 - e) * pct

    @property
    def avg10(self) -> NDArray[np.float64]:
        return self._avg[0]

    @property
    def avg60(self) -> NDArray[np.float64]:
        return self._avg[1]

    @property
    def avg300(self) -> NDArray[np.float64]:
        return self._avg[2]


def mmc_some(cores: int, rho: float) -> float:
    """CPU some (fraction 0–1) of an M/M/c queue with ``cores`` servers at utilisation ``rho``.

    ``E[min((N − c)⁺, c)] / c``: the expected number of waiting tasks, at most one per CPU, per CPU
    (``docs/model.md``, *Contention and PSI* — perfect global balancing, a lower bound).
    """
    if rho <= 0.0:
        return 0.0
    if rho >= 1.0:
        return 1.0
    c = int(cores)
    a = c * rho
    # Stationary distribution: p_n = p0 a^n/n! (n ≤ c); p_n = p_c ρ^(n−c) (n > c). Work in logs.
    log_terms = [n * math.log(a) - math.lgamma(n + 1) for n in range(c)]
    log_pc_unnorm = c * math.log(a) - math.lgamma(c + 1)
    m = max(*log_terms, log_pc_unnorm) if log_terms else log_pc_unnorm
    s = sum(math.exp(x - m) for x in log_terms) + math.exp(log_pc_unnorm - m) / (1.0 - rho)
    p_c = math.exp(log_pc_unnorm - m) / s
    # Σ_{k≥1} min(k, c) ρ^k = Σ_{k=1..c} k ρ^k + c ρ^(c+1)/(1−ρ)
    head = rho * (1 - (c + 1) * rho**c + c * rho ** (c + 1)) / (1 - rho) ** 2
    tail = c * rho ** (c + 1) / (1 - rho)
    return min(1.0, p_c * (head + tail) / c)


GRID_STEPS = 2000  # M/M/c table resolution over ρ ∈ [0, 1]
_RHO_GRID = np.linspace(0.0, 1.0, GRID_STEPS + 1)


@njit(cache=True)
def _mmc_grid(c: int, rho: np.ndarray, lgam: np.ndarray, out: np.ndarray) -> None:
    """:func:`mmc_some` at every ``rho`` into ``out``: the same operations in the same order, with
    libm's ``log``, ``exp`` and ``pow`` (``lgam[k]`` = ``math.lgamma(k + 1)``, computed by the
    caller), so each entry is bit for bit the scalar formula's (``tests/sim/test_psi.py``)."""
    cf = float(c)
    for j in range(rho.size):
        r = rho[j]
        la = math.log(c * r)
        log_pc = c * la - lgam[c]
        m = log_pc
        for n in range(c):
            m = max(m, n * la - lgam[n])
        s = 0.0
        for n in range(c):
            s += math.exp((n * la - lgam[n]) - m)
        s = s + math.exp(log_pc - m) / (1.0 - r)
        p_c = math.exp(log_pc - m) / s
        # float exponents: numba's math.pow(x, int) multiplies instead of calling libm's pow
        head = (
            r * (1 - (c + 1) * math.pow(r, cf) + c * math.pow(r, cf + 1.0)) / math.pow(1 - r, 2.0)
        )
        tail = c * math.pow(r, cf + 1.0) / (1 - r)
        out[j] = min(1.0, p_c * (head + tail) / c)


@lru_cache(maxsize=256)
def _mmc_table(cores: int) -> NDArray[np.float64]:
    """:func:`mmc_some` over the ρ grid (compiled: a table of 2,001 points costs ~1 ms).

    Why not NumPy's ``np.log``/``np.exp``/``**`` over the grid: NumPy dispatches those by CPU —
    on AVX-512 machines to SVML/AVX-512F code (up to 4 ULP, numpy#19478, numpy#23523) that differs
    from libm in the last bits — and such a table made the committed results differ between
    machines. libm (glibc) is the one implementation of transcendental functions in the model.
    """
    c = int(cores)
    lgam = np.array([math.lgamma(k + 1) for k in range(c + 1)])
    out = np.empty(_RHO_GRID.size)
    out[0], out[-1] = 0.0, 1.0  # 0 and 1 are exact: 0 and 1
    _mmc_grid(c, _RHO_GRID[1:-1], lgam, out[1:-1])
    return out


class CpuPressureModel:
    """Node CPU some pressure (fraction 0–1) from CPU demand, for a fixed set of nodes.

    ``blend`` weights the per-runqueue ρ² term against the pooled M/M/c term for random load;
    ``hog_share`` is the share of demand from always-runnable threads, which contend only once
    demand exceeds the cores (the kernel's 257-hogs-on-256-CPUs example gives 1/256). Both terms
    are non-decreasing in demand, so pressure is monotone in load. The M/M/c term is tabulated per
    core count (2,001 points over ρ ∈ [0, 1], linear interpolation) once, at construction.
    """

    def __init__(self, cores: NDArray[np.float64], blend: float, hog_share: float) -> None:
        self.cores = np.asarray(cores, dtype=np.float64)
        self.blend = blend
        self.hog_share = hog_share
        counts = [int(c) for c in self.cores]
        unique = sorted(set(counts))
        self.tables = np.stack([_mmc_table(c) for c in unique]).ravel()
        self.rows = np.array([unique.index(c) * (GRID_STEPS + 1) for c in counts], dtype=np.int64)

    def __call__(self, demand: NDArray[np.float64]) -> NDArray[np.float64]:
        rho = demand / self.cores
        rho_r = np.minimum(rho, 1.0)
        out = rho_r * rho_r
        out *= self.blend
        if self.blend < 1.0:
            x = rho_r * GRID_STEPS
            i = np.minimum(x.astype(np.int64), GRID_STEPS - 1)
            frac = x - i
            i += self.rows
            lo = self.tables[i]
            mmc = lo + (self.tables[i + 1] - lo) * frac
            out += (1.0 - self.blend) * mmc
        out *= 1.0 - self.hog_share
        hog = np.maximum(rho - 1.0, 0.0)
        out += np.minimum(hog, 1.0)
        return np.minimum(out, 1.0)


def guest_pressure(
    node_cpu_some: NDArray[np.float64],
    node_mem_some: NDArray[np.float64],
    node_busy: NDArray[np.float64],
    runnable: NDArray[np.float64],
    vcpus: NDArray[np.float64],
    own_share: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """A guest's own cpu some, cpu full, memory some and memory full (fractions 0–1), per guest,
    from its node's (module docstring). ``node_busy``: the node's busy share of its cores (0–1,
    i.e. min(demand/cores, 1)); ``runnable``: the guest's runnable cores (demand × run fraction);
    ``vcpus``: its vCPU threads; ``own_share``: its share of the node's busy CPU (0–1). The round
    kernel evaluates the same formulas."""
    u = np.minimum(runnable / vcpus, 1.0)
    busy = np.maximum(node_busy, 0.0)
    idle = busy <= 0.0
    # per busy CPU first, as the round kernel evaluates it
    cpu_per_busy = np.divide(node_cpu_some, busy, out=np.zeros_like(u), where=~idle)
    mem_per_busy = np.divide(node_mem_some, busy, out=np.zeros_like(u), where=~idle)
    cpu = np.minimum(cpu_per_busy * u, 1.0)
    full = cpu * (1.0 - own_share)
    mem = np.minimum(mem_per_busy * u, 1.0)
    return cpu, full, mem, mem.copy()


def cpu_some(
    demand: NDArray[np.float64],
    cores: NDArray[np.float64],
    blend: float,
    hog_share: float,
) -> NDArray[np.float64]:
    """One-off form of :class:`CpuPressureModel` (fraction 0–1 per node)."""
    return CpuPressureModel(cores, blend, hog_share)(demand)


def memory_some(
    used: NDArray[np.float64], total: NDArray[np.float64], watermark: float, gain: float
) -> NDArray[np.float64]:
    """Memory some pressure (fraction 0–1): 0 while ``used`` fits under ``total × (1 − watermark)``;
    above it, reclaim and refaults stall tasks in proportion to the overcommitted fraction × ``gain``
    (``docs/model.md``: a modelling choice grounded in the memstall sources)."""
    avail = total * (1.0 - watermark)
    over = np.maximum(used - avail, 0.0)
    over *= gain / avail
    return np.minimum(over, 1.0)
