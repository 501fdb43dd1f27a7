"""The observation layout of ``pvegym/Cluster-v1``: feature names, block offsets and scales.

One module defines where every feature sits, so that the environment's compiled encoder
(:mod:`pvegym.env.encoding_v1`), the balancer-side encoder of a deployed agent
(:mod:`pvegym.env.view_encoding_v1`), a batched vector environment and the policy network
(:mod:`pvegym.learning.pair_policy`) read the same vector the same way.

The vector is four blocks, each padded to the action space's ``max_nodes`` / ``max_guests``
(padding slots are 0, their ``present`` feature included):

=========  ========================  =============================================================
block      shape (feature-major)     index of feature ``f`` of slot ``i`` (``j``)
=========  ========================  =============================================================
global     ``(G,)``                  ``f``
node       ``(N_F, max_nodes)``      ``node_offset + f·max_nodes + i``
guest      ``(G_F, max_guests)``     ``guest_offset + f·max_guests + i``
pair       ``(P_F, max_guests,       ``pair_offset + (f·max_guests + i)·max_nodes + j``: guest
           max_nodes)``              ``i`` → node ``j``, the same order as the actions
=========  ========================  =============================================================

Every feature is in [0, 1] (clipped; NaN — telemetry switched off — reads 0 and sets the global
``missing_<field>`` flag). Units and scales are given per feature below. No feature depends on the
padding: counts have fixed (log) scales and node indices are stored as ``(index + 1) /
NODE_INDEX_SCALE`` (0: none; exact in float32), which a network decodes with ``round(x ·
NODE_INDEX_SCALE) − 1``. So a cluster padded to 4 × 40 slots and the same cluster padded to
8 × 100 give the same features in the slots they share, and a model trained on one padding acts on
any cluster by re-padding (:class:`~pvegym.policies.learned.LearnedPolicy` builds the layout of the view's
size when the cluster exceeds its training padding).

The observation is built from telemetry only — what :class:`~pvegym.sim.view.ClusterView` carries,
round after round — plus the memory an HA manager keeps of the motions it saw end
(:class:`~pvegym.env.memory.MotionMemory`). Node ``maintenance`` and ``fenced`` read 0 until the
model's HA stack reports them; they are in the layout now so that it does not change then.
"""

from __future__ import annotations

from dataclasses import dataclass

from pvegym.sim.scenario import TELEMETRY_FIELDS
from pvegym.units import GiB, MiB

#: Layout version: a model records it and refuses another.
VERSION = "v1"

# --------------------------------------------------------------------------------------- scales
# Linear: ``x / scale``. Logarithmic, for quantities spanning orders of magnitude where a network
# must tell 1 GiB from 4 GiB as well as 64 from 256: ``log(1 + x/x0) / log(1 + max/x0)``.
CORES_SCALE = 128.0  # node cores (linear)
NODE_MEM_SCALE = 1024.0 * GiB  # node memory, bytes (linear)
GUEST_CPU_LOG = (1.0, 256.0)  # guest vCPUs: x0, max (log)
GUEST_MEM_LOG = (1.0 * GiB, 1024.0 * GiB)  # guest memory, bytes (log)
DURATION_LOG = (10.0, 3600.0)  # predicted/observed motion durations, seconds (log)
PRESSURE_ROUNDS_SCALE = 6.0  # consecutive CRM rounds above the pressure gate
FAILURES_SCALE = 4.0  # failed motions of a guest within the memory window
AFTER_SCALE = 2.0  # what-if load of a target (fraction of its capacity) is stored halved
NODE_INDEX_SCALE = 1024.0  # node index + 1 over this (a power of two: exact in float32)
NODES_LOG = (1.0, 128.0)  # real nodes in the cluster: x0, max (log)
GUESTS_LOG = (1.0, 4096.0)  # real HA guests in the cluster: x0, max (log)
NODE_GUESTS_LOG = (1.0, 512.0)  # HA guests on one node: x0, max (log)

