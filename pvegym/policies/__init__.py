"""Balancers as policies: each maps the HA manager's view (:class:`pvegym.sim.view.ClusterView`) to
at most one motion per round. The registry lets configs and the CLI name them."""

from pvegym.policies.registry import available, make_policy

__all__ = ["available", "make_policy"]
