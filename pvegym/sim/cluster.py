"""Cluster physics for one round: demand, supply under contention, memory, PSI.

State is kept as NumPy arrays indexed by node and guest (struct of arrays): this is the
simulator's hot path, and one vectorised pass per round serves 2,000 guests as cheaply as 20.

Per round of ``dt`` seconds (constant within the round):

1. Workloads, read at the round's start (a step event at time t first acts on the round that
   starts at t), give each guest's CPU demand (cores, clipped to its vCPUs) and host memory footprint
   ``memhost`` (bytes; above ``maxmem`` it is guest memory pressure, never memory), and each node's
   base load (host, non-HA guests, ARC).
2. A guest that is throttled by auto-converge or paused/down runs only that fraction of the round
   (``run_fraction``, clipped at 0 in place: the motion pipeline may take more than a round).
3. CPU supply: a node gives at most its cores; when demand exceeds them every runnable thread gets
   the same share (CFS fairness approximated as proportional scaling). ``received ≤ min(demand,
   cores)`` holds per guest and per node.
4. Pressure: node CPU some by :func:`pvegym.sim.psi.cpu_some`'s formula (evaluated in the round
   kernel from the model's tables); memory some/full from memory in use (base + Σ memhost +
   memory held for incoming migrations) over the watermark. A guest's PSI is its own cgroup's
   (:func:`pvegym.sim.psi.guest_pressure`): the node's stall per busy CPU scaled by how much its
   vCPU threads are runnable, full = the part spent behind other guests' threads; plus its own
   memory beyond its size now (``balloon``). Throttling is not pressure: a throttled vCPU sleeps
   (``cpu-throttle.c``); the migration threads' cores (``motion_cpu``) load the node. Memory in
   use beyond MemTotal + swap is counted for the OOM killer (``mem_wanted``, ``totals``).
6. pvestatd's samples of the round (:mod:`pvegym.sim.telemetry`), when telemetry is not the
   true state.
5. PSI averages advance by ``dt / 2`` periods.

The arithmetic runs in one compiled call
(:func:`pvegym.sim.kernel.cluster_round`, which samples the workloads first) that also
returns the round's totals for the metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.sim import layout as L
from pvegym.sim.kernel import cluster_round, entry_point
from pvegym.sim.psi import GRID_STEPS, PERIOD_S, CpuPressureModel, decay_factors
from pvegym.sim.scenario import Scenario
from pvegym.sim.workload import WorkloadBank

F64 = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class SampledRows:
    """The telemetry-visible rows (:data:`pvegym.sim.layout.NODE_SAMPLED`/``GUEST_SAMPLED``) of a
    pair of matrices laid out like :attr:`ClusterState.node_rows`/``guest_rows`` — the true
    state, or pvestatd's samples of it (:mod:`pvegym.sim.telemetry`) — as named views."""

    node_cpu: F64  # cores busy
    node_mem: F64  # bytes in use
    node_avg: F64  # (windows, series, n) percent
    mem_ratio: F64
    run_fraction: F64
    received: F64  # cores
    memhost: F64  # bytes
    guest_avg: F64  # (windows, series, g) percent

    @classmethod
    def of(cls, node_rows: F64, guest_rows: F64) -> SampledRows:
        n, g = node_rows.shape[1], guest_rows.shape[1]
        return cls(
            node_rows[L.N_CPU],
            node_rows[L.N_MEM],
            node_rows[L.N_AVG : L.N_AVG + L.WINDOWS * L.N_SERIES].reshape(L.WINDOWS, L.N_SERIES, n),
            guest_rows[L.G_MEM_RATIO],
            guest_rows[L.G_RUN_FRACTION],
            guest_rows[L.G_RECEIVED],
            guest_rows[L.G_MEMHOST],
            guest_rows[L.G_AVG : L.G_AVG + L.WINDOWS * L.G_SERIES].reshape(
                L.WINDOWS, L.G_SERIES, g
            ),
        )

    def node_avg10(self) -> tuple[F64, F64, F64]:
        """cpu some, memory some, memory full avg10 of each node (percent)."""
        return node_avg10(self.node_avg)

    def guest_avg10(self) -> tuple[F64, F64, F64, F64]:
        """cpu some, cpu full, memory some, memory full avg10 of each guest (percent)."""
        return guest_avg10(self.guest_avg)


def node_avg10(node_avg: F64) -> tuple[F64, F64, F64]:
    """The avg10 rows of a node PSI block (``windows × series × n``): cpu some, mem some, full."""
    a = node_avg[L.AVG10]
    return a[L.N_CPU_SOME], a[L.N_MEM_SOME], a[L.N_MEM_FULL]


def guest_avg10(guest_avg: F64) -> tuple[F64, F64, F64, F64]:
    """The avg10 rows of a guest PSI block: cpu some, cpu full, memory some, memory full."""
    a = guest_avg[L.AVG10]
    return a[L.G_CPU_SOME], a[L.G_CPU_FULL], a[L.G_MEM_SOME], a[L.G_MEM_FULL]


