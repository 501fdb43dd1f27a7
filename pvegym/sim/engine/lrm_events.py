"""The LRM's events and their log lines (:mod:`pvegym.sim.engine.lrm`).

One row ``(kind, sid, node, a, b, -1, -1, -1)`` of int64 per event (the CRM's row width,
:data:`pvegym.sim.engine.events.EV_WIDTH`); :func:`format_lrm_events` turns rows into the port's
log lines ``(node, level, message)`` (:mod:`pvegym.sim.ha.lrm`, word for word). Kinds start at
101, apart from the CRM's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pvegym.sim.engine import codes as k

LE_STATUS_CHANGE = 101  # [node, old LRM state, new LRM state]
LE_FENCE_RELEASE = 102  # [node]
LE_FENCE_RELEASE_MAINT = 103  # [node]
LE_DISARM_RELEASE = 104  # [node]
LE_DISARM_RELEASE_MAINT = 105  # [node]
LE_IDLE = 106  # [node]
LE_RETRY = 107  # sid [node, tries]
LE_START_GIVEUP = 108  # sid [node, tries]

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
        else:
            raise ValueError(f"unknown LRM event kind {kind}")
    return out
