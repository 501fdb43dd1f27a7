"""Row layout of the matrices the compiled kernels share: one name per row, defined once.

Why matrices: handing an array to a compiled (numba) function costs ~75–150 ns whatever its size,
so related per-node and per-guest arrays are rows of one matrix (``ClusterState.node_rows``,
``ClusterState.guest_rows``) and the familiar attributes (``node_cpu``, ``run_fraction``, …) are
row views (ARCHITECTURE.md, "The hot path"). Every reader — :mod:`pvegym.sim.cluster`,
:mod:`pvegym.sim.kernel`, :mod:`pvegym.env.encoding`, the experiment runner — indexes the rows by
these names, never by number.

The kernels read these module constants as compile-time constants. numba's on-disk cache is keyed
by the *kernel's* source file, not by this one: after changing a row here, also touch the kernels
that read it (or delete their ``__pycache__``) so a stale compiled kernel is not loaded;
``tests/sim/test_layout.py`` compares the compiled round kernel with its Python source to catch
one.

Units: cores, bytes, fractions 0–1 (instantaneous pressure), percent (PSI averages).
"""

from __future__ import annotations

# ---------------------------------------------------------------- ClusterState.node_rows (n,)
N_MAXCPU = 0  # cores
N_MAXMEM = 1  # bytes
N_RESERVED_MEM = 2  # in: bytes held on the node for incoming migrations
N_DEMAND = 3  # out: cores wanted
N_CPU = 4  # out: cores busy
N_MEM = 5  # out: bytes in use (MemTotal − MemAvailable)
N_INST = 6  # out: instantaneous pressure, N_SERIES rows (fractions 0–1)
N_SERIES = 3  # node pressure series: cpu some, memory some, memory full
N_CPU_SOME, N_MEM_SOME, N_MEM_FULL = 0, 1, 2  # series index within N_INST / each N_AVG window
N_AVG = N_INST + N_SERIES  # out: PSI averages, WINDOWS × N_SERIES rows (percent)
N_SCALE = N_AVG + 3 * N_SERIES  # round kernel scratch: the share of its demand a node supplies
N_MOTION_CPU = N_SCALE + 1  # in: cores of host work the motions cost (migration threads)
N_CS_BUSY = N_MOTION_CPU + 1  # round kernel scratch: cpu some per busy CPU (guests' own PSI)
N_MS_BUSY = N_CS_BUSY + 1  # round kernel scratch: memory some per busy CPU
N_INV_CPU = N_MS_BUSY + 1  # round kernel scratch: 1 / cores busy (0 when idle)
N_OOM_LIMIT = N_INV_CPU + 1  # in: bytes in use past which the OOM killer acts (MemTotal + swap)
N_MEM_WANTED = N_OOM_LIMIT + 1  # out: bytes in use the node was asked for (not capped)
NODE_ROWS = N_MEM_WANTED + 1

# ---------------------------------------------------------------- ClusterState.guest_rows (g,)
G_MAXCPU = 0  # vCPUs
G_MAXMEM = 1  # bytes
G_MEM_RATIO = 2  # guest-reported mem / memhost (0–1)
G_RUN_FRACTION = 3  # in: fraction of the round the guest runs (0–1), set by motions
G_DEMAND = 4  # out: cores wanted
G_RECEIVED = 5  # out: cores received
G_MEMHOST = 6  # out: host memory footprint (bytes)
G_INST = 7  # out: instantaneous pressure, G_SERIES rows (fractions 0–1)
G_SERIES = 4  # guest pressure series: cpu some, cpu full, memory some, memory full
G_CPU_SOME, G_CPU_FULL, G_MEM_SOME, G_MEM_FULL = 0, 1, 2, 3  # series index
G_AVG = G_INST + G_SERIES  # out: PSI averages, WINDOWS × G_SERIES rows (percent)
G_BALLOON = G_AVG + 3 * G_SERIES  # in: the guest's memory now (bytes; maxmem unless ballooned)
G_KSM_FRAC = G_BALLOON + 1  # in: share of its footprint KSM merged away (0–1)
G_INV_MAXCPU = G_KSM_FRAC + 1  # 1 / vCPUs
GUEST_ROWS = G_INV_MAXCPU + 1

