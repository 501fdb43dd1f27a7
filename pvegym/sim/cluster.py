"""Cluster physics for one round: demand, supply under contention, memory, PSI.

State is kept as NumPy arrays indexed by node and guest (struct of arrays): this is the
simulator's hot path, and one vectorised pass per round serves 2,000 guests as cheaply as 20.

Per round of ``dt`` seconds (constant within the round):

1. Workloads give each guest's CPU demand (cores, clipped to its vCPUs) and host memory footprint
   ``memhost`` (bytes; above ``maxmem`` it is guest memory pressure, never memory), and each node's
   base load (host, non-HA guests, ARC).
2. A guest that is throttled by auto-converge or paused/down runs only that fraction of the round.
3. CPU supply: a node gives at most its cores; when demand exceeds them every runnable thread gets
   the same share (CFS fairness approximated as proportional scaling). ``received ≤ min(demand,
   cores)`` holds per guest and per node.
4. Pressure: node CPU some from :func:`pvegym.sim.psi.cpu_some`; memory some/full from memory in
   use (base + Σ memhost + memory held for incoming migrations) over the watermark; guests see the
   node's pressure on the resources they use, plus their own memory beyond ``maxmem``. A guest's
   CPU *full* is the fraction of its work that waits (all its threads stalled). Throttling is not
   pressure: a throttled vCPU sleeps (``cpu-throttle.c``).
5. PSI averages advance by ``dt / 2`` periods.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.psi import PERIOD_S, PsiAverages, cpu_some, memory_some
from pvegym.sim.scenario import Scenario
from pvegym.sim.workload import WorkloadBank

F64 = NDArray[np.float64]


class ClusterState:
    """Nodes and guests of one scenario, their workloads and their pressure (arrays)."""

    def __init__(self, scenario: Scenario, rng: np.random.Generator) -> None:
        self.scenario = scenario
        self.psi_model = scenario.psi
        # nodes sorted by name and guests by sid, as the HA manager iterates them
        self.nodes = tuple(sorted(scenario.nodes, key=lambda n: n.name))
        self.guests = tuple(sorted(scenario.guests, key=lambda g: g.sid))
        self.node_names = tuple(n.name for n in self.nodes)
        self.n_nodes = len(self.node_names)
        self.node_maxcpu = np.array([float(n.maxcpu) for n in self.nodes])
        self.node_maxmem = np.array([n.maxmem for n in self.nodes])
        self.node_online = np.array([n.online for n in self.nodes])
        self.sids = tuple(g.sid for g in self.guests)
        self.n_guests = len(self.sids)
        self.node_index = {name: i for i, name in enumerate(self.node_names)}
        self.guest_index = {sid: i for i, sid in enumerate(self.sids)}
        self.home = np.array([self.node_index[g.node] for g in self.guests], dtype=np.int64)
        self.guest_maxcpu = np.array([float(g.maxcpu) for g in self.guests])
        self.guest_maxmem = np.array([g.maxmem for g in self.guests])
        self.mem_ratio = np.array([g.mem_ratio for g in self.guests])
        seeds = rng.integers(0, 2**63 - 1, size=4)
        self.cpu_bank = WorkloadBank([g.cpu for g in self.guests], np.random.default_rng(seeds[0]))
        self.mem_bank = WorkloadBank(
            [g.memhost for g in self.guests], np.random.default_rng(seeds[1])
        )
        self.base_cpu_bank = WorkloadBank(
            [n.base_cpu for n in self.nodes], np.random.default_rng(seeds[2])
        )
        self.base_mem_bank = WorkloadBank(
            [n.base_mem for n in self.nodes], np.random.default_rng(seeds[3])
        )
        g, n = self.n_guests, self.n_nodes
        self.node = self.home.copy()  # where each guest runs now
        self.running = np.array([g.state == "started" for g in self.guests])
        # per-round inputs set by the motion pipeline: fraction of the round a guest runs (0–1),
        # and memory held on nodes for incoming migrations (bytes)
        self.run_fraction = np.ones(g)
        self.reserved_mem = np.zeros(n)
        # outputs of the last round
        self.demand = np.zeros(g)  # cores wanted
        self.received = np.zeros(g)  # cores received
        self.memhost = np.zeros(g)  # bytes
        self.node_cpu = np.zeros(n)  # cores busy
        self.node_mem = np.zeros(n)  # bytes in use (MemTotal − MemAvailable)
        self.node_cpu_some = np.zeros(n)  # instantaneous fraction 0–1 over the round
        self.node_mem_some = np.zeros(n)
        self.node_mem_full = np.zeros(n)
        self.guest_cpu_some = np.zeros(g)
        self.guest_cpu_full = np.zeros(g)
        self.guest_mem_some = np.zeros(g)
        self.guest_mem_full = np.zeros(g)
        self.psi_node = PsiAverages(3 * n)  # cpu some | mem some | mem full
        self.psi_guest = PsiAverages(4 * g)  # cpu some | cpu full | mem some | mem full
        self._node_pct = np.zeros(3 * n)
        self._guest_pct = np.zeros(4 * g)

    def reset(self) -> None:
        for bank in (self.cpu_bank, self.mem_bank, self.base_cpu_bank, self.base_mem_bank):
            bank.reset()
        self.node[:] = self.home
        self.running[:] = [g.state == "started" for g in self.guests]
        self.run_fraction[:] = 1.0
        self.reserved_mem[:] = 0.0
        self.psi_node.reset()
        self.psi_guest.reset()

    def advance(self, t: float, dt: float) -> None:
        """Physics of the round ending at ``t`` (s), lasting ``dt`` (s)."""
        pm = self.psi_model
        n = self.n_nodes
        demand = np.clip(self.cpu_bank.sample(t, dt), 0.0, self.guest_maxcpu)
        demand *= self.running
        self.demand = demand
        want_mem = np.maximum(self.mem_bank.sample(t, dt), 0.0)
        memhost = np.minimum(want_mem, self.guest_maxmem) * self.running
        self.memhost = memhost
        base_cpu = np.maximum(self.base_cpu_bank.sample(t, dt), 0.0)
        base_mem = np.maximum(self.base_mem_bank.sample(t, dt), 0.0)

        runnable = demand * self.run_fraction
        node_demand = (
            np.bincount(self.node, weights=runnable, minlength=n).astype(np.float64) + base_cpu
        )
        cores = self.node_maxcpu
        scale = np.minimum(1.0, cores / np.maximum(node_demand, 1e-12))
        self.received = runnable * scale[self.node]
        self.node_cpu = np.minimum(node_demand, cores)
        used = base_mem + np.bincount(self.node, weights=memhost, minlength=n) + self.reserved_mem
        self.node_mem = np.minimum(used, self.node_maxmem)

        some = cpu_some(node_demand, cores, pm.cpu_blend, pm.cpu_hog_share)
        mem_some = memory_some(used, self.node_maxmem, pm.mem_watermark, pm.mem_gain)
        mem_full = mem_some * pm.mem_full_ratio
        self.node_cpu_some, self.node_mem_some, self.node_mem_full = some, mem_some, mem_full

        active = runnable > 0.0
        self.guest_cpu_some = some[self.node] * active
        self.guest_cpu_full = (1.0 - scale[self.node]) * active
        own_over = np.minimum(
            np.maximum(want_mem - self.guest_maxmem, 0.0) / self.guest_maxmem * pm.mem_gain, 1.0
        )
        resident = memhost > 0.0
        self.guest_mem_some = np.maximum(mem_some[self.node] * resident, own_over * self.running)
        self.guest_mem_full = np.maximum(
            mem_full[self.node] * resident, own_over * pm.mem_full_ratio * self.running
        )

        periods = round(dt / PERIOD_S)
        npct = self._node_pct
        npct[:n] = some
        npct[n : 2 * n] = mem_some
        npct[2 * n :] = mem_full
        npct *= 100.0
        self.psi_node.update(npct, periods)
        g = self.n_guests
        gpct = self._guest_pct
        gpct[:g] = self.guest_cpu_some
        gpct[g : 2 * g] = self.guest_cpu_full
        gpct[2 * g : 3 * g] = self.guest_mem_some
        gpct[3 * g :] = self.guest_mem_full
        gpct *= 100.0
        self.psi_guest.update(gpct, periods)

    # avg10 views (percent) -------------------------------------------------------------------
    def node_avg10(self) -> tuple[F64, F64, F64]:
        a, n = self.psi_node.avg10, self.n_nodes
        return a[:n], a[n : 2 * n], a[2 * n :]

    def guest_avg10(self) -> tuple[F64, F64, F64, F64]:
        a, g = self.psi_guest.avg10, self.n_guests
        return a[:g], a[g : 2 * g], a[2 * g : 3 * g], a[3 * g :]
