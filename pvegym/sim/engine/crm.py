"""The CRM master's round over arrays: ``PVE::HA::Manager::manage`` and ``PVE::HA::NodeStatus``
(pve-ha-manager 5.2.0) compiled with numba.

Each function mirrors the port's function of the same name (:mod:`pvegym.sim.ha.manager`,
:mod:`pvegym.sim.ha.node_status`) step by step, in the same order, so that every state change and
every event comes out as the port's; the port stays the specification and is never called here.
Arrays and codes: :mod:`pvegym.sim.engine.codes`; events: :mod:`pvegym.sim.engine.events`.
Deterministic: integer state, no fastmath, sequential loops in the port's (sorted) order.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from pvegym.sim.engine import crs as ecrs
from pvegym.sim.engine import events as ev
from pvegym.sim.engine import rules as erules
from pvegym.sim.engine.codes import (
    CFG_DISABLED,
    CFG_IGNORED,
    CFG_STARTED,
    CFG_STOPPED,
    CMD_MIGRATE,
    CMD_NONE,
    CMD_RELOCATE,
    CMD_STOP,
    DISARM_FREEZE,
    DISARM_IGNORE,
    DISARM_NONE,
    DISARMED,
    DISARMING,
    ERR_FAILED_FULL,
    ERR_FENCE_UNDEFINED,
    ERROR,
    EWRONG_NODE,
    F_CFG_NODE,
    F_CFG_STATE,
    F_CMD,
    F_CMD_ARG,
    F_FAILED,
    F_MAINT_NODE,
    F_MAX_RELOCATE,
    F_N_FAILED,
    F_NODE,
    F_RES_CODE,
    F_RES_NODE,
    F_RES_UID,
    F_RUNNING,
    F_STATE,
    F_TARGET,
    F_TIMEOUT,
    F_TYPE,
    F_UID,
    F_USE_CUR,
    F_USE_TGT,
    FAILED_MAX,
    IGNORED,
    K_ALL_DISARMED,
    K_DISARM_MODE,
    K_DISARM_STATE,
    K_ERROR,
    K_MASTER,
    K_MOTION_AFTER,
    K_MOTION_BEFORE,
    K_MOTION_SID,
    K_MOTION_TARGET,
    K_N_EVENTS,
    K_REBALANCE_ON_START,
    K_UID,
    MODE_ACTIVE,
    MODE_DISARM,
    MODE_MAINTENANCE,
    MODE_RESTART,
    MODE_UNKNOWN,
    N_COUNT,
    N_FENCED_OK,
    N_FENCED_SEEN,
    N_LOCK,
    N_MAINT_REQ,
    N_MODE,
    N_ONLINE,
    N_READ_MODE,
    N_STATE,
    N_USAGE,
    NO_RESULT,
    NONE,
    NONE_SET,
    NS_ABSENT,
    NS_FENCE,
    NS_GONE,
    NS_MAINTENANCE,
    NS_ONLINE,
    NS_UNKNOWN,
    Q_ARM,
    Q_DISABLE_MAINTENANCE,
    Q_DISARM,
    Q_ENABLE_MAINTENANCE,
    Q_MIGRATE,
    Q_RELOCATE,
    Q_STOP,
    SS_ABSENT,
    SS_ERROR,
    SS_FENCE,
    SS_FREEZE,
    SS_MIGRATE,
    SS_RECOVERY,
    SS_RELOCATE,
    SS_REQUEST_START,
    SS_REQUEST_START_BALANCE,
    SS_REQUEST_STOP,
    SS_STARTED,
    SS_STOPPED,
    SUCCESS,
    TYPE_VM,
)

#: seconds a node must be offline before its services are fenced (NodeStatus.pm ``$fence_delay``)
FENCE_DELAY = 60.0

#: node preferences of ``select_service_node`` (:mod:`pvegym.sim.engine.rules`)
PREF_NONE = erules.PREF_NONE
PREF_BEST_SCORE = erules.PREF_BEST_SCORE
PREF_TRY_NEXT = erules.PREF_TRY_NEXT


# ---------------------------------------------------------------------------- events


_emit = ev.emit


@njit(cache=True)
def _ev(evbuf: np.ndarray, clu: np.ndarray, kind: int, sid: int, a: int, b: int) -> None:
    _emit(evbuf, clu, kind, sid, a, b, -1, -1, -1, -1)


# ---------------------------------------------------------------------------- node status


@njit(cache=True)
def _node_state(nodes: np.ndarray, n: int) -> int:
    """``get_node_state``: absent and undefined nodes read as 'unknown'."""
    if n < 0:
        return NS_UNKNOWN
    s = nodes[n, N_STATE]
    return NS_UNKNOWN if s == NS_ABSENT else s


@njit(cache=True)
def _node_is_online(nodes: np.ndarray, n: int) -> bool:
    return _node_state(nodes, n) == NS_ONLINE


@njit(cache=True)
def _offline_delayed(nodes: np.ndarray, last_online: np.ndarray, n: int, now: float) -> bool:
    """``node_is_offline_delayed`` (fence delay); ``last_online[-1]`` is the undefined node's."""
    if _node_state(nodes, n) == NS_ONLINE:
        return False
    i = n if n >= 0 else last_online.shape[0] - 1
    if math.isnan(last_online[i]):
        last_online[i] = now
        return False
    return (now - last_online[i]) >= FENCE_DELAY


