"""Integer codes of the HA engine: service, configuration, node and LRM states, commands, exit
codes and the layout of its arrays (see :mod:`pvegym.sim.engine` for the design).

The names are upstream's (pve-ha-manager 5.2.0, ``Manager.pm``, ``NodeStatus.pm``, ``Tools.pm``);
the tuples map a code back to upstream's spelling for the log formatter and the differential
check.
"""

from __future__ import annotations

# ---------------------------------------------------------------- service states (``$sd->{state}``)
SS_ABSENT = 0  # not in the service status (new, ignored or removed)
SS_STOPPED = 1
SS_REQUEST_STOP = 2
SS_REQUEST_START = 3
SS_REQUEST_START_BALANCE = 4
SS_STARTED = 5
SS_FENCE = 6
SS_RECOVERY = 7
SS_MIGRATE = 8
SS_RELOCATE = 9
SS_FREEZE = 10
SS_ERROR = 11
SERVICE_STATES = (
    "",
    "stopped",
    "request_stop",
    "request_start",
    "request_start_balance",
    "started",
    "fence",
    "recovery",
    "migrate",
    "relocate",
    "freeze",
    "error",
)

# ---------------------------------------------------------------- requested states (service config)
CFG_STARTED = 0
CFG_STOPPED = 1
CFG_DISABLED = 2
CFG_IGNORED = 3
CONFIG_STATES = ("started", "stopped", "disabled", "ignored")

# ---------------------------------------------------------------- node states (``$ns``)
NS_ABSENT = 0  # not in the node status (never seen online); reads as 'unknown'
NS_ONLINE = 1
NS_MAINTENANCE = 2
NS_UNKNOWN = 3
NS_FENCE = 4
NS_GONE = 5
NODE_STATES = ("unknown", "online", "maintenance", "unknown", "fence", "gone")

# ---------------------------------------------------------------- LRM modes (``lrm_status->{mode}``)
MODE_UNKNOWN = 0  # no LRM status read (a node not in the node status)
MODE_ACTIVE = 1
MODE_MAINTENANCE = 2
MODE_RESTART = 3
MODE_DISARM = 4
LRM_MODES = ("unknown", "active", "maintenance", "restart", "disarm")

# ---------------------------------------------------------------- a service's queued command
CMD_NONE = 0
CMD_MIGRATE = 1
CMD_RELOCATE = 2
CMD_STOP = 3
SERVICE_COMMANDS = ("", "migrate", "relocate", "stop")

# ---------------------------------------------------------------- CRM commands (the command queue)
# rows of (kind, a, b): migrate/relocate (sid, node), stop (sid, timeout s),
# maintenance (node, -), disarm (mode, -), arm (-, -)
Q_MIGRATE = 1
Q_RELOCATE = 2
Q_STOP = 3
Q_ENABLE_MAINTENANCE = 4
Q_DISABLE_MAINTENANCE = 5
Q_DISARM = 6
Q_ARM = 7

# ---------------------------------------------------------------- disarm (``$ms->{disarm}``)
DISARM_NONE = 0
DISARM_FREEZE = 1
DISARM_IGNORE = 2
DISARM_MODES = ("", "freeze", "ignore")
DISARMING = 1
DISARMED = 2
DISARM_STATES = ("", "disarming", "disarmed")

# ---------------------------------------------------------------- LRM exit codes (Tools.pm)
NO_RESULT = -1
SUCCESS = 0
ERROR = 1
EWRONG_NODE = 3
IGNORED = 8

# ---------------------------------------------------------------- resource types
TYPE_VM = 0
TYPE_CT = 1

NONE = -1  # an absent node, target, timeout, maintenance node
NONE_SET = -2  # a key present with an undefined value (``target => undef``)

# ---------------------------------------------------------------- service fields (svc[c, s, F])
F_STATE = 0
F_NODE = 1
F_TARGET = 2
F_UID = 3
F_CMD = 4
F_CMD_ARG = 5  # target node of migrate/relocate, timeout of stop
F_RUNNING = 6
F_MAINT_NODE = 7
F_TIMEOUT = 8
F_N_FAILED = 9
F_FAILED = 10  # failed_nodes, packed: entry k is ((v >> 4k) & 15) - 1; NONE_SET when []
F_CFG_STATE = 11
F_CFG_NODE = 12
F_TYPE = 13
F_MAX_RELOCATE = 14
F_FAILBACK = 15
F_RES_UID = 16  # the LRM's result: for which uid (input)
F_RES_CODE = 17  # its exit code, NO_RESULT if none (input)
F_RES_NODE = 18  # the node whose LRM reported it (input)
F_USE_CUR = 19  # the nodes this service's usage is counted on
F_USE_TGT = 20
N_SVC_FIELDS = 21
FAILED_MAX = 15

