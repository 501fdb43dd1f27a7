"""Run any :class:`~pvegym.sim.view.Balancer` (``noop``, ``upstream``, ...) inside the environment.

:class:`HeuristicAgent` makes a hand-written balancer act in ``pvegym/Cluster-v0`` exactly as in
``pvegym simulate``: each step it calls ``policy.decide(env.unwrapped.view)`` on the same telemetry
view and encodes the answer as an action. With ``skip_idle_rounds=False`` (the default) the episode
metrics equal ``Simulation(scenario, seed).run(policy)``; with skipping on, a policy that keeps
per-round state (e.g. reading motion results while blocked) would miss the skipped rounds.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from pvegym.policies.registry import make_policy
from pvegym.sim.view import Balancer


class HeuristicAgent:
    """A balancer as an environment agent: ``predict(env) -> action``."""

    def __init__(self, policy: Balancer | str, **params: Any) -> None:
        self.policy: Balancer = make_policy(policy, **params) if isinstance(policy, str) else policy
        self.name = self.policy.name

    def reset(self, seed: int | None = None) -> None:
        """Clear the balancer's state at the start of an episode (as ``Simulation.run`` does)."""
        self.policy.reset(seed)

    def predict(self, env: gymnasium.Env[Any, Any]) -> int:
        """The action of the balancer's decision on the environment's current view."""
        base = env.unwrapped
        return int(base.encode_motion(self.policy.decide(base.view)))  # type: ignore[attr-defined]

    def run_episode(self, env: gymnasium.Env[Any, Any], seed: int | None = None) -> dict[str, Any]:
        """One whole episode from ``reset(seed=seed)``; returns the final ``info`` (the metrics,
        ``move_log``) plus ``return`` (the sum of rewards) and ``steps``."""
        env.reset(seed=seed)
        self.reset(env.unwrapped.episode_seed)  # type: ignore[attr-defined]
        total, steps = 0.0, 0
        while True:
            _, reward, terminated, truncated, info = env.step(self.predict(env))
            total += float(reward)
            steps += 1
            if terminated or truncated:
                return {**info, "return": total, "steps": steps}
