"""Memory that moves: PVE's auto-ballooning and KSM, once per 10 s round.

**Auto-ballooning** (pve-manager ``PVE/Service/pvestatd.pm`` ``auto_ballooning``, ``PVE/AutoBalloon.pm``
``compute_alg1``). Every pvestatd cycle (10 s) a node aims at ``ballooning-target`` (default 80 %)
of its memory in use: ``goal = int(memtotal × target / 100 − memused)``. Only VMs with a running
balloon driver and a minimum (``balloon`` in the config: :attr:`GuestSpec.balloon_min`) take
part, none that is being migrated (``lock migrate``) or has ``shares = 0``. Above 10 MiB of goal
it grows balloons (VMs short of free memory first), below −10 MiB it shrinks them (VMs with more
than 25 % of their minimum free first), weighted by ``shares`` (default 1000), each VM by at most
100 MiB per cycle (``$maxchange``) and never below its minimum or above its ``maxmem``. The
balloon is the guest's memory now: its footprint (``memhost``) is capped there, and what it wants
beyond is its own memory pressure.

**KSM** (the ``ksm-control-daemon`` PVE installs: ``ksmtuned`` with its defaults). Every
``KSM_MONITOR_INTERVAL`` (60 s) ksmtuned stops ksmd while the guests' committed memory plus the
threshold (20 % of MemTotal, at least 2048 MiB) fits and free memory exceeds the threshold;
otherwise it runs it, raising ``pages_to_scan`` by 300 while free memory is below the threshold
and lowering it by 50 above it (within 64 … 1250), with a sleep of ``KSM_SLEEP_MSEC`` (10 ms) ×
16 GiB / MemTotal between scans (at least 10 ms). ksmd merges a page once it has seen it unchanged
on two passes over the mergeable memory (QEMU marks guest RAM ``MADV_MERGEABLE``): a guest's
shareable part (:attr:`GuestSpec.ksm_shareable`, the share of its footprint that duplicates pages
on its node) merges over two passes over its node's guest memory. Merged pages leave ``memhost``
(qemu-server 9.1.4+ reads the cgroup's ``memory.current``, which follows PSS — 12.8 GB with KSM vs
41 GB without in its commit's example) and the node's memory in use; the guest's own view
(``mem``) does not change. A migrated guest arrives unmerged: the target holds its full footprint
until KSM merges it again.

Both are switchable (``memory.autoballoon``, ``memory.ksm``) and cost nothing in a scenario
without ballooned or shareable guests.
"""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np
from numpy.typing import NDArray

from pvegym.sim.cluster import ClusterState
from pvegym.sim.scenario import MemorySettings
from pvegym.units import MiB

#: pvestatd ``auto_ballooning``: ``my $maxchange = 100 * 1024 * 1024`` (bytes per VM per cycle).
BALLOON_MAX_CHANGE = 100 * MiB
#: AutoBalloon.pm ``compute_alg1``: goals within ±10 MiB are left alone.
BALLOON_DEAD_ZONE = 10 * MiB
#: AutoBalloon.pm: ``$d->{shares} || 1000``.
DEFAULT_SHARES = 1000
#: KSM's page size (x86 base pages).
KSM_PAGE = 4096


def _alg1_change(
    vms: dict[int, dict[str, float]],
    maxchange: float,
    res: dict[int, float],
    idlist: list[int],
    amount: float,
) -> float:
    """``compute_alg1``'s ``$change_func``: share ``amount`` bytes of balloon change among the
    VMs of ``idlist`` by their shares, at most ``maxchange`` bytes each, into ``res``; the
    bytes left unassigned."""
    rest = amount
    repeat = True
    done: set[int] = set()
    progress = 1.0
    while rest and repeat and progress:
        repeat = False
        progress = 0.0
        shares_total = 0.0
        alloc_old = 0.0
        for v in idlist:
            if v in done:
                continue
            d = vms[v]
            balloon = res.get(v, d["balloon"])
            alloc_old += balloon - d["balloon_min"]
            shares_total += d["shares"] or DEFAULT_SHARES
        changes = 0.0
        alloc_new = alloc_old + rest
        for v in idlist:
            if v in done:
                continue
            d = vms[v]
            shares = d["shares"] or DEFAULT_SHARES
            desired = d["balloon_min"] + math.trunc((alloc_new / shares_total) * shares)
            if desired > d["maxmem"]:
                desired = d["maxmem"]
                repeat = True
            elif desired < d["balloon_min"]:
                desired = d["balloon_min"]
                repeat = True
            if amount > 0 and desired - d["balloon"] > 0:  # grow
                new = d["balloon"] + maxchange
                balloon = desired if new > desired else new
            elif desired - d["balloon"] < 0:  # shrink
                new = d["balloon"] - maxchange
                balloon = new if new > desired else desired
            else:
                done.add(v)
                continue
            diff = balloon - d["balloon"]
            if diff != 0:
                old = res.get(v, d["balloon"])
                res[v] = balloon
                step = balloon - old
                if step != 0:
                    changes += step
                    progress += abs(diff)
                    repeat = True
        rest -= changes
    return rest


