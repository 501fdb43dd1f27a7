"""The fixes an operator can make: guests whose balancer migrations would fail or loop.

A guest **fails** when its config blocks every migration (:mod:`pvegym.pve_export.blockers`: a
local CD-ROM, a host-path volume, a local device): the balancer picks it, the precheck refuses it,
and upstream picks it again a hold later. A guest **loops** when a balancer's replay moves it back
to a node it left (the ``oscillations`` metric, per guest). Each gets the fix from its config
(:func:`pvegym.pve_export.blockers.fix_for`) and the scenario override that models the fix:
``local_resources = false`` when the fix frees the migration, else ``auto_rebalance = false``
(the HA resource's ``auto-rebalance: 0``: the balancer leaves the guest alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pvegym.pve_export.blockers import (
    Fix,
    auto_rebalance_off,
    ct_migratability,
    fix_for,
    vm_migratability,
)
from pvegym.pve_export.cluster import ClusterExport


@dataclass
class GuestFix:
    """One guest's problem, its fixes and the override that simulates them."""

    sid: str
    problem: str  # "fails" | "loops"
    reason: str  # from its config (or the replay, for a loop)
    fixes: list[Fix]
    override: tuple[str, Any]  # scenario key path, value
    attempts: dict[str, int] = field(default_factory=dict)  # policy -> its motions of the guest

    def as_json(self) -> dict[str, Any]:
        return {
            "sid": self.sid,
            "problem": self.problem,
            "reason": self.reason,
            "fixes": [f.__dict__ for f in self.fixes],
            "fix": "; ".join(f.fix for f in self.fixes),
            "simulated_as": {self.override[0]: self.override[1]},
            "attempts": self.attempts,
        }


def find_fixes(
    export: ClusterExport,
    scenario: dict[str, Any],
    runs: dict[str, list[dict[str, Any]]],
) -> list[GuestFix]:
    """The started, HA-managed, balancer-eligible guests of ``scenario`` (the import's dict) whose
    migrations fail (blocked by their config) or that a replay of ``runs`` (label → motions)
    moves back to a node they left."""
    by_sid = {g.sid: g for g in export.guests.values()}
    out = []
    for i, entry in enumerate(scenario["guests"]):
        sid = entry["sid"]
        if (
            not entry.get("ha", True)
            or entry.get("auto_rebalance", True) is False
            or entry.get("state", "started") != "started"
        ):
            continue  # no balancer picks it: nothing to fix
        attempts = {
            label: sum(1 for m in moves if m["guest"] == sid)
            for label, moves in runs.items()
            if any(m["guest"] == sid for m in moves)
        }
        g = by_sid.get(sid)
        if entry.get("local_resources") and g is not None:
            mig = (
                vm_migratability(g.config, export.storages, export.pci_live_capable)
                if g.kind == "qemu"
                else ct_migratability(g.config, export.storages)
            )
            fixes = [fix_for(sid, key, reason) for key, reason in mig.blockers]
            frees = all(f.frees for f in fixes)
            override = (
                (f"guests[{i}].local_resources", False)
                if frees
                else (f"guests[{i}].auto_rebalance", False)
            )
            reason = "; ".join(f"{k}: {r}" for k, r in mig.blockers)
            out.append(GuestFix(sid, "fails", reason, fixes, override, attempts))
            continue
        loops = {label: n for label, moves in runs.items() if (n := _returns(moves, sid))}
        if loops:
            label, n = max(loops.items(), key=lambda kv: kv[1])
            reason = f"`{label}` moves it back to a node it left {n}× in the window"
            fix = Fix("auto-rebalance", reason, auto_rebalance_off(sid), False)
            out.append(
                GuestFix(
                    sid, "loops", reason, [fix], (f"guests[{i}].auto_rebalance", False), attempts
                )
            )
    return out


def _returns(moves: list[dict[str, Any]], sid: str) -> int:
    """Succeeded motions of ``sid`` that return it to a node it left earlier."""
    left: set[str] = set()
    n = 0
    for m in moves:
        if m["guest"] != sid or m["outcome"] != "succeeded":
            continue
        left.add(m["source"])
        if m["target"] in left:
            n += 1
    return n


def overrides(fixes: list[GuestFix]) -> dict[str, Any]:
    """Every fix at once, as scenario overrides."""
    return dict(f.override for f in fixes)