@njit(cache=True)
def _set_node_state(
    nodes: np.ndarray, clu: np.ndarray, evbuf: np.ndarray, n: int, state: int
) -> None:
    last = _node_state(nodes, n)
    if state == last:
        return
    nodes[n, N_STATE] = state
    _emit(evbuf, clu, ev.E_NODE_STATE, -1, n, last, state, -1, -1, -1)


@njit(cache=True)
def _ns_update(
    nodes: np.ndarray, last_online: np.ndarray, clu: np.ndarray, evbuf: np.ndarray, now: float
) -> None:
    """``NodeStatus::update`` (every node is a cluster member: no 'gone' nodes)."""
    nn = nodes.shape[0]
    for n in range(nn):
        if not nodes[n, N_ONLINE]:
            continue
        mode = nodes[n, N_READ_MODE]
        last_online[n] = now
        state = _node_state(nodes, n)
        if state == NS_ONLINE:
            if mode == MODE_MAINTENANCE:
                _set_node_state(nodes, clu, evbuf, n, NS_MAINTENANCE)
        elif state in (NS_UNKNOWN, NS_GONE) or (
            state == NS_MAINTENANCE and mode != MODE_MAINTENANCE
        ):
            _set_node_state(nodes, clu, evbuf, n, NS_ONLINE)
    for n in range(nn):
        if nodes[n, N_STATE] == NS_ABSENT or nodes[n, N_ONLINE]:
            continue
        state = _node_state(nodes, n)
        if state == NS_ONLINE or (
            state == NS_MAINTENANCE and nodes[n, N_READ_MODE] != MODE_MAINTENANCE
        ):
            _set_node_state(nodes, clu, evbuf, n, NS_UNKNOWN)


@njit(cache=True)
def _fence_node(nodes: np.ndarray, clu: np.ndarray, evbuf: np.ndarray, n: int) -> bool:
    """``NodeStatus::fence_node``: acknowledged once the node's agent lock is ours."""
    if _node_state(nodes, n) != NS_FENCE:
        _set_node_state(nodes, clu, evbuf, n, NS_FENCE)
    if nodes[n, N_LOCK]:
        _ev(evbuf, clu, ev.E_FENCE_ACK, -1, n, -1)
        _set_node_state(nodes, clu, evbuf, n, NS_UNKNOWN)
        return True
    return False


# ---------------------------------------------------------------------------- usage (basic)


@njit(cache=True)
def _usage_nodes(svc: np.ndarray, nodes: np.ndarray, s: int) -> tuple[int, int]:
    """``get_used_service_nodes``: (current, target) nodes ``s`` puts load on, if in the usage."""
    state, node, target = svc[s, F_STATE], svc[s, F_NODE], svc[s, F_TARGET]
    cur = NONE
    tgt = NONE
    if state in (SS_STOPPED, SS_REQUEST_START):
        return cur, tgt
    if state != SS_REQUEST_START_BALANCE and node >= 0 and nodes[node, N_USAGE]:
        cur = node
    if (
        (state in (SS_MIGRATE, SS_RELOCATE, SS_REQUEST_START_BALANCE))
        and target >= 0
        and nodes[target, N_USAGE]
    ):
        tgt = target
    return cur, tgt


@njit(cache=True)
def _remove_usage(svc: np.ndarray, nodes: np.ndarray, s: int) -> None:
    cur, tgt = svc[s, F_USE_CUR], svc[s, F_USE_TGT]
    if cur >= 0:
        nodes[cur, N_COUNT] -= 1
    if tgt >= 0 and tgt != cur:
        nodes[tgt, N_COUNT] -= 1
    svc[s, F_USE_CUR] = NONE
    svc[s, F_USE_TGT] = NONE


@njit(cache=True)
def _add_usage(svc: np.ndarray, nodes: np.ndarray, s: int) -> None:
    """``add_service_usage`` (basic mode: a node counts each service once)."""
    cur, tgt = _usage_nodes(svc, nodes, s)
    if cur >= 0:
        nodes[cur, N_COUNT] += 1
    if tgt >= 0 and tgt != cur:
        nodes[tgt, N_COUNT] += 1
    svc[s, F_USE_CUR] = cur
    svc[s, F_USE_TGT] = tgt


@njit(cache=True)
def _recompute_usage(svc: np.ndarray, nodes: np.ndarray) -> None:
    """``recompute_online_node_usage`` in basic mode over the online nodes."""
    for n in range(nodes.shape[0]):
        nodes[n, N_USAGE] = 1 if nodes[n, N_STATE] == NS_ONLINE else 0
        nodes[n, N_COUNT] = 0
    for s in range(svc.shape[0]):
        svc[s, F_USE_CUR] = NONE
        svc[s, F_USE_TGT] = NONE
        if svc[s, F_STATE] != SS_ABSENT:
            _add_usage(svc, nodes, s)


