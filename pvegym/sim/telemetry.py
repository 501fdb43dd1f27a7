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

from typing import Any

import numpy as np

from pvegym.sim import layout as L
from pvegym.sim.cluster import ClusterState, SampledRows
from pvegym.sim.scenario import TelemetrySettings

#: pvestatd.pm: ``my $updatetime = 10;`` (s between samples).
UPDATE_S = 10.0
#: pve-cluster ``status.c``: RRD step of the node and guest schemas (s).
RRD_STEP_S = 60.0


class Telemetry:
    """pvestatd's samples of one cluster, as the CRM reads them at each round's end.

    The sampling itself runs in the round kernel (:func:`pvegym.sim.kernel.sample_telemetry`) on
    the rows below the state in :attr:`ClusterState.node_rows`/``guest_rows``
    (:mod:`pvegym.sim.layout`: ``N_TEL``, ``G_TEL`` …); this class draws the phases, marks moved
    guests and keeps the RRD averages."""

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
        # the samples: matrices laid out like the state's (rows 0 … NODE_ROWS − 1 / GUEST_ROWS − 1)
        point_node = cl.node_rows[L.N_TEL : L.N_TEL + L.NODE_ROWS]
        point_guest = cl.guest_rows[L.G_TEL : L.G_TEL + L.GUEST_ROWS]
        if self.passthrough:
            self.node_rows, self.guest_rows = cl.node_rows, cl.guest_rows
        elif self.rrd:  # the round's samples go to a ring; what is read is the last minute's mean
            self.node_rows = np.zeros_like(point_node)
            self.guest_rows = np.zeros_like(point_guest)
            per_step = max(1, round(RRD_STEP_S / round_s))
            self._ring_node = np.zeros((per_step, *point_node.shape))
            self._ring_guest = np.zeros((per_step, *point_guest.shape))
        else:
            self.node_rows, self.guest_rows = point_node, point_guest
        self._point_node, self._point_guest = point_node, point_guest
        self.view: SampledRows = SampledRows.of(self.node_rows, self.guest_rows)
        self.node_age = cl.node_rows[L.N_AGE]  # latest sample's age, in rounds (0–1)
        self._state = cl.guest_rows[L.G_TEL_STATE]
        #: guest -> (arrival time, source) of guests moved recently (their samples lag)
        self.arrivals: dict[int, tuple[float, int]] = {}
        self._rounds = 0
        self._age: list[float] = self.node_age.tolist()
        self._marked: list[int] = []
        cl.totals[L.T_TEL_ON] = 0.0 if self.passthrough else 1.0

    def reset(self) -> None:
        """A new episode: each node's pvestatd phase drawn anew (``aₙ`` in [0, 10) s)."""
        cl = self.cluster
        if self.phased:
            ages = self._rng.random(cl.n_nodes) * UPDATE_S / self.round_s
            self.node_age[:] = np.minimum(ages, 1.0)
        # the ages as floats for before_round (fixed within the episode; a list reads faster)
        self._age = self.node_age.tolist()
        self._state[:] = 0.0
        self._marked = []  # guests whose state before_round set (the others are 0)
        cl.totals[L.T_TEL_FIRST] = 1.0  # no earlier sample: the first round takes its state
        cl.totals[L.T_TEL_STATES] = 0.0
        self.arrivals.clear()
        self._rounds = 0

    def arrived(self, g: int, t: float, source: int) -> None:
        """Guest ``g`` runs on a new node since ``t`` (s); it was sampled on ``source`` before."""
        if self.first_zero:
            self.arrivals[g] = (t, source)

    def before_round(self, t: float) -> None:
        """Before the physics of the round ending at ``t`` (s), while :attr:`arrivals` is not
        empty: which moved guests the samples taken by then hold back or report with cpu 0 —
        still the source's value until the target's pvestatd samples the guest, whose first
        sample reports cpu 0."""
        state, age, node, round_s = self._state, self._age, self.cluster.node, self.round_s
        for g in self._marked:  # only the guests marked last time are not 0
            state[g] = 0.0
        marked: list[int] = []
        for g, (t_arr, _source) in list(self.arrivals.items()):
            taken = t - age[node.item(g)] * round_s  # the target's latest sample
            if taken < t_arr:
                state[g] = L.TEL_HOLD
                marked.append(g)
            elif taken - UPDATE_S < t_arr:
                state[g] = L.TEL_ZERO_CPU
                marked.append(g)
            else:
                del self.arrivals[g]
        self._marked = marked
        self.cluster.totals[L.T_TEL_STATES] = 1.0 if self.arrivals else 0.0

    def after_round(self, t: float) -> None:
        """RRD mode, after the round's physics (the kernel took the samples): keep them; at each
        minute the mean of the last six."""
        self._rounds += 1
        k = (self._rounds - 1) % self._ring_node.shape[0]
        self._ring_node[k] = self._point_node
        self._ring_guest[k] = self._point_guest
        if self._rounds == 1 or abs(t / RRD_STEP_S - round(t / RRD_STEP_S)) < 1e-9:
            filled = min(self._rounds, self._ring_node.shape[0])
            self.node_rows[:] = self._ring_node[:filled].mean(axis=0)
            self.guest_rows[:] = self._ring_guest[:filled].mean(axis=0)
