"""``patched``: the upstream balancer with the field report's patch series, patch by patch.

The field report ("[PATCH ha-manager 0/7] auto rebalance: fix failure retry loop, oscillation and
idle-cluster churn", pve-ha-manager 5.2.5, two-node PVE 9.2 cluster) has five behavioural patches;
patches 4–5 only extend upstream's Perl simulator (pvegym models that already). Each behavioural
patch is one boolean switch of :class:`PatchedPolicy.Config`, so that any one can be ablated alone;
with every switch off the policy decides exactly like :class:`~pvegym.policies.upstream.UpstreamPolicy`.

1. ``outcome_tracking`` — remember the outcome of the motions *this balancer* issued, learned
   from ``view.results`` (the LRM exits the CRM processes, nothing else): after a failure the
   (resource, target) pair is backed off for ``backoff_base_s`` × 2^(k−1) s after its k-th failure
   (60 s, 120 s, 240 s, …, capped at ``backoff_cap_s``); after a success the resource (and its
   bundle) is left alone for ``cooldown_s``. Seed: "failed motions back off with the expected
   60/120s delays".
2. ``use_memhost`` — a guest's memory in the dynamic stats is its host-side footprint
   (``memhost``) instead of the balloon-reported guest view (``mem``), falling back to ``mem``
   where ``memhost`` is missing (NaN). Seed: "the predicted post-migration state is systematically
   off because the balloon-adjusted guest memory value is used instead of the host-side footprint".
3. ``dead_band`` — a move must also lower the imbalance by at least ``min_improvement`` in
   absolute terms, on top of upstream's relative ``margin``. Seed: "the relative margin provides
   almost no hysteresis (a base load difference of ~0.5 percentage points qualifies a motion and
   later its reverse)".
6. ``residual_ema`` — node load = Σ usage of the HA guests on the node + a residual (node stat −
   that sum); only the residual is smoothed, by an EMA kept across rounds. Known structural
   changes (a guest moved, a guest's own load) act at once; only load no HA motion can act upon is
   averaged. Seed: "only load that cannot be attributed to any HA-managed service - which drives
   the oscillation but cannot be acted upon - is averaged".
7. ``pressure_gate`` — act only while some node reports PSI cpu or memory *some* avg10 ≥
   ``min_pressure_pct``; fail open when that telemetry is missing. Seed: "only while some node
   reports a cpu or memory some-pressure (PSI avg10 …) of at least 10%".

The hooks used (see :class:`~pvegym.policies.upstream.UpstreamPolicy`): :meth:`observe` (patch 1, every
round, blocked or not), :meth:`guest_stats` (2), :meth:`node_stats` (6), :meth:`should_consider`
(7, after the hold counter fired, so a gated attempt still resets the counter like any attempt),
:meth:`filter_candidates` (1) and :meth:`accept` (3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pvegym.errors import ConfigError
from pvegym.policies import kernels
from pvegym.policies.upstream import (
    BOOL,
    CURRENT_STATES,
    F64,
    I64,
    Candidates,
    FloatArray,
    NodeStatsArrays,
    UpstreamPolicy,
    check_non_negative,
    quantity,
)
from pvegym.sim.view import ClusterView, Motion


@dataclass(frozen=True, slots=True)
class IssuedMotion:
    """A motion this balancer issued, until its result has been seen."""

    leader: str
    target: str
    members: tuple[str, ...]  # the bundle moved with the leader (sids, leader included)


class PatchedPolicy(UpstreamPolicy):
    """Upstream's balancer plus the field report's patches 1, 2, 3, 6 and 7, each behind its own switch."""

    name = "patched"

    @dataclass(frozen=True, slots=True)
    class Config(UpstreamPolicy.Config):
        """Upstream's constants plus the patch switches and constants (all overridable).

        Patch 1 (outcome tracking):

        * ``backoff_base_s`` = 60 s: the field report's observed first backoff ("60/120s delays").
        * ``backoff_factor`` = 2: "exponential per-target backoff", doubling (60, 120, 240, …).
        * ``backoff_cap_s`` = 3600 s (not in the field report): reached after the 7th failure
          (60·2⁶ = 3840 s), so a permanently failing move (local CD-ROM) is retried at most about
          once an hour — the tail of the nuisance stays bounded, yet a condition fixed by an admin
          (CD-ROM ejected) is picked up within the hour without a CRM restart.
        * ``cooldown_s`` = 600 s (not in the field report): after a successful move its resource stays put
          for 10 min — several hold windows (3 × 10 s) plus a full migration of a large guest at
          the convergence patch's ~430 MiB/s (a 96 GiB guest: ≈ 4 min), and long enough for PSI avg60 to show
          the move's effect; it caps one guest at 6 balancer moves per hour, where the field report saw 5
          moves of one VM in 27 min.

        Patch 3 (dead band):

        * ``min_improvement`` = 0.1 (normalized imbalance, not in the field report): the imbalance must
          drop by at least 0.1 in absolute terms. On two nodes the normalized imbalance is
          ``|l₁ − l₂| / (l₁ + l₂)``, so a move of load ``x`` lowers it by at most ``2x/(l₁+l₂)``:
          0.1 asks a move to shift at least 5 % of the cluster's total load — a third of
          upstream's 0.3 threshold. Swapping a dominant guest between nodes whose base loads differ
          by δ improves it by only ``2δ/(l₁+l₂)`` (the field report's ~0.5 pp asymmetry on an idle
          cluster of total load ≈ 0.15 gives ≈ 0.07 < 0.1).

        Patch 6 (residual EMA):

        * ``ema_alpha`` = 0.2 per CRM round (not in the field report): with 10 s rounds the time constant
          is −10 s / ln(0.8) ≈ 45 s, about the hold window plus one pvestatd sample: white
          sampling noise of the residual shrinks by √(α/(2−α)) = 1/3, while a real, lasting change
          of unattributable load is 90 % followed within ≈ 100 s (10 rounds).

        Patch 7 (pressure gate):

        * ``min_pressure_pct`` = 10 % PSI some avg10: the field report's figure ("of at least 10%"),
          equal to the churn threshold of docs/metrics.md.
        """

        outcome_tracking: bool = True
        backoff_base_s: float = quantity(60.0, "duration")
        backoff_factor: float = 2.0
        backoff_cap_s: float = quantity(3600.0, "duration")
        cooldown_s: float = quantity(600.0, "duration")
        use_memhost: bool = True
        dead_band: bool = True
        min_improvement: float = 0.1
        residual_ema: bool = True
        ema_alpha: float = 0.2
        pressure_gate: bool = True
        min_pressure_pct: float = 10.0

        def __post_init__(self) -> None:
            # zero-argument super() does not work in a slots dataclass (the class is recreated)
            UpstreamPolicy.Config.__post_init__(self)
            for key in (
                "outcome_tracking",
                "use_memhost",
                "dead_band",
                "residual_ema",
                "pressure_gate",
            ):
                if not isinstance(getattr(self, key), bool):
                    raise ConfigError(
                        f"patched.{key}", f"must be true or false, got {getattr(self, key)!r}"
                    )
            for key in (
                "backoff_base_s",
                "backoff_cap_s",
                "cooldown_s",
                "min_improvement",
                "min_pressure_pct",
            ):
                check_non_negative(f"patched.{key}", getattr(self, key))
            f = self.backoff_factor
            if isinstance(f, bool) or not isinstance(f, int | float) or not (1 <= f < math.inf):
                raise ConfigError("patched.backoff_factor", f"must be a number >= 1, got {f!r}")
            a = self.ema_alpha
            if isinstance(a, bool) or not isinstance(a, int | float) or not (0 < a <= 1):
                raise ConfigError("patched.ema_alpha", f"must be in (0, 1], got {a!r}")

    config: Config

    def __init__(self, config: Any = None, **params: Any) -> None:
        super().__init__(config, **params)
        # the guests' usage is the telemetry's (patch 2's choice), not a subclass's own
        self._usage_from_view = type(self).guest_stats is PatchedPolicy.guest_stats
        self._alpha = float(self.config.ema_alpha)  # the kernel's float argument
        self._clear()

    def _clear(self) -> None:
        # patch 1: (sid, target) -> number of failures, and the time until which it is blocked (s)
        self.failures: dict[tuple[str, str], int] = {}
        self.backoff_until: dict[tuple[str, str], float] = {}
        # patch 1: sid -> time until which it is not moved again after a successful move (s)
        self.cooldown_until: dict[str, float] = {}
        self._issued: dict[float, IssuedMotion] = {}  # CRM round time of issue -> the motion
        # patch 6: per-node EMA of the residual (cores, bytes), and the round it was last updated
        self.residual_cpu: FloatArray | None = None
        self.residual_mem: FloatArray | None = None
        self._ema_t: float | None = None
        self._cands: Candidates | None = None
        # node_stats' last output, the view it read and the imbalance computed with it
        self._stats_imbalance: tuple[NodeStatsArrays, ClusterView, float] | None = None

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._clear()

    # ---------------------------------------------------------------- protocol

    def decide(self, view: ClusterView) -> Motion | None:
        """Upstream's round; remembers the motion it issued (patch 1) to learn its outcome."""
        self._cands = None
        motion = super().decide(view)
        if motion is not None and self.config.outcome_tracking:
            members: tuple[str, ...] = (motion.sid,)
            cands = self._cands
            if cands is not None:
                leader = view.sids.index(motion.sid)
                members = tuple(view.sids[g] for g in cands.members.get(leader, (leader,)))
            self.record_issued(view.t, motion.sid, motion.target, members)
        return motion

    def record_issued(self, t: float, leader: str, target: str, members: tuple[str, ...]) -> None:
        """Remember a motion issued at CRM round ``t`` (s) so that its outcome, when the CRM sees
        it in ``view.results``, feeds the backoff and cooldown (patch 1)."""
        self._issued[t] = IssuedMotion(leader, target, members)

    # ---------------------------------------------------------------- patch 1

    def observe(self, view: ClusterView) -> None:
        """Learn the outcome of our own motions from the LRM exits the CRM sees this round.

        A failure of any bundle member backs off the (leader, target) pair for
        ``min(base · factor^(k−1), cap)`` s after its k-th failure, counted from this round (when
        the CRM learns it); a success resets that pair's count and starts the cooldown of every
        bundle member. Results of manual motions are not ours and are ignored.
        """
        if not self.config.outcome_tracking or not view.results:
            return
        cfg = self.config
        outcome: dict[float, bool] = {}
        for r in view.results:
            issued = self._issued.get(r.t_issued)
            if issued is None or r.sid not in issued.members:
                continue
            outcome[r.t_issued] = outcome.get(r.t_issued, True) and r.ok
        for t_issued, ok in sorted(outcome.items()):
            issued = self._issued.pop(t_issued)
            pair = (issued.leader, issued.target)
            if ok:
                self.failures.pop(pair, None)
                self.backoff_until.pop(pair, None)
                for sid in issued.members:
                    self.cooldown_until[sid] = view.t + cfg.cooldown_s
                self.log.append((view.t, f"{issued.leader}: moved, cooldown {cfg.cooldown_s:g} s"))
            else:
                k = self.failures.get(pair, 0) + 1
                self.failures[pair] = k
                delay = min(cfg.backoff_base_s * cfg.backoff_factor ** (k - 1), cfg.backoff_cap_s)
                self.backoff_until[pair] = view.t + delay
                self.log.append(
                    (
                        view.t,
                        f"{issued.leader}: motion to {issued.target} failed ({k}x), "
                        f"backing off {delay:g} s",
                    )
                )

    def filter_candidates(self, view: ClusterView, cands: Candidates) -> Candidates:
        """Drop candidates whose (leader, target) is backed off or whose bundle is cooling down."""
        self._cands = cands
        if not self.config.outcome_tracking or len(cands) == 0:
            return cands
        if not self.backoff_until and not self.cooldown_until:
            return cands
        # the tables hold a few entries (one per motion issued): mark what they block now, then
        # look every candidate up at once
        t = view.t
        g_of = {sid: i for i, sid in enumerate(view.sids)}
        n_of = {name: i for i, name in enumerate(view.node_names)}
        backed_off = np.zeros((len(view.sids), len(view.node_names)), dtype=bool)
        for (sid, target), until in self.backoff_until.items():
            if until > t and sid in g_of and target in n_of:
                backed_off[g_of[sid], n_of[target]] = True
        cooling = np.zeros(len(view.sids), dtype=bool)
        for sid, until in self.cooldown_until.items():
            if until > t and sid in g_of:
                cooling[g_of[sid]] = True
        keep = ~backed_off[cands.leader, cands.target] & ~cooling[cands.leader]
        for g, members in cands.members.items():  # a bundle cools down with any of its members
            if cooling[list(members)].any():
                keep &= cands.leader != g
        out = cands.select(keep)
        self._cands = out
        return out

    # ---------------------------------------------------------------- patch 2

    def guest_stats(self, view: ClusterView) -> tuple[FloatArray, FloatArray]:
        """Dynamic mode with ``use_memhost``: memory = ``memhost`` (bytes), else ``mem``, else 0."""
        if not self.config.use_memhost or self.mode(view) == "static":
            return UpstreamPolicy.guest_stats(self, view)
        return self._dynamic_guest_stats(view, use_memhost=True)

    # ---------------------------------------------------------------- patch 6

    def node_stats(self, view: ClusterView) -> NodeStatsArrays:
        """Dynamic mode with ``residual_ema``: Σ HA-guest usage + EMA(node stat − Σ HA-guest usage).

        The sum runs over the HA guests counted on their current node (``Usage.pm``
        ``get_used_service_nodes`` states) with the usage :meth:`guest_stats` gives (so ``memhost``
        with patch 2). The EMA is updated once per round in which the balancer is not blocked: while
        a motion runs, the target already holds the incoming guest's memory and the CRM's placement
        lags the LRM's, so the residual would briefly contain attributable load. A node whose sample
        is missing (NaN) keeps its EMA and reads NaN (the imbalance then fails open like
        upstream's).
        """
        cfg = self.config
        if not cfg.residual_ema or self.mode(view) == "static":
            return UpstreamPolicy.node_stats(self, view)
        n = len(view.node_names)
        if self.residual_cpu is None or self.residual_cpu.shape != (n,):
            self.residual_cpu = np.full(n, np.nan)  # NaN: not initialised (first sample sets it)
            self.residual_mem = np.full(n, np.nan)
        assert self.residual_mem is not None
        update = self._ema_t != view.t
        self._ema_t = view.t
        cpu, mem = np.empty(n), np.empty(n)
        # Σ usage per node (bincount order), the EMA update in place and the clipped sum: one pass
        if self._usage_from_view:  # straight from the telemetry
            gcpu = np.asarray(view.guest_cpu, F64)
            gmem = np.asarray(view.guest_mem, F64)
            ghost = np.asarray(view.guest_memhost, F64)
            memhost = cfg.use_memhost
        else:  # a subclass's own usage (a missing value counts 0, as a missing sample does)
            gcpu, gmem = self.guest_stats(view)
            ghost, memhost = gmem, False
        maxcpu = np.asarray(view.node_maxcpu, F64)
        maxmem = np.asarray(view.node_maxmem, F64)
        # the imbalance of these stats in the same call (what :meth:`imbalance` returns for them)
        imb = kernels.patched_stats_imbalance(
            np.asarray(view.node_cpu, F64),
            np.asarray(view.node_mem, F64),
            gcpu,
            gmem,
            ghost,
            memhost,
            np.asarray(view.guest_node, I64),
            self.states_in(view, CURRENT_STATES),
            self.residual_cpu,
            self.residual_mem,
            self._alpha,
            update,
            cpu,
            mem,
            maxcpu,
            maxmem,
            np.asarray(view.node_online, BOOL),
            cfg.normalized,
        )
        stats = NodeStatsArrays(cpu, mem, maxcpu, maxmem)
        self._stats_imbalance = (stats, view, imb)
        return stats

    def imbalance(self, view: ClusterView, stats: NodeStatsArrays) -> float:
        """Upstream's imbalance; for the stats :meth:`node_stats` just built from this view, the
        value its kernel computed alongside them (the same fold on the same arrays: the same
        bits), which saves the patched round a second compiled call."""
        done = self._stats_imbalance
        if done is not None and done[0] is stats and done[1] is view:
            return float(done[2])
        return UpstreamPolicy.imbalance(self, view, stats)

    # ---------------------------------------------------------------- patch 7

    def should_consider(self, view: ClusterView, imbalance: float) -> bool:
        """Attempt only while some online node's cpu or memory some avg10 ≥ ``min_pressure_pct``.

        Fail-open: when any online node's cpu or memory some reading is missing (NaN, telemetry
        off), pressure cannot be ruled out there, so the gate lets the attempt through.
        """
        if not self.config.pressure_gate:
            return True
        return bool(
            kernels.pressure_gate(
                np.asarray(view.node_cpu_some, dtype=np.float64),
                np.asarray(view.node_mem_some, dtype=np.float64),
                np.asarray(view.node_online, dtype=np.bool_),
                float(self.config.min_pressure_pct),
            )
        )

    # ---------------------------------------------------------------- patch 3

    def accept(self, imb_before: float, imb_after: float) -> bool:
        """Upstream's relative margin, and with ``dead_band`` an absolute improvement ≥
        ``min_improvement`` (normalized imbalance units)."""
        if not UpstreamPolicy.accept(self, imb_before, imb_after):
            return False
        if self.config.dead_band:
            # 1e-12: 0.5 − 0.4 must count as an improvement of 0.1 (binary floating point)
            return imb_before - imb_after >= self.config.min_improvement - 1e-12
        return True
