"""The HA engine's events and their log lines.

The engine writes one row ``(kind, sid, a, b, c, d, e, f)`` of int64 per event (``-1`` for an unused
argument); :func:`format_events` turns rows into upstream's log lines ``(level, message)``, word
for word those of the port (:mod:`pvegym.sim.ha.manager`, :mod:`pvegym.sim.ha.node_status`), so
that a log is produced only where one is wanted and the differential check can compare logs.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pvegym.sim.engine import codes as k

EV_WIDTH = 8

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

#: every kind's name (the differential check counts them)
EVENT_NAMES = {v: n[2:].lower() for n, v in globals().items() if n.startswith("E_")}

_QKIND = {k.Q_MIGRATE: "migrate", k.Q_RELOCATE: "relocate", k.Q_STOP: "stop"}


def unpack_failed(n: int, packed: int) -> list[int]:
    """The node indices of a packed ``failed_nodes`` list (:data:`codes.F_FAILED`)."""
    return [((packed >> (4 * i)) & 15) - 1 for i in range(n)]


def format_events(
    rows: np.ndarray, sids: Sequence[str], nodes: Sequence[str]
) -> list[tuple[str, str]]:
    """``(level, message)`` of each event row, as the port logs it."""
    out: list[tuple[str, str]] = []

    def nd(i: int) -> str:
        return "" if i < 0 else nodes[i]

    ss = k.SERVICE_STATES
    for row in rows:
        kind, s, a, b, c, d, e, f = (int(x) for x in row)
        sid = sids[s] if s >= 0 else ""
        failed = ""
        if kind == E_RELOCATION_OK:
            failed = ", ".join(nodes[i] for i in unpack_failed(b, c))
        elif kind in (E_RECOVERY_POLICY_FAILED, E_TRIED_ALL):
            failed = ", ".join(nodes[i] for i in unpack_failed(a, b))
        if kind == E_NODE_STATE:
            msg = f"node '{nodes[a]}': state changed from '{k.NODE_STATES[b]}' => '{k.NODE_STATES[c]}'"
            out.append(("info", msg))
        elif kind == E_MASTER_OFFLINE:
            out.append(("info", "master seems offline"))
        elif kind == E_ADD_SERVICE:
            out.append(("info", f"adding new service '{sid}' on node '{nd(a)}'"))
        elif kind == E_REMOVE_STALE:
            reason = "ignored state requested" if a else "no config"
            out.append(("info", f"removing stale service '{sid}' ({reason})"))
        elif kind in (E_CMD_NODE_NOT_ONLINE, E_CMD_ALREADY_ON_TARGET, E_CMD_NO_SUCH_SERVICE):
            arg = str(b) if a == k.Q_STOP else nd(b)
            cmd = f"{_QKIND[a]} {sid} {arg}"
            if kind == E_CMD_NODE_NOT_ONLINE:
                out.append(("err", f"crm command error - node not online: {cmd}"))
            elif kind == E_CMD_ALREADY_ON_TARGET:
                out.append(("info", f"ignore crm command - service already on target node: {cmd}"))
            else:
                out.append(("err", f"crm command error - no such service: {cmd}"))
        elif kind == E_GOT_MOTION:
            out.append(("info", f"got crm command: {_QKIND[a]} {sid} {nd(b)}"))
        elif kind == E_GOT_STOP:
            out.append(("info", f"got crm command: stop {sid} {a}"))
        elif kind == E_MAINT_DISARMED:
            out.append(
                ("warn", f"ignoring maintenance command for node {nd(a)} - HA stack is disarmed")
            )
        elif kind == E_MAINT_ALREADY:
            out.append(
                ("info", f"ignoring crm command - node {nd(a)} is already in maintenance state")
            )
        elif kind == E_MAINT_NOT_ONLINE:
            out.append(
                ("err", f"crm command error - node not online: enable-node-maintenance {nd(a)}")
            )
        elif kind == E_CLEAR_MAINT_WARN:
            out.append(
                (
                    "warn",
                    f"clearing maintenance of node {nd(a)} requested, but it's in state"
                    f" {k.NODE_STATES[b]}",
                )
            )
        elif kind == E_DISARM_ALREADY:
            out.append(
                (
                    "notice",
                    f"ignoring disarm-ha command - already in disarm state ({k.DISARM_STATES[a]})",
                )
            )
        elif kind == E_GOT_DISARM:
            out.append(("info", f"got crm command: disarm-ha {k.DISARM_MODES[a]}"))
        elif kind == E_DISARM_SUSPEND:
            out.append(("info", f"disarm: suspending HA tracking for service '{sid}'"))
        elif kind == E_GOT_ARM:
            out.append(("info", "got crm command: arm-ha"))
        elif kind == E_ARM_UPDATE_NODE:
            out.append(
                (
                    "info",
                    f"service '{sid}': updating node '{nd(a)}' => '{nd(b)}' (changed while disarmed)",
                )
            )
        elif kind == E_ARM_NOT_DISARMED:
            out.append(("notice", "ignoring arm-ha command - HA stack is not disarmed"))
        elif kind == E_DEFER:
            level = "warn" if a in (k.SS_FENCE, k.SS_RECOVERY) else "info"
            out.append((level, f"deferring disarm - service '{sid}' is in '{ss[a]}' state"))
        elif kind == E_FREEZING:
            out.append(("info", f"disarm: freezing service '{sid}' (was '{ss[a]}')"))
        elif kind == E_ALL_DISARMED:
            out.append(("info", "all LRMs disarmed, HA stack is now fully disarmed"))
        elif kind == E_STATE_CHANGE:
            parts = []
            if c & 1:
                parts.append(f"node = {nd(d)}")
            if c & 2:
                parts.append(f"target = {nd(e)}")
            if c & 4:
                parts.append(f"timeout = {f}")
            text = f"  ({', '.join(parts)})" if parts else ""
            out.append(
                ("info", f"service '{sid}': state changed from '{ss[a]}' to '{ss[b]}'{text}")
            )
        elif kind == E_FENCE_NO_SERVICES:
            out.append(
                (
                    "notice",
                    f"node '{nd(a)}' in fence state but no services to-fence! admin interference?!",
                )
            )
        elif kind == E_FENCE_ACK:
            out.append(("info", f"fencing: acknowledged - got agent lock for node '{nd(a)}'"))
        elif kind == E_FIXUP:
            out.append(("info", f"fixup service '{sid}' location ({nd(a)} => {nd(b)})"))
        elif kind == E_IGNORE_NOT_ONLINE:
            cmd = k.SERVICE_COMMANDS[a]
            out.append(("err", f"ignore service '{sid}' {cmd} request - node '{nd(b)}' not online"))
        elif kind == E_IGNORE_ALREADY_ON:
            cmd = k.SERVICE_COMMANDS[a]
            out.append(
                (
                    "info",
                    f"ignore service '{sid}' {cmd} request - service already on node '{nd(b)}'",
                )
            )
        elif kind == E_IGNORE_STOP_STOPPED:
            out.append(("info", f"ignore service '{sid}' stop request - service already stopped"))
        elif kind == E_UNKNOWN_CFG_STATE:
            out.append(
                (
                    "err",
                    f"service '{sid}' - unknown state '{k.CONFIG_STATES[a]}' in service configuration",
                )
            )
        elif kind == E_MOVE_CMD:
            out.append(("info", f"{k.SERVICE_COMMANDS[a]} service '{sid}' to node '{nd(b)}'"))
        elif kind == E_HARD_STOP:
            out.append(("info", f"request immediate service hard-stop for service '{sid}'"))
        elif kind == E_GRACEFUL_STOP:
            out.append(("info", f"request graceful stop with timeout '{a}' for service '{sid}'"))
        elif kind == E_RELOCATION_OK:
            out.append(
                (
                    "info",
                    f"relocation policy successful for '{sid}' on node '{nd(a)}',"
                    f" failed nodes: {failed}",
                )
            )
        elif kind == E_START_FAILED:
            out.append(
                ("warning", f"starting service {sid} on node '{nd(a)}' failed, relocating service.")
            )
        elif kind == E_RECOVERY_POLICY_FAILED:
            out.append(
                (
                    "err",
                    f"recovery policy for service {sid} failed, entering error state."
                    f" Failed nodes: {failed}",
                )
            )
        elif kind == E_UNRECOVERABLE:
            out.append(("err", f"service '{sid}' got unrecoverable error (exit code {a})"))
        elif kind == E_BACK_FROM_MAINT:
            out.append(
                (
                    "info",
                    f"moving service '{sid}' back to '{nd(a)}', node came back from maintenance.",
                )
            )
        elif kind == E_DROP_MAINT:
            out.append(("info", f"dropping maintenance fallback node '{nd(a)}' for '{sid}'"))
        elif kind == E_MIGRATE_RUNNING:
            out.append(("info", f"migrate service '{sid}' to node '{nd(a)}' (running)"))
        elif kind == E_RELOCATE_TO:
            out.append(("info", f"relocate service '{sid}' to node '{nd(a)}'"))
        elif kind == E_TRIED_ALL:
            out.append(
                (
                    "warning",
                    f"Start Error Recovery: Tried all available nodes for service '{sid}', retry"
                    f" start on current node. Tried nodes: {failed}",
                )
            )
        elif kind == E_CLEAR_STALE_MAINT:
            out.append(
                (
                    "info",
                    f"service '{sid}': clearing stale maintenance node '{nd(a)}' setting"
                    " (is current node)",
                )
            )
        elif kind == E_STOP_FAILED:
            out.append(("err", f"service '{sid}' stop failed (exit code {a})"))
        elif kind == E_MIGRATION_WRONG_NODE:
            out.append(
                ("err", f"service '{sid}' - migration failed: service registered on wrong node!")
            )
        elif kind == E_REBALANCE_IGNORED:
            out.append(
                (
                    "info",
                    f"service '{sid}' - rebalance-on-start request ignored - service already running",
                )
            )
        elif kind == E_MIGRATION_FAILED:
            out.append(("err", f"service '{sid}' - migration failed (exit code {a})"))
        elif kind == E_REBALANCE_SELECTED:
            which = "new" if a else "current"
            out.append(
                ("info", f"service {sid}: re-balance selected {which} node {nd(b)} for startup")
            )
        elif kind == E_RECOVER:
            if a == b:
                msg = f"recover service '{sid}' to previous failed and fenced node '{nd(a)}' again"
            else:
                msg = f"recover service '{sid}' from fenced node '{nd(a)}' to node '{nd(b)}'"
            out.append(("info", msg))
        elif kind == E_RECOVER_FAILED:
            out.append(
                (
                    "err",
                    f"recovering service '{sid}' from fenced node '{nd(a)}' failed,"
                    " no recovery node found",
                )
            )
        elif kind == E_AUTO_REBALANCE:
            change = f"expected change for imbalance from {c / 100:.2f} to {d / 100:.2f}"
            out.append(("info", f"auto rebalance - {_QKIND[a]} {sid} to {nd(b)} ({change})"))
        else:
            raise ValueError(f"unknown engine event kind {kind}")
    return out