# ---------------------------------------------------------------------------- state changes

P_NODE = 1
P_TARGET = 2
P_TIMEOUT = 4


@njit(cache=True)
def _change(
    svc: np.ndarray,
    nodes: np.ndarray,
    clu: np.ndarray,
    evbuf: np.ndarray,
    s: int,
    new_state: int,
    params: int,
    node: int,
    target: int,
    timeout: int,
) -> None:
    """``change_service_state``: the state and the given params (``P_*``), the rest cleared but
    node, failed_nodes and maintenance_node; the usage updated; a new uid; the event."""
    old = svc[s, F_STATE]
    svc[s, F_STATE] = new_state
    svc[s, F_TARGET] = NONE
    svc[s, F_CMD] = CMD_NONE
    svc[s, F_CMD_ARG] = NONE
    svc[s, F_RUNNING] = 0
    svc[s, F_TIMEOUT] = NONE
    if params & P_NODE:
        svc[s, F_NODE] = node
    if params & P_TARGET:
        svc[s, F_TARGET] = target
    if params & P_TIMEOUT:
        svc[s, F_TIMEOUT] = timeout
    _remove_usage(svc, nodes, s)
    _add_usage(svc, nodes, s)
    clu[K_UID] += 1
    svc[s, F_UID] = clu[K_UID]
    _emit(evbuf, clu, ev.E_STATE_CHANGE, s, old, new_state, params, node, target, timeout)


@njit(cache=True)
def _change0(
    svc: np.ndarray, nodes: np.ndarray, clu: np.ndarray, evbuf: np.ndarray, s: int, new_state: int
) -> None:
    _change(svc, nodes, clu, evbuf, s, new_state, 0, NONE, NONE, NONE)


@njit(cache=True)
def _change_node(
    svc: np.ndarray,
    nodes: np.ndarray,
    clu: np.ndarray,
    evbuf: np.ndarray,
    s: int,
    new_state: int,
    node: int,
) -> None:
    _change(svc, nodes, clu, evbuf, s, new_state, P_NODE, node, NONE, NONE)


@njit(cache=True)
def _lrm_result(svc: np.ndarray, nodes: np.ndarray, s: int) -> int:
    """The exit code of the LRM's result for the service's current uid, NO_RESULT if none (a
    result is read only from the LRMs of the nodes in the node status)."""
    code = svc[s, F_RES_CODE]
    if code == NO_RESULT or svc[s, F_RES_UID] != svc[s, F_UID]:
        return NO_RESULT
    rn = svc[s, F_RES_NODE]
    if rn < 0 or nodes[rn, N_READ_MODE] == MODE_UNKNOWN:
        return NO_RESULT
    return code


@njit(cache=True)
def _record_failed(svc: np.ndarray, clu: np.ndarray, s: int, node: int) -> None:
    nf = svc[s, F_N_FAILED]
    if nf >= FAILED_MAX or node < 0:
        clu[K_ERROR] = ERR_FAILED_FULL
        return
    svc[s, F_FAILED] |= (node + 1) << (4 * nf)
    svc[s, F_N_FAILED] = nf + 1


@njit(cache=True)
def _clear_failed(svc: np.ndarray, s: int) -> None:
    svc[s, F_N_FAILED] = 0
    svc[s, F_FAILED] = 0


@njit(cache=True)
def _req_state(svc: np.ndarray, s: int) -> int:
    return SS_STARTED if svc[s, F_CFG_STATE] == CFG_STARTED else SS_REQUEST_STOP


# ---------------------------------------------------------------------------- next states


@njit(cache=True)
def _next_request_stop(svc, nodes, last_online, clu, evbuf, s, res, now):
    if res != NO_RESULT:
        if res == SUCCESS:
            _change0(svc, nodes, clu, evbuf, s, SS_STOPPED)
            return
        _ev(evbuf, clu, ev.E_STOP_FAILED, s, res, -1)
        _change0(svc, nodes, clu, evbuf, s, SS_ERROR)
        return
    if _offline_delayed(nodes, last_online, svc[s, F_NODE], now):
        _change0(svc, nodes, clu, evbuf, s, SS_FENCE)


@njit(cache=True)
def _next_migrate_relocate(svc, nodes, last_online, clu, evbuf, s, res, now):
    if res != NO_RESULT:
        req = _req_state(svc, s)
        if res == SUCCESS:
            target = svc[s, F_TARGET]
            _change_node(svc, nodes, clu, evbuf, s, req, target if target >= 0 else NONE)
            return
        if res == EWRONG_NODE:
            _ev(evbuf, clu, ev.E_MIGRATION_WRONG_NODE, s, -1, -1)
            _change0(svc, nodes, clu, evbuf, s, SS_ERROR)
        elif res == IGNORED:
            _ev(evbuf, clu, ev.E_REBALANCE_IGNORED, s, -1, -1)
            _change_node(svc, nodes, clu, evbuf, s, req, svc[s, F_NODE])
        else:
            _ev(evbuf, clu, ev.E_MIGRATION_FAILED, s, res, -1)
            _change_node(svc, nodes, clu, evbuf, s, req, svc[s, F_NODE])
            return
    if _offline_delayed(nodes, last_online, svc[s, F_NODE], now):
        _change0(svc, nodes, clu, evbuf, s, SS_FENCE)


