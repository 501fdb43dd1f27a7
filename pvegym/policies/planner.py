"""``planner``: a balancer that plans with pvegym's model from telemetry alone (issue 32, item 1).

Why: the look-ahead expert (``pvegym.learning.lookahead``) reaches what a policy could on the
model, but it rolls the *true* episode forward — clairvoyant, no policy a user could run beside a
real cluster. This planner sees only the :class:`~pvegym.sim.view.ClusterView`s of its episode,
the way an HA manager does, and plans on a model state of its own:

1. **Estimate** (every round). Per guest, an exponential moving average of its reported CPU
   (cores) and host memory (bytes) with weight ``ema_alpha`` per round, and the EMA of the CPU's
   squared deviation from it (its variance, cores²). A guest's first sample on a new node reads
   0 (qemu-server's ``vmstatus``, ``docs/model.md`` *Telemetry*): the round it changed node is
   not learned from. A node's load not attributable to its HA guests (host, non-HA guests) is the
   EMA of ``node_cpu − Σ guest_cpu`` (cores) and ``node_mem − Σ guest_memhost`` (bytes).
2. **Propose** (every round, so their hold counters and outcome tracking follow the episode):
   ``patched`` with the constants ``patched`` (the experiment file passes the tuned ones:
   ``patched-tuned``'s motion) and ``guest-centric``'s ``candidates`` best by relief minus cost.
   A round on which neither proposes, or a motion is under way, is a noop without planning.
3. **Plan**. A :class:`~pvegym.sim.scenario.Scenario` of the view's nodes, guests and rules
   whose workloads are drawn from the estimate — each guest's CPU its EMA plus Ornstein–Uhlenbeck
   noise of the estimated standard deviation and correlation time ``tau_s``, its memory its EMA
   — is simulated (:class:`~pvegym.sim.simulation.Simulation`, the model's own CRM round) in
   ``futures`` futures, each a seed of the planner's own generator. Every option (noop and each
   proposal) meets the same futures (common random numbers): ``warmup_s`` without a motion (the
   fresh model's PSI averages start at 0), the option committed, then ``horizon_s`` without a
   further motion. The option's cost is what the rollout added to
   :data:`~pvegym.sim.cost.BALANCER_COST` after the warm-up, plus two terms the fresh model
   cannot see because it has no history: an oscillation (the move takes a guest back to a node
   the planner saw it leave less than the metrics' ``oscillation_window_s`` before) and a churn
   move (no online node's reported cpu or memory some pressure reaches the churn threshold),
   priced as :data:`BALANCER_COST` prices them. It answers the option of least mean cost, a motion
   only when it saves more than ``margin`` cost units over noop.

What it never reads: the scenario catalog or the family generators (the true instance), the
episode's seed beyond seeding its own generator through a hash, the migration's dirty rates or
writable working sets (priors, ``guest-centric``'s, replaced by what ``guest-centric`` learned
from the planner's own migrations). A guest or node without CPU or memory telemetry (NaN) makes
the round unplannable: it answers ``patched``'s motion (fail-open to the tuned heuristic).

Units: seconds, cores, bytes, cost units (guest-stall-second equivalents).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pvegym.errors import ConfigError
from pvegym.limits import MAX_DURATION_S
from pvegym.policies.guest_centric import GuestCentricPolicy
from pvegym.policies.patched import PatchedPolicy
from pvegym.sim.cost import BALANCER_COST, RunningCost
from pvegym.sim.metrics import Metrics
from pvegym.sim.move_ledger import CHURN_PRESSURE_PCT
from pvegym.sim.scenario import Scenario, scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import STARTED, ClusterView, Motion

#: futures and candidates are bounded: each costs a rollout per option per planned round
MAX_FUTURES = 64
MAX_CANDIDATES = 16
#: metrics' window for an oscillation (s): one owner, :class:`~pvegym.sim.metrics.Metrics`
OSCILLATION_WINDOW_S: float = float(Metrics.oscillation_window_s)

#: the CRM round of the planner's model (s): the scenario schema's default
ROUND_S: float = float(Scenario.round_s)


class PlannerPolicy:
    """Estimate → propose → simulate → choose (module doc)."""

    name = "planner"

    @dataclass(frozen=True)
    class Config:
        """The planner's constants, with units.

        * ``horizon_s`` = 600 s simulated after the decision: ten minutes, long enough for a
          move's 60-unit price to be paid back by the stall it relieves, short enough that the
          no-further-motion continuation stays plausible.
        * ``futures`` = 4 sampled futures per option; ``candidates`` = 3 of ``guest-centric``'s
          proposals (plus ``patched``'s motion and noop).
        * ``warmup_s`` = 60 s of the model before the decision: PSI avg10 settles in ~3 time
          constants (30 s) of the model's 10 s average.
        * ``ema_alpha`` = 0.2 per 10 s round (a 50 s memory); ``tau_s`` = 120 s, the correlation
          time of a guest's CPU noise around its EMA.
        * ``margin`` = 0 cost units a motion must save over noop.
        * ``patched``: the constants of the ``patched`` proposer (empty: its defaults);
          ``guest_centric``: those of the ``guest-centric`` proposer.
        """

        horizon_s: float = 600.0
        futures: int = 4
        candidates: int = 3
        warmup_s: float = 60.0
        ema_alpha: float = 0.2
        tau_s: float = 120.0
        margin: float = 0.0
        patched: dict[str, Any] = field(default_factory=dict)
        guest_centric: dict[str, Any] = field(default_factory=dict)

        def __post_init__(self) -> None:
            _check(self.horizon_s, "horizon_s", 10.0, MAX_DURATION_S / 2)
            _check(self.warmup_s, "warmup_s", 0.0, 3600.0)
            _check(self.ema_alpha, "ema_alpha", 1e-6, 1.0)
            _check(self.tau_s, "tau_s", 1.0, MAX_DURATION_S)
            _check(self.margin, "margin", 0.0, 1e9)
            for key, hi in (("futures", MAX_FUTURES), ("candidates", MAX_CANDIDATES)):
                v = getattr(self, key)
                if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
                    raise ConfigError(f"planner.{key}", f"must be a whole number in 1..{hi}")
            for key in ("patched", "guest_centric"):
                if not isinstance(getattr(self, key), dict):
                    raise ConfigError(
                        f"planner.{key}", "must be a table of that policy's constants"
                    )

    def __init__(self, config: Any = None, **params: Any) -> None:
        from pvegym.policies.registry import make_policy  # the registry imports this module

        cfg = type(self).Config(**params) if config is None else config
        if not isinstance(cfg, type(self).Config):
            raise ConfigError("planner", f"expected PlannerPolicy.Config, got {type(cfg).__name__}")
        self.config: PlannerPolicy.Config = cfg
        self._patched: PatchedPolicy = _proposer(make_policy, "patched", cfg.patched)
        self._gc: GuestCentricPolicy = _proposer(make_policy, "guest-centric", cfg.guest_centric)
        self._cost = RunningCost(BALANCER_COST, "planner.cost")
        self.reset(None)

    def reset(self, seed: int | None = None) -> None:
        """A new episode: estimates cleared; the planner's generator seeded by a hash of
        ``seed`` (only a seed of its own futures: nothing of the episode is rebuilt from it)."""
        self._patched.reset(seed)
        self._gc.reset(seed)
        digest = hashlib.sha256(f"pvegym-planner/{seed}".encode()).digest()
        self._rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        self._est: dict[str, list[float]] = {}  # sid -> [cpu, cpu var, memhost, mem ratio]
        self._base: dict[str, list[float]] = {}  # node -> [cpu, mem]
        self._where: dict[str, str] = {}  # sid -> node last seen on
        self._left: dict[tuple[str, str], float] = {}  # (sid, node) -> t it was seen leaving (s)
        self.planned = 0  # rounds on which options were simulated
        self.rollouts = 0

    # ---------------------------------------------------------------- the round

    def decide(self, view: ClusterView) -> Motion | None:
        plannable = self._learn(view)
        shadow = self._patched.decide(view)
        proposals = self._gc.propose(view)
        if view.motion_active:
            return None
        options: list[Motion] = [] if shadow is None else [shadow]
        ranked = sorted(proposals, key=lambda c: c.relief - c.cost, reverse=True)
        for c in ranked[: self.config.candidates]:
            m = Motion(c.sid, c.target)
            if all((m.sid, m.target) != (o.sid, o.target) for o in options):
                options.append(m)
        if not options:
            return None
        chosen = self._plan(view, options) if plannable else shadow
        if chosen is not None:
            self._gc.adopt(view, chosen)
            if shadow is None or (shadow.sid, shadow.target) != (chosen.sid, chosen.target):
                self._patched.record_issued(view.t, chosen.sid, chosen.target, (chosen.sid,))
        return chosen

    # ---------------------------------------------------------------- estimate

    def _learn(self, view: ClusterView) -> bool:
        """Fold this view's samples into the estimate; whether every value it needs is known."""
        a = self.config.ema_alpha
        gcpu = np.asarray(view.guest_cpu, dtype=np.float64)
        gmem = np.asarray(view.guest_memhost, dtype=np.float64)
        gview = np.asarray(view.guest_mem, dtype=np.float64)
        ok = bool(np.isfinite(gcpu).all() and np.isfinite(gmem).all())
        ok = ok and bool(np.isfinite(view.node_cpu).all() and np.isfinite(view.node_mem).all())
        for i, sid in enumerate(view.sids):
            node = view.node_names[int(view.guest_node[i])] if view.guest_node[i] >= 0 else ""
            moved = self._where.get(sid, node) != node
            if moved:
                self._left[(sid, self._where[sid])] = view.t
            self._where[sid] = node
            if not (math.isfinite(gcpu[i]) and math.isfinite(gmem[i])):
                continue
            ratio = gview[i] / gmem[i] if math.isfinite(gview[i]) and gmem[i] > 0 else 1.0
            ratio = min(max(ratio, 1e-3), 1.0)
            e = self._est.get(sid)
            if e is None:
                self._est[sid] = [float(gcpu[i]), 0.0, float(gmem[i]), ratio]
                continue
            if moved or not view.guest_running[i]:
                continue  # a first sample on a new node reads cpu 0
            d = float(gcpu[i]) - e[0]
            e[0] += a * d
            e[1] = (1 - a) * (e[1] + a * d * d)
            e[2] += a * (float(gmem[i]) - e[2])
            e[3] += a * (ratio - e[3])
        if not ok:
            return False
        on = np.asarray(view.guest_node, dtype=np.int64)
        for n, name in enumerate(view.node_names):
            here = (on == n) & np.asarray(view.guest_running, dtype=bool)
            cpu = max(float(view.node_cpu[n]) - float(gcpu[here].sum()), 0.0)
            mem = max(float(view.node_mem[n]) - float(gmem[here].sum()), 0.0)
            b = self._base.get(name)
            if b is None:
                self._base[name] = [cpu, mem]
            else:
                b[0] += a * (cpu - b[0])
                b[1] += a * (mem - b[1])
        return all(sid in self._est for sid in view.sids)

    def estimate(self, sid: str) -> tuple[float, float, float]:
        """A guest's estimated CPU (cores), its standard deviation (cores) and host memory
        (bytes)."""
        e = self._est[sid]
        return e[0], math.sqrt(max(e[1], 0.0)), e[2]

    # ---------------------------------------------------------------- plan

    def model_scenario(self, view: ClusterView) -> Scenario:
        """The model state the planner simulates: the view's nodes, guests and rules, workloads
        from the estimate (module doc, 3)."""
        cfg = self.config
        gc = self._gc.config
        nodes = []
        for n, name in enumerate(view.node_names):
            bcpu, bmem = self._base.get(name, [0.0, 0.0])
            nodes.append(
                {
                    "name": name,
                    "maxcpu": max(1, round(float(view.node_maxcpu[n]))),
                    "maxmem": float(view.node_maxmem[n]),
                    "base_cpu": bcpu,
                    "base_mem": bmem,
                    "online": bool(view.node_online[n]),
                }
            )
        guests = []
        for i, sid in enumerate(view.sids):
            cpu, sd, mem = self.estimate(sid)
            maxmem = float(view.guest_maxmem[i])
            mem = min(max(mem, 1.0), maxmem)
            dirty, sens = self._gc.dirty_estimate.get(
                sid, (gc.dirty_prior_bps, gc.sensitivity_prior)
            )
            cpu_sig: list[dict[str, Any]] = [{"type": "constant", "level": cpu}]
            if sd > 0:
                cpu_sig.append({"type": "ou", "mean": 0.0, "sigma": sd, "tau": cfg.tau_s})
            running = bool(view.guest_running[i]) and view.guest_state[i] != "stopped"
            guests.append(
                {
                    "sid": sid,
                    "node": view.node_names[max(int(view.guest_node[i]), 0)],
                    "maxcpu": _vcpus(float(view.guest_maxcpu[i])),
                    "maxmem": maxmem,
                    "cpu": cpu_sig,
                    "memhost": mem,
                    "mem_ratio": self._est[sid][3],
                    "dirty_rate": min(dirty, 2.0 * gc.bandwidth_bps),
                    "wws": min(gc.wws_prior_frac * maxmem, maxmem),
                    "throttle_sensitivity": sens,
                    "local_resources": not bool(view.guest_migratable[i]),
                    "state": STARTED if running else "stopped",
                }
            )
        rules = view.rules
        return scenario_from_dict(
            {
                "name": "planner-model",
                "nodes": nodes,
                "guests": guests,
                "duration": cfg.warmup_s + cfg.horizon_s + 2 * ROUND_S,
                "crs_mode": view.mode,
                "node_affinity": [
                    {
                        "name": r.name,
                        "resources": list(r.resources),
                        "nodes": dict(r.nodes),
                        "strict": r.strict,
                    }
                    for r in rules.node_affinity
                ],
                "resource_affinity": [
                    {
                        "name": r.name,
                        "resources": list(r.resources),
                        "affinity": "positive" if r.positive else "negative",
                    }
                    for r in rules.resource_affinity
                ],
            },
            "planner.model",
        )

    def _plan(self, view: ClusterView, options: list[Motion]) -> Motion | None:
        """The option of least expected cost (noop unless a motion saves ``margin``)."""
        cfg = self.config
        scenario = self.model_scenario(view)
        seeds = self._rng.integers(0, 2**63 - 1, size=cfg.futures)
        costs = np.zeros(len(options) + 1)
        for s in seeds:
            for k, option in enumerate([None, *options]):
                costs[k] += self.rollout(scenario, int(s), option)
        costs /= cfg.futures
        costs[1:] += [self._history_cost(view, m) for m in options]
        self.planned += 1
        best = int(np.argmin(costs))
        if best == 0 or costs[best] > costs[0] - cfg.margin:
            return None
        return options[best - 1]

    def rollout(self, scenario: Scenario, seed: int, option: Motion | None) -> float:
        """The cost a model future adds after the warm-up when ``option`` is committed then."""
        cfg = self.config
        sim = Simulation(scenario, seed)
        sim.reset()
        for _ in range(round(cfg.warmup_s / sim.round_s)):
            sim.step(None)
        before = self._cost(sim)
        sim.commit(option)
        for k in range(max(1, round(cfg.horizon_s / sim.round_s))):
            if k:
                sim.commit(None)
            sim.advance()
            sim.receive()
        self.rollouts += 1
        return self._cost(sim) - before

    def _history_cost(self, view: ClusterView, motion: Motion) -> float:
        """What the fresh model cannot charge: oscillation and churn (module doc, 3)."""
        cost = 0.0
        left = self._left.get((motion.sid, motion.target))
        if left is not None and view.t - left < OSCILLATION_WINDOW_S:
            cost += BALANCER_COST["oscillations"]
        on = np.asarray(view.node_online, dtype=bool)
        peak = np.fmax(np.asarray(view.node_cpu_some), np.asarray(view.node_mem_some))[on]
        if peak.size and bool(np.all(peak < CHURN_PRESSURE_PCT)):
            cost += BALANCER_COST["churn_moves"]
        return cost


def _proposer(make: Any, name: str, params: dict[str, Any]) -> Any:
    """A proposer built with ``params``; a bad constant is a ConfigError at
    ``planner.<proposer>.<key>`` (the proposers name their own keys by their own prefix)."""
    key = f"planner.{name.replace('-', '_')}"
    try:
        return make(name, key, **params)
    except ConfigError as err:
        raise ConfigError(f"{key}.{err.path.rsplit('.', 1)[-1]}", err.message) from None


def _check(value: float, key: str, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"planner.{key}", f"must be a number in [{lo:g}, {hi:g}]")
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ConfigError(f"planner.{key}", f"must be in [{lo:g}, {hi:g}], not {value!r}")


def _vcpus(maxcpu: float) -> int:
    """A guest's scenario ``maxcpu`` from the view's: whole vCPUs, at least 1, except 0 (no CPU
    limit, a container) which stays 0."""
    return 0 if maxcpu == 0 else max(1, round(maxcpu))
