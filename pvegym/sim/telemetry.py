"""What the HA manager reads about nodes and guests: pvestatd's samples, as PVE 9 takes them.

pve-manager ``PVE/Service/pvestatd.pm``: every node runs its own pvestatd, which samples the node
(``update_node_status``: ``/proc/stat`` busy share since the last sample, MemTotal − MemAvailable,
PSI avg10) and its guests (``update_qemu_status`` → qemu-server ``vmstatus``) every
``$updatetime`` = 10 s and broadcasts them; the CRM reads the latest broadcast of each node
(``Env/PVE2.pm`` ``get_dynamic_node_stats``: ``rrd_dump``, point samples). So:

* **Phase** (``telemetry.timing = "phased"``, the default). Each node's pvestatd loop has its own
  phase: at a CRM round at time t, node n's latest sample was taken at t − aₙ, aₙ uniform in
  [0, 10) s (seeded per episode, fixed: the loops are periodic). A sample's CPU is the busy share
  over the 10 s before it, so it mixes this round and the previous one with weights 1 − aₙ/10 and
  aₙ/10; the point values (memory, PSI averages) are interpolated between the two round ends the
  same way. ``"aligned"``: every node sampled exactly at the round time (the model before).
* **A moved guest's first sample** (``telemetry.first_sample_zero``, default on). qemu-server
  ``vmstatus`` computes ``cpu`` from the change of the QEMU process's CPU time since the previous
  call (``$last_proc_pid_stat``); the first call for a new process (the guest just arrived on the
  target) has no previous one and reports ``cpu`` 0. Until the target's pvestatd has sampled it,
  the latest value of the guest is still the source's last one.
* **RRD averages** (``telemetry.mode = "rrd"``). pve-cluster's RRD files (``status.c``: step 60 s,
  AVERAGE and MAX RRAs) hold the samples averaged per minute — what PVE's graphs show and what
  averaging consumers read: every value is the mean of the six samples of the last complete
  minute, updated once a minute. ``"point"`` (default): the latest sample, as ``rrd_dump`` hands it
  to the HA manager.

With ``aligned``, ``point`` and no first-sample rule the telemetry is the true state of the round
(no copy). Otherwise :class:`Telemetry` keeps matrices shaped like the cluster's
(``node_rows``/``guest_rows``, the same row layout) that the view and the environment's observation
read instead of the true ones; the metrics always use the true state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from pvegym.sim.cluster import ClusterState, SampledRows
from pvegym.sim.kernel import entry_point
from pvegym.sim.scenario import TelemetrySettings

#: pvestatd.pm: ``my $updatetime = 10;`` (s between samples).
UPDATE_S = 10.0
#: pve-cluster ``status.c``: RRD step of the node and guest schemas (s).
RRD_STEP_S = 60.0
_HOLD = -2  # a guest whose latest sample is older than this round's (it has not been sampled yet)


@njit(cache=True)
def sample_rows(
    node_rows: np.ndarray,  # the round's true state (ClusterState.node_rows / guest_rows)
    guest_rows: np.ndarray,
    prev: np.ndarray,  # (node rows | guest rows) at the previous round's end, flattened per row
    tel_node: np.ndarray,  # out: the sampled values, same layout
    tel_guest: np.ndarray,
    node_age: np.ndarray,  # per node: age of its latest sample in rounds (0–1)
    node: np.ndarray,  # where each guest runs
    sampler: np.ndarray,  # per guest: the node whose sample counts, −1 = where it runs, −2 = hold
    zero_cpu: np.ndarray,  # per guest: its latest sample is the first on a new node (cpu 0)
    received_row: int,
    memhost_row: int,
    ratio_row: int,
    first: bool,
) -> None:
    """The samples at the round's end from this round's and the last round's state, then the
    round's state kept for the next call. A guest's ``mem`` (``memhost × mem_ratio``) is sampled
    as one value, so the ratio row is the sampled ``mem`` over the sampled ``memhost``."""
    nr, n_n = node_rows.shape
    gr, g_n = guest_rows.shape
    prev_node = prev[: nr * n_n].reshape((nr, n_n))
    prev_guest = prev[nr * n_n :].reshape((gr, g_n))
    if first:
        prev_node[:] = node_rows
        prev_guest[:] = guest_rows
    for r in range(nr):
        for n in range(n_n):
            cur = node_rows[r, n]
            tel_node[r, n] = cur + node_age[n] * (prev_node[r, n] - cur)
    for g in range(g_n):
        s = sampler[g]
        if s == _HOLD:
            continue
        w = node_age[node[g] if s < 0 else s]
        for r in range(gr):
            cur = guest_rows[r, g]
            tel_guest[r, g] = cur + w * (prev_guest[r, g] - cur)
        host = tel_guest[memhost_row, g]
        if host > 0.0:
            cur = guest_rows[memhost_row, g] * guest_rows[ratio_row, g]
            mem = cur + w * (prev_guest[memhost_row, g] * prev_guest[ratio_row, g] - cur)
            tel_guest[ratio_row, g] = mem / host
        if zero_cpu[g]:
            tel_guest[received_row, g] = 0.0
    prev_node[:] = node_rows
    prev_guest[:] = guest_rows


class Telemetry:
    """pvestatd's samples of one cluster, as the CRM reads them at each round's end."""

    def __init__(
        self, cluster: ClusterState, settings: TelemetrySettings, round_s: float, rng: Any
    ) -> None:
        self.cluster = cl = cluster
        self.settings = s = settings
        self.round_s = round_s
        self.phased = s.timing == "phased"
        self.rrd = s.mode == "rrd"
        self.first_zero = s.first_sample_zero
        #: True: the telemetry is the round's true state (no copies, no work)
        self.passthrough = not (self.phased or self.rrd or self.first_zero)
        self._rng = rng
        if self.passthrough:
            self.node_rows, self.guest_rows = cl.node_rows, cl.guest_rows
        else:
            self.node_rows = np.zeros_like(cl.node_rows)
            self.guest_rows = np.zeros_like(cl.guest_rows)
        self._point_node, self._point_guest = self.node_rows, self.guest_rows
        if self.rrd:  # the point samples go to a ring of the last minute's rounds
            self._point_node = np.zeros_like(cl.node_rows)
            self._point_guest = np.zeros_like(cl.guest_rows)
            per_step = max(1, round(RRD_STEP_S / round_s))
            self._ring_node = np.zeros((per_step, *cl.node_rows.shape))
            self._ring_guest = np.zeros((per_step, *cl.guest_rows.shape))
        self.view: SampledRows = SampledRows.of(self.node_rows, self.guest_rows)
        self._prev = np.zeros(cl.node_rows.size + cl.guest_rows.size)
        self.node_age = np.zeros(cl.n_nodes)  # latest sample's age, in rounds (0–1)
        self._sampler = np.full(cl.n_guests, -1, dtype=np.int64)
        self._zero = np.zeros(cl.n_guests, dtype=np.bool_)
        self._arrivals: dict[int, tuple[float, int]] = {}  # guest -> (arrival time, source)
        self._rounds = 0
        self._args: tuple[Any, ...] = (
            cl.node_rows, cl.guest_rows, self._prev, self._point_node, self._point_guest,
            self.node_age, cl.node, self._sampler, self._zero, SampledRows.RECEIVED_ROW,
            SampledRows.MEMHOST_ROW, SampledRows.RATIO_ROW,
        )  # fmt: skip
        self._sample: Callable[..., None] | None = None
        if not self.passthrough:
            self._sample = entry_point(sample_rows, *self._args, False)

    def reset(self) -> None:
        """A new episode: each node's pvestatd phase drawn anew (``aₙ`` in [0, 10) s)."""
        if self.phased:
            ages = self._rng.random(self.cluster.n_nodes) * UPDATE_S / self.round_s
            self.node_age[:] = np.minimum(ages, 1.0)
        self._sampler[:] = -1
        self._zero[:] = False
        self._arrivals.clear()
        self._rounds = 0

    def arrived(self, g: int, t: float, source: int) -> None:
        """Guest ``g`` runs on a new node since ``t`` (s); it was sampled on ``source`` before."""
        if self.first_zero:
            self._arrivals[g] = (t, source)

    def sample(self, t: float) -> None:
        """The samples the CRM reads at round time ``t`` (s), after the round's physics."""
        if self._sample is None:
            return
        if self._arrivals:
            self._place_arrivals(t)
        self._sample(*self._args, self._rounds == 0)
        self._rounds += 1
        if self.rrd:
            self._consolidate(t)

    def _place_arrivals(self, t: float) -> None:
        """Whose sample counts for each recently moved guest: still the source's (hold the last
        value) until the target's pvestatd samples it, whose first sample reports cpu 0."""
        self._sampler[:] = -1
        self._zero[:] = False
        for g, (t_arr, _source) in list(self._arrivals.items()):
            target = int(self.cluster.node[g])
            taken = t - float(self.node_age[target]) * self.round_s  # the target's latest sample
            if taken < t_arr:
                self._sampler[g] = _HOLD
            elif taken - UPDATE_S < t_arr:
                self._zero[g] = True
            else:
                del self._arrivals[g]

    def _consolidate(self, t: float) -> None:
        """RRD mode: keep the round's samples; at each minute the mean of the last six."""
        k = (self._rounds - 1) % self._ring_node.shape[0]
        self._ring_node[k] = self._point_node
        self._ring_guest[k] = self._point_guest
        if self._rounds == 1 or abs(t / RRD_STEP_S - round(t / RRD_STEP_S)) < 1e-9:
            filled = min(self._rounds, self._ring_node.shape[0])
            self.node_rows[:] = self._ring_node[:filled].mean(axis=0)
            self.guest_rows[:] = self._ring_guest[:filled].mean(axis=0)