@njit(cache=True)
def _next_stopped(svc, nodes, last_online, clu, evbuf, s, now):
    if svc[s, F_NODE] != svc[s, F_CFG_NODE]:
        _ev(evbuf, clu, ev.E_FIXUP, s, svc[s, F_NODE], svc[s, F_CFG_NODE])
        svc[s, F_NODE] = svc[s, F_CFG_NODE]
    cmd = svc[s, F_CMD]
    if cmd != CMD_NONE:
        if cmd in (CMD_MIGRATE, CMD_RELOCATE):
            target = svc[s, F_CMD_ARG]
            if not _node_is_online(nodes, target):
                _ev(evbuf, clu, ev.E_IGNORE_NOT_ONLINE, s, cmd, target)
            elif svc[s, F_NODE] == target:
                _ev(evbuf, clu, ev.E_IGNORE_ALREADY_ON, s, cmd, target)
            else:
                st = SS_MIGRATE if cmd == CMD_MIGRATE else SS_RELOCATE
                _change(
                    svc, nodes, clu, evbuf, s, st, P_NODE | P_TARGET, svc[s, F_NODE], target, NONE
                )
                return
        else:
            _ev(evbuf, clu, ev.E_IGNORE_STOP_STOPPED, s, -1, -1)
        svc[s, F_CMD] = CMD_NONE
        svc[s, F_CMD_ARG] = NONE
    state = svc[s, F_CFG_STATE]
    if state == CFG_DISABLED:
        return
    node = svc[s, F_NODE]
    if (
        _offline_delayed(nodes, last_online, node, now)
        and _node_state(nodes, node) != NS_MAINTENANCE
    ):
        _change0(svc, nodes, clu, evbuf, s, SS_FENCE)
        return
    if state == CFG_STOPPED:
        return
    if state == CFG_STARTED:
        _change_node(svc, nodes, clu, evbuf, s, SS_REQUEST_START, node)
        return
    _ev(evbuf, clu, ev.E_UNKNOWN_CFG_STATE, s, state, -1)


@njit(cache=True)
def _next_request_start(svc, nodes, clu, evbuf, s, rx):
    current = svc[s, F_NODE]
    if clu[K_REBALANCE_ON_START]:
        selected = erules.select_service_node(svc, nodes, clu, evbuf, rx, s, PREF_BEST_SCORE)
        _ev(evbuf, clu, ev.E_REBALANCE_SELECTED, s, 1 if selected != current else 0, selected)
        if selected != current:
            sel = selected if selected >= 0 else NONE_SET
            _change(
                svc,
                nodes,
                clu,
                evbuf,
                s,
                SS_REQUEST_START_BALANCE,
                P_NODE | P_TARGET,
                current,
                sel,
                NONE,
            )
            return
    _change_node(svc, nodes, clu, evbuf, s, SS_STARTED, current)