# --------------------------------------------------------------------------------------- features
GLOBAL_FEATURES: tuple[str, ...] = (
    "time_frac",  # simulated time / episode length
    "motion_active",  # the pipeline is busy: only action 0 is valid
    "nodes",  # real nodes, log scale NODES_LOG
    "guests",  # real HA guests, log scale GUESTS_LOG
    "imbalance",  # normalized CV of telemetry node loads (cpu/maxcpu + mem/maxmem)/2, clipped to 1
    "result_ok",  # a motion result (success) arrived this round
    "result_failed",  # a motion result (failure) arrived this round
    "pressure_max",  # max over online nodes of PSI cpu/memory some avg10 / 100
    *(f"missing_{f}" for f in TELEMETRY_FIELDS),  # 1 when that telemetry field reads NaN
)
NODE_FEATURES: tuple[str, ...] = (
    "present",
    "online",
    "maintenance",  # node in maintenance mode (0 until the HA stack reports it)
    "fenced",  # node fenced (0 until the HA stack reports it)
    "maxcpu",  # cores / 128
    "maxmem",  # bytes / 1 TiB
    "cpu",  # cpu / maxcpu
    "mem",  # mem / maxmem
    "cpu_some",  # PSI avg10 / 100
    "mem_some",
    "mem_full",
    "guests",  # HA guests on the node, log scale NODE_GUESTS_LOG
    "ha_cpu",  # Σ cpu of the HA guests on the node / maxcpu
    "ha_memhost",  # Σ memhost of the HA guests on the node / maxmem
    "incoming",  # a motion is bringing a guest here
    "pressure_rounds",  # consecutive rounds with cpu or memory some ≥ the gate / 6
)
GUEST_FEATURES: tuple[str, ...] = (
    "present",
    "node",  # (node index + 1) / NODE_INDEX_SCALE: an identifier, not a quantity
    "target",  # (motion target + 1) / NODE_INDEX_SCALE, 0 when not moving
    "started",  # HA state started (movable)
    "moving",  # in migrate/relocate
    "running",
    "container",  # a container (relocate: stop, move, start) rather than a VM (live migration)
    "migratable",  # no local resource pins it (every motion of it fails otherwise)
    "maxcpu",  # vCPUs, log scale GUEST_CPU_LOG
    "maxmem",  # bytes, log scale GUEST_MEM_LOG
    "cpu",  # cores / vCPUs
    "mem",  # balloon view / maxmem
    "memhost",  # host footprint / maxmem
    "cpu_some",  # guest PSI avg10 / 100
    "cpu_full",
    "mem_some",
    "mem_full",
    "cpu_node_share",  # cores / its node's cores: what moving it takes off the node
    "memhost_node_share",  # memhost / its node's memory
    "source_cpu_after",  # its node's cpu without it / the node's cores
    "transfer_s",  # memhost / migration bandwidth (s, the first pre-copy pass), log DURATION_LOG
    "last_ok",  # the last motion of it that ended succeeded
    "last_failed",  # ... failed or was aborted
    "motion_recency",  # 1 − (t − end of its last motion) / window, 0 if none within the window
    "failures",  # its failed motions within the window / 4
    "backoff",  # longest remaining failure backoff of it to any node / backoff cap
    "last_duration",  # its last successful motion, issue → end (s), log scale DURATION_LOG
)
PAIR_FEATURES: tuple[str, ...] = (
    "left_recency",  # 1 − (t − when it last left that node) / window: moving back oscillates
    "fail_recency",  # 1 − (t − its last failed motion to that node) / window
    "backoff",  # remaining backoff of this guest → node after failures / backoff cap
    "cpu_after",  # (node cpu + the guest's cpu) / node cores / 2; the node's own load on its own
    "mem_after",  # (node mem + the guest's memhost) / node memory / 2 (> 0.5: it does not fit)
)

G_INDEX = {name: i for i, name in enumerate(GLOBAL_FEATURES)}
N_INDEX = {name: i for i, name in enumerate(NODE_FEATURES)}
GU_INDEX = {name: i for i, name in enumerate(GUEST_FEATURES)}
P_INDEX = {name: i for i, name in enumerate(PAIR_FEATURES)}


@dataclass(frozen=True)
class Layout:
    """Offsets of the blocks for padded sizes ``max_nodes`` × ``max_guests``."""

    max_nodes: int
    max_guests: int

    def __post_init__(self) -> None:
        if not 1 <= self.max_nodes < NODE_INDEX_SCALE or self.max_guests < 1:
            raise ValueError(
                f"a layout needs 1..{int(NODE_INDEX_SCALE) - 1} nodes and ≥ 1 guest, not "
                f"{self.max_nodes} × {self.max_guests}"
            )

    def fitting(self, nodes: int, guests: int) -> Layout:
        """This layout if a cluster of ``nodes`` × ``guests`` fits it, else the smallest layout
        that holds both (the features do not depend on the padding)."""
        if nodes <= self.max_nodes and guests <= self.max_guests:
            return self
        return Layout(max(self.max_nodes, nodes), max(self.max_guests, guests))

    @property
    def n_global(self) -> int:
        return len(GLOBAL_FEATURES)

    @property
    def node_offset(self) -> int:
        return self.n_global

    @property
    def guest_offset(self) -> int:
        return self.node_offset + len(NODE_FEATURES) * self.max_nodes

    @property
    def pair_offset(self) -> int:
        return self.guest_offset + len(GUEST_FEATURES) * self.max_guests

    @property
    def size(self) -> int:
        return self.pair_offset + len(PAIR_FEATURES) * self.max_guests * self.max_nodes

    @property
    def n_actions(self) -> int:
        """``1 + max_guests · max_nodes``: action 0 = no motion, ``1 + g·max_nodes + n``."""
        return 1 + self.max_guests * self.max_nodes

    def as_dict(self) -> dict[str, object]:
        """Plain data a trained model records (and a policy network is built from)."""
        return {"version": VERSION, "max_nodes": self.max_nodes, "max_guests": self.max_guests}


@dataclass(frozen=True)
class MemoryOptions:
    """How the HA manager's motion memory is summarised (environment options, seconds).

    ``window_s`` (3600 s: the oscillation window of ``docs/metrics.md``) bounds the recency features and the
    failure count; the backoff after the k-th consecutive failure of a guest → node is
    ``backoff_base_s · backoff_factor^(k−1)`` capped at ``backoff_cap_s`` (60 s, 2, 3600 s: the field
    report's patch 1). ``pressure_pct`` is the gate of ``pressure_rounds`` (10 %: patch 7, and the churn
    threshold of ``docs/metrics.md``). ``bandwidth_bps`` is the migration network's throughput an administrator
    configures (datacenter.cfg; 430 MiB/s: the convergence patch's observation) for ``transfer_s``.
    """

    window_s: float = 3600.0
    backoff_base_s: float = 60.0
    backoff_factor: float = 2.0
    backoff_cap_s: float = 3600.0
    pressure_pct: float = 10.0
    bandwidth_bps: float = 430.0 * MiB


__all__ = [
    "GLOBAL_FEATURES",
    "GUESTS_LOG",
    "GUEST_FEATURES",
    "GU_INDEX",
    "G_INDEX",
    "NODES_LOG",
    "NODE_FEATURES",
    "NODE_GUESTS_LOG",
    "NODE_INDEX_SCALE",
    "N_INDEX",
    "PAIR_FEATURES",
    "P_INDEX",
    "VERSION",
    "Layout",
    "MemoryOptions",
]
