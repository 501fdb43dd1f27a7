"""What an HA manager remembers of the motions it saw end, and of the pressure it saw persist.

A balancer that only sees the current round repeats a failing move: it cannot tell a guest whose
last three migrations failed from one never tried (measured: a learned agent without this memory
fell into a loop of 87 failed moves of a guest with a local resource). The HA manager itself sees
every motion's result (the LRM's exit, ``view.results``), so remembering them is telemetry, not
ground truth. :class:`MotionMemory` keeps, per HA guest (in ``view.sids`` order) and per
guest × node:

* the end time, outcome and duration (issue → end) of its last motion;
* the end times of its recent failed motions (a ring of :data:`FAILURE_RING`);
* when it last *left* each node (a successful motion away from it: moving back within the window
  is an oscillation, ``docs/metrics.md``), when it last failed to reach each node, and the failure
  backoff of each guest → node pair (the field report's patch 1: base · factor^(k−1), capped);
* per node, the consecutive rounds its PSI cpu or memory some avg10 was at or above the gate
  (the field report's patch 7 gate and upstream's hold counter count rounds alike).

The environment feeds it the results of each round from the simulation; a deployed agent feeds it
``view.results`` round by round (:mod:`pvegym.env.view_encoding_v1`): the same results arrive in
the same rounds, so both hold the same memory. Times are seconds of simulated time.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from pvegym.env.observation_layout import MemoryOptions

#: failures of one guest remembered for the ``failures`` count (more in a window read as the cap)
FAILURE_RING = 8

# rows of MotionMemory.guest
LAST_END, LAST_STATE, LAST_DURATION = 0, 1, 2
STATE_NONE, STATE_OK, STATE_FAILED = 0.0, 1.0, 2.0
# rows of MotionMemory.pair
LEFT_T, FAIL_T, FAIL_K, BACKOFF_UNTIL = 0, 1, 2, 3


class MotionMemory:
    """Per-guest and per-pair motion memory for ``n_guests`` HA guests on ``n_nodes`` nodes."""

    def __init__(self, n_guests: int, n_nodes: int, options: MemoryOptions) -> None:
        self.options = options
        self.guest = np.empty((3, n_guests))
        self.failures = np.empty((n_guests, FAILURE_RING))
        self.pair = np.empty((4, n_guests, n_nodes))
        self.pressure_rounds = np.zeros(n_nodes)
        self.reset()

    def reset(self) -> None:
        self.guest[LAST_END] = -math.inf
        self.guest[LAST_STATE] = STATE_NONE
        self.guest[LAST_DURATION] = 0.0
        self.failures[:] = -math.inf
        self.pair[LEFT_T] = -math.inf
        self.pair[FAIL_T] = -math.inf
        self.pair[FAIL_K] = 0.0
        self.pair[BACKOFF_UNTIL] = -math.inf
        self.pressure_rounds[:] = 0.0
        self._ring = np.zeros(self.guest.shape[1], dtype=np.int64)

    def record(
        self, g: int, source: int, target: int, ok: bool, t_issued: float, t_end: float
    ) -> None:
        """The result of a motion of guest ``g`` from node ``source`` to ``target``."""
        opt = self.options
        self.guest[LAST_END, g] = t_end
        self.guest[LAST_STATE, g] = STATE_OK if ok else STATE_FAILED
        if ok:
            self.guest[LAST_DURATION, g] = t_end - t_issued
            self.pair[LEFT_T, g, source] = t_end
            self.pair[FAIL_K, g, target] = 0.0
            self.pair[BACKOFF_UNTIL, g, target] = -math.inf
            return
        k = float(self.pair[FAIL_K, g, target]) + 1.0
        self.pair[FAIL_K, g, target] = k
        self.pair[FAIL_T, g, target] = t_end
        # libm's pow (math.pow), never NumPy's dispatched power (tests/test_portability.py)
        delay = min(opt.backoff_base_s * math.pow(opt.backoff_factor, k - 1.0), opt.backoff_cap_s)
        self.pair[BACKOFF_UNTIL, g, target] = t_end + delay
        self.failures[g, self._ring[g] % FAILURE_RING] = t_end
        self._ring[g] += 1

    def observe_pressure(
        self,
        online: NDArray[np.bool_],
        cpu_some: NDArray[np.float64],
        mem_some: NDArray[np.float64],
    ) -> None:
        """One round's node PSI some avg10 (percent; NaN — no telemetry — is no pressure)."""
        count_pressure_rounds(
            self.pressure_rounds, online, cpu_some, mem_some, self.options.pressure_pct
        )


@njit(cache=True)
def count_pressure_rounds(
    rounds: NDArray[np.float64],
    online: NDArray[np.bool_],
    cpu_some: NDArray[np.float64],
    mem_some: NDArray[np.float64],
    gate_pct: float,
) -> None:
    """``rounds[j]`` + 1 where node ``j`` is online with PSI cpu or memory some avg10 at or above
    ``gate_pct`` (percent), else 0, in place (a NaN reading compares false: no pressure).
    Compiled because it runs every round of every environment: NumPy's per-call overhead on
    arrays of a few nodes was ~12 % of a profiled ``Cluster-v1`` step (issue 20)."""
    for j in range(rounds.size):
        if online[j] and (cpu_some[j] >= gate_pct or mem_some[j] >= gate_pct):
            rounds[j] += 1.0
        else:
            rounds[j] = 0.0


__all__ = ["FAILURE_RING", "MotionMemory", "count_pressure_rounds"]