@njit(cache=True)
def _next_started(svc, nodes, last_online, clu, evbuf, s, res, now, rx):
    node = svc[s, F_NODE]
    if not _node_is_online(nodes, node):
        if _offline_delayed(nodes, last_online, node, now):
            _change0(svc, nodes, clu, evbuf, s, SS_FENCE)
        if _node_state(nodes, svc[s, F_NODE]) != NS_MAINTENANCE:
            return
        svc[s, F_MAINT_NODE] = svc[s, F_NODE]
    state = svc[s, F_CFG_STATE]
    if state in (CFG_DISABLED, CFG_STOPPED):
        _change0(svc, nodes, clu, evbuf, s, SS_REQUEST_STOP)
        return
    if state != CFG_STARTED:
        _ev(evbuf, clu, ev.E_UNKNOWN_CFG_STATE, s, state, -1)
        return
    cmd = svc[s, F_CMD]
    if cmd != CMD_NONE:
        arg = svc[s, F_CMD_ARG]
        if cmd in (CMD_MIGRATE, CMD_RELOCATE):
            if not _node_is_online(nodes, arg):
                _ev(evbuf, clu, ev.E_IGNORE_NOT_ONLINE, s, cmd, arg)
            elif svc[s, F_NODE] == arg:
                _ev(evbuf, clu, ev.E_IGNORE_ALREADY_ON, s, cmd, arg)
            else:
                _ev(evbuf, clu, ev.E_MOVE_CMD, s, cmd, arg)
                st = SS_MIGRATE if cmd == CMD_MIGRATE else SS_RELOCATE
                _change(svc, nodes, clu, evbuf, s, st, P_NODE | P_TARGET, svc[s, F_NODE], arg, NONE)
        else:
            if arg == 0:
                _ev(evbuf, clu, ev.E_HARD_STOP, s, -1, -1)
            else:
                _ev(evbuf, clu, ev.E_GRACEFUL_STOP, s, arg, -1)
            _change(svc, nodes, clu, evbuf, s, SS_REQUEST_STOP, P_TIMEOUT, NONE, NONE, arg)
            svc[s, F_CFG_STATE] = CFG_STOPPED  # update_service_config state=stopped
        svc[s, F_CMD] = CMD_NONE
        svc[s, F_CMD_ARG] = NONE
        return
    pref = PREF_NONE
    if res != NO_RESULT:
        if res == SUCCESS:
            if svc[s, F_N_FAILED] > 0:
                _emit(
                    evbuf,
                    clu,
                    ev.E_RELOCATION_OK,
                    s,
                    svc[s, F_NODE],
                    svc[s, F_N_FAILED],
                    svc[s, F_FAILED],
                    -1,
                    -1,
                    -1,
                )
            _clear_failed(svc, s)
            svc[s, F_RUNNING] = 1
        elif res in (ERROR, EWRONG_NODE):
            svc[s, F_RUNNING] = 0
            _record_failed(svc, clu, s, svc[s, F_NODE])
            if svc[s, F_N_FAILED] <= svc[s, F_MAX_RELOCATE]:
                pref = PREF_TRY_NEXT
                _ev(evbuf, clu, ev.E_START_FAILED, s, svc[s, F_NODE], -1)
            else:
                _ev(
                    evbuf, clu, ev.E_RECOVERY_POLICY_FAILED, s, svc[s, F_N_FAILED], svc[s, F_FAILED]
                )
                _change0(svc, nodes, clu, evbuf, s, SS_ERROR)
                return
        else:
            _record_failed(svc, clu, s, svc[s, F_NODE])
            _ev(evbuf, clu, ev.E_UNRECOVERABLE, s, res, -1)
            _change0(svc, nodes, clu, evbuf, s, SS_ERROR)
            return
    target = erules.select_service_node(svc, nodes, clu, evbuf, rx, s, pref)
    # _started_place
    if target >= 0 and svc[s, F_NODE] != target:
        fallback = svc[s, F_MAINT_NODE]
        if fallback >= 0:
            if target == fallback:
                _ev(evbuf, clu, ev.E_BACK_FROM_MAINT, s, fallback, -1)
                svc[s, F_MAINT_NODE] = NONE
            elif svc[s, F_NODE] != fallback:
                _ev(evbuf, clu, ev.E_DROP_MAINT, s, fallback, -1)
                svc[s, F_MAINT_NODE] = NONE
        if svc[s, F_TYPE] == TYPE_VM:
            _ev(evbuf, clu, ev.E_MIGRATE_RUNNING, s, target, -1)
            _change(
                svc,
                nodes,
                clu,
                evbuf,
                s,
                SS_MIGRATE,
                P_NODE | P_TARGET,
                svc[s, F_NODE],
                target,
                NONE,
            )
        else:
            _ev(evbuf, clu, ev.E_RELOCATE_TO, s, target, -1)
            _change(
                svc,
                nodes,
                clu,
                evbuf,
                s,
                SS_RELOCATE,
                P_NODE | P_TARGET,
                svc[s, F_NODE],
                target,
                NONE,
            )
    else:
        if pref == PREF_TRY_NEXT and target < 0:
            _ev(evbuf, clu, ev.E_TRIED_ALL, s, svc[s, F_N_FAILED], svc[s, F_FAILED])
        m = svc[s, F_MAINT_NODE]
        if m >= 0 and svc[s, F_NODE] == m and _node_state(nodes, m) == NS_ONLINE:
            _ev(evbuf, clu, ev.E_CLEAR_STALE_MAINT, s, m, -1)
            svc[s, F_MAINT_NODE] = NONE
        if res != NO_RESULT:
            clu[K_UID] += 1
            svc[s, F_UID] = clu[K_UID]


@njit(cache=True)
def _next_error(svc, nodes, clu, evbuf, s):
    if svc[s, F_CFG_STATE] == CFG_DISABLED:
        _clear_failed(svc, s)
        _change0(svc, nodes, clu, evbuf, s, SS_STOPPED)


@njit(cache=True)
def _next_recovery(svc, nodes, clu, evbuf, s, rx):
    fenced = svc[s, F_NODE]
    rnode = erules.select_service_node(svc, nodes, clu, evbuf, rx, s, PREF_BEST_SCORE)
    if rnode >= 0:
        _ev(evbuf, clu, ev.E_RECOVER, s, fenced, rnode)
        svc[s, F_CFG_NODE] = rnode  # steal_service
        svc[s, F_NODE] = rnode
        _change_node(svc, nodes, clu, evbuf, s, _req_state(svc, s), rnode)
    else:
        _ev(evbuf, clu, ev.E_RECOVER_FAILED, s, fenced, -1)
        if svc[s, F_CFG_STATE] == CFG_DISABLED:
            _clear_failed(svc, s)
            _change0(svc, nodes, clu, evbuf, s, SS_STOPPED)


