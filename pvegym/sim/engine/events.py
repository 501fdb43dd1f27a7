"""The HA engine's events and their log lines.

The engine writes one row ``(kind, sid, a, b, c, d, e, f)`` of int64 per event (``-1`` for an unused
argument); :func:`format_events` turns rows into upstream's log lines ``(level, message)``, word
for word those of the port (:mod:`pvegym.sim.ha.manager`, :mod:`pvegym.sim.ha.node_status`), so
that a log is produced only where one is wanted and the differential check can compare logs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numba import njit

from pvegym.sim.engine import codes as k

EV_WIDTH = 8


@njit(cache=True)
def emit(evbuf, clu, kind, sid, a, b, c, d, e, f):
    """Append one event row ``(kind, sid, a … f)`` (−1: unused) to ``evbuf`` and count it in
    ``clu[K_N_EVENTS]``; a full buffer drops the row and sets ``clu[K_ERROR]``."""
    n = clu[k.K_N_EVENTS]
    if n >= evbuf.shape[0]:
        clu[k.K_ERROR] = k.ERR_EVENTS_FULL
        return
    row = evbuf[n]
    row[0] = kind
    row[1] = sid
    row[2] = a
    row[3] = b
    row[4] = c
    row[5] = d
    row[6] = e
    row[7] = f
    clu[k.K_N_EVENTS] = n + 1


# kinds (arguments in brackets)
E_NODE_STATE = 1  # [node, old node state, new node state]
E_MASTER_OFFLINE = 2
E_ADD_SERVICE = 3  # sid [node]
E_REMOVE_STALE = 4  # sid [ignored?]
E_CMD_NODE_NOT_ONLINE = 5  # sid [qkind, node]
E_CMD_ALREADY_ON_TARGET = 6  # sid [qkind, node]
E_CMD_NO_SUCH_SERVICE = 7  # sid [qkind, arg]
E_GOT_MOTION = 8  # sid [qkind, node]
E_GOT_STOP = 9  # sid [timeout]
E_MAINT_DISARMED = 10  # [node]
E_MAINT_ALREADY = 11  # [node]
E_MAINT_NOT_ONLINE = 12  # [node]
E_CLEAR_MAINT_WARN = 13  # [node, node state]
E_DISARM_ALREADY = 14  # [disarm state]
E_GOT_DISARM = 15  # [mode]
E_DISARM_SUSPEND = 16  # sid
E_GOT_ARM = 17
E_ARM_UPDATE_NODE = 18  # sid [old node, new node]
E_ARM_NOT_DISARMED = 19
E_DEFER = 20  # sid [state]
E_FREEZING = 21  # sid [old state]
E_ALL_DISARMED = 22
E_STATE_CHANGE = 23  # sid [old, new, params (1 node, 2 target, 4 timeout), node, target, timeout]
E_FENCE_NO_SERVICES = 24  # [node]
E_FENCE_ACK = 25  # [node]
E_FIXUP = 26  # sid [old node, new node]
E_IGNORE_NOT_ONLINE = 27  # sid [cmd, target]
E_IGNORE_ALREADY_ON = 28  # sid [cmd, target]
E_IGNORE_STOP_STOPPED = 29  # sid
E_UNKNOWN_CFG_STATE = 30  # sid [config state]
E_MOVE_CMD = 31  # sid [cmd, target]
E_HARD_STOP = 32  # sid
E_GRACEFUL_STOP = 33  # sid [timeout]
E_RELOCATION_OK = 34  # sid [node, n failed, packed failed]
E_START_FAILED = 35  # sid [node]
E_RECOVERY_POLICY_FAILED = 36  # sid [n failed, packed failed]
E_UNRECOVERABLE = 37  # sid [exit code]
E_BACK_FROM_MAINT = 38  # sid [node]
E_DROP_MAINT = 39  # sid [node]
E_MIGRATE_RUNNING = 40  # sid [node]
E_RELOCATE_TO = 41  # sid [node]
E_TRIED_ALL = 42  # sid [n failed, packed failed]
E_CLEAR_STALE_MAINT = 43  # sid [node]
E_STOP_FAILED = 44  # sid [exit code]
E_MIGRATION_WRONG_NODE = 45  # sid
E_REBALANCE_IGNORED = 46  # sid
E_MIGRATION_FAILED = 47  # sid [exit code]
E_REBALANCE_SELECTED = 48  # sid [new?, node]
E_RECOVER = 49  # sid [fenced node, recovery node]
E_RECOVER_FAILED = 50  # sid [fenced node]
E_AUTO_REBALANCE = 51  # sid [qkind, node, imbalance before, after (hundredths)]
# rules, groups and CRS modes (pvegym.sim.engine.rules; a range of their own)
E_DROP_RULE = 101  # [index of the line in the compile's drop messages]
E_NEGATIVE_REFUSED = 102  # sid [qkind, node, the negative partner]
E_POSITIVE_PARTNER = 103  # sid [qkind, node, the positive partner moved with it]
E_CRS_MODE = 104  # [CRS mode]
E_USAGE_SAME_NODE = 105  # sid
E_GROUP_MIGRATION = 106  # [step GM_*, node, c] (the persistent HA groups migration)

#: every kind's name (the differential check counts them)
EVENT_NAMES = {v: n[2:].lower() for n, v in globals().items() if n.startswith("E_")}

_QKIND = {k.Q_MIGRATE: "migrate", k.Q_RELOCATE: "relocate", k.Q_STOP: "stop"}


def unpack_failed(n: int, packed: int) -> list[int]:
    """The node indices of a packed ``failed_nodes`` list (:data:`codes.F_FAILED`)."""
    return [((packed >> (4 * i)) & 15) - 1 for i in range(n)]


#: kind → (level, message template) of the events logged as one fixed sentence; the fields
#: (:func:`format_events`): ``sid``, ``a``, ``na``/``nb`` (node a/b's name), ``qa`` (queued
#: command a), ``ca`` (service command a), ``ssa`` (service state a), ``nsb``/``nsc`` (node
#: state b/c), ``dsa``/``dma`` (disarm state/mode a), ``cfa`` (config state a), ``failed``, ``cmd``
_MESSAGES: dict[int, tuple[str, str]] = {
    E_NODE_STATE: ("info", "node '{na}': state changed from '{nsb}' => '{nsc}'"),
    E_MASTER_OFFLINE: ("info", "master seems offline"),
    E_ADD_SERVICE: ("info", "adding new service '{sid}' on node '{na}'"),
    E_CMD_NODE_NOT_ONLINE: ("err", "crm command error - node not online: {cmd}"),
    E_CMD_ALREADY_ON_TARGET: ("info", "ignore crm command - service already on target node: {cmd}"),
    E_CMD_NO_SUCH_SERVICE: ("err", "crm command error - no such service: {cmd}"),
    E_GOT_MOTION: ("info", "got crm command: {qa} {sid} {nb}"),
    E_GOT_STOP: ("info", "got crm command: stop {sid} {a}"),
    E_MAINT_DISARMED: ("warn", "ignoring maintenance command for node {na} - HA stack is disarmed"),
    E_MAINT_ALREADY: ("info", "ignoring crm command - node {na} is already in maintenance state"),
    E_MAINT_NOT_ONLINE: (
        "err",
        "crm command error - node not online: enable-node-maintenance {na}",
    ),
    E_CLEAR_MAINT_WARN: (
        "warn",
        "clearing maintenance of node {na} requested, but it's in state {nsb}",
    ),
    E_DISARM_ALREADY: ("notice", "ignoring disarm-ha command - already in disarm state ({dsa})"),
    E_GOT_DISARM: ("info", "got crm command: disarm-ha {dma}"),
    E_DISARM_SUSPEND: ("info", "disarm: suspending HA tracking for service '{sid}'"),
    E_GOT_ARM: ("info", "got crm command: arm-ha"),
    E_ARM_UPDATE_NODE: (
        "info",
        "service '{sid}': updating node '{na}' => '{nb}' (changed while disarmed)",
    ),
    E_ARM_NOT_DISARMED: ("notice", "ignoring arm-ha command - HA stack is not disarmed"),
    E_FREEZING: ("info", "disarm: freezing service '{sid}' (was '{ssa}')"),
    E_ALL_DISARMED: ("info", "all LRMs disarmed, HA stack is now fully disarmed"),
    E_FENCE_NO_SERVICES: (
        "notice",
        "node '{na}' in fence state but no services to-fence! admin interference?!",
    ),
    E_FENCE_ACK: ("info", "fencing: acknowledged - got agent lock for node '{na}'"),
    E_FIXUP: ("info", "fixup service '{sid}' location ({na} => {nb})"),
    E_IGNORE_NOT_ONLINE: ("err", "ignore service '{sid}' {ca} request - node '{nb}' not online"),
    E_IGNORE_ALREADY_ON: (
        "info",
        "ignore service '{sid}' {ca} request - service already on node '{nb}'",
    ),
    E_IGNORE_STOP_STOPPED: (
        "info",
        "ignore service '{sid}' stop request - service already stopped",
    ),
    E_UNKNOWN_CFG_STATE: (
        "err",
        "service '{sid}' - unknown state '{cfa}' in service configuration",
    ),
    E_MOVE_CMD: ("info", "{ca} service '{sid}' to node '{nb}'"),
    E_HARD_STOP: ("info", "request immediate service hard-stop for service '{sid}'"),
    E_GRACEFUL_STOP: ("info", "request graceful stop with timeout '{a}' for service '{sid}'"),
    E_RELOCATION_OK: (
        "info",
        "relocation policy successful for '{sid}' on node '{na}', failed nodes: {failed}",
    ),
    E_START_FAILED: (
        "warning",
        "starting service {sid} on node '{na}' failed, relocating service.",
    ),
    E_RECOVERY_POLICY_FAILED: (
        "err",
        "recovery policy for service {sid} failed, entering error state. Failed nodes: {failed}",
    ),
    E_UNRECOVERABLE: ("err", "service '{sid}' got unrecoverable error (exit code {a})"),
    E_BACK_FROM_MAINT: (
        "info",
        "moving service '{sid}' back to '{na}', node came back from maintenance.",
    ),
    E_DROP_MAINT: ("info", "dropping maintenance fallback node '{na}' for '{sid}'"),
    E_MIGRATE_RUNNING: ("info", "migrate service '{sid}' to node '{na}' (running)"),
    E_RELOCATE_TO: ("info", "relocate service '{sid}' to node '{na}'"),
    E_TRIED_ALL: (
        "warning",
        "Start Error Recovery: Tried all available nodes for service '{sid}', retry start on"
        " current node. Tried nodes: {failed}",
    ),
    E_CLEAR_STALE_MAINT: (
        "info",
        "service '{sid}': clearing stale maintenance node '{na}' setting (is current node)",
    ),
    E_STOP_FAILED: ("err", "service '{sid}' stop failed (exit code {a})"),
    E_MIGRATION_WRONG_NODE: (
        "err",
        "service '{sid}' - migration failed: service registered on wrong node!",
    ),
    E_REBALANCE_IGNORED: (
        "info",
        "service '{sid}' - rebalance-on-start request ignored - service already running",
    ),
    E_MIGRATION_FAILED: ("err", "service '{sid}' - migration failed (exit code {a})"),
    E_RECOVER_FAILED: (
        "err",
        "recovering service '{sid}' from fenced node '{na}' failed, no recovery node found",
    ),
    E_NEGATIVE_REFUSED: (
        "err",
        "crm command '{cmd}' error - service '{sc}' on node '{nb}' in negative affinity with"
        " service '{sid}'",
    ),
    E_POSITIVE_PARTNER: (
        "info",
        "crm command '{cmd}' - {qa} service '{sc}' to node '{nb}' (service '{sc}' in positive"
        " affinity with service '{sid}')",
    ),
    E_CRS_MODE: ("info", "using scheduler mode '{crsa}'"),
    E_USAGE_SAME_NODE: (
        "warning",
        "unable to add service '{sid}' - resource '{sid}' has the same current and target node",
    ),
}


class _Fields(dict[str, str]):
    """A row's template fields, each derived only when a template names it (a code that does
    not index a table for one event kind must not be looked up for it)."""

    def __init__(self, derive: dict[str, Callable[[], object]]) -> None:
        super().__init__()
        self._derive = derive

    def __missing__(self, key: str) -> str:
        return str(self._derive[key]())


def _special(
    kind: int, sid: str, a: int, b: int, row: Sequence[int], nd: Callable[[int], str]
) -> tuple[str, str]:
    """The events whose wording or level depends on their data."""
    ss = k.SERVICE_STATES
    c, d, e, f = row
    if kind == E_REMOVE_STALE:
        reason = "ignored state requested" if a else "no config"
        return "info", f"removing stale service '{sid}' ({reason})"
    if kind == E_DEFER:
        level = "warn" if a in (k.SS_FENCE, k.SS_RECOVERY) else "info"
        return level, f"deferring disarm - service '{sid}' is in '{ss[a]}' state"
    if kind == E_STATE_CHANGE:
        parts = [
            text
            for bit, text in (
                (1, f"node = {nd(d)}"),
                (2, f"target = {nd(e)}"),
                (4, f"timeout = {f}"),
            )
            if c & bit
        ]
        extra = f"  ({', '.join(parts)})" if parts else ""
        return "info", f"service '{sid}': state changed from '{ss[a]}' to '{ss[b]}'{extra}"
    if kind == E_REBALANCE_SELECTED:
        which = "new" if a else "current"
        return "info", f"service {sid}: re-balance selected {which} node {nd(b)} for startup"
    if kind == E_RECOVER:
        if a == b:
            return (
                "info",
                f"recover service '{sid}' to previous failed and fenced node '{nd(a)}' again",
            )
        return "info", f"recover service '{sid}' from fenced node '{nd(a)}' to node '{nd(b)}'"
    if kind == E_AUTO_REBALANCE:
        change = f"expected change for imbalance from {c / 100:.2f} to {d / 100:.2f}"
        return "info", f"auto rebalance - {_QKIND[a]} {sid} to {nd(b)} ({change})"
    if kind == E_GROUP_MIGRATION:
        return _group_migration_line(a, nd(b), row[0])
    raise ValueError(f"unknown engine event kind {kind}")


# steps of E_GROUP_MIGRATION (pvegym.sim.engine.rules.try_group_migration)
GM_START = 0
GM_NODE_STATE = 1  # [node, node state]
GM_LRM = 2  # [node, LRM state * 8 + mode]
GM_VERSION = 3  # [node, version index]
GM_SUCCESS = 4
GM_RULES_OK = 5
GM_RESOURCES_OK = 6
GM_DELETED = 7
GM_FAILED = 8
GM_RETRY = 9
GM_ABORT = 10  # GM_ABORT + reason: [node]
GM_NOT_QUORATE = 0
GM_NO_NODES = 1
GM_NOT_ONLINE = 2
GM_NO_LRM_STATE = 3
GM_NOT_ACTIVE_IDLE = 4
GM_NOT_MODE_ACTIVE = 5
GM_NO_VERSION = 6
GM_OLD_VERSION = 7
_GM_ABORTS = (
    "cluster is not quorate",
    "node list is empty",
    "node '{n}' is not online",
    "could not retrieve state for lrm '{n}'",
    "lrm '{n}' is not in state 'active' or 'idle'",
    "lrm '{n}' is not in mode 'active'",
    "could not retrieve version from node '{n}'",
    "node '{n}' needs at least pve-manager version '" + k.HA_RULES_MINVERSION + "'",
)


def _group_migration_line(step: int, node: str, c: int) -> tuple[str, str]:
    if step == GM_START:
        return "notice", "start ha group migration..."
    if step == GM_NODE_STATE:
        return "notice", f"ha groups migration: node '{node}' is in state '{k.NODE_STATES[c]}'"
    if step == GM_LRM:
        state, mode = k.RN_LRM_STATES[c // 8], k.LRM_MODE_NAMES[c % 8]
        return (
            "notice",
            f"ha groups migration: lrm '{node}' is in state '{state}' and mode '{mode}'",
        )
    if step == GM_VERSION:
        return "notice", f"ha groups migration: node '{node}' has version '{k.NODE_VERSIONS[c]}'"
    fixed = {
        GM_SUCCESS: ("notice", "ha groups migration successful"),
        GM_RULES_OK: ("notice", "ha groups migration: migration to rules config successful"),
        GM_RESOURCES_OK: (
            "notice",
            "ha groups migration: migration to resources config successful",
        ),
        GM_DELETED: ("notice", "ha groups migration: group config deletion successful"),
        GM_FAILED: ("err", "ha groups migration failed"),
        GM_RETRY: ("notice", "retry ha groups migration in 6 rounds (~ 60 seconds)"),
    }
    if step in fixed:
        return fixed[step]
    return "err", f"abort ha groups migration: {_GM_ABORTS[step - GM_ABORT].format(n=node)}"


def _row_fields(
    kind: int, sid: str, a: int, b: int, c: int, nodes: Sequence[str], sids: Sequence[str] = ()
) -> _Fields:
    """The template fields of one event row (:data:`_MESSAGES`)."""

    def nd(i: int) -> str:
        return "" if i < 0 else nodes[i]

    def failed(n: int, packed: int) -> str:
        return ", ".join(nodes[i] for i in unpack_failed(n, packed))

    return _Fields(
        {
            "sid": lambda: sid,
            "a": lambda: a,
            "na": lambda: nd(a),
            "nb": lambda: nd(b),
            "qa": lambda: _QKIND[a],
            "ca": lambda: k.SERVICE_COMMANDS[a],
            "ssa": lambda: k.SERVICE_STATES[a],
            "nsb": lambda: k.NODE_STATES[b],
            "nsc": lambda: k.NODE_STATES[c],
            "dsa": lambda: k.DISARM_STATES[a],
            "dma": lambda: k.DISARM_MODES[a],
            "cfa": lambda: k.CONFIG_STATES[a],
            "failed": lambda: failed(b, c) if kind == E_RELOCATION_OK else failed(a, b),
            "cmd": lambda: f"{_QKIND[a]} {sid} {b if a == k.Q_STOP else nd(b)}",
            "sc": lambda: sids[c],
            "crsa": lambda: k.CRS_MODES[a],
        }
    )


def format_events(
    rows: np.ndarray,
    sids: Sequence[str],
    nodes: Sequence[str],
    rule_messages: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """``(level, message)`` of each event row, as the port logs it (``rule_messages``: the drop
    lines of the rules compile the round took over, :class:`~pvegym.sim.engine.rules.RulesHost`)."""
    out: list[tuple[str, str]] = []

    def nd(i: int) -> str:
        return "" if i < 0 else nodes[i]

    for row in rows:
        kind, s, a, b, c, d, e, f = (int(x) for x in row)
        sid = sids[s] if s >= 0 else ""
        if kind == E_DROP_RULE:
            out.append(("info", rule_messages[a]))
            continue
        if kind not in _MESSAGES:
            out.append(_special(kind, sid, a, b, (c, d, e, f), nd))
            continue
        level, template = _MESSAGES[kind]
        fields = _row_fields(kind, sid, a, b, c, nodes, sids)
        out.append((level, template.format_map(fields)))
    return out
