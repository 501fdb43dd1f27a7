"""A privileged look-ahead expert: it tries its candidate motions on copies of the simulation.

Why (issue 19): cloning ``guest-centric`` caps the learned balancer at its teacher, and no
``guest-centric`` variant wins more than 19 of the 40 validation instances against the tuned
``patched`` (``results/train-pair-scorer/teachers.md``). This expert is a *training-time teacher*
and a measure of what a policy could reach on the model: it reads the running
:class:`~pvegym.sim.simulation.Simulation` (never a deployed policy; the student still sees only
the Cluster-v1 observation).

At a round where its proposer (``guest-centric``'s scoring, :meth:`GuestCentricPolicy.propose`)
would attempt a motion, it forks the simulation once per option — no motion and the proposer's
``candidates`` best candidates by relief minus cost — commits the option, rolls the fork forward
``horizon_s`` seconds (no further motion: the cheapest continuation) and keeps the option of
least cost in the metrics' vocabulary (:class:`~pvegym.sim.cost.RunningCost` with ``weights``: the
recipe's reward weights, guest stall plus prices on moves, failures, oscillations, churn, bytes and
pause). A motion must save ``margin`` cost units over waiting.

The fork replays the episode: a fresh simulation of the same scenario and seed stepped with the
balancer motions the original recorded (``metrics.moves``: time, guest, target), so it is the
same state with the same random streams — each option meets the same future (common random
numbers), and it is a *clairvoyant* future: the rollouts see the episode's true randomness.
``copy.deepcopy`` of a simulation is not exact (the round kernels' arrays are row views of shared
matrices, which ``deepcopy`` turns into independent arrays), and a replay costs ~0.1 ms a round.
"""

from __future__ import annotations

import csv
import time
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pvegym.errors import ConfigError
from pvegym.sim import layout as L
from pvegym.sim.cost import BALANCER_COST, RunningCost
from pvegym.sim.move_ledger import CHURN_PRESSURE_PCT
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion
from pvegym.units import parse_duration

#: the recipe's reward weights (experiments/train-pair-scorer.toml): the benchmark's cost plus
#: 60 per GiB sent, 30 per second of guest pause, a churn move priced as an oscillation
DEFAULT_WEIGHTS: dict[str, float] = {
    **BALANCER_COST,
    "churn_moves": 300.0,
    "migration_bytes": 60.0 / 2**30,
    "downtime_s": 30.0,
}
#: the recipe's teacher constants (experiments/train-pair-scorer.toml [imitation])
DEFAULT_PROPOSER: dict[str, Any] = {"w_gib": 1200.0, "w_downtime": 300.0, "horizon_s": 1200.0}


def fork(sim: Simulation) -> Simulation:
    """A copy of ``sim`` at its current round (after that round's ``observe``, before its
    ``commit``), rebuilt by replaying its balancer motions from ``reset`` on the same scenario and
    seed. Exact: the model is deterministic in (scenario, seed, motions)."""
    moves: dict[float, list[Motion]] = {}
    for rec in sim.metrics.moves:
        moves.setdefault(rec.t, []).append(Motion(sid=rec.guest, target=rec.target))
    copy = Simulation(sim.scenario, sim.seed)
    copy.reset()
    while copy.t < sim.t:
        todo = moves.get(copy.t)
        if todo and len(todo) > 1:
            raise RuntimeError(f"two balancer motions at t={copy.t}: not a balancer's trace")
        copy.step(todo[0] if todo else None)
    if copy.t != sim.t:
        raise RuntimeError(f"fork ended at t={copy.t}, not {sim.t}")
    return copy


def rollout_cost(
    sim: Simulation, motion: Motion | None, seconds: float, cost: RunningCost
) -> float:
    """The cost (``cost``'s weights over the episode so far) of a fork of ``sim`` that commits
    ``motion`` now and then no motion for ``seconds`` (whole rounds, at least one)."""
    f = fork(sim)
    f.commit(motion)
    rounds = max(1, round(seconds / f.round_s))
    for k in range(rounds):
        if k:
            f.commit(None)
        f.advance()
        f.receive()
    return cost(f)