@njit(cache=True)
def _lrm_mode_of(nodes: np.ndarray, n: int) -> int:
    return MODE_UNKNOWN if n < 0 else nodes[n, N_READ_MODE]


@njit(cache=True)
def _next_service_state(svc, nodes, last_online, clu, evbuf, s, now, rx):
    res = _lrm_result(svc, nodes, s)
    last = svc[s, F_STATE]
    if last == SS_STOPPED:
        _next_stopped(svc, nodes, last_online, clu, evbuf, s, now)
    elif last == SS_STARTED:
        _next_started(svc, nodes, last_online, clu, evbuf, s, res, now, rx)
    elif last == SS_REQUEST_START:
        _next_request_start(svc, nodes, clu, evbuf, s, rx)
    elif last in (SS_MIGRATE, SS_RELOCATE, SS_REQUEST_START_BALANCE):
        _next_migrate_relocate(svc, nodes, last_online, clu, evbuf, s, res, now)
    elif last == SS_RECOVERY:
        _next_recovery(svc, nodes, clu, evbuf, s, rx)
    elif last == SS_REQUEST_STOP:
        _next_request_stop(svc, nodes, last_online, clu, evbuf, s, res, now)
    elif last == SS_FREEZE:
        if _lrm_mode_of(nodes, svc[s, F_NODE]) == MODE_ACTIVE:
            st = SS_STARTED if svc[s, F_CFG_STATE] == CFG_STARTED else SS_REQUEST_STOP
            _change0(svc, nodes, clu, evbuf, s, st)
    elif last == SS_ERROR:
        _next_error(svc, nodes, clu, evbuf, s)
    st = svc[s, F_STATE]
    if _lrm_mode_of(nodes, svc[s, F_NODE]) == MODE_RESTART and (
        st in (SS_STARTED, SS_STOPPED, SS_REQUEST_STOP)
    ):
        _change0(svc, nodes, clu, evbuf, s, SS_FREEZE)
    return svc[s, F_STATE] != last


@njit(cache=True)
def _handle_fencing(svc, nodes, clu, evbuf):
    repeat = False
    nn = nodes.shape[0]
    for n in range(nn):
        nodes[n, N_FENCED_SEEN] = 0
    for s in range(svc.shape[0]):
        if svc[s, F_STATE] != SS_FENCE:
            continue
        n = svc[s, F_NODE]
        if n < 0:  # the port fails an assertion here
            clu[K_ERROR] = ERR_FENCE_UNDEFINED
            continue
        if not nodes[n, N_FENCED_SEEN]:
            nodes[n, N_FENCED_SEEN] = 1
            nodes[n, N_FENCED_OK] = 1 if _fence_node(nodes, clu, evbuf, n) else 0
        if not nodes[n, N_FENCED_OK]:
            continue
        _change0(svc, nodes, clu, evbuf, s, SS_RECOVERY)
        repeat = True
    for n in range(nn):
        if nodes[n, N_STATE] == NS_ABSENT or nodes[n, N_FENCED_SEEN]:
            continue
        if _node_state(nodes, n) != NS_FENCE:
            continue
        _ev(evbuf, clu, ev.E_FENCE_NO_SERVICES, -1, n, -1)
        if _fence_node(nodes, clu, evbuf, n):
            repeat = True
    return repeat


# ---------------------------------------------------------------------------- commands, disarm


@njit(cache=True)
def _load_balance(svc, clu, evbuf, rx):
    """``load_balance`` with the balancer's answer given (``K_MOTION_*``): queue it."""
    s = clu[K_MOTION_SID]
    if s < 0 or svc[s, F_STATE] == SS_ABSENT:  # a balancer picks a service of the status
        return
    qkind = Q_MIGRATE if svc[s, F_TYPE] == TYPE_VM else Q_RELOCATE
    target = clu[K_MOTION_TARGET]
    _emit(
        evbuf,
        clu,
        ev.E_AUTO_REBALANCE,
        s,
        qkind,
        target,
        clu[K_MOTION_BEFORE],
        clu[K_MOTION_AFTER],
        -1,
        -1,
    )
    erules.queue_resource_motion(svc, clu, evbuf, rx, qkind, s, target)


