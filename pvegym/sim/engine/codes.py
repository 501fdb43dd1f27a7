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
ENGINE_ERRORS = (
    "",
    "event buffer full",
    "failed_nodes list full",
    "a service to fence on an undefined node",
)
