"""Episode metrics (``MODEL.md`` §9): what a policy achieved and what it cost.

The names are part of the public interface. Pressure and stall metrics integrate the *true*
instantaneous pressure of each round (not the telemetry a policy sees); counts come from the
motions the balancer issued (a bundle counts once, under its leader).

Beyond §9: ``moves_guest_failed`` counts live migrations the HA manager reports as succeeded that
paused their guest for at least :attr:`Metrics.pause_failure_s` (10 s) — the unpatched
non-converging case's ≈ 23 s switchover (MODEL §6) is a success for the pipeline and a failure
for the guest, and the reports say so. ``oom_kills`` counts guests the kernel's OOM killer killed
because their node's memory in use went past MemTotal + swap (an overcommitted target).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

METRIC_KEYS = (
    "sim_seconds",
    "moves",
    "moves_succeeded",
    "moves_failed",
    "moves_aborted",
    "moves_guest_failed",
    "failed_repeats",
    "oscillations",
    "max_moves_one_guest",
    "churn_moves",
    "stall_cpu_s",
    "stall_mem_s",
    "oom_kills",
    "guest_stall_s",
    "cpu_shortfall_core_s",
    "migration_bytes",
    "migration_seconds",
    "downtime_s",
    "evacuation_latency_s",
    "imbalance_mean",
)


@dataclass(slots=True)
class MoveRecord:
    """One balancer motion (``moves`` list of ``simulate --json``)."""

    t: float
    guest: str
    source: str
    target: str
    outcome: str = "running"  # running | succeeded | failed | aborted
    reason: str = ""
    t_end: float | None = None
    pause_s: float = 0.0  # guest-visible pause of the motion (s): switchover or container down

    def as_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "guest": self.guest,
            "source": self.source,
            "target": self.target,
            "outcome": self.outcome,
            "t_end": self.t_end,
            "reason": self.reason,
            "pause_s": self.pause_s,
        }


@dataclass
class Metrics:
    """Accumulates §9 metrics over an episode."""

    oscillation_window_s: float = 3600.0
    pause_failure_s: float = 10.0
    """A live migration that paused its guest this long (s) failed the guest although the HA
    manager counts it as succeeded: MODEL §10's bar for the unpatched non-converging case ("ends
    with a guest pause ≥ 10 s"), the limit qemu-server was told is 0.1 s (``migrate_downtime``)."""
    sim_seconds: float = 0.0
    stall_cpu_s: float = 0.0
    stall_mem_s: float = 0.0
    guest_stall_s: float = 0.0
    cpu_shortfall_core_s: float = 0.0
    migration_bytes: float = 0.0
    migration_seconds: float = 0.0
    downtime_s: float = 0.0
    failed_repeats: int = 0
    oom_kills: int = 0  # guests the kernel's OOM killer killed (a node past MemTotal + swap)
    moves_failed: int = 0  # running count (failed + aborted), so per-step readers need no scan
    oscillations: int = 0
    churn_moves: int = 0
    moves: list[MoveRecord] = field(default_factory=list)
    _imbalance_sum: float = 0.0
    _rounds: int = 0
    _failed_pairs: set[tuple[str, str]] = field(default_factory=set)
    _departures: dict[tuple[str, str], float] = field(default_factory=dict)
    _per_guest: dict[str, int] = field(default_factory=dict)
    onsets: list[tuple[float, str]] = field(default_factory=list)

    def add_round(
        self,
        dt: float,
        stall_cpu: float,
        stall_mem: float,
        guest_stall: float,
        shortfall: float,
        imbalance: float,
    ) -> None:
        """One round of ``dt`` s: Σ over online nodes of cpu/memory some (fractions 0–1), Σ over
        guests of cpu + memory some, Σ CPU shortfall (cores) and the normalized imbalance."""
        self.sim_seconds += dt
        self.stall_cpu_s += stall_cpu * dt
        self.stall_mem_s += stall_mem * dt
        self.guest_stall_s += guest_stall * dt
        self.cpu_shortfall_core_s += shortfall * dt
        self._imbalance_sum += imbalance
        self._rounds += 1

    def move_issued(self, rec: MoveRecord, churn: bool) -> None:
        self.moves.append(rec)
        self._per_guest[rec.guest] = self._per_guest.get(rec.guest, 0) + 1
        left = self._departures.get((rec.guest, rec.target))
        if left is not None and rec.t - left < self.oscillation_window_s:
            self.oscillations += 1
        if churn:
            self.churn_moves += 1

    def move_ended(
        self,
        rec: MoveRecord,
        ok: bool,
        aborted: bool,
        reason: str,
        t_end: float,
        pause_s: float = 0.0,
    ) -> None:
        rec.t_end = t_end
        rec.reason = reason
        rec.pause_s = pause_s
        if ok:
            rec.outcome = "succeeded"
            self._departures[(rec.guest, rec.source)] = t_end
        else:
            rec.outcome = "aborted" if aborted else "failed"
            self.moves_failed += 1
            pair = (rec.guest, rec.target)
            if pair in self._failed_pairs:
                self.failed_repeats += 1
            self._failed_pairs.add(pair)

    def result(self) -> dict[str, Any]:
        moves = self.moves
        latency: float | None = None
        for t0, node in self.onsets:
            after = [m.t - t0 for m in moves if m.source == node and m.t >= t0]
            if after:
                latency = min(after) if latency is None else min(latency, min(after))
        return {
            "sim_seconds": self.sim_seconds,
            "moves": len(moves),
            "moves_succeeded": sum(m.outcome == "succeeded" for m in moves),
            "moves_failed": self.moves_failed,
            "moves_aborted": sum(m.outcome == "aborted" for m in moves),
            "moves_guest_failed": sum(
                m.outcome == "succeeded"
                and m.guest.startswith("vm:")  # a live migration (a container restarts by design)
                and m.pause_s >= self.pause_failure_s
                for m in moves
            ),
            "failed_repeats": self.failed_repeats,
            "oscillations": self.oscillations,
            "max_moves_one_guest": max(self._per_guest.values(), default=0),
            "churn_moves": self.churn_moves,
            "stall_cpu_s": self.stall_cpu_s,
            "stall_mem_s": self.stall_mem_s,
            "oom_kills": self.oom_kills,
            "guest_stall_s": self.guest_stall_s,
            "cpu_shortfall_core_s": self.cpu_shortfall_core_s,
            "migration_bytes": self.migration_bytes,
            "migration_seconds": self.migration_seconds,
            "downtime_s": self.downtime_s,
            "evacuation_latency_s": latency,
            "imbalance_mean": self._imbalance_sum / self._rounds if self._rounds else 0.0,
        }