@njit(cache=True)
def _crm_commands(svc, nodes, clu, evbuf, cmds, ncmd, rx):
    """``update_crm_commands``."""
    for q in range(ncmd):
        kind, a, b = cmds[q, 0], cmds[q, 1], cmds[q, 2]
        if kind in (Q_MIGRATE, Q_RELOCATE):
            if svc[a, F_STATE] != SS_ABSENT:
                if not _node_is_online(nodes, b):
                    _ev(evbuf, clu, ev.E_CMD_NODE_NOT_ONLINE, a, kind, b)
                elif b == svc[a, F_NODE]:
                    _ev(evbuf, clu, ev.E_CMD_ALREADY_ON_TARGET, a, kind, b)
                else:
                    erules.queue_resource_motion(svc, clu, evbuf, rx, kind, a, b)
            else:
                _ev(evbuf, clu, ev.E_CMD_NO_SUCH_SERVICE, a, kind, b)
        elif kind == Q_STOP:
            if svc[a, F_STATE] != SS_ABSENT:
                _ev(evbuf, clu, ev.E_GOT_STOP, a, b, -1)
                svc[a, F_CMD] = CMD_STOP
                svc[a, F_CMD_ARG] = b
            else:
                _ev(evbuf, clu, ev.E_CMD_NO_SUCH_SERVICE, a, kind, b)
        elif kind == Q_ENABLE_MAINTENANCE:
            state = _node_state(nodes, a)
            if clu[K_DISARM_MODE] != DISARM_NONE:
                _ev(evbuf, clu, ev.E_MAINT_DISARMED, -1, a, -1)
            elif state == NS_ONLINE:
                nodes[a, N_MAINT_REQ] = 1
            elif state == NS_MAINTENANCE:
                _ev(evbuf, clu, ev.E_MAINT_ALREADY, -1, a, -1)
            else:
                _ev(evbuf, clu, ev.E_MAINT_NOT_ONLINE, -1, a, -1)
        elif kind == Q_DISABLE_MAINTENANCE:
            state = _node_state(nodes, a)
            if state != NS_MAINTENANCE:
                _ev(evbuf, clu, ev.E_CLEAR_MAINT_WARN, -1, a, state)
            nodes[a, N_MAINT_REQ] = 0
        elif kind == Q_DISARM:
            if clu[K_DISARM_MODE] != DISARM_NONE:
                _ev(evbuf, clu, ev.E_DISARM_ALREADY, -1, clu[K_DISARM_STATE], -1)
            else:
                _ev(evbuf, clu, ev.E_GOT_DISARM, -1, a, -1)
                if a == DISARM_IGNORE:
                    for s in range(svc.shape[0]):
                        if svc[s, F_STATE] != SS_ABSENT:
                            _ev(evbuf, clu, ev.E_DISARM_SUSPEND, s, -1, -1)
                clu[K_DISARM_MODE] = a
                clu[K_DISARM_STATE] = DISARMING
        elif kind == Q_ARM:
            if clu[K_DISARM_MODE] != DISARM_NONE:
                _ev(evbuf, clu, ev.E_GOT_ARM, -1, -1, -1)
                if clu[K_DISARM_MODE] == DISARM_IGNORE:
                    for s in range(svc.shape[0]):
                        if svc[s, F_STATE] == SS_ABSENT:
                            continue
                        if svc[s, F_CFG_NODE] == svc[s, F_NODE]:
                            continue
                        _ev(evbuf, clu, ev.E_ARM_UPDATE_NODE, s, svc[s, F_NODE], svc[s, F_CFG_NODE])
                        svc[s, F_NODE] = svc[s, F_CFG_NODE]
                clu[K_DISARM_MODE] = DISARM_NONE
                clu[K_DISARM_STATE] = 0
            else:
                _ev(evbuf, clu, ev.E_ARM_NOT_DISARMED, -1, -1, -1)


@njit(cache=True)
def _strip(svc: np.ndarray, s: int) -> None:
    """Keep only state, node, uid and maintenance_node of a service (``handle_disarm``)."""
    svc[s, F_TARGET] = NONE
    svc[s, F_CMD] = CMD_NONE
    svc[s, F_CMD_ARG] = NONE
    svc[s, F_RUNNING] = 0
    svc[s, F_TIMEOUT] = NONE
    _clear_failed(svc, s)


@njit(cache=True)
def _handle_disarm(svc, nodes, clu, evbuf, deferred):
    """``handle_disarm``: True if services are deferred (marked in ``deferred``)."""
    anydef = False
    for s in range(svc.shape[0]):
        st = svc[s, F_STATE]
        deferred[s] = False
        if st in (SS_FENCE, SS_RECOVERY, SS_MIGRATE, SS_RELOCATE):
            _ev(evbuf, clu, ev.E_DEFER, s, st, -1)
            deferred[s] = True
            anydef = True
    if anydef:
        return True
    if clu[K_DISARM_MODE] == DISARM_FREEZE:
        for s in range(svc.shape[0]):
            st = svc[s, F_STATE]
            if st in (SS_FREEZE, SS_ABSENT):
                continue
            if st in (
                SS_STARTED,
                SS_STOPPED,
                SS_REQUEST_STOP,
                SS_REQUEST_START,
                SS_REQUEST_START_BALANCE,
            ):
                _ev(evbuf, clu, ev.E_FREEZING, s, st, -1)
                _strip(svc, s)
                svc[s, F_STATE] = SS_FREEZE
                clu[K_UID] += 1
                svc[s, F_UID] = clu[K_UID]
    else:
        for s in range(svc.shape[0]):
            if svc[s, F_STATE] != SS_ABSENT:
                _strip(svc, s)
    alld = True
    for n in range(nodes.shape[0]):
        if nodes[n, N_STATE] == NS_ONLINE and nodes[n, N_READ_MODE] != MODE_DISARM:
            alld = False
    if alld and clu[K_DISARM_STATE] != DISARMED:
        _ev(evbuf, clu, ev.E_ALL_DISARMED, -1, -1, -1)
        clu[K_DISARM_STATE] = DISARMED
    clu[K_ALL_DISARMED] = 1 if clu[K_DISARM_STATE] == DISARMED else 0
    return False