# ---------------------------------------------------------------- node fields (nodes[c, n, F])
N_STATE = 0
N_ONLINE = 1  # member of the quorate partition this round (input)
N_MODE = 2  # LRM mode this round (input)
N_LOCK = 3  # the master can take this node's agent lock this round (input)
N_MAINT_REQ = 4  # ``$ms->{node_request}{node}{maintenance}``
N_USAGE = 5  # in this round's usage (online when it was built)
N_COUNT = 6  # services counted on the node (basic usage)
N_READ_MODE = 7  # the mode the Manager read this round (MODE_UNKNOWN if not in the status)
N_FENCED_SEEN = 8  # scratch: visited by this fencing pass
N_FENCED_OK = 9  # scratch: its fencing result
N_PRI = 10  # scratch of select_service_node: a preferred node
N_ORDER = 11  # scratch of select_service_node: row i holds the i-th node by score
N_NODE_FIELDS = 12

# ---------------------------------------------------------------- cluster fields (clu[c, F])
K_DISARM_MODE = 0
K_DISARM_STATE = 1
K_ALL_DISARMED = 2
K_UID = 3  # last uid handed out
K_REBALANCE_ON_START = 4
K_MASTER = 5  # the node the CRM master runs on
K_N_EVENTS = 6
K_ERROR = 7  # an engine limit was hit (see ENGINE_ERRORS); the round's outputs are invalid
# the balancer's answer this round (``load_balance``; input): service (NONE: no motion), target
# node, and the imbalance before and after it expected, in hundredths (for the log line)
K_MOTION_SID = 8
K_MOTION_TARGET = 9
K_MOTION_BEFORE = 10
K_MOTION_AFTER = 11
N_CLU_FIELDS = 12
ERR_EVENTS_FULL = 1
ERR_FAILED_FULL = 2
ERR_FENCE_UNDEFINED = 3
ENGINE_ERRORS = (
    "",
    "event buffer full",
    "failed_nodes list full",
    "a service to fence on an undefined node",
)

# ================================================================ the LRM (engine/lrm.py)
# ``PVE::HA::LRM`` (LRM.pm, port: pvegym/sim/ha/lrm.py). Its state is in arrays of its own, each
# with the leading cluster axis: ``lnodes[c, n, L_*]`` (one LRM daemon per node), the worker table
# ``lwork[c, n, s, W_*]`` (upstream's ``$self->{workers}``: one entry per service at most, queued
# or forked; at most ``max_workers`` forked), the per-node, per-service results and restart
# counters ``lres[c, n, s, R_*]``, the per-service LRM config ``lcfg[c, s, C_*]`` and the
# cluster's LRM scalars ``lclu[c, LK_*]``.

# ---------------------------------------------------------------- LRM states (``status->{state}``)
LS_WAIT = 0  # wait_for_agent_lock
LS_ACTIVE = 1
LS_LOST = 2  # lost_agent_lock
LS_MAINTENANCE = 3
LS_STARTUP = 4  # a new daemon: 'startup', before its constructor's first status change
LRM_STATES = ("wait_for_agent_lock", "active", "lost_agent_lock", "maintenance", "startup")

# ---------------------------------------------------------------- the LRM's own modes
MODE_SHUTDOWN = 5  # stop all services (a node shutdown under 'failover' or 'conditional')
LRM_MODE_NAMES = (*LRM_MODES, "shutdown")

# ---------------------------------------------------------------- shutdown requests (input)
SD_NONE = 0
SD_RESTART = 1  # the LRM daemon restarts (``is_node_shutdown``: no shutdown, no reboot)
SD_REBOOT = 2  # the node reboots
SD_POWEROFF = 3  # the node shuts down
# datacenter.cfg ``ha: shutdown_policy`` (default conditional)
POLICY_CONDITIONAL = 0
POLICY_FREEZE = 1
POLICY_FAILOVER = 2
POLICY_MIGRATE = 3
SHUTDOWN_POLICIES = ("conditional", "freeze", "failover", "migrate")

# ---------------------------------------------------------------- LRM exit codes (Tools.pm)
ETRY_AGAIN = 2  # the LRM retries a failed start (restart policy); the CRM is not told
EUNKNOWN_SERVICE = 7