def compute_alg1(
    vms: dict[int, dict[str, float]], goal: float, maxchange: float
) -> dict[int, float]:
    """``PVE::AutoBalloon::compute_alg1``, line by line: new balloon targets (bytes) per VM.

    ``vms`` maps a VM to its ``vmstatus`` fields: ``balloon`` (current size), ``balloon_min``,
    ``maxmem``, ``freemem`` (guest free memory, 0 if unknown), ``shares``, ``lock`` (1 = migrating).
    """

    idlist: list[int] = []
    pressured: list[int] = []  # idlist1: VMs with memory pressure
    relaxed: list[int] = []  # idlist2: VMs with enough free memory
    for v, d in vms.items():
        if not d["balloon"] or not d["balloon_min"] or d["lock"]:
            continue
        if d["shares"] == 0:
            continue
        idlist.append(v)
        if (
            d["freemem"]
            and d["freemem"] > d["balloon_min"] * 0.25
            and d["balloon"] >= d["balloon_min"]
        ):
            relaxed.append(v)
        else:
            pressured.append(v)
    res: dict[int, float] = {}
    if goal > BALLOON_DEAD_ZONE:
        rest = _alg1_change(vms, maxchange, res, pressured, goal)
        if rest >= goal:  # no progress: consider all VMs
            _alg1_change(vms, maxchange, res, idlist, rest)
    elif goal < -BALLOON_DEAD_ZONE:
        rest = _alg1_change(vms, maxchange, res, relaxed, goal)
        if rest <= goal:
            _alg1_change(vms, maxchange, res, idlist, rest)
    # pvestatd: my $target = int($res->{$vmid}); the balloon command takes whole bytes
    return {v: float(math.trunc(b)) for v, b in res.items()}