@dataclass
class LookaheadExpert:
    """The look-ahead expert as a balancer (``decide(view)``) on a bound simulation (module doc).

    ``bind(sim)`` before an episode: the expert reads that simulation at each ``decide``. Units:
    ``horizon_s`` seconds, ``margin`` cost units (guest-stall-second equivalents)."""

    horizon_s: float = 1200.0
    candidates: int = 3
    margin: float = 0.0
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    proposer: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PROPOSER))
    #: a second proposer run in the shadow: ``{"policy": <registered balancer>, <its constants>}``
    #: (e.g. the reference ``patched`` with its tuned constants); its motion, when it has one, is
    #: one more option, and a round where only it proposes is also compared. Empty: none
    shadow: dict[str, Any] = field(default_factory=dict)
    #: more shadow proposers, each as ``shadow`` (the benchmark's oracle runs every reference
    #: heuristic in the shadow: :mod:`pvegym.experiments.benchmark`)
    shadows: list[dict[str, Any]] = field(default_factory=list)
    name: str = "lookahead"

    def __post_init__(self) -> None:
        from pvegym.policies.registry import make_policy

        self._cost = RunningCost(self.weights, "lookahead.weights")
        self._proposer: Any = make_policy("guest-centric", "lookahead.proposer", **self.proposer)
        specs = [("lookahead.shadow", self.shadow)] if self.shadow else []
        specs += [(f"lookahead.shadows[{i}]", s) for i, s in enumerate(self.shadows)]
        self._shadows: list[Any] = []
        for path, spec in specs:
            params = dict(spec)
            if "policy" not in params:
                raise ConfigError(f"{path}.policy", "missing (a registered balancer's name)")
            self._shadows.append(make_policy(str(params.pop("policy")), path, **params))
        self._sim: Simulation | None = None
        self.rollouts = 0  # rollouts done (a measure of its cost)
        self.attempts = 0  # rounds on which it compared options

    def bind(self, sim: Simulation) -> None:
        """Read ``sim`` from now on (the privileged access)."""
        self._sim = sim

    def reset(self, seed: int | None = None) -> None:
        self._proposer.reset(seed)
        for shadow in self._shadows:
            shadow.reset(seed)

    def adopt(self, view: ClusterView, motion: Motion) -> None:
        """Another balancer issued ``motion`` for this one (DAgger's learner): the proposer's
        outcome tracking follows it. The fork needs nothing: it reads the simulation's moves."""
        self._proposer.adopt(view, motion)

    def _options(self, view: ClusterView) -> list[Motion]:
        """The motions to try this round: the proposer's ``candidates`` best by relief minus
        cost, then each shadow's motion if it is another (every proposer sees every round)."""
        scored = self._proposer.propose(view)
        ranked = sorted(scored, key=lambda c: -(c.relief - c.cost))[: self.candidates]
        options = [Motion(sid=c.sid, target=c.target) for c in ranked]
        for shadow in self._shadows:
            extra = shadow.decide(view)
            if extra is not None and all(
                (m.sid, m.target) != (extra.sid, extra.target) for m in options
            ):
                options.append(Motion(sid=extra.sid, target=extra.target))
        return options

    def decide(self, view: ClusterView) -> Motion | None:
        sim = self._sim
        if sim is None:
            raise RuntimeError("LookaheadExpert.decide before bind(sim)")
        options = self._options(view)
        if not options:
            return None
        horizon = min(self.horizon_s, sim.scenario.duration - sim.t)
        self.attempts += 1
        best, best_cost = None, rollout_cost(sim, None, horizon, self._cost) - self.margin
        for motion in options:
            cost = rollout_cost(sim, motion, horizon, self._cost)
            if cost < best_cost:
                best, best_cost = motion, cost
        self.rollouts += 1 + len(options)
        if best is not None:
            self._proposer.adopt(view, best)
        return best


def pressured_rounds(scenario: Any, seed: int, duration: float) -> int:
    """Decision rounds of the no-motion episode (``scenario``, ``seed``, ``duration`` s) at which
    a move would not be a churn move (some online node's true PSI some avg10 at
    ``CHURN_PRESSURE_PCT``; NaN counts as pressure, as ``churn_moves`` counts them).

    Why: every policy's episode equals the no-motion one up to its first move, so on an instance
    with none of these rounds any policy that moves makes a churn move — a policy held to zero
    churn moves cannot move there, and ties a reference that does not move either."""
    from pvegym.experiments.record import play

    count = 0

    def check(sim: Simulation) -> None:
        nonlocal count
        count += not bool(sim.cluster.totals[L.T_PEAK_SOME] < CHURN_PRESSURE_PCT)

    play(Simulation(scenario, seed), lambda _view: None, duration, on_round=check)
    return count