class ClusterState:
    """Nodes and guests of one scenario, their workloads and their pressure (arrays)."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self.scenario = scenario
        pm = self.psi_model = scenario.psi
        # nodes sorted by name and guests by sid, as the HA manager iterates them
        self.nodes = tuple(sorted(scenario.nodes, key=lambda n: n.name))
        self.guests = tuple(sorted(scenario.guests, key=lambda g: g.sid))
        self.node_names = tuple(n.name for n in self.nodes)
        self.n_nodes = n = len(self.node_names)
        self._init_node_rows(n)
        self.node_online = np.array([x.online for x in self.nodes], dtype=np.bool_)
        self.sids = tuple(x.sid for x in self.guests)
        self.n_guests = g = len(self.sids)
        self.node_index = {name: i for i, name in enumerate(self.node_names)}
        self.guest_index = {sid: i for i, sid in enumerate(self.sids)}
        self.home = np.array([self.node_index[x.node] for x in self.guests], dtype=np.int64)
        self._init_guest_rows(g)
        # one bank for every signal: [guest cpu | guest memhost | node base cpu | node base mem]
        specs = [x.cpu for x in self.guests] + [x.memhost for x in self.guests]
        specs += [x.base_cpu for x in self.nodes] + [x.base_mem for x in self.nodes]
        self.bank = WorkloadBank(specs, rng)
        self.cpu_pressure = CpuPressureModel(self.node_maxcpu, pm.cpu_blend, pm.cpu_hog_share)
        self.node = self.home.copy()  # where each guest runs now
        self.running = np.array([x.state == "started" for x in self.guests], dtype=np.bool_)
        # outputs of the last round: instantaneous pressure (0–1), PSI averages, and the totals
        # (stall cpu, stall mem, guest stall, shortfall, imbalance, online nodes, peak avg10 some
        # %, nodes past their OOM limit: rows ``layout.T_*``)
        self.totals = np.zeros(L.TOTALS)
        self._decay_dt = -1.0
        self._decay = np.ones(3)
        pm, cp = self.psi_model, self.cpu_pressure
        # the round's arguments, bound once (every array above is updated in place): the
        # workload bank's (its ``out`` is the signals the round reads), then the physics'
        self._round_args: tuple[Any, ...] = (
            *self.bank.kernel_args,
            self.node, self.running, self.guest_rows, self.node_rows,
            self.node_online, cp.tables, cp.rows, GRID_STEPS,
            cp.blend, cp.hog_share, pm.mem_watermark, pm.mem_gain, pm.mem_full_ratio, self._decay,
            self.totals,
        )  # fmt: skip
        self._round = entry_point(cluster_round, 0.0, 0.0, *self._round_args)

    def _init_node_rows(self, n: int) -> None:
        """The per-node float arrays, rows of :attr:`node_rows`, for ``n`` nodes."""
        # per-node and per-guest float arrays are rows of two matrices (the attributes are row
        # views), so the round kernel takes two arrays instead of sixteen (~75–150 ns each)
        # (rows: :mod:`pvegym.sim.layout`)
        # (below the state: pvestatd's samples of it, pvegym.sim.telemetry)
        rows = self.node_rows = np.zeros((L.NODE_MATRIX_ROWS, n))
        self.node_maxcpu = rows[L.N_MAXCPU]  # cores
        self.node_maxmem = rows[L.N_MAXMEM]  # bytes
        self.reserved_mem = rows[L.N_RESERVED_MEM]  # in: bytes held for incoming migrations
        self.node_demand = rows[L.N_DEMAND]  # out: cores wanted
        self.node_cpu = rows[L.N_CPU]  # out: cores busy
        self.node_mem = rows[L.N_MEM]  # out: bytes in use (MemTotal − MemAvailable)
        # out: cpu some | mem some | mem full (0–1)
        self.node_inst = rows[L.N_INST : L.N_INST + L.N_SERIES]
        # out: PSI windows avg10/60/300 × the three node series, percent
        self.node_avg = rows[L.N_AVG : L.N_AVG + L.WINDOWS * L.N_SERIES].reshape(
            L.WINDOWS, L.N_SERIES, n
        )
        # in: cores of host work the motions cost the node this round (migration threads)
        self.motion_cpu = rows[L.N_MOTION_CPU]
        # in: memory in use past which the OOM killer acts (MemTotal + swap, bytes); out: memory
        # in use the node was asked for (bytes, not capped at MemTotal)
        self.oom_limit = rows[L.N_OOM_LIMIT]
        self.mem_wanted = rows[L.N_MEM_WANTED]
        self.node_maxcpu[:] = [float(x.maxcpu) for x in self.nodes]
        self.node_maxmem[:] = [x.maxmem for x in self.nodes]
        self.oom_limit[:] = [x.maxmem + x.swap_bytes for x in self.nodes]

    def _init_guest_rows(self, g: int) -> None:
        """The per-guest float arrays, rows of :attr:`guest_rows`, for ``g`` guests."""
        rows = self.guest_rows = np.zeros((L.GUEST_MATRIX_ROWS, g))
        self.guest_maxcpu = rows[L.G_MAXCPU]  # vCPUs it can use (no limit: its node's CPUs)
        self.guest_maxmem = rows[L.G_MAXMEM]  # bytes
        self.mem_ratio = rows[L.G_MEM_RATIO]  # guest-reported mem / memhost (0–1)
        self.run_fraction = rows[L.G_RUN_FRACTION]  # in: fraction of the round it runs (0–1)
        self.demand = rows[L.G_DEMAND]  # out: cores wanted
        self.received = rows[L.G_RECEIVED]  # out: cores received
        self.memhost = rows[L.G_MEMHOST]  # out: host memory footprint (bytes)
        # out: cpu some | cpu full | mem some | mem full (0–1)
        self.guest_inst = rows[L.G_INST : L.G_INST + L.G_SERIES]
        # out: windows × series, percent
        self.guest_avg = rows[L.G_AVG : L.G_AVG + L.WINDOWS * L.G_SERIES].reshape(
            L.WINDOWS, L.G_SERIES, g
        )
        # in (pvegym.sim.memory): the guest's memory now (bytes: maxmem unless ballooned) and the
        # share of its footprint KSM has merged away (0–1)
        self.balloon = rows[L.G_BALLOON]
        self.ksm_frac = rows[L.G_KSM_FRAC]
        self.guest_inv_maxcpu = rows[L.G_INV_MAXCPU]  # 1 / vCPUs (the round's guest PSI)
        #: configured vCPUs as PVE's static usage reads them (0 = no CPU limit, containers)
        self.guest_cfg_maxcpu = np.array([float(x.maxcpu) for x in self.guests])
        self.guest_cfg_maxcpu.flags.writeable = False
        #: the guests without a CPU limit: their vCPUs are their node's CPUs (:meth:`advance`)
        self._unlimited = np.flatnonzero(self.guest_cfg_maxcpu == 0)
        self.guest_maxcpu[:] = self.guest_cfg_maxcpu
        self.guest_maxcpu[self._unlimited] = self.node_maxcpu[self.home[self._unlimited]]
        self.guest_inv_maxcpu[:] = 1.0 / self.guest_maxcpu
        self.guest_maxmem[:] = [x.maxmem for x in self.guests]
        self.mem_ratio[:] = [x.mem_ratio for x in self.guests]
        self.run_fraction[:] = 1.0
        self.balloon[:] = self.guest_maxmem

    # instantaneous per-round pressure (fractions 0–1)
    @property
    def node_cpu_some(self) -> F64:
        return self.node_inst[L.N_CPU_SOME]

    @property
    def node_mem_some(self) -> F64:
        return self.node_inst[L.N_MEM_SOME]

    @property
    def guest_mem_some(self) -> F64:
        return self.guest_inst[L.G_MEM_SOME]

    def reset(self) -> None:
        self.bank.reset()
        self.node[:] = self.home
        self.running[:] = [x.state == "started" for x in self.guests]
        self.run_fraction[:] = 1.0
        self.balloon[:] = self.guest_maxmem
        self.ksm_frac[:] = 0.0
        self.mem_ratio[:] = [x.mem_ratio for x in self.guests]
        self.reserved_mem[:] = 0.0
        self.motion_cpu[:] = 0.0
        self.node_avg[:] = 0.0
        self.guest_avg[:] = 0.0

    def advance(self, t: float, dt: float) -> None:
        """Physics of the round ending at ``t`` (s), lasting ``dt`` (s)."""
        if dt != self._decay_dt:
            self._decay_dt = dt
            self._decay[:] = decay_factors(round(dt / PERIOD_S))
        self.bank.draw(dt)
        if self._unlimited.size:  # no CPU limit: the CPUs of the node each runs on now
            u = self._unlimited
            self.guest_maxcpu[u] = self.node_maxcpu[self.node[u]]
            self.guest_inv_maxcpu[u] = 1.0 / self.guest_maxcpu[u]
        self._round(t - dt, dt, *self._round_args)  # workloads at the round's start, physics

    # avg10 views (percent) -------------------------------------------------------------------
    def node_avg10(self) -> tuple[F64, F64, F64]:
        """cpu some, memory some, memory full avg10 of each node (percent)."""
        return node_avg10(self.node_avg)

    def guest_avg10(self) -> tuple[F64, F64, F64, F64]:
        """cpu some, cpu full, memory some, memory full avg10 of each guest (percent)."""
        return guest_avg10(self.guest_avg)