# ---------------------------------------------------------------- node fields (lnodes[c, n, L])
L_STATE = 0
L_MODE = 1  # MODE_ACTIVE / _MAINTENANCE / _DISARM / _RESTART / _SHUTDOWN (``$self->{mode}``)
L_STARTED = 2  # ``wrote_lrm_status_at_startup``
L_IDLE = 3  # ``active_idle_rounds``
L_WD = 4  # the agent watchdog is open
L_SEQ = 5  # last insertion number of the worker table (its dict order)
L_W_MODE = 6  # the mode of the LRM status last written (MODE_UNKNOWN: never written)
L_RUNS = 7  # the daemon runs this round (input; 0: the node is off)
L_QUORATE = 8  # the node is in the quorate partition (input)
L_LOCK = 9  # the daemon can take or renew its agent lock (input)
L_MAX_WORKERS = 10  # datacenter.cfg ``max_workers`` (>= 1; input)
L_SHUTDOWN_REQ = 11  # a shutdown request this round, SD_* (input)
L_SHUTDOWN = 12  # ``shutdown_request``: in shutdown
L_ERRORS = 13  # ``shutdown_errors``: failed stop jobs of the shutdown
L_SS_READ = 14  # the service status the daemon read last was not empty (it is the live one)
L_CLOCK = 15  # the daemon's clock (s): the iteration's start (input), then its sleeps
L_STATE_TIME = 16  # ``state_change_time`` (s)
L_EXITED = 17  # the daemon exited this round (output; it runs no more)
L_W_STATE = 18  # the state in the LRM status last written (-1: never written)
N_LRM_NODE_FIELDS = 19

# ---------------------------------------------------------------- worker fields (lwork[c, n, s, W])
W_NONE = 0
W_QUEUED = 1
W_FORKED = 2
W_STATE = 0  # W_NONE / W_QUEUED / W_FORKED
W_UID = 1  # the request's uid (NONE: a shutdown's stop job)
W_CMD = 2  # the service state it runs (SS_*)
W_TARGET = 3  # its parameters: target node, stop timeout (NONE: none)
W_TIMEOUT = 4
W_TRIES = 5  # ``start_tries``
W_SEQ = 6  # insertion number (dict order)
W_DONE = 7  # the job's exit code if it ends this round (input, consumed), else NO_RESULT
W_DONE_AT = 8  # the daemon's clock (s) from which a poll sees that end (input; 0: any poll)
W_FORKED_AT = 9  # the daemon's clock (s) when the job was forked (output)
N_WORKER_FIELDS = 10
POLLS = 9  # polls of one ``run_workers`` call: every second for 8 s (LRM.pm ``run_workers``)

# ---------------------------------------------------------------- result fields (lres[c, n, s, R])
R_UID = 0  # ``results->{uid}``: at most one per service (the others are pruned)
R_CODE = 1  # its exit code, NO_RESULT if none
R_CMD = 2  # the state it answered
R_W_UID = 3  # the result in the LRM status last written (what the CRM reads)
R_W_CODE = 4
R_TRIES = 5  # ``restart_tries``
N_RESULT_FIELDS = 6

# ---------------------------------------------------------------- per-service fields (lcfg[c, s, C])
C_MAX_RESTART = 0  # service config ``max_restart``
C_SEEN = 1  # in the service status at the last LRM round
C_SS_SEQ = 2  # its insertion number in the service status (the order the LRM walks it in)
N_LRM_SVC_FIELDS = 3

# ---------------------------------------------------------------- cluster fields (lclu[c, LK])
LK_SS_SEQ = 0
LK_N_EVENTS = 1
LK_ERROR = 2  # 1: the event buffer is full
LK_POLICY = 3  # the shutdown policy, POLICY_*
LK_CLOCK = 4  # the clock (s) of the daemon iterating now (its L_CLOCK), stamped on its events
N_LRM_CLU_FIELDS = 5

# ================================================================ rules, groups and CRS modes
# (:mod:`pvegym.sim.engine.rules`, :mod:`pvegym.sim.engine.crs`): arrays of their own, per cluster
# ``c`` (the leading axis), handed to the kernel as the tuple ``rx`` (:data:`RX_ARRAYS` order).

#: ``rprio[c, slot, s, n]``: the priority of node ``n`` in service ``s``'s node-affinity rule
#: (a non-strict rule's other nodes have −1), NA_OUT where the rule does not allow ``n``;
#: ``rpair[c, slot, s, s2]``: PAIR_* bits; ``rsvc[c, slot, s, RS_*]``. Slot RULES_ACTIVE is what
#: the kernel places by, RULES_PENDING what the host compiled for this round (taken over when
#: the port would recompile: see :func:`pvegym.sim.engine.rules.activate_rules`).
RULES_ACTIVE = 0
RULES_PENDING = 1
NA_OUT = -(2**62)
PAIR_POSITIVE = 1
PAIR_NEGATIVE = 2
RS_HAS_NA = 0  # the service is in an enabled node-affinity rule
RS_HAS_RA = 1  # the service has a resource-affinity partner
N_RS_FIELDS = 2

