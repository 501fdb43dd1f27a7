"""The LRM daemons over arrays: ``PVE::HA::LRM`` (pve-ha-manager 5.2.0) compiled with numba.

Each function mirrors the port's method of the same name (:mod:`pvegym.sim.ha.lrm`) step by step,
in the same order — the calls of ``run_workers`` that upstream's short-circuit conditions make
included, as each call polls the workers and counts their ``start_tries`` — so that every state
change, worker, result and log line comes out as the port's. The port stays the specification and
is never called here. Arrays and codes: :mod:`pvegym.sim.engine.codes` (the LRM section); events:
:mod:`pvegym.sim.engine.lrm_events`.

What the LRM reads is the manager status the CRM round left in ``svc``/``nodes``/``clu`` (the
service status, node states, maintenance requests, disarm); what it writes is its LRM status
(``L_W_MODE``, ``R_W_*``), which :func:`publish` turns into the CRM's inputs of the next round
(``N_MODE``, ``F_RES_*``). The hardware's part stays an input, as the port's LRM gets it from its
``Env``: whether the node runs, is quorate and can take its agent lock (``L_RUNS``, ``L_QUORATE``,
``L_LOCK``), ``max_workers``, and a worker's job — a forked job ends when its ``W_DONE`` says so
(its exit code, consumed by the first poll at or after the clock ``W_DONE_AT``), which is
``waitpid``'s answer; what the job itself does (``exec_resource_agent`` and the resource agent)
is the hardware's, and ``W_FORKED_AT`` tells it when the fork was.

Shutdown requests (``L_SHUTDOWN_REQ``: an LRM restart, a node reboot or shutdown, as the daemon's
signal handler calls ``shutdown_request`` before an iteration) are covered with the four policies
(``LK_POLICY``); a daemon that exits sets ``L_EXITED`` and runs no more (the caller starts a new
one: :func:`reset_node`). The daemon's clock (``L_CLOCK``: the iteration's start, input, plus its
sleeps) matters only for the 90 s a lost lock may last under an LRM restart.

Not covered: ``max_workers = 0`` (jobs run in place), a failing fork, jobs killed by a signal or
failing to execute (exit status -1), an unknown shutdown policy, a failing cluster file system.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pvegym.sim.engine import lrm_events as lev
from pvegym.sim.engine.codes import (
    C_MAX_RESTART,
    C_SEEN,
    C_SS_SEQ,
    ERROR,
    ETRY_AGAIN,
    F_NODE,
    F_RES_CODE,
    F_RES_NODE,
    F_RES_UID,
    F_STATE,
    F_TARGET,
    F_TIMEOUT,
    F_UID,
    K_DISARM_MODE,
    L_CLOCK,
    L_ERRORS,
    L_EXITED,
    L_IDLE,
    L_LOCK,
    L_MAX_WORKERS,
    L_MODE,
    L_QUORATE,
    L_RUNS,
    L_SEQ,
    L_SHUTDOWN,
    L_SHUTDOWN_REQ,
    L_SS_READ,
    L_STARTED,
    L_STATE,
    L_STATE_TIME,
    L_W_MODE,
    L_W_STATE,
    L_WD,
    LK_CLOCK,
    LK_ERROR,
    LK_N_EVENTS,
    LK_POLICY,
    LK_SS_SEQ,
    LS_ACTIVE,
    LS_LOST,
    LS_MAINTENANCE,
    LS_STARTUP,
    LS_WAIT,
    MODE_ACTIVE,
    MODE_DISARM,
    MODE_MAINTENANCE,
    MODE_RESTART,
    MODE_SHUTDOWN,
    MODE_UNKNOWN,
    N_LRM_CLU_FIELDS,
    N_LRM_NODE_FIELDS,
    N_LRM_SVC_FIELDS,
    N_MAINT_REQ,
    N_MODE,
    N_RESULT_FIELDS,
    N_STATE,
    N_WORKER_FIELDS,
    NO_RESULT,
    NONE,
    NS_ABSENT,
    NS_FENCE,
    POLICY_CONDITIONAL,
    POLICY_FAILOVER,
    POLICY_FREEZE,
    POLICY_MIGRATE,
    POLLS,
    R_CMD,
    R_CODE,
    R_TRIES,
    R_UID,
    R_W_CODE,
    R_W_UID,
    SD_REBOOT,
    SD_RESTART,
    SS_ABSENT,
    SS_ERROR,
    SS_FENCE,
    SS_FREEZE,
    SS_RECOVERY,
    SS_REQUEST_START,
    SS_REQUEST_STOP,
    SS_STARTED,
    SS_STOPPED,
    SUCCESS,
    W_CMD,
    W_DONE,
    W_DONE_AT,
    W_FORKED,
    W_FORKED_AT,
    W_NONE,
    W_QUEUED,
    W_SEQ,
    W_STATE,
    W_TARGET,
    W_TIMEOUT,
    W_TRIES,
    W_UID,
)
from pvegym.sim.engine.events import EV_WIDTH

MAX_ACTIVE_IDLE_ROUNDS = lev.MAX_ACTIVE_IDLE_ROUNDS


# ---------------------------------------------------------------------------- events, status


@njit(cache=True)
def _ev(levbuf: np.ndarray, lclu: np.ndarray, kind: int, sid: int, node: int, a: int, b: int):
    i = lclu[LK_N_EVENTS]
    if i >= levbuf.shape[0]:
        lclu[LK_ERROR] = 1
        return
    levbuf[i, 0] = kind
    levbuf[i, 1] = sid
    levbuf[i, 2] = node
    levbuf[i, 3] = a
    levbuf[i, 4] = b
    levbuf[i, lev.LE_CLOCK] = lclu[LK_CLOCK]
    for j in range(lev.LE_CLOCK + 1, levbuf.shape[1]):
        levbuf[i, j] = -1
    lclu[LK_N_EVENTS] = i + 1


@njit(cache=True)
def _set_state(ln: np.ndarray, lclu: np.ndarray, levbuf: np.ndarray, n: int, new: int) -> None:
    """``set_local_status``: a change only if the state differs, logged."""
    old = ln[L_STATE]
    if old == new:
        return
    _ev(levbuf, lclu, lev.LE_STATUS_CHANGE, -1, n, old, new)
    ln[L_STATE] = new
    ln[L_STATE_TIME] = ln[L_CLOCK]


@njit(cache=True)
def _update_lrm_status(ln: np.ndarray, lr: np.ndarray) -> bool:
    """``update_lrm_status``: the LRM status (mode, results) written, if quorate."""
    if not ln[L_QUORATE]:
        return False
    ln[L_W_MODE] = ln[L_MODE]
    ln[L_W_STATE] = ln[L_STATE]
    for s in range(lr.shape[0]):
        lr[s, R_W_UID] = lr[s, R_UID]
        lr[s, R_W_CODE] = lr[s, R_CODE]
    return True


@njit(cache=True)
def _update_service_status(
    svc: np.ndarray, nodes: np.ndarray, clu: np.ndarray, ln: np.ndarray, n: int
) -> None:
    """``update_service_status``: the service status read (an empty one is a copy, a non-empty
    one the live status), and the mode the manager status asks for, unless shutting down."""
    ln[L_SS_READ] = 0
    for s in range(svc.shape[0]):
        if svc[s, F_STATE] != SS_ABSENT:
            ln[L_SS_READ] = 1
            break
    if ln[L_SHUTDOWN]:
        return
    if nodes[n, N_MAINT_REQ]:
        ln[L_MODE] = MODE_MAINTENANCE
    elif clu[K_DISARM_MODE] != 0:
        ln[L_MODE] = MODE_DISARM
    elif ln[L_MODE] == MODE_MAINTENANCE or ln[L_MODE] == MODE_DISARM:
        ln[L_MODE] = MODE_ACTIVE


@njit(cache=True)
def _get_lock(ln: np.ndarray, lclu: np.ndarray) -> bool:
    """``get_protected_ha_agent_lock``: the lock (its retries give the same answer), and the
    watchdog opened or updated with it."""
    if ln[L_LOCK]:
        ln[L_WD] = 1
        return True
    ln[L_CLOCK] += 5  # five retries a second apart
    lclu[LK_CLOCK] = ln[L_CLOCK]
    return False


@njit(cache=True)
def _fence_requested(svc: np.ndarray, nodes: np.ndarray, n: int) -> bool:
    if nodes[n, N_STATE] == NS_FENCE:
        return True
    hit = False
    for s in range(svc.shape[0]):
        if svc[s, F_STATE] == SS_FENCE and svc[s, F_NODE] == n:
            hit = True
            break
    return hit


@njit(cache=True)
def _active_service_count(svc: np.ndarray, n: int) -> int:
    """``count_active_services``: on the node or moving to it, not stopped/freeze/error/
    request_start."""
    count = 0
    for s in range(svc.shape[0]):
        st = svc[s, F_STATE]
        if st == SS_ABSENT:
            continue
        if svc[s, F_NODE] != n and svc[s, F_TARGET] != n:
            continue
        if st in (SS_STOPPED, SS_FREEZE, SS_ERROR, SS_REQUEST_START):
            continue
        count += 1
    return count


@njit(cache=True)
def _has_configured_service(svc: np.ndarray, n: int) -> bool:
    hit = False
    for s in range(svc.shape[0]):
        if svc[s, F_STATE] != SS_ABSENT and svc[s, F_NODE] == n:
            hit = True
            break
    return hit


# ---------------------------------------------------------------------------- workers


@njit(cache=True)
def _handle_service_exitcode(
    lr: np.ndarray,
    lcfg: np.ndarray,
    lclu: np.ndarray,
    levbuf: np.ndarray,
    n: int,
    s: int,
    cmd: int,
    code: int,
) -> int:
    """``handle_service_exitcode``: the restart policy of a failed start (``max_restart``)."""
    if cmd == SS_STARTED:
        if code == SUCCESS:
            lr[s, R_TRIES] = 0
            return code
        if code == ERROR:
            if lr[s, R_TRIES] >= lcfg[s, C_MAX_RESTART]:
                _ev(levbuf, lclu, lev.LE_START_GIVEUP, s, n, lr[s, R_TRIES], -1)
                lr[s, R_TRIES] = 0
                return ERROR
            lr[s, R_TRIES] += 1
            _ev(levbuf, lclu, lev.LE_RETRY, s, n, lr[s, R_TRIES], -1)
            return ETRY_AGAIN
    return code


@njit(cache=True)
def _resource_command_finished(
    svc: np.ndarray,
    lw: np.ndarray,
    lr: np.ndarray,
    lcfg: np.ndarray,
    lclu: np.ndarray,
    levbuf: np.ndarray,
    n: int,
    s: int,
    code: int,
) -> None:
    """``resource_command_finished``: the worker removed, its result kept (unless retried), the
    results of uids the manager no longer knows pruned."""
    lw[s, W_STATE] = W_NONE
    uid = lw[s, W_UID]
    cmd = lw[s, W_CMD]
    code = _handle_service_exitcode(lr, lcfg, lclu, levbuf, n, s, cmd, code)
    if code == ETRY_AGAIN:
        return
    lr[s, R_UID] = uid
    lr[s, R_CODE] = code
    lr[s, R_CMD] = cmd
    for t in range(lr.shape[0]):
        if lr[t, R_CODE] == NO_RESULT:
            continue
        if svc[t, F_STATE] == SS_ABSENT or svc[t, F_UID] != lr[t, R_UID]:
            lr[t, R_CODE] = NO_RESULT


@njit(cache=True)
def _check_active_workers(svc, lw, lr, lcfg, lclu, levbuf, n, order, ln_errors) -> int:
    """``check_active_workers``: the forked workers in the table's order; a job whose exit code
    is there (``W_DONE``) finishes; the number still running."""
    m = 0
    for s in range(lw.shape[0]):
        if lw[s, W_STATE] != W_NONE:
            order[m] = s
            m += 1
    # the dict order: by insertion number
    for i in range(1, m):
        j = i
        while j > 0 and lw[order[j - 1], W_SEQ] > lw[order[j], W_SEQ]:
            order[j - 1], order[j] = order[j], order[j - 1]
            j -= 1
    count = 0
    for i in range(m):
        s = order[i]
        if lw[s, W_STATE] != W_FORKED:
            continue
        code = lw[s, W_DONE]
        if code == NO_RESULT or lclu[LK_CLOCK] < lw[s, W_DONE_AT]:
            count += 1
        elif lw[s, W_UID] != NONE:
            lw[s, W_DONE] = NO_RESULT
            _resource_command_finished(svc, lw, lr, lcfg, lclu, levbuf, n, s, code)
        else:  # stop_command_finished: a shutdown's stop job
            lw[s, W_DONE] = NO_RESULT
            lw[s, W_STATE] = W_NONE
            if code != SUCCESS:
                ln_errors[0] += 1
    return count


@njit(cache=True)
def _run_workers(svc, ln, lw, lr, lcfg, lclu, levbuf, n, order) -> int:
    """``run_workers``: collect finished jobs and fork queued ones (the most tried first, then by
    sid), at most ``max_workers`` running, polling every second for 8 s while any runs; the
    number of workers queued or running."""
    max_workers = ln[L_MAX_WORKERS]
    for _ in range(POLLS):
        count = _check_active_workers(
            svc, lw, lr, lcfg, lclu, levbuf, n, order, ln[L_ERRORS : L_ERRORS + 1]
        )
        m = 0
        for s in range(lw.shape[0]):
            if lw[s, W_STATE] == W_QUEUED:
                order[m] = s
                m += 1
        for i in range(1, m):  # by (-start_tries, sid)
            j = i
            while j > 0 and lw[order[j - 1], W_TRIES] < lw[order[j], W_TRIES]:
                order[j - 1], order[j] = order[j], order[j - 1]
                j -= 1
        for i in range(m):
            s = order[i]
            lw[s, W_TRIES] += 1
            if count >= max_workers:
                continue
            lw[s, W_STATE] = W_FORKED
            lw[s, W_FORKED_AT] = ln[L_CLOCK]
            count += 1
        if count == 0:
            break
        ln[L_CLOCK] += 1
        lclu[LK_CLOCK] = ln[L_CLOCK]
    m = 0
    for s in range(lw.shape[0]):
        if lw[s, W_STATE] != W_NONE:
            m += 1
    return m


@njit(cache=True)
def _queue_resource_command(ln, lw, lr, s, uid, state, target, timeout) -> None:
    """``queue_resource_command``: not the same request twice (``stopped`` always runs; ``uid``
    NONE: a shutdown's stop job); a queued entry is replaced, a forked one kept."""
    if state != SS_STOPPED and uid != NONE and lr[s, R_CODE] != NO_RESULT and lr[s, R_UID] == uid:
        return
    if lw[s, W_STATE] == W_FORKED:
        return
    ln[L_SEQ] += 1
    lw[s, W_STATE] = W_QUEUED
    lw[s, W_UID] = uid
    lw[s, W_CMD] = state
    lw[s, W_TARGET] = target
    lw[s, W_TIMEOUT] = timeout
    lw[s, W_TRIES] = 0
    lw[s, W_SEQ] = ln[L_SEQ]


@njit(cache=True)
def _manage_resources(svc, ln, lw, lr, lcfg, lclu, levbuf, n, ss_order, order) -> int:
    """``manage_resources``: queue what the service status asks of every service on this node (in
    the service status's order), then run the workers."""
    for s in range(svc.shape[0]):
        if svc[s, F_STATE] == SS_ABSENT:
            lr[s, R_TRIES] = 0
    for i in range(ss_order.shape[0]):
        s = ss_order[i]
        if svc[s, F_NODE] != n:
            continue
        st = svc[s, F_STATE]
        if st in (SS_RECOVERY, SS_FREEZE, SS_REQUEST_START):
            continue
        _queue_resource_command(
            ln, lw, lr, s, svc[s, F_UID], st, svc[s, F_TARGET], svc[s, F_TIMEOUT]
        )
    return _run_workers(svc, ln, lw, lr, lcfg, lclu, levbuf, n, order)


# ---------------------------------------------------------------------------- the daemon


@njit(cache=True)
def _release(ln: np.ndarray) -> None:
    """The agent lock released (the hardware's) and the watchdog closed."""
    ln[L_WD] = 0


@njit(cache=True)
def _change_state_active(svc, nodes, ln, lw, lr, lcfg, lclu, levbuf, n, fence, order) -> None:
    if fence:
        _ev(levbuf, lclu, lev.LE_FENCE_RELEASE, -1, n, -1, -1)
        _set_state(ln, lclu, levbuf, n, LS_LOST)
    elif not _get_lock(ln, lclu):
        _set_state(ln, lclu, levbuf, n, LS_LOST)
    elif ln[L_MODE] == MODE_MAINTENANCE:
        _set_state(ln, lclu, levbuf, n, LS_MAINTENANCE)
    elif ln[L_MODE] == MODE_DISARM and not _run_workers(
        svc, ln, lw, lr, lcfg, lclu, levbuf, n, order
    ):
        _ev(levbuf, lclu, lev.LE_DISARM_RELEASE, -1, n, -1, -1)
        _release(ln)
        _set_state(ln, lclu, levbuf, n, LS_WAIT)
    elif not _has_configured_service(svc, n) and not _run_workers(
        svc, ln, lw, lr, lcfg, lclu, levbuf, n, order
    ):
        ln[L_IDLE] += 1
        if ln[L_IDLE] > MAX_ACTIVE_IDLE_ROUNDS:
            _ev(levbuf, lclu, lev.LE_IDLE, -1, n, -1, -1)
            _release(ln)
            _set_state(ln, lclu, levbuf, n, LS_WAIT)
            ln[L_IDLE] = 0
    elif ln[L_IDLE]:
        ln[L_IDLE] = 0


@njit(cache=True)
def _change_state_maintenance(svc, ln, lw, lr, lcfg, lclu, levbuf, n, fence, order) -> None:
    if fence:
        _ev(levbuf, lclu, lev.LE_FENCE_RELEASE_MAINT, -1, n, -1, -1)
        _set_state(ln, lclu, levbuf, n, LS_LOST)
    elif (
        ln[L_MODE] == MODE_DISARM
        and not _active_service_count(svc, n)
        and not _run_workers(svc, ln, lw, lr, lcfg, lclu, levbuf, n, order)
    ):
        _ev(levbuf, lclu, lev.LE_DISARM_RELEASE_MAINT, -1, n, -1, -1)
        _release(ln)
        _set_state(ln, lclu, levbuf, n, LS_WAIT)
    elif _active_service_count(svc, n) or _run_workers(
        svc, ln, lw, lr, lcfg, lclu, levbuf, n, order
    ):
        if not _get_lock(ln, lclu):
            _set_state(ln, lclu, levbuf, n, LS_LOST)
    elif ln[L_MODE] != MODE_MAINTENANCE:
        if _get_lock(ln, lclu):
            _set_state(ln, lclu, levbuf, n, LS_ACTIVE)
        else:
            _set_state(ln, lclu, levbuf, n, LS_LOST)


@njit(cache=True)
def _request_shutdown(svc, ln, lw, lr, lclu, levbuf, n, kind, ss_order) -> None:
    """``shutdown_request`` (the daemon's signal handler, before its iteration): the policy's
    effect, a node shutdown's stop jobs (uid NONE) for the services of the status read last,
    the shutdown mode, the LRM status written."""
    if ln[L_SHUTDOWN]:
        return
    shutdown = kind != SD_RESTART
    reboot = kind == SD_REBOOT
    policy = lclu[LK_POLICY]
    if shutdown:
        _ev(levbuf, lclu, lev.LE_SHUTDOWN_REQUEST, -1, n, policy, -1)
    freeze_all = False
    maintenance = False
    if policy == POLICY_CONDITIONAL:
        freeze_all = reboot
    elif policy == POLICY_FREEZE:
        freeze_all = True
    elif policy == POLICY_FAILOVER:
        freeze_all = False
    elif policy == POLICY_MIGRATE:
        maintenance = True
    if not maintenance and shutdown and ln[L_SS_READ]:
        for i in range(ss_order.shape[0]):
            s = ss_order[i]
            if svc[s, F_NODE] == n:
                _queue_resource_command(ln, lw, lr, s, NONE, SS_REQUEST_STOP, NONE, NONE)
    # _enter_shutdown_mode
    rb = 1 if reboot else 0
    if shutdown:
        if ln[L_MODE] == MODE_MAINTENANCE:
            if maintenance:
                _ev(levbuf, lclu, lev.LE_IGNORE_MAINT_POLICY, -1, n, rb, -1)
            else:
                _ev(levbuf, lclu, lev.LE_IGNORE_POLICY_MANUAL, -1, n, rb, policy)
        elif maintenance:
            _ev(levbuf, lclu, lev.LE_DOING_MAINT, -1, n, rb, -1)
            ln[L_MODE] = MODE_MAINTENANCE
        elif freeze_all:
            _ev(levbuf, lclu, lev.LE_STOP_FREEZE, -1, n, rb, -1)
            ln[L_MODE] = MODE_RESTART
        else:
            _ev(levbuf, lclu, lev.LE_STOP_ALL, -1, n, -1, -1)
            ln[L_MODE] = MODE_SHUTDOWN
    elif ln[L_MODE] == MODE_MAINTENANCE:
        _ev(levbuf, lclu, lev.LE_RESTART_IN_MAINT, -1, n, -1, -1)
    else:
        _ev(levbuf, lclu, lev.LE_RESTART_FREEZE, -1, n, -1, -1)
        ln[L_MODE] = MODE_RESTART
    ln[L_SHUTDOWN] = 1
    if not _update_lrm_status(ln, lr):
        _ev(levbuf, lclu, lev.LE_STATUS_WRITE_FAILED, -1, n, -1, -1)


@njit(cache=True)
def _active_round(svc, nodes, clu, ln, lw, lr, lcfg, lclu, levbuf, n, ss_order, order) -> bool:
    """The work of an active round; True to shut down (the daemon exits)."""
    _update_service_status(svc, nodes, clu, ln, n)
    if ln[L_SHUTDOWN]:
        if ln[L_MODE] == MODE_RESTART:
            workers = _run_workers(svc, ln, lw, lr, lcfg, lclu, levbuf, n, order)
            if _active_service_count(svc, n) == 0 and workers == 0:
                _release(ln)
                return True
        elif _run_workers(svc, ln, lw, lr, lcfg, lclu, levbuf, n, order) == 0:
            if ln[L_ERRORS] == 0:
                _release(ln)
            return True
        return False
    _manage_resources(svc, ln, lw, lr, lcfg, lclu, levbuf, n, ss_order, order)
    return False


@njit(cache=True)
def _work(svc, nodes, clu, ln, lw, lr, lcfg, lclu, levbuf, n, ss_order, order) -> bool:
    """One ``do_one_iteration`` of node ``n``'s LRM (LRM.pm ``work``): state changes first, then
    that state's work; False when the daemon exits."""
    if not ln[L_STARTED]:
        if _update_lrm_status(ln, lr):
            ln[L_STARTED] = 1
        else:
            return not ln[L_SHUTDOWN]
    state = ln[L_STATE]
    _update_service_status(svc, nodes, clu, ln, n)
    fence = _fence_requested(svc, nodes, n)
    # do state changes first
    if state == LS_WAIT:
        count = _active_service_count(svc, n)
        if ln[L_MODE] == MODE_DISARM:
            pass  # stay idle while disarmed
        elif not fence and count and ln[L_QUORATE] and _get_lock(ln, lclu):
            _set_state(ln, lclu, levbuf, n, LS_ACTIVE)
    elif state == LS_LOST:
        if not fence and ln[L_QUORATE] and _get_lock(ln, lclu):
            _set_state(ln, lclu, levbuf, n, LS_ACTIVE)
    elif state == LS_ACTIVE:
        _change_state_active(svc, nodes, ln, lw, lr, lcfg, lclu, levbuf, n, fence, order)
    elif state == LS_MAINTENANCE:
        _change_state_maintenance(svc, ln, lw, lr, lcfg, lclu, levbuf, n, fence, order)
    # do work
    state = ln[L_STATE]
    if state == LS_WAIT:
        if ln[L_SHUTDOWN]:
            return False
        _update_lrm_status(ln, lr)
    elif state == LS_ACTIVE:
        shutdown = _active_round(
            svc, nodes, clu, ln, lw, lr, lcfg, lclu, levbuf, n, ss_order, order
        )
        _update_lrm_status(ln, lr)
        if shutdown:
            return False
    elif state == LS_LOST:  # wait for the lock (or the watchdog)
        if ln[L_SHUTDOWN]:
            count = _active_service_count(svc, n)
            if count > 0:
                _ev(levbuf, lclu, lev.LE_LOST_SHUTDOWN, -1, n, count, -1)
                # restart mode and an infinite stop timeout: exit, the services untouched
                if ln[L_MODE] == MODE_RESTART and ln[L_CLOCK] - ln[L_STATE_TIME] > 90:
                    _ev(levbuf, lclu, lev.LE_LOST_GIVEUP, -1, n, -1, -1)
                    return False
            else:  # every service stopped: the watchdog can be closed
                ln[L_WD] = 0
                return False
    elif state == LS_MAINTENANCE:
        _update_service_status(svc, nodes, clu, ln, n)
        exit_lrm = False
        if _active_service_count(svc, n) == 0 and (
            _run_workers(svc, ln, lw, lr, lcfg, lclu, levbuf, n, order) == 0
        ):
            _release(ln)
            if ln[L_SHUTDOWN]:
                exit_lrm = True
        if not exit_lrm:
            _manage_resources(svc, ln, lw, lr, lcfg, lclu, levbuf, n, ss_order, order)
        _update_lrm_status(ln, lr)
        if exit_lrm:
            return False
    return True


@njit(cache=True)
def _lrm_round_one(svc, nodes, clu, ln, lw, lr, lcfg, lclu, levbuf) -> None:
    lclu[LK_N_EVENTS] = 0
    lclu[LK_ERROR] = 0
    ns = svc.shape[0]
    # the service status's order: a service (re)added to it goes to its end
    for s in range(ns):
        present = svc[s, F_STATE] != SS_ABSENT
        if present and not lcfg[s, C_SEEN]:
            lclu[LK_SS_SEQ] += 1
            lcfg[s, C_SS_SEQ] = lclu[LK_SS_SEQ]
        lcfg[s, C_SEEN] = 1 if present else 0
    m = 0
    ss_order = np.empty(ns, dtype=np.int64)
    for s in range(ns):
        if svc[s, F_STATE] != SS_ABSENT:
            ss_order[m] = s
            m += 1
    ss_order = ss_order[:m]
    for i in range(1, m):
        j = i
        while j > 0 and lcfg[ss_order[j - 1], C_SS_SEQ] > lcfg[ss_order[j], C_SS_SEQ]:
            ss_order[j - 1], ss_order[j] = ss_order[j], ss_order[j - 1]
            j -= 1
    order = np.empty(ns, dtype=np.int64)
    for n in range(ln.shape[0]):
        ln[n, L_EXITED] = 0
        if not ln[n, L_RUNS]:
            continue
        lclu[LK_CLOCK] = ln[n, L_CLOCK]
        if ln[n, L_STATE] == LS_STARTUP:  # a new daemon: its constructor's status change
            _set_state(ln[n], lclu, levbuf, n, LS_WAIT)
        kind = ln[n, L_SHUTDOWN_REQ]
        if kind:
            _request_shutdown(svc, ln[n], lw[n], lr[n], lclu, levbuf, n, kind, ss_order)
        if not _work(svc, nodes, clu, ln[n], lw[n], lr[n], lcfg, lclu, levbuf, n, ss_order, order):
            ln[n, L_EXITED] = 1


@njit(cache=True)
def lrm_round(svc, nodes, clu, lnodes, lwork, lres, lcfg, lclu, levbuf) -> None:
    """One iteration of every running LRM (in node order) of every cluster ``c`` (leading axis),
    after the CRM round that left the manager status in ``svc``/``nodes``/``clu``."""
    for c in range(svc.shape[0]):
        _lrm_round_one(
            svc[c], nodes[c], clu[c], lnodes[c], lwork[c], lres[c], lcfg[c], lclu[c], levbuf[c]
        )


@njit(cache=True)
def publish(svc, nodes, lnodes, lres) -> None:
    """What the CRM reads of the LRM status files before its round (``read_lrm_status``): each
    node's mode (``active`` if it never wrote one) and, per service, the result for its current
    uid from the first node of the node status that has one."""
    for c in range(svc.shape[0]):
        for n in range(nodes.shape[1]):
            m = lnodes[c, n, L_W_MODE]
            nodes[c, n, N_MODE] = MODE_ACTIVE if m == MODE_UNKNOWN else m
        for s in range(svc.shape[1]):
            svc[c, s, F_RES_CODE] = NO_RESULT
            if svc[c, s, F_STATE] == SS_ABSENT:
                continue
            uid = svc[c, s, F_UID]
            for n in range(nodes.shape[1]):
                if nodes[c, n, N_STATE] == NS_ABSENT:
                    continue
                if lres[c, n, s, R_W_CODE] != NO_RESULT and lres[c, n, s, R_W_UID] == uid:
                    svc[c, s, F_RES_CODE] = lres[c, n, s, R_W_CODE]
                    svc[c, s, F_RES_UID] = uid
                    svc[c, s, F_RES_NODE] = n
                    break


def new_state(
    n_clusters: int, n_nodes: int, n_services: int, max_events: int = 4096
) -> tuple[np.ndarray, ...]:
    """Fresh LRM arrays ``(lnodes, lwork, lres, lcfg, lclu, levbuf)``: every daemon about to
    start, ``max_workers`` 4 (``Env/PVE2.pm`` default), ``max_restart`` 1 (the service config's
    default, ``Config.pm``); the inputs are the caller's."""
    lnodes = np.zeros((n_clusters, n_nodes, N_LRM_NODE_FIELDS), dtype=np.int64)
    lnodes[:, :, L_W_MODE] = MODE_UNKNOWN
    lnodes[:, :, L_W_STATE] = -1
    lnodes[:, :, L_MAX_WORKERS] = 4
    lwork = np.zeros((n_clusters, n_nodes, n_services, N_WORKER_FIELDS), dtype=np.int64)
    lres = np.zeros((n_clusters, n_nodes, n_services, N_RESULT_FIELDS), dtype=np.int64)
    lres[:, :, :, R_W_CODE] = NO_RESULT
    lcfg = np.zeros((n_clusters, n_services, N_LRM_SVC_FIELDS), dtype=np.int64)
    lcfg[:, :, C_MAX_RESTART] = 1
    lclu = np.zeros((n_clusters, N_LRM_CLU_FIELDS), dtype=np.int64)
    levbuf = np.zeros((n_clusters, max_events, EV_WIDTH), dtype=np.int64)
    for c in range(n_clusters):
        for n in range(n_nodes):
            reset_node(lnodes, lwork, lres, c, n)
    return lnodes, lwork, lres, lcfg, lclu, levbuf


def reset_node(lnodes: np.ndarray, lwork: np.ndarray, lres: np.ndarray, c: int, n: int) -> None:
    """Node ``n``'s LRM daemon (re)started (the node booted): a new daemon's state; the LRM
    status file it wrote stays."""
    ln = lnodes[c, n]
    ln[L_STATE] = LS_STARTUP
    ln[L_MODE] = MODE_ACTIVE
    ln[L_STARTED] = 0
    ln[L_IDLE] = 0
    ln[L_WD] = 0
    ln[L_SEQ] = 0
    ln[L_SHUTDOWN] = 0
    ln[L_ERRORS] = 0
    ln[L_SS_READ] = 0
    ln[L_STATE_TIME] = 0
    ln[L_EXITED] = 0
    lwork[c, n] = 0
    lwork[c, n, :, W_STATE] = W_NONE
    lwork[c, n, :, W_DONE] = NO_RESULT
    lwork[c, n, :, W_TARGET] = NONE
    lres[c, n, :, R_UID] = 0
    lres[c, n, :, R_CODE] = NO_RESULT
    lres[c, n, :, R_CMD] = 0
    lres[c, n, :, R_TRIES] = 0
