"""Where each guest was during the window, and the migrations of the window.

The export's migration tasks (``qmigrate``/``vzmigrate`` on the source node, ``hamigrate`` for an
operator's HA request, ``nodes/<node>/tasks.json``) give each successful migration's source and
time; the target is the next migration's source or, for the last, the guest's node at export
time. A migration is the *operator's* when the guest is not HA-managed, when a ``hamigrate``
request preceded it, or when it evacuated a node in maintenance; otherwise the HA manager issued
it itself (a balancer under test replaces those).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pvegym.pve_export.cluster import ClusterExport, GuestExport, Task
from pvegym.pve_export.notes import Note, utc
from pvegym.pve_export.window import Window

#: A ``hamigrate`` request counts as the origin of a ``qmigrate`` starting this soon after (s).
HAMIGRATE_LAG_S = 120


@dataclass
class Migration:
    """A migration task of the window: ``origin`` operator | ha-manager; ``target`` derived."""

    t: float  # seconds into the window: the task started
    t_end: float  # seconds into the window: the task ended (the guest runs on the target after)
    sid: str
    source: str
    target: str
    ok: bool
    origin: str


def migrations(
    export: ClusterExport, window: Window, notes: list[Note]
) -> tuple[list[Migration], list[Migration]]:
    """Successful and failed migrations in the window, with their origin and derived target."""
    tasks = sorted((t for n in export.nodes.values() for t in n.tasks), key=lambda t: t.start)
    by_vmid: dict[int, list[Task]] = {}
    requests: dict[int, list[int]] = {}
    for t in tasks:
        if t.kind == "hamigrate":
            requests.setdefault(t.vmid, []).append(t.start)
        elif t.vmid in export.guests:
            by_vmid.setdefault(t.vmid, []).append(t)
    ok_moves: list[Migration] = []
    failed: list[Migration] = []
    for vmid, ts in sorted(by_vmid.items()):
        g = export.guests[vmid]
        done = [t for t in ts if t.ok and t.end is not None]
        for i, t in enumerate(done):
            target = done[i + 1].node if i + 1 < len(done) else g.node
            if target == t.node:
                notes.append(
                    Note(
                        "info",
                        g.sid,
                        f"migration at {utc(t.start)} from {t.node} ends where it started: the task list is incomplete; ignored",
                    )
                )
                continue
            if not (window.start < (t.end or t.start) <= window.end):
                continue
            ok_moves.append(
                Migration(
                    t.start - window.start,
                    (t.end or t.start) - window.start,
                    g.sid,
                    t.node,
                    target,
                    True,
                    _origin(export, g, t, requests),
                )
            )
        for t in ts:
            if not t.ok and window.start < t.start <= window.end:
                failed.append(
                    Migration(
                        t.start - window.start,
                        (t.end or t.start) - window.start,
                        g.sid,
                        t.node,
                        "",
                        False,
                        _origin(export, g, t, requests),
                    )
                )
    if ok_moves:
        by_origin = {o: sum(m.origin == o for m in ok_moves) for o in ("operator", "ha-manager")}
        notes.append(
            Note(
                "info",
                "migrations",
                f"{len(ok_moves)} in the window ({by_origin['operator']} by the operator: replayed "
                f"as events; {by_origin['ha-manager']} issued by the HA manager: replaced by the "
                "balancer under test, replayed only in the validation run)",
            )
        )
    if failed:
        notes.append(
            Note(
                "info",
                "migrations",
                f"{len(failed)} failed migration tasks in the window (listed in the what-if report)",
            )
        )
    return sorted(ok_moves, key=lambda m: m.t), sorted(failed, key=lambda m: m.t)


def _origin(export: ClusterExport, g: GuestExport, t: Task, requests: dict[int, list[int]]) -> str:
    if g.ha is None or g.ha.state == "ignored":
        return "operator"
    if any(0 <= t.start - r <= HAMIGRATE_LAG_S for r in requests.get(t.vmid, [])):
        return "operator"
    if export.nodes[t.node].maintenance:
        return "operator"  # evacuating a node in maintenance: any balancer would
    return "ha-manager"


def start_placement(export: ClusterExport, window: Window) -> dict[int, str]:
    """Each guest's node at the window's start: the source of its first successful migration that
    ended after the start, else its node at export time."""
    out: dict[int, str] = {}
    for vmid, g in export.guests.items():
        node = g.node
        done = sorted(
            (
                t
                for n in export.nodes.values()
                for t in n.tasks
                if t.vmid == vmid and t.kind != "hamigrate" and t.ok and t.end is not None
            ),
            key=lambda t: t.start,
        )
        for t in done:
            if (t.end or 0) > window.start:
                node = t.node
                break
        out[vmid] = node
    return out


def placement_matrix(
    export: ClusterExport, window: Window, start: dict[int, str], moves: list[Migration]
) -> dict[int, NDArray[np.object_]]:
    """Each guest's node per window row: where it spent most of the row's interval (it runs on
    the target once the migration task has ended)."""
    rel = window.times - window.start - window.step / 2
    out: dict[int, NDArray[np.object_]] = {}
    for vmid, g in export.guests.items():
        where = np.full(window.n, start[vmid], dtype=object)
        for m in moves:
            if m.sid == g.sid:
                where[rel > m.t_end] = m.target
        out[vmid] = where
    return out