# ---------------------------------------------------------------- PSI windows of the N_AVG/G_AVG blocks
AVG10, AVG60, AVG300 = 0, 1, 2
WINDOWS = 3

# ---------------------------------------------------------------- ClusterState.totals (11,)
#: the round's totals for the metrics and the churn check (``cluster_round``'s last argument),
#: then the telemetry switches the round reads
T_STALL_CPU = 0  # Σ online nodes' cpu some (fraction)
T_STALL_MEM = 1  # Σ online nodes' memory some (fraction)
T_GUEST_STALL = 2  # Σ guests' cpu some + memory some (fraction)
T_SHORTFALL = 3  # Σ guests' demand − received (cores)
T_IMBALANCE = 4  # normalized imbalance (CV ÷ √(n−1)) of the true node loads
T_ONLINE = 5  # online nodes
T_PEAK_SOME = 6  # peak avg10 cpu/memory some of online nodes (%, NaN if one is NaN, −inf if none)
T_OOM = 7  # nodes whose memory in use exceeds MemTotal + swap (the OOM killer acts)
T_TEL_ON = 8  # in: 1 = the round takes pvestatd's samples (pvegym.sim.telemetry), 0 = it does not
T_TEL_FIRST = 9  # in/out: 1 = no earlier sample yet (the first round takes the round's state)
T_TEL_STATES = 10  # in: 1 = some guest has a telemetry state (G_TEL_STATE) other than 0
TOTALS = 11

# ---------------------------------------------------------------- telemetry (pvegym.sim.telemetry)
#: the rows pvestatd's samples carry, what the view and the observation read: node cpu, memory
#: and the avg10 of its three series; guest mem_ratio (sampled with memhost as one value: memhost
#: × mem_ratio), run_fraction, received, memhost and the avg10 of its four series
NODE_SAMPLED = (N_CPU, N_MEM, *range(N_AVG, N_AVG + N_SERIES))
GUEST_SAMPLED = (
    G_MEM_RATIO,
    G_RUN_FRACTION,
    G_RECEIVED,
    G_MEMHOST,
    *range(G_AVG, G_AVG + G_SERIES),
)

# pvestatd's samples live in the same matrices, below the state (one array each for the compiled
# round, no extra argument): a copy of the state's layout holding the samples (only the sampled
# rows written), what the round overwrites before it can mix it in (a node's sampled rows, a
# guest's mem), and per node its latest sample's age (rounds, 0–1) / per guest a scratch weight
# and a telemetry state
N_TEL = NODE_ROWS  # first row of the node samples (same layout as rows 0 … NODE_ROWS − 1)
N_PREV = N_TEL + NODE_ROWS
N_AGE = N_PREV + len(NODE_SAMPLED)
NODE_MATRIX_ROWS = N_AGE + 1
G_TEL = GUEST_ROWS
G_MEM_PREV = G_TEL + GUEST_ROWS  # the guest's mem (memhost × mem_ratio) at the last round's end
G_WEIGHT = G_MEM_PREV + 1  # round kernel scratch: the weight of the value a round ago (0–1)
G_TEL_STATE = G_WEIGHT + 1  # 0 sampled, TEL_HOLD, TEL_ZERO_CPU
GUEST_MATRIX_ROWS = G_TEL_STATE + 1
TEL_HOLD = 1  # guest telemetry state: its latest sample is a round old (its node has not sampled
# it yet after a move)
TEL_ZERO_CPU = 2  # guest telemetry state: its latest sample is its first on a new node (cpu 0)

# ---------------------------------------------------------------- Simulation.svc_place (2, g)
SVC_NODE = 0  # where each service is (node index)
SVC_TARGET = 1  # where it is moving to (node index, −1: nowhere)
SVC_ROWS = 2
