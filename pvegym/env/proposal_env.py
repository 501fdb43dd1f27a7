"""A choice among proposed motions (issue 32, item 2): the agent picks noop or one of a proposer's
K motions, and is paid for beating a reference balancer on the same episode.

Why: a flat agent over every guest × node pair must discover, from scratch, the few motions worth
making among hundreds; it acts as ``noop`` at argmax. Here the hard part — which motions are worth
considering — is done by the heuristics (a :class:`Proposer`: in pvegym,
:class:`pvegym.policies.proposals.HeuristicProposer`, ``patched-tuned``'s motion and
``guest-centric``'s best few), so the agent can always match the tuned heuristic (the slot of its
motion) and learns when noop or another proposal does better.

* **Rounds.** The episode is the benchmark's (:func:`pvegym.experiments.record.play`'s order:
  decide on round ``r``'s view, commit, simulate to round ``r + 1``; the last decision is committed
  and not simulated). The proposer sees every round's :class:`~pvegym.sim.view.ClusterView` (its
  heuristics keep per-round state); the agent is asked only on rounds with a proposal (and the
  episode's last round, so that an episode without one still has a step). The other rounds commit
  no motion — what a deployed agent does there too (:mod:`pvegym.policies.learned`).
* **Observation.** What the proposer encodes from the view and its proposals
  (:attr:`Proposals.observation`): telemetry only. Its size does not depend on the cluster's.
* **Action.** ``Discrete(proposer.n_slots)``: slot 0 is noop, slot ``k`` the proposer's ``k``-th
  motion; ``action_masks()`` marks the slots with a motion. A masked slot is a counted no-op.
* **Reward.** Minus what the step added to ``RunningCost(reward_weights)`` of the episode, minus
  the same of a *twin* :class:`~pvegym.sim.simulation.Simulation` of the same instance and seed
  played by ``baseline`` (a fresh balancer per episode: the benchmark passes ``patched-tuned``),
  over ``reward_scale``. An episode's return is (baseline cost − agent cost) / scale: paid for
  beating the tuned heuristic on the same randomness, 0 for copying it. ``baseline=None``: no twin.

Units: seconds, cost units (guest-stall-second equivalents).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, SupportsFloat

import gymnasium
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.sim import catalog
from pvegym.sim.cost import BALANCER_COST, RunningCost
from pvegym.sim.scenario import Scenario
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import Balancer, ClusterView, Motion


@dataclass(frozen=True)
class Proposals:
    """One round's proposals: ``motions[k]`` the motion of slot ``k`` (``None`` for slot 0 and
    for an empty slot), ``mask[k]`` whether slot ``k`` may be chosen, ``observation`` the agent's
    input (float32 in [0, 1])."""

    motions: tuple[Motion | None, ...]
    mask: NDArray[np.bool_]
    observation: NDArray[np.float32]

    @property
    def any_motion(self) -> bool:
        return bool(self.mask[1:].any())


class Proposer(Protocol):
    """What proposes the motions the agent chooses among (stateful over an episode's views)."""

    n_slots: int
    observation_size: int

    def reset(self, seed: int | None = None) -> None: ...

    def propose(self, view: ClusterView) -> Proposals:
        """Called on every round's view, in order (also while a motion is under way)."""
        ...

    def adopt(self, view: ClusterView, motion: Motion | None) -> None:
        """What was committed on the round :meth:`propose` last saw (``None``: no motion)."""
        ...


class ProposalEnv(gymnasium.Env[NDArray[np.float32], np.int64]):
    """The proposal action space over a scenario or family (module doc).

    Arguments: ``scenario`` (a family name, named scenario, ``.toml`` path or
    :class:`Scenario`), ``proposer`` (a :class:`Proposer`), ``baseline`` (a factory of the twin's
    balancer, or ``None``), ``reward_weights`` (default :data:`BALANCER_COST`), ``reward_scale``
    (> 0), ``seed_split`` (``"train"`` or ``"test"``: where unseeded resets draw a family
    instance), ``episode_seconds`` (default the scenario's duration). ``reset(seed=s)`` plays
    instance ``s`` with episode seed ``s``, as the benchmark does.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012
    #: rounds without a proposal are simulated inside a step (ClusterEnv's name for it)
    skip_idle_rounds = True

    def __init__(
        self,
        scenario: str | Scenario,
        proposer: Proposer,
        baseline: Callable[[], Balancer] | None = None,
        *,
        reward_weights: Mapping[str, float] | None = None,
        reward_scale: float = 1.0,
        seed_split: str = "train",
        episode_seconds: float | None = None,
    ) -> None:
        if seed_split not in ("train", "test"):
            raise ConfigError("seed_split", f"{seed_split!r} is not allowed (allowed: train, test)")
        if not (isinstance(reward_scale, int | float) and 0.0 < float(reward_scale) < math.inf):
            raise ConfigError("reward_scale", f"must be a finite number > 0, not {reward_scale!r}")
        self.proposer = proposer
        self.baseline = baseline
        self._cost = RunningCost(BALANCER_COST if reward_weights is None else reward_weights)
        self.reward_weights = dict(self._cost.weights)
        self.reward_scale = float(reward_scale)
        self.episode_seconds = episode_seconds
        self._family: str | None = None
        self._fixed: Scenario | None = None
        if isinstance(scenario, Scenario):
            self._fixed = scenario
            self._split: Sequence[int] = range(0, 2**31 - 1)
        elif catalog.is_family(scenario):
            self._family = scenario
            self._split = catalog.seeds(scenario, "train" if seed_split == "train" else "test")
        else:
            self._fixed = catalog.resolve(scenario, 0).scenario
            self._split = range(0, 2**31 - 1)
        self.action_space = spaces.Discrete(proposer.n_slots)
        self.observation_space = spaces.Box(
            0.0, 1.0, shape=(proposer.observation_size,), dtype=np.float32
        )
        self._sim: Simulation | None = None
        self._twin: Simulation | None = None
        self._twin_policy: Balancer | None = None
        self.episode_seed: int | None = None
        self._p: Proposals | None = None

    # ------------------------------------------------------------------ public
    @property
    def sim(self) -> Simulation:
        """The agent's simulation (ground truth: for tests and tools, never for decisions)."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        return self._sim

    @property
    def view(self) -> ClusterView:
        """The current round's telemetry view."""
        return self._view

    def action_masks(self) -> NDArray[np.bool_]:
        if self._p is None:
            raise RuntimeError("call reset() first")
        return self._p.mask.copy()

    @property
    def proposals(self) -> Proposals:
        """The proposals of the current decision."""
        if self._p is None:
            raise RuntimeError("call reset() first")
        return self._p

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is None:
            seed = int(self._split[int(self.np_random.integers(len(self._split)))])
        self.episode_seed = int(seed)
        scn = self._fixed if self._family is None else catalog.resolve(self._family, seed).scenario
        assert scn is not None
        seconds = scn.duration if self.episode_seconds is None else float(self.episode_seconds)
        self._sim = Simulation(scn, seed)
        self._rounds = max(1, round(seconds / self._sim.round_s))
        self._view = self._sim.reset()
        self._twin = self._twin_policy = None
        if self.baseline is not None:
            self._twin = Simulation(scn, seed)
            self._twin_view = self._twin.reset()
            self._twin_policy = self.baseline()
            self._twin_policy.reset(seed)
        self.proposer.reset(seed)
        self._r = 0
        self._last_cost = 0.0
        self._invalid_total = 0
        self._to_decision()
        assert self._p is not None
        return self._p.observation.copy(), {"action_mask": self._p.mask.copy(), "rounds": 1}

    def step(
        self, action: int | np.integer[Any]
    ) -> tuple[NDArray[np.float32], SupportsFloat, bool, bool, dict[str, Any]]:
        p = self._p
        if p is None or self._sim is None:
            raise RuntimeError("call reset() first")
        if self._r >= self._rounds:
            raise RuntimeError("episode is over: call reset()")
        a = int(action)
        if not 0 <= a < p.mask.size:
            raise ValueError(f"action {a} outside Discrete({p.mask.size})")
        motion = p.motions[a] if p.mask[a] else None
        invalid = int(not p.mask[a])
        self._invalid_total += invalid
        self.proposer.adopt(self._view, motion)
        start = self._r
        self._round(motion)
        self._to_decision()
        truncated = self._r >= self._rounds
        cost = self._cost(self._sim)
        if self._twin is not None:
            cost -= self._cost(self._twin)
        reward = -(cost - self._last_cost) / self.reward_scale
        self._last_cost = cost
        info: dict[str, Any] = {"invalid_action": invalid, "rounds": self._r - start}
        if truncated:
            result = self._sim.result()
            info.update(result["metrics"])
            info["move_log"] = result["moves"]
            info["invalid_actions"] = self._invalid_total
            if self._twin is not None:
                info["baseline_cost"] = self._cost(self._twin)
        p = self._p
        assert p is not None
        info["action_mask"] = p.mask.copy()
        return p.observation.copy(), reward, False, truncated, info

    # ------------------------------------------------------------------ internals
    def _round(self, motion: Motion | None) -> None:
        """Round ``r``'s commit and the physics to round ``r + 1`` (the last round: commit only),
        for the agent's simulation and the twin."""
        sim, twin = self._sim, self._twin
        assert sim is not None
        last = self._r >= self._rounds - 1
        if last:
            sim.commit(motion)
        else:
            self._view = sim.step(motion)
        if twin is not None:
            assert self._twin_policy is not None
            m = self._twin_policy.decide(self._twin_view)
            if last:
                twin.commit(m)
            else:
                self._twin_view = twin.step(m)
        self._r += 1

    def _to_decision(self) -> None:
        """Play noop rounds until one with a proposal (or the last round); past the end, the
        observation is the last one with no motion allowed."""
        while self._r < self._rounds:
            p = self.proposer.propose(self._view)
            if p.any_motion or self._r == self._rounds - 1:
                self._p = p
                return
            self.proposer.adopt(self._view, None)
            self._round(None)
        assert self._p is not None
        mask = np.zeros_like(self._p.mask)
        mask[0] = True
        self._p = Proposals((None,) * mask.size, mask, self._p.observation)


__all__ = ["ProposalEnv", "Proposals", "Proposer"]
