"""What a balancer sees in one CRM round, and what it may answer.

The HA manager's balancer never reads ground truth. It reads what pvestatd broadcast (point samples
every 10 s, see ``docs/model.md``, *Telemetry*, and ``PVE/HA/Env/PVE2.pm``), the manager's own service states,
the configured rules and the results of finished motions (the LRM's exit). :class:`ClusterView` is
that view, as arrays (struct of arrays) so that a policy over 2,000 guests stays cheap. A field
whose telemetry is switched off reads NaN: policies must fail open on it.

Every policy, heuristic or learned, implements :class:`Balancer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

# HA service states (pve-ha-manager ``Manager.pm``); the balancer only moves ``started`` services.
STARTED = "started"
MIGRATE = "migrate"
RELOCATE = "relocate"
STOPPED = "stopped"
REQUEST_START = "request_start"
MOTION_STATES = frozenset({MIGRATE, RELOCATE})


@dataclass(frozen=True, slots=True)
class Motion:
    """A balancer's answer: move ``sid`` (the leader of its bundle) to node ``target``.

    The HA manager moves the whole positive-affinity bundle with it (``queue_resource_motion``).
    ``imbalance_before``/``imbalance_after`` are what the balancer expected (for its log line).
    """

    sid: str
    target: str
    imbalance_before: float | None = None
    imbalance_after: float | None = None


@dataclass(frozen=True, slots=True)
class MotionResult:
    """The LRM's exit for one finished motion, as the CRM sees it in the round after it ended.

    With the full HA stack (``ha_stack = "full"``) a result is shown in the round after the
    physics ended the motion; the port's CRM reads it from the LRM's status in that round or
    the next (the LRM tick that collects it may fall in the following round).
    """

    sid: str
    source: str
    target: str
    ok: bool
    reason: (
        str  # "" on success; e.g. "local resource", "hugepage allocation failed", "no convergence"
    )
    t_issued: float  # seconds, simulated time of the CRM round that queued it
    t_ended: float  # seconds, when the LRM's worker finished


@dataclass(frozen=True, slots=True)
class NodeAffinityRule:
    """``node-affinity`` rule: ``resources`` prefer ``nodes`` (node → priority, higher first)."""

    name: str
    resources: tuple[str, ...]
    nodes: tuple[tuple[str, int], ...]
    strict: bool = False


@dataclass(frozen=True, slots=True)
class ResourceAffinityRule:
    """``resource-affinity`` rule: positive = keep together (a bundle), negative = keep apart."""

    name: str
    resources: tuple[str, ...]
    positive: bool


@dataclass(frozen=True, slots=True)
class Rules:
    node_affinity: tuple[NodeAffinityRule, ...] = ()
    resource_affinity: tuple[ResourceAffinityRule, ...] = ()


FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@dataclass(slots=True)
class ClusterView:
    """The HA manager's view at one CRM round. Arrays are read-only snapshots; do not mutate.

    Units: cpu in cores, memory in bytes, pressure in percent (avg10, 0–100), time in seconds.
    Guests are the HA-managed services only, sorted by sid; nodes are sorted by name.
    """

    t: float
    node_names: tuple[str, ...]
    node_online: BoolArray
    node_maxcpu: FloatArray
    node_maxmem: FloatArray
    node_cpu: FloatArray  # cores busy over the last 10 s (pvestatd point sample)
    node_mem: FloatArray  # MemTotal − MemAvailable
    node_cpu_some: FloatArray  # PSI cpu some avg10, percent
    node_mem_some: FloatArray  # PSI memory some avg10, percent
    node_mem_full: FloatArray  # PSI memory full avg10, percent
    sids: tuple[str, ...]
    guest_node: IntArray  # index into node_names: the node the service is on
    guest_target: IntArray  # index of the motion target while migrate/relocate, else -1
    guest_state: tuple[str, ...]  # HA state (started, migrate, relocate, stopped, ...)
    guest_running: BoolArray
    # configured vCPUs as PVE's static usage reads them; 0 = no CPU limit (a container with
    # neither ``cores`` nor ``cpulimit``: it may use every CPU of the node it runs on), see
    # :func:`guest_cpu_cap`
    guest_maxcpu: FloatArray
    guest_maxmem: FloatArray  # configured memory, bytes
    guest_cpu: FloatArray  # cores (RRD point sample)
    guest_mem: FloatArray  # balloon-reported guest view, bytes
    guest_memhost: FloatArray  # host-side footprint, bytes
    guest_cpu_some: FloatArray
    guest_cpu_full: FloatArray
    guest_mem_some: FloatArray
    guest_mem_full: FloatArray
    guest_migratable: BoolArray  # False when the config pins it (local CD-ROM, local device)
    rules: Rules = field(default_factory=Rules)
    # LRM exits the CRM processes in this round (full stack: motions ended in the last round,
    # which its CRM sees this round or the next; MotionResult)
    results: tuple[MotionResult, ...] = ()
    motion_active: bool = False  # a motion is queued or running anywhere (the pipeline is busy)
    mode: str = "dynamic"  # CRS scheduler mode: "dynamic" or "static"
    # running guests that are not HA resources (Manager.pm recompute_online_node_usage adds them
    # to the usage from Env/PVE2.pm's cluster-wide guest list): where they run and their
    # configured size; never moved by the HA manager
    other_node: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    other_maxcpu: FloatArray = field(default_factory=lambda: np.zeros(0))  # vCPUs, 0 = no limit
    other_maxmem: FloatArray = field(default_factory=lambda: np.zeros(0))  # bytes
    # the HA manager's node states beyond ``node_online`` (its ``online``: a node a motion may
    # target), when the full HA stack runs (``None``: every node online or off as configured):
    # in maintenance; fenced or being fenced (``fence``, ``unknown``, ``gone``)
    node_maintenance: BoolArray | None = None
    node_fenced: BoolArray | None = None
    # each HA resource's ``auto-rebalance`` flag (``ha-manager`` resource config, default on):
    # off, the balancer never picks it nor a positive-affinity bundle it is in (upstream's
    # ``get_active_stationary_movable_resource_bundles``); ``None``: on for every guest
    guest_auto_rebalance: BoolArray | None = None

    def node_index(self, name: str) -> int:
        return self.node_names.index(name)

    def sid_index(self, sid: str) -> int:
        return self.sids.index(sid)


def guest_cpu_cap(view: ClusterView) -> FloatArray:
    """The vCPUs each HA guest of ``view`` can use: its ``guest_maxcpu``, or where that is 0 (no
    CPU limit) the CPUs of the node it is on — what pve-container's ``vmstatus`` reports as its
    ``maxcpu`` (``cores || cpulimit || the host's CPU count``) and the RRD carries."""
    gmax = np.asarray(view.guest_maxcpu, dtype=np.float64)
    if not (gmax == 0).any():
        return gmax
    nodes = np.asarray(view.node_maxcpu, dtype=np.float64)
    where = np.clip(np.asarray(view.guest_node, dtype=np.int64), 0, max(nodes.size - 1, 0))
    return np.where(gmax == 0, nodes[where], gmax)


@runtime_checkable
class Balancer(Protocol):
    """A balancer: called once per CRM round (``load_balance``), at most one motion per round.

    It keeps its own state across rounds (hold counters, backoff tables, EMAs); ``reset`` clears it
    at the start of an episode.
    """

    name: str

    def reset(self, seed: int | None = None) -> None: ...

    def decide(self, view: ClusterView) -> Motion | None: ...