#: ``rk[c, RK_*]``: the rules' and CRS scalars of a cluster
RK_CONFIG_CHANGED = 0  # input: the rules, groups or service config changed since the last round
RK_COMPILED = 1  # the active slot holds compiled rules
RK_N_DROPS = 2  # input: drop messages of the pending compile (logged when it is taken over)
RK_ACTIVATED = 3  # output: this round took the pending compile over
RK_CRS_MODE = 4  # input: CRS_* (the datacenter's ``crs: ha=...``)
RK_MODE_LOGGED = 5  # the Manager's first-round "using scheduler mode" line is out
# counters of placements (cumulative; the differential check reports them)
RK_N_SCORED = 6  # decided by score among two or more nodes
RK_N_NOT_BASIC = 7  # … onto another node than the fewest-services one (basic mode's choice)
RK_N_STRICT = 8  # a strict rule kept an online node out
RK_N_FALLBACK = 9  # onto a node a non-strict rule does not name (priority −1)
RK_N_FAILBACK = 10  # moved because of failback (it could have stayed otherwise)
# the persistent HA groups migration (``try_persistent_group_migration``)
RK_HAS_GROUPS = 11  # the groups config has groups (input; cleared when they are migrated)
RK_GROUP_ROUND = 12  # rounds until the next try (``group_migration_round``; host sets 3)
RK_QUORATE = 13  # input: the master's partition is quorate
RK_GROUPS_MIGRATED = 14  # output: this round migrated the groups (the host's config changed)
N_RK_FIELDS = 15

#: CRS modes (``Manager.pm`` ``update_crs_scheduler_mode``)
CRS_BASIC = 0
CRS_STATIC = 1
CRS_DYNAMIC = 2
CRS_MODES = ("basic", "static", "dynamic")

#: ``rnode[c, n, RN_*]``: scratch of a placement
RN_TOGETHER = 0  # positive partners using the node
RN_SEPARATE = 1  # a negative partner uses the node
RN_ALLOWED = 2  # allowed by node affinity
RN_LRM_STATE = 3  # input: the LRM status's state (LRM_STATE_*)
RN_VERSION = 4  # input: index into NODE_VERSIONS, −1 if unknown
N_RN_FIELDS = 5

#: an LRM's state as its status reports it (``LRM.pm``); NONE: no state in the status
LRM_STATE_NONE = 0
LRM_STATE_WAIT = 1
LRM_STATE_ACTIVE = 2
LRM_STATE_LOST = 3
LRM_STATE_MAINTENANCE = 4
RN_LRM_STATES = ("", "wait_for_agent_lock", "active", "lost_agent_lock", "maintenance")
#: the compiled LRM's written state (``L_W_STATE``, LS_*) as an RN_LRM_STATE input
LS_TO_RN_LRM_STATE = (
    LRM_STATE_WAIT,
    LRM_STATE_ACTIVE,
    LRM_STATE_LOST,
    LRM_STATE_MAINTENANCE,
    LRM_STATE_NONE,
)

#: the pve-manager versions a node can report (``RN_VERSION`` indexes this) and the minimum the
#: groups migration needs (``Manager.pm`` ``$ha_rules_minversion``)
NODE_VERSIONS = ("9.0.0~16", "9.0.0", "9.0.0~15", "8.4.1", "9.1.2")
HA_RULES_MINVERSION = "9.0.0~16"

#: ``usvc[c, s, US_*]``: the usage bookkeeping the CRS modes need
US_RUNNING0 = 0  # the running flag when the round's usage was built
US_LAST_ADD = 1  # scratch: position of the service's last re-add this round (−1: none)
US_GROUPED = 2  # the service config names an HA group
US_FAILBACK_MIGRATED = 3  # its failback once the groups are migrated persistently
N_US_FIELDS = 4

#: ``fsvc[c, s, FS_*]`` (input, float64): a guest's usage, cores and bytes (static mode reads
#: maxcpu and maxmem, dynamic mode all four)
FS_CPU = 0
FS_MAXCPU = 1
FS_MEM = 2
FS_MAXMEM = 3
N_FS_FIELDS = 4
#: ``fnode[c, n, FN_*]`` (float64): a node's capacity (static) and measured usage (dynamic), as
#: inputs; the aggregated stats and score of a placement as scratch
FN_CPU = 0
FN_MAXCPU = 1
FN_MEM = 2
FN_MAXMEM = 3
FN_AGG_CPU = 4
FN_AGG_MEM = 5
FN_SCORE = 6
N_FN_FIELDS = 7

#: the order of the arrays in the kernel's ``rx`` tuple
RX_ARRAYS = ("rprio", "rpair", "rsvc", "rk", "rnode", "usvc", "fsvc", "fnode")
