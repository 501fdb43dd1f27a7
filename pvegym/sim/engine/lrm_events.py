"""The LRM's events and their log lines (:mod:`pvegym.sim.engine.lrm`).

One row ``(kind, sid, node, a, b, clock, -1, -1)`` of int64 per event (the CRM's row width,
:data:`pvegym.sim.engine.events.EV_WIDTH`; ``clock``: the daemon's clock when it logged it, s,
the time of the port's line); :func:`format_lrm_events` turns rows into the port's log lines
``(node, level, message)`` (:mod:`pvegym.sim.ha.lrm`, word for word). Kinds start at 101, apart
from the CRM's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pvegym.sim.engine import codes as k

#: the row's column of the daemon's clock (s) at the event
LE_CLOCK = 5

LE_STATUS_CHANGE = 101  # [node, old LRM state, new LRM state]
LE_FENCE_RELEASE = 102  # [node]
LE_FENCE_RELEASE_MAINT = 103  # [node]
LE_DISARM_RELEASE = 104  # [node]
LE_DISARM_RELEASE_MAINT = 105  # [node]
LE_IDLE = 106  # [node]
LE_RETRY = 107  # sid [node, tries]
LE_START_GIVEUP = 108  # sid [node, tries]
LE_SHUTDOWN_REQUEST = 109  # [node, policy]
LE_IGNORE_MAINT_POLICY = 110  # [node, reboot?]
LE_IGNORE_POLICY_MANUAL = 111  # [node, reboot?, policy]
LE_DOING_MAINT = 112  # [node, reboot?]
LE_STOP_FREEZE = 113  # [node, reboot?]
LE_STOP_ALL = 114  # [node]
LE_RESTART_IN_MAINT = 115  # [node]
LE_RESTART_FREEZE = 116  # [node]
LE_STATUS_WRITE_FAILED = 117  # [node]
LE_LOST_SHUTDOWN = 118  # [node, active services]
LE_LOST_GIVEUP = 119  # [node]

#: every kind's name (the differential check counts them)
LRM_EVENT_NAMES = {v: "lrm " + n[3:].lower() for n, v in globals().items() if n.startswith("LE_")}

#: ``$max_active_idle_rounds`` (LRM.pm): the rounds an active LRM without services waits
MAX_ACTIVE_IDLE_ROUNDS = 60

_FIXED: dict[int, tuple[str, str]] = {
    LE_FENCE_RELEASE: ("err", "node needs to be fenced - releasing agent_lock"),
    LE_FENCE_RELEASE_MAINT: (
        "err",
        "node needs to be fenced during maintenance mode - releasing agent_lock",
    ),
    LE_DISARM_RELEASE: ("info", "HA disarm requested, releasing agent lock and watchdog"),
    LE_DISARM_RELEASE_MAINT: (
        "info",
        "HA disarm requested during maintenance, releasing agent lock and watchdog",
    ),
    LE_IDLE: (
        "info",
        f"node had no service configured for {MAX_ACTIVE_IDLE_ROUNDS} rounds, going idle.",
    ),
    LE_STOP_ALL: ("info", "shutdown LRM, stop all services"),
    # sic: upstream's level string spans a line break (LRM.pm L133-134)
    LE_RESTART_IN_MAINT: (
        "\n\t    info",
        "Restarting LRM in maintenance mode may be delayed until all services are moved",
    ),
    LE_RESTART_FREEZE: ("info", "restart LRM, freeze all services"),
    LE_STATUS_WRITE_FAILED: ("err", "unable to update lrm status file - not quorate?"),
    LE_LOST_GIVEUP: ("err", "lost agent lock and restart request for over 90 seconds - giving up!"),
}

#: events ``(kind) -> template`` with the shutdown type (``{t}``: reboot or shutdown) and policy
_TYPED: dict[int, str] = {
    LE_IGNORE_MAINT_POLICY: "{t} LRM, ignore maintenance policy, already in maintenance mode",
    LE_IGNORE_POLICY_MANUAL: "{t} LRM, ignore {p} policy as manual maintenance mode is enabled",
    LE_DOING_MAINT: "{t} LRM, doing maintenance, removing this node from active list",
    LE_STOP_FREEZE: "{t} LRM, stop and freeze all services",
}


def format_lrm_events(
    rows: np.ndarray, sids: Sequence[str], nodes: Sequence[str]
) -> list[tuple[str, str, str]]:
    """``(node, level, message)`` of each LRM event row, as the port logs it."""
    out: list[tuple[str, str, str]] = []
    for row in rows:
        kind, s, n, a, b = (int(x) for x in row[:5])
        node = nodes[n]
        sid = sids[s] if s >= 0 else ""
        if kind in _FIXED:
            out.append((node, *_FIXED[kind]))
        elif kind == LE_STATUS_CHANGE:
            msg = f"status change {k.LRM_STATES[a]} => {k.LRM_STATES[b]}"
            out.append((node, "info", msg))
        elif kind == LE_RETRY:
            out.append((node, "warning", f"restart policy: retry number {a} for service '{sid}'"))
        elif kind == LE_START_GIVEUP:
            msg = f"unable to start service {sid} on local node after {a} retries"
            out.append((node, "err", msg))
        elif kind in _TYPED:
            msg = _TYPED[kind].format(
                t="reboot" if a else "shutdown", p=k.SHUTDOWN_POLICIES[b] if b >= 0 else ""
            )
            out.append((node, "info", msg))
        elif kind == LE_SHUTDOWN_REQUEST:
            msg = f"got shutdown request with shutdown policy '{k.SHUTDOWN_POLICIES[a]}'"
            out.append((node, "info", msg))
        elif kind == LE_LOST_SHUTDOWN:
            msg = f"got shutdown request in state 'lost_agent_lock' - detected {a} running services"
            out.append((node, "err", msg))
        else:
            raise ValueError(f"unknown LRM event kind {kind}")
    return out