#: the name that selects :class:`LookaheadExpert` as the recipe's teacher (``[imitation] expert``)
EXPERT_NAME = "lookahead"


def make_expert(name: str, path: str, **params: Any) -> Any:
    """The imitation teacher ``name``: the privileged :class:`LookaheadExpert` (``"lookahead"``;
    it needs ``bind(env.sim)`` each episode) or a registered balancer
    (:func:`pvegym.policies.registry.make_policy`). An unknown constant is a ConfigError at ``path``."""
    if name != EXPERT_NAME:
        from pvegym.policies.registry import make_policy

        return make_policy(name, path, **params)
    known = {f.name for f in fields(LookaheadExpert) if f.init and f.name != "name"}
    for key in params:
        if key not in known:
            raise ConfigError(
                f"{path}.{key}", f"not a constant of {name} ({', '.join(sorted(known))})"
            )
    return LookaheadExpert(**params)


def evaluate(
    expert_params: dict[str, Any], seeds: list[int], train_toml: Path, out: Path
) -> list[dict[str, Any]]:
    """The expert and the recipe's selection reference (``train_toml``'s ``[selection]``: the
    tuned ``patched``) on family instances ``seeds`` of the recipe's scenario, one deterministic
    episode each through the runner's loop (``record.play``), as selection judges a checkpoint.
    Writes ``out/metrics.csv`` (the columns :mod:`pvegym.learning.acceptance` reads) as it goes and
    returns its rows."""
    from pvegym.experiments.record import play
    from pvegym.policies.registry import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.metrics import METRIC_KEYS

    doc = tomllib.loads(train_toml.read_text())
    env, sel = doc["env"], doc["selection"]
    duration = parse_duration(env["episode_seconds"], "env.episode_seconds")
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    header = ["scenario", "policy", "seed", "wall_s", "rollouts", "pressured_rounds", *METRIC_KEYS]
    with (out / "metrics.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, header, extrasaction="ignore")
        writer.writeheader()
        for seed in seeds:
            scn = catalog.resolve(env["scenario"], seed, name_key="env.scenario").scenario
            expert = LookaheadExpert(**expert_params)
            reference = make_policy(sel["reference"], **sel.get("reference_params", {}))
            for label, policy in (("lookahead", expert), (f"{sel['reference']}-tuned", reference)):
                sim = Simulation(scn, seed)
                if isinstance(policy, LookaheadExpert):
                    policy.bind(sim)
                policy.reset(seed)
                t0 = time.perf_counter()
                result, _ = play(sim, policy.decide, duration)
                row = {"scenario": env["scenario"], "policy": label, "seed": seed}
                row["pressured_rounds"] = pressured_rounds(scn, seed, duration)
                row.update(wall_s=time.perf_counter() - t0, rollouts=getattr(policy, "rollouts", 0))
                row.update(result["metrics"])
                writer.writerow(row)
                fh.flush()
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m pvegym.learning.lookahead --out DIR [--start 9000 --count 40] [--set k=v]``:
    :func:`evaluate`, then the acceptance table against the reference."""
    import argparse
    import json

    from pvegym.learning.acceptance import report

    p = argparse.ArgumentParser(prog="python -m pvegym.learning.lookahead")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--train", type=Path, default=Path("experiments/train-pair-scorer.toml"))
    p.add_argument("--start", type=int, default=9000)
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--set", action="append", default=[], help="expert constant k=<json>")
    args = p.parse_args(argv)
    params = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    seeds = list(range(args.start, args.start + args.count))
    rows = evaluate(params, seeds, args.train, args.out)
    scenario = str(rows[0]["scenario"])
    reference = str(rows[1]["policy"])
    lines = report(
        [{k: str(v) for k, v in r.items()} for r in rows], "lookahead", [reference], scenario
    )
    text = "\n".join(lines) + "\n"
    (args.out / "acceptance.md").write_text(f"expert constants: {json.dumps(params)}\n\n" + text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "DEFAULT_PROPOSER",
    "DEFAULT_WEIGHTS",
    "EXPERT_NAME",
    "LookaheadExpert",
    "evaluate",
    "fork",
    "make_expert",
    "pressured_rounds",
    "rollout_cost",
]