# ---------------------------------------------------------------------------- the round


@njit(cache=True)
def _manage_one(svc, nodes, last_online, clu, evbuf, cmds, ncmd, now, deferred, rx):
    """``Manager::manage`` for one cluster (``rx``: the rules and CRS arrays)."""
    clu[K_N_EVENTS] = 0
    clu[K_ERROR] = 0
    erules.log_crs_mode(rx, clu, evbuf)
    changed_nodelist = erules.nodelist_changed(nodes)
    # read_lrm_status: modes of the nodes in the node status, before its update
    for n in range(nodes.shape[0]):
        if nodes[n, N_STATE] == NS_ABSENT:
            nodes[n, N_READ_MODE] = MODE_UNKNOWN
        else:
            nodes[n, N_READ_MODE] = nodes[n, N_MODE]
    _ns_update(nodes, last_online, clu, evbuf, now)
    master = clu[K_MASTER]
    ms = _node_state(nodes, master)
    if ms not in (NS_ONLINE, NS_MAINTENANCE):
        _ev(evbuf, clu, ev.E_MASTER_OFFLINE, -1, -1, -1)
        return
    erules.try_group_migration(svc, nodes, clu, evbuf, rx)
    # _read_services_and_rules: new and stale services, the usage
    if clu[K_DISARM_MODE] == DISARM_NONE:
        for s in range(svc.shape[0]):
            if svc[s, F_STATE] != SS_ABSENT:
                continue
            cs = svc[s, F_CFG_STATE]
            if cs == CFG_IGNORED:
                continue
            _ev(evbuf, clu, ev.E_ADD_SERVICE, s, svc[s, F_CFG_NODE], -1)
            svc[s, F_STATE] = SS_REQUEST_START if cs == CFG_STARTED else SS_REQUEST_STOP
            svc[s, F_NODE] = svc[s, F_CFG_NODE]
            clu[K_UID] += 1
            svc[s, F_UID] = clu[K_UID]
            _strip(svc, s)
            svc[s, F_MAINT_NODE] = NONE
        for s in range(svc.shape[0]):
            if svc[s, F_STATE] == SS_ABSENT or svc[s, F_CFG_STATE] != CFG_IGNORED:
                continue
            _ev(evbuf, clu, ev.E_REMOVE_STALE, s, 1, -1)
            svc[s, F_STATE] = SS_ABSENT
    _recompute_usage(svc, nodes)
    ecrs.snapshot_usage(svc, clu, evbuf, rx)
    erules.activate_rules(rx, clu, evbuf, changed_nodelist)
    _crm_commands(svc, nodes, clu, evbuf, cmds, ncmd[0], rx)
    ncmd[0] = 0  # the queue is read and cleared (it stays while the master is offline)
    anydef = False
    if clu[K_DISARM_MODE] != DISARM_NONE:
        anydef = _handle_disarm(svc, nodes, clu, evbuf, deferred)
        if not anydef:
            return
    else:  # no new migrations while a disarm is pending or deferred
        _load_balance(svc, clu, evbuf, rx)
    # the state machine, repeated until no state changes, with fencing
    clu[K_ALL_DISARMED] = 0
    while True:
        repeat = False
        for s in range(svc.shape[0]):
            if svc[s, F_STATE] == SS_ABSENT:
                continue
            if anydef and not deferred[s]:
                continue
            if _next_service_state(svc, nodes, last_online, clu, evbuf, s, now, rx):
                repeat = True
        if _handle_fencing(svc, nodes, clu, evbuf):
            repeat = True
        if not repeat:
            break


@njit(cache=True)
def manage(
    svc,
    nodes,
    last_online,
    clu,
    evbuf,
    cmds,
    ncmd,
    now,
    deferred,
    rprio,
    rpair,
    rsvc,
    rk,
    rnode,
    usvc,
    fsvc,
    fnode,
):
    """One CRM round of every cluster ``c`` (leading axis of every argument).

    ``cmds[c, :ncmd[c]]``: the CRM command queue (rows ``(kind, a, b)``, codes ``Q_*``); it is
    consumed (``ncmd[c] = 0``) unless the master is not operational, as upstream's stays queued.
    ``rprio`` … ``fnode``: the rules and CRS arrays (:data:`~pvegym.sim.engine.codes.RX_ARRAYS`,
    :func:`pvegym.sim.engine.rules.rx_arrays`)."""
    for c in range(svc.shape[0]):
        rx = (rprio[c], rpair[c], rsvc[c], rk[c], rnode[c], usvc[c], fsvc[c], fnode[c])
        _manage_one(
            svc[c],
            nodes[c],
            last_online[c],
            clu[c],
            evbuf[c],
            cmds[c],
            ncmd[c : c + 1],
            now[c],
            deferred[c],
            rx,
        )
