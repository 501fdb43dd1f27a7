"""``noop``: never moves anything. The floor every balancer is compared against."""

from __future__ import annotations

from pvegym.sim.view import ClusterView, Motion


class NoopPolicy:
    name = "noop"

    def reset(self, seed: int | None = None) -> None:
        return None

    def decide(self, view: ClusterView) -> Motion | None:
        return None