class GuestMemory:
    """Auto-ballooning and KSM of one cluster: each round it updates the rows the round kernel
    reads, :attr:`ClusterState.balloon` (bytes) and :attr:`ClusterState.ksm_frac` (0–1)."""

    def __init__(self, cluster: ClusterState, settings: MemorySettings) -> None:
        self.cluster = cl = cluster
        self.settings = s = settings
        guests = cl.guests
        # dtypes given: a cluster without guests has empty rows, which NumPy would make float
        self.balloon_min = np.array([g.balloon_min or 0.0 for g in guests], dtype=np.float64)
        self.shares = np.array([float(g.shares) for g in guests], dtype=np.float64)
        self.shareable = np.array([g.ksm_shareable for g in guests], dtype=np.float64)
        # the guest's own view / memhost
        self.mem_ratio = np.array([g.mem_ratio for g in guests], dtype=np.float64)
        self.vm = np.array([g.kind == "vm" for g in guests], dtype=bool)
        self.ballooning = s.autoballoon and bool(np.any((self.balloon_min > 0) & self.vm))
        self.merging = s.ksm and bool(np.any(self.shareable > 0))
        self.merged: NDArray[np.float64] = np.zeros(cl.n_guests)  # of the shareable part, 0–1
        n = cl.n_nodes
        self.npages = np.full(n, float(s.ksm_npages_min))  # ksmtuned's npages
        self.ksm_on = np.zeros(n, dtype=bool)
        self._next_monitor = 0.0
        total_kib = cl.node_maxmem / 1024.0
        # ksmtuned: sleep = KSM_SLEEP_MSEC * 16 * 1024 * 1024 / total (kB); at least 10 ms
        self.sleep_s = np.maximum(s.ksm_sleep_ms * 16 * 1024 * 1024 / total_kib, 10.0) / 1000.0
        # ksmtuned: thres = total * KSM_THRES_COEF / 100, at least KSM_THRES_CONST
        self.thres = np.maximum(cl.node_maxmem * s.ksm_thres_coef_pct / 100.0, s.ksm_thres_const)

    def reset(self) -> None:
        cl = self.cluster
        cl.balloon[:] = cl.guest_maxmem
        cl.ksm_frac[:] = 0.0
        cl.mem_ratio[:] = self.mem_ratio
        self.merged[:] = 0.0
        self.npages[:] = self.settings.ksm_npages_min
        self.ksm_on[:] = False
        self._next_monitor = 0.0

    def arrived(self, g: int) -> None:
        """Guest ``g`` now runs on another node: its pages there are fresh copies, unmerged."""
        if self.merging:
            self.merged[g] = 0.0
            self._set_ksm_frac(g)

    def footprint(self, g: int) -> float:
        """Guest ``g``'s footprint before KSM merging (bytes): what a migration sends and what
        its target holds."""
        cl = self.cluster
        frac = cl.ksm_frac.item(g)  # Python floats straight away (a read every migrating round)
        return cl.memhost.item(g) / (1.0 - frac) if frac < 1.0 else cl.memhost.item(g)

    def round(self, t: float, dt: float, migrating: Collection[int]) -> None:
        """pvestatd's and ksmd's work over the round starting at ``t`` (s), from the state the
        last round left (node memory in use, footprints); ``migrating``: the guests whose live
        migration runs (``lock migrate``)."""
        if self.ballooning:
            self._autoballoon(migrating)
        if self.merging:
            self._ksm(t, dt)

    # ------------------------------------------------------------------ auto-ballooning
    def _autoballoon(self, migrating: Collection[int]) -> None:
        cl = self.cluster
        target = self.settings.ballooning_target_pct
        for n in range(cl.n_nodes):
            if not cl.node_online[n]:
                continue
            on = np.flatnonzero((cl.node == n) & cl.running & self.vm)
            if on.size == 0:
                continue
            goal = math.trunc(cl.node_maxmem[n] * target / 100.0 - cl.node_mem[n])
            vms: dict[int, dict[str, float]] = {}
            for g in on.tolist():
                balloon = float(cl.balloon[g])
                used = float(cl.memhost[g]) / (1.0 - float(cl.ksm_frac[g])) * self.mem_ratio[g]
                vms[g] = {
                    "balloon": balloon,
                    "balloon_min": float(self.balloon_min[g]),
                    "maxmem": float(cl.guest_maxmem[g]),
                    "freemem": max(balloon - used, 0.0),
                    "shares": float(self.shares[g]),
                    "lock": 1.0 if g in migrating else 0.0,
                }
            for g, size in compute_alg1(vms, goal, BALLOON_MAX_CHANGE).items():
                cl.balloon[g] = size  # the balloon driver reaches it within the cycle

    # ------------------------------------------------------------------ KSM
    def _ksm(self, t: float, dt: float) -> None:
        cl, s = self.cluster, self.settings
        if t >= self._next_monitor:  # ksmtuned's adjust(), every KSM_MONITOR_INTERVAL
            self._next_monitor = t + s.ksm_monitor_interval_s
            for n in range(cl.n_nodes):
                on = cl.node == n
                committed = float(np.sum(cl.memhost[on] / (1.0 - cl.ksm_frac[on])))
                free = float(cl.node_maxmem[n] - cl.node_mem[n])
                total, thres = float(cl.node_maxmem[n]), float(self.thres[n])
                if committed + thres < total and free > thres:
                    self.ksm_on[n] = False  # KSMCTL stop: merged pages stay merged
                    continue
                step = s.ksm_npages_boost if free < thres else -s.ksm_npages_decay
                self.npages[n] = min(max(self.npages[n] + step, s.ksm_npages_min), s.ksm_npages_max)
                self.ksm_on[n] = True
        for n in np.flatnonzero(self.ksm_on).tolist():
            on = np.flatnonzero((cl.node == n) & cl.running & (self.shareable > 0))
            if on.size == 0:
                continue
            mergeable = float(np.sum(cl.memhost[cl.node == n] / (1.0 - cl.ksm_frac[cl.node == n])))
            if mergeable <= 0.0:
                continue
            scanned = self.npages[n] * KSM_PAGE / self.sleep_s[n] * dt
            # a page merges on the second pass that finds it unchanged
            self.merged[on] = np.minimum(self.merged[on] + scanned / (2.0 * mergeable), 1.0)
            for g in on.tolist():
                self._set_ksm_frac(g)

    def _set_ksm_frac(self, g: int) -> None:
        cl = self.cluster
        frac = float(self.shareable[g] * self.merged[g])
        cl.ksm_frac[g] = frac
        # the guest's own view (balloon stats) does not see host-side merging: keep mem fixed
        cl.mem_ratio[g] = self.mem_ratio[g] / (1.0 - frac) if frac < 1.0 else self.mem_ratio[g]
