"""Replay an upstream test directory on upstream's test hardware with pvegym's HA stack.

:class:`~pvegym.harness.testhardware.TestHardware` runs the model layer's CRM, Manager and LRM
(:mod:`pvegym.sim.ha`); the balancer of the Manager's ``load_balance`` step is
:class:`pvegym.policies.upstream.UpstreamPolicy` with the constants of the directory's ``datacenter.cfg``
(the raw coefficient of variation, as ha-manager 5.2.0's crate reports it). The result is the whole
log, in ``log.expect``'s format, and the balancer's decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pvegym.harness.hardware import LogEntry
from pvegym.harness.sim_env import SimEnv
from pvegym.harness.testdir import TestDir, read_testdir
from pvegym.harness.testhardware import TestHardware
from pvegym.policies.upstream import UpstreamPolicy
from pvegym.sim.view import Balancer, ClusterView, Motion


@dataclass(slots=True)
class Decision:
    """One ``auto rebalance`` motion: round time (s), leader, target, imbalance before/after."""

    t: float
    sid: str
    target: str
    imbalance_before: float
    imbalance_after: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "sid": self.sid,
            "target": self.target,
            "imbalance_before": self.imbalance_before,
            "imbalance_after": self.imbalance_after,
        }


@dataclass(slots=True)
class ReplayResult:
    log: list[LogEntry]
    decisions: list[Decision] = field(default_factory=list)

    @property
    def end_time(self) -> float:
        return self.log[-1].t if self.log else 0

    def log_text(self) -> str:
        """The log as upstream's harness writes it (``status/log``)."""
        return "".join(e.format() + "\n" for e in self.log)


class _Recording:
    """A balancer that records the motions it answers (at the round's time)."""

    def __init__(self, inner: Balancer, decisions: list[Decision]) -> None:
        self.inner = inner
        self.name = inner.name
        self.decisions = decisions

    def reset(self, seed: int | None = None) -> None:
        self.inner.reset(seed)

    def decide(self, view: ClusterView) -> Motion | None:
        motion = self.inner.decide(view)
        if motion is not None:
            self.decisions.append(
                Decision(
                    view.t,
                    motion.sid,
                    motion.target,
                    float(motion.imbalance_before or 0.0),
                    float(motion.imbalance_after or 0.0),
                )
            )
        return motion


def upstream_policy(env: SimEnv) -> UpstreamPolicy:
    """Upstream's balancer with the ``datacenter.cfg`` constants in force (``Manager.pm``
    ``update_crs_scheduler_mode``) and the raw coefficient of variation of crate 2.0."""
    crs = env.get_datacenter_settings()["crs"]

    def get(key: str, default: Any) -> Any:
        v = crs.get(key)
        return default if v is None else v

    return UpstreamPolicy(
        threshold=float(get("ha-auto-rebalance-threshold", 0.3)),
        hold_duration=float(get("ha-auto-rebalance-hold-duration", 3)),
        margin=float(get("ha-auto-rebalance-margin", 0.1)),
        method=str(get("ha-auto-rebalance-method", "bruteforce")),
        normalized=False,
    )


def replay(td: TestDir, balancer: Callable[[SimEnv], Balancer] | None = None) -> ReplayResult:
    """Run ``td`` to its end; ``balancer`` builds the policy for every new Manager (default:
    :func:`upstream_policy`)."""
    decisions: list[Decision] = []
    make = balancer or upstream_policy

    def factory(env: SimEnv) -> Balancer:
        return _Recording(make(env), decisions)

    hw = TestHardware(td.files, td.cmdlist, factory)
    hw.simulate()
    return ReplayResult(hw.log_entries, decisions)


def replay_dir(path: str | Path) -> ReplayResult:
    """Read and replay one upstream test directory."""
    return replay(read_testdir(path))


def first_difference(expected: str, got: str) -> tuple[int, str | None, str | None] | None:
    """The first differing line of two logs: ``(line number, expected, got)``; ``None`` if equal."""
    a = expected.splitlines()
    b = got.splitlines()
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return i + 1, x, y
    return None


__all__ = [
    "Decision",
    "ReplayResult",
    "first_difference",
    "replay",
    "replay_dir",
    "upstream_policy",
]
