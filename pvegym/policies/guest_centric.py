"""``guest-centric``: a contention-driven, cost-aware balancer (DRS-style), beyond the field report.

The field report's patch series (``docs/model.md``) ends with three known gaps: candidate migratability is
not checked before scoring (a local CD-ROM turns into a bounded retry nuisance instead of never
being tried), migration cost is not part of the scoring ("the balancer prefers the largest
imbalance improvement over the cheapest adequate motion"), and "a fully guest-centric scoring
model (per-guest contention score, DRS-style) would be the natural next step on top of patch 7 -
the required per-guest PSI telemetry is already collected". This policy closes all three; it never
looks at the imbalance metric.

One CRM round (``decide``):

1. **Outcome tracking** (patch 1, reused from :class:`~pvegym.policies.patched.PatchedPolicy`): a failed
   motion backs its (guest, target) off for 60 s, 120 s, … (capped); a successful one cools its
   bundle down. Completed and aborted migrations of *our* motions also calibrate the dirty-rate
   estimate of the moved guest (step 5).
2. **Pressure gate** (patch 7): act only while some online node reports PSI cpu or memory *some*
   avg10 ≥ ``min_pressure_pct``, for ``hold_rounds`` consecutive rounds; fail-open when the node
   PSI telemetry is missing (NaN).
3. **Who suffers.** A guest's *relievable contention* (percent) is the part of its own PSI that
   its node explains — ``w_cpu_some·min(cpu some, node cpu some) + w_cpu_full·min(cpu full, node
   cpu some) + w_mem_some·min(mem some, node mem some) + w_mem_full·min(mem full, node mem
   full)``. What exceeds the node's (a guest beyond its own ``maxmem``) is self-inflicted and no
   migration helps it (the field report's reason for gating on node pressure only). Guests with a
   relievable score ≥ ``min_guest_score_pct`` suffer; only bundles containing one are candidates.
   Missing guest PSI falls back to the node's, missing node CPU PSI to the pressure curve of the
   node's utilisation (step 6) — fail-open, as the gate.
4. **Migratability before scoring.** A candidate (bundle, target) is dropped unless every member
   is migratable (``guest_migratable``: no local CD-ROM/device), the target respects node affinity
   and negative affinity (upstream's candidate rules), it is not backed off or cooling down, and
   the target keeps ``mem_headroom_frac`` of its memory free after receiving the bundle's
   ``memhost`` (qemu-server would not refuse it: the target would overcommit and stall). So no
   motion is proposed that must fail for a local resource or overcommits its target.
5. **Cost** (:mod:`pvegym.sim.migration`, ``docs/model.md``, *Live migration*): each member's live
   migration is predicted with the same pre-copy + auto-converge + qemu-server model the cluster
   runs — memory = ``maxmem``, resident = ``memhost``, bandwidth = ``bandwidth_bps`` — giving the
   duration, bytes, throttled CPU time and pause. The guest's dirty rate is *not* telemetry; it is
   estimated honestly from what an HA manager can know: a configurable prior
   (``dirty_prior_bps`` over ``wws_prior_frac`` of its memory, ``sensitivity_prior``), replaced
   after one of our migrations of that guest completed by the rate that reproduces its observed
   duration (``t_ended − t_issued − lrm_overhead_s``; bisection), or, after a "no convergence"
   abort, by a rate no throttling can converge. A motion predicted not to complete — the convergence patch's
   ``abort_factor``× abort would fire, or it would still run after ``max_migration_s`` (unpatched
   qemu-server) — is dropped. Containers cost ``ct_downtime_s`` of downtime.
   ``cost = w_gib·GiB sent + w_migration_s·duration + w_throttle·∫throttle + w_downtime·pause``,
   in guest-stall-second equivalents.
6. **Relief.** Node CPU pressure is predicted with a pressure curve ``P(ρ) = 100·(a·ρ² +
   (1 − a)·ρ^k)`` of the utilisation ``ρ`` = demand / cores (a per-runqueue quadratic plus a steep
   pooled-queue term; ``a`` = ``curve_quadratic_share``, ``k`` = ``curve_exponent``), anchored on
   the observed PSI: the source's pressure scales by ``P(ρ')/P(ρ)``, the target's rises by
   ``P(ρ') − P(ρ)``; CPU *full* follows the overload share ``1 − 1/ρ``. Demand is
   ``cpu / (1 − cpu full)`` per guest (a guest stalled a fraction f of the time wanted 1/(1 − f)
   more) plus the node's unattributed residual. Relief = the moved guests' relievable contention
   + the source's other guests' reduction − the contention added to the target's guests and
   inherited by the moved guests (guest·percent), times ``horizon_s`` / 100 → guest-stall
   seconds.
7. **Decision.** Eligible: relief > ``cost_factor`` × cost. Among eligible motions that are
   *adequate* (source and target predicted below ``min_pressure_pct``) the cheapest wins; if none
   is adequate, the largest ``relief − cost_factor·cost``. Nothing eligible: no motion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.policies import kernels
from pvegym.policies.patched import PatchedPolicy
from pvegym.policies.upstream import (
    CURRENT_STATES,
    CandidateError,
    Candidates,
    check_non_negative,
    quantity,
)
from pvegym.sim.migration import (
    COMPLETED,
    PAGE_SIZE,
    Migration,
    MigrationParams,
    params_array,
)
from pvegym.sim.view import STARTED, ClusterView, Motion, guest_cpu_cap
from pvegym.units import GiB, MiB

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class MigrationEstimate:
    """A predicted motion of one guest: ``ok`` False when it would abort or not converge."""

    ok: bool
    duration_s: float
    bytes: float
    throttle_s: float  # ∫ throttle fraction dt (s of vCPU time per vCPU lost)
    pause_s: float  # guest-visible downtime (s)
    passes: float  # transferred / memory


@dataclass(frozen=True, slots=True)
class Candidate:
    """One scored motion (for the log and the tests)."""

    sid: str
    target: str
    relief: float  # guest-stall seconds avoided over the horizon
    cost: float  # guest-stall-second equivalents
    adequate: bool
    source_after_pct: float  # predicted source node cpu some
    target_after_pct: float  # predicted target node cpu some


class GuestCentricPolicy:
    """Per-guest contention score + migratability filter + migration-cost model (module doc)."""

    name = "guest-centric"

    @dataclass(frozen=True, slots=True)
    class Config:
        """Every constant, with its unit; all tunable (``pvegym tune`` ``params.<name>``).

        Gate (patch 7) and hold:

        * ``pressure_gate`` = true; ``min_pressure_pct`` = 10 % PSI some avg10: the field report's figure,
          also the "adequate" bound a motion must bring source and target below.
        * ``hold_rounds`` = 3 CRM rounds (30 s): the gate must hold this long before an attempt,
          like upstream's hold duration, so a single PSI spike does not trigger.

        Per-guest contention score (weights per percent of PSI avg10):

        * ``w_cpu_some`` = 1, ``w_cpu_full`` = 1, ``w_mem_some`` = 1, ``w_mem_full`` = 1: a
          percent of any stall counts alike (the metric ``guest_stall_s`` weighs some-stalls 1).
        * ``min_guest_score_pct`` = 5 %: a guest suffers above it (half the node gate: a guest
          below it loses < 5 % of its time, under the noise of a busy but healthy node).

        Pressure model:

        * ``curve_quadratic_share`` = 0.2, ``curve_exponent`` = 8: ``P(ρ) = 100 (a ρ² + (1−a) ρ^k)``
          gives 5 % at ρ = 0.5, 14 % at 0.7, 27 % at 0.8, 51 % at 0.9 — between the PSI of an 8-
          and a 32-core node under a pooled run queue; only its ratios matter for the source.
        * ``mem_band_frac`` = 0.05: memory pressure lives in the last ~5 % of a node's memory
          (reclaim above the watermark); moving that much memhost off removes it all.
        * ``mem_headroom_frac`` = 0.05: a target must keep 5 % of its memory free after the move
          (the bundle's memhost must fit; 5 % covers drift until the migration starts and keeps
          the target out of reclaim).

        Migration cost prediction:

        * ``bandwidth_bps`` = 430 MiB/s: the migration network (the convergence patch's observation); an admin
          setting (datacenter.cfg migration bandwidth), not telemetry.
        * ``dirty_prior_bps`` = 50 MiB/s raw writes over ``wws_prior_frac`` = 0.25 of the guest's
          memory, ``sensitivity_prior`` = 0.5 (half the writes slowed by throttling): a mid-range
          server guest; replaced per guest by what its own past migrations showed
          (``learn_dirty`` = true).
        * ``lrm_overhead_s`` = 8 s: LRM start delay (uniform 0–10 s, mean 5 s) + precheck (3 s),
          subtracted from an observed motion's duration before fitting the dirty rate.
        * ``downtime_limit_ms`` = 100 ms (qemu-server default), ``boost_factor`` = 1.5 and
          ``abort_factor`` = 4 passes (the convergence patch); ``abort_factor`` = 0 predicts an unpatched
          qemu-server (no abort).
        * ``max_migration_s`` = 600 s: a migration predicted to run longer is treated as
          non-converging (docs/model.md, *Targets*: unpatched, ≥ 280 s).
        * ``ct_downtime_s`` = 15 s: container relocate = shutdown (10 s) + start (5 s), down all
          the time.

        Cost weights (guest-stall-second equivalents):

        * ``w_gib`` = 1 per GiB sent (network and target-memory use for the transfer).
        * ``w_migration_s`` = 0.2 per second the motion occupies the serialized pipeline (no other
          motion can run meanwhile).
        * ``w_throttle`` = 1 per second of auto-converge throttle fraction (lost guest CPU time).
        * ``w_downtime`` = 10 per second of guest pause: an outage is worse than a stall.

        Decision:

        * ``horizon_s`` = 600 s: how long a relief is assumed to last (one cooldown; traces change
          on a 5-min scale).
        * ``cost_factor`` = 1: move only when relief > cost_factor × cost.
        * ``prefer_cheapest_adequate`` = true: among adequate motions take the cheapest (the
          field report's "cheapest adequate motion"), else the best net relief.

        Anti-oscillation:

        * ``return_block_s`` = 3600 s: a guest we moved off a node is not moved back there within
          this time (docs/metrics.md counts such a return as an oscillation within 3600 s): a relief
          that reverses a recent motion was mispredicted once already.

        Outcome tracking (patch 1): ``backoff_base_s`` = 60 s, ``backoff_factor`` = 2,
        ``backoff_cap_s`` = 3600 s, ``cooldown_s`` = 600 s — as
        :class:`~pvegym.policies.patched.PatchedPolicy.Config` explains.
        """

        pressure_gate: bool = True
        min_pressure_pct: float = 10.0
        hold_rounds: float = 3
        w_cpu_some: float = 1.0
        w_cpu_full: float = 1.0
        w_mem_some: float = 1.0
        w_mem_full: float = 1.0
        min_guest_score_pct: float = 5.0
        curve_quadratic_share: float = 0.2
        curve_exponent: float = 8.0
        mem_band_frac: float = 0.05
        mem_headroom_frac: float = 0.05
        bandwidth_bps: float = quantity(430.0 * MiB, "rate")
        dirty_prior_bps: float = quantity(50.0 * MiB, "rate")
        wws_prior_frac: float = 0.25
        sensitivity_prior: float = 0.5
        learn_dirty: bool = True
        lrm_overhead_s: float = quantity(8.0, "duration")
        downtime_limit_ms: float = 100.0
        boost_factor: float = 1.5
        abort_factor: float = 4.0
        max_migration_s: float = quantity(600.0, "duration")
        ct_downtime_s: float = quantity(15.0, "duration")
        w_gib: float = 1.0
        w_migration_s: float = 0.2
        w_throttle: float = 1.0
        w_downtime: float = 10.0
        horizon_s: float = quantity(600.0, "duration")
        cost_factor: float = 1.0
        prefer_cheapest_adequate: bool = True
        return_block_s: float = quantity(3600.0, "duration")
        backoff_base_s: float = quantity(60.0, "duration")
        backoff_factor: float = 2.0
        backoff_cap_s: float = quantity(3600.0, "duration")
        cooldown_s: float = quantity(600.0, "duration")

        def __post_init__(self) -> None:
            for f in fields(self):
                value = getattr(self, f.name)
                where = f"guest-centric.{f.name}"
                if f.type in (bool, "bool"):
                    if not isinstance(value, bool):
                        raise ConfigError(where, f"must be true or false, got {value!r}")
                    continue
                check_non_negative(where, value)
            for key in ("curve_quadratic_share", "wws_prior_frac", "sensitivity_prior"):
                if getattr(self, key) > 1:
                    raise ConfigError(f"guest-centric.{key}", "must be a fraction in [0, 1]")
            for key in ("mem_band_frac", "mem_headroom_frac"):
                if not 0 < getattr(self, key) < 1:
                    raise ConfigError(f"guest-centric.{key}", "must be a fraction in (0, 1)")
            for key in ("bandwidth_bps", "downtime_limit_ms", "max_migration_s", "curve_exponent"):
                if getattr(self, key) <= 0:
                    raise ConfigError(f"guest-centric.{key}", "must be > 0")
            if self.wws_prior_frac <= 0:
                raise ConfigError("guest-centric.wws_prior_frac", "must be > 0")
            if self.abort_factor and self.abort_factor <= self.boost_factor:
                raise ConfigError(
                    "guest-centric.abort_factor", "must be 0 (unpatched) or > boost_factor"
                )
            if self.backoff_factor < 1:
                raise ConfigError("guest-centric.backoff_factor", "must be >= 1")

    def __init__(self, config: Any = None, **params: Any) -> None:
        cls = type(self).Config
        if config is None:
            config = cls(**params)
        elif params:
            merged = {f.name: getattr(config, f.name) for f in fields(cls)}
            merged.update(params)
            config = cls(**merged)
        elif not isinstance(config, cls):
            raise ConfigError(
                "guest-centric", f"expected {cls.__qualname__}, got {type(config).__name__}"
            )
        self.config: GuestCentricPolicy.Config = config
        c = config
        # the scoring kernel's constants (pvegym/policies/kernels.py: gc_relief)
        self._weights = np.array([c.w_cpu_some, c.w_cpu_full, c.w_mem_some, c.w_mem_full], float)
        self._params = np.array(
            [
                c.curve_quadratic_share,
                c.curve_exponent,
                c.mem_band_frac,
                c.horizon_s,
                c.cost_factor,
                c.min_pressure_pct,
            ],
            dtype=np.float64,
        )
        # composition: upstream's candidate rules (affinity) and patch 1's outcome tracking
        self._base = PatchedPolicy(
            PatchedPolicy.Config(
                mode="dynamic",
                outcome_tracking=True,
                backoff_base_s=c.backoff_base_s,
                backoff_factor=c.backoff_factor,
                backoff_cap_s=c.backoff_cap_s,
                cooldown_s=c.cooldown_s,
                use_memhost=True,
                pressure_gate=c.pressure_gate,
                min_pressure_pct=c.min_pressure_pct,
            )
        )
        self._clear()

    def _clear(self) -> None:
        self.sustained = 0
        self.log: list[tuple[float, str]] = []
        self._last_scored: list[Candidate] | None = []
        self._scored_columns: tuple[Any, ...] = ()
        self._last_best = -1  # the row of _scored_columns the last attempt chose (-1: none)
        # sid -> (raw dirty rate B/s, throttle sensitivity) learned from our own migrations
        self.dirty_estimate: dict[str, tuple[float, float]] = {}
        # issue time -> [(sid, memhost bytes, maxmem bytes)] of the bundle members we moved
        self._moved: dict[float, list[tuple[str, float, float]]] = {}
        self._cost_cache: dict[tuple[str, int, float, float], MigrationEstimate] = {}
        self._params_template: NDArray[np.float64] | bool | None = None
        self._spare: Migration | None = None
        # (sid, node) -> time until which sid is not moved back to node it left (s)
        self.left_until: dict[tuple[str, str], float] = {}

    def reset(self, seed: int | None = None) -> None:
        self._base.reset(seed)
        self._clear()

    # ---------------------------------------------------------------- the round

    def decide(self, view: ClusterView) -> Motion | None:
        return self._decide(view, issue=True)

    def propose(self, view: ClusterView) -> list[Candidate]:
        """:meth:`decide` without issuing anything: the candidates it scored on this round (empty
        on a round it would not attempt). Why: a look-ahead expert
        (``pvegym.learning.lookahead``) ranks its rollouts by this policy's scoring and tells it
        what it did through :meth:`adopt`, so the outcome tracking follows the real trajectory."""
        self._last_scored = []
        self._last_best = -1
        self._decide(view, issue=False)
        return self.last_scored

    @property
    def last_choice(self) -> Candidate | None:
        """The candidate the last attempt chose (what :meth:`decide` would have issued), or
        ``None``: the proposal agent's slot of this policy's own motion
        (:mod:`pvegym.policies.proposals`)."""
        return None if self._last_best < 0 else self._scored_row(self._last_best)

    def _decide(self, view: ClusterView, issue: bool) -> Motion | None:
        self._base.observe(view)  # patch 1: backoff / cooldown from our motions' results
        self._learn(view)
        if view.motion_active:
            return None
        if not self._base.should_consider(view, math.nan):  # patch 7 (fail-open)
            self.sustained = 0
            return None
        self.sustained += 1
        if self.sustained < self.config.hold_rounds:
            return None
        self.sustained = 0
        return self._choose(view, issue)

    # ---------------------------------------------------------------- scoring

    def _choose(self, view: ClusterView, issue: bool = True) -> Motion | None:
        cfg = self.config
        online = np.asarray(view.node_online, dtype=bool)
        ncs = np.asarray(view.node_cpu_some, dtype=np.float64)
        nms = np.asarray(view.node_mem_some, dtype=np.float64)
        nmf = np.asarray(view.node_mem_full, dtype=np.float64)
        node = np.asarray(view.guest_node, dtype=np.int64)
        state = np.asarray(view.guest_state, dtype=object)
        here = self._base.states_in(view, CURRENT_STATES) & (node >= 0)
        nd = np.where(here, node, 0)

        gcf = self._guest_psi(view.guest_cpu_full, None, nd)
        gcpu, demand, node_demand = self._demand(view, here, nd, gcf)
        cores = np.asarray(view.node_maxcpu, dtype=np.float64)
        # fail-open: a node without PSI telemetry reads the pressure curve of its utilisation
        curve = kernels.curve_values(
            node_demand / cores, float(cfg.curve_quadratic_share), float(cfg.curve_exponent)
        )
        ncs = np.where(np.isfinite(ncs), ncs, curve)
        gcs = self._guest_psi(view.guest_cpu_some, ncs, nd)
        gms = self._guest_psi(view.guest_mem_some, nms, nd)
        gmf = self._guest_psi(view.guest_mem_full, nmf, nd)
        # the node's share of each guest's stall (fmin: a missing node value keeps the guest's)
        relievable = (
            cfg.w_cpu_some * np.fmin(gcs, ncs[nd])
            + cfg.w_cpu_full * np.fmin(gcf, ncs[nd])
            + cfg.w_mem_some * np.fmin(gms, nms[nd])
            + cfg.w_mem_full * np.fmin(gmf, nmf[nd])
        )
        relievable = np.where(here, np.nan_to_num(relievable, nan=0.0), 0.0)
        suffering = (state == STARTED) & (relievable >= cfg.min_guest_score_pct)
        self._last_scored = []
        if not suffering.any():
            return None
        try:
            cands = self._base.filter_candidates(view, self._base.candidates(view))
        except CandidateError:
            return None
        if len(cands) == 0:
            return None

        maxmem = np.asarray(view.node_maxmem, dtype=np.float64)
        # memory a move transfers and a target must hold: memhost, else the configured size
        memhost = np.asarray(view.guest_memhost, dtype=np.float64)
        gmaxmem = np.asarray(view.guest_maxmem, dtype=np.float64)
        memhost = np.where(np.isfinite(memhost), memhost, gmaxmem)
        node_mem = np.asarray(view.node_mem, dtype=np.float64)
        # the target also holds memory of a guest still moving there (MIGRATE/RELOCATE)
        active = here & (gcpu > 0.0)
        psi_s = np.nan_to_num(ncs, nan=0.0)
        migratable = np.asarray(view.guest_migratable, dtype=bool)

        # step 4 (cheap checks) for every candidate at once, then the cost per bundle, then
        # steps 6–7 for the candidates left: compiled (pvegym/policies/kernels.py), candidate by
        # candidate in their order, as the module doc describes
        ptr, flat = self._members_csr(cands)
        keep, m_b, d_b = kernels.gc_prefilter(
            ptr, flat, cands.source, cands.target, self._returning(view), migratable,
            suffering, online, node_mem, maxmem, memhost, demand, float(cfg.mem_headroom_frac),
        )  # fmt: skip
        rows, costs = self._costed(view, cands, keep, memhost, gmaxmem)
        if not rows:
            return None
        sel = np.asarray(rows, dtype=np.int64)
        sub = cands.select(sel)
        sub_ptr, sub_flat = self._members_csr(sub)
        relief, src_after, tgt_after, mem_after, best = kernels.gc_relief(
            sub_ptr, sub_flat, sub.source, sub.target, d_b[sel], m_b[sel],
            np.asarray(costs, dtype=np.float64), node_demand, cores, maxmem, psi_s, nms, nmf,
            gcs, gcf, gms, gmf, relievable, active, nd, self._weights, self._params,
            bool(cfg.prefer_cheapest_adequate),
        )  # fmt: skip
        # the scored list is built when read (last_scored): most attempts issue nothing
        self._scored_columns = (view, sub, relief, costs, src_after, tgt_after, mem_after)
        self._last_scored = None
        self._last_best = int(best)
        if best < 0 or not issue:
            return None
        return self._issue(view, cands, rows[best], self._scored_row(best))

    @property
    def last_scored(self) -> list[Candidate]:
        """The candidates the last attempt scored (costed ones, in candidate order), each with
        its relief and the pressures it leaves."""
        if self._last_scored is None:
            self._last_scored = self._scored(*self._scored_columns)
        return self._last_scored

    def _scored_row(self, i: int) -> Candidate:
        """Row ``i`` of :attr:`last_scored`, without building the others."""
        view, sub, relief, costs, src_after, tgt_after, mem_after = self._scored_columns
        min_p = self.config.min_pressure_pct
        sa, ta, ma = float(src_after[i]), float(tgt_after[i]), float(mem_after[i])
        return Candidate(
            view.sids[int(sub.leader[i])],
            view.node_names[int(sub.target[i])],
            float(relief[i]),
            costs[i],
            sa < min_p and ta < min_p and ma < min_p,
            sa,
            ta,
        )

    @staticmethod
    def _guest_psi(arr: Any, node_arr: FloatArray | None, nd: NDArray[np.int64]) -> FloatArray:
        """A guest PSI series (percent); a guest without it reads its node's (``nd``: each
        guest's node), or 0 when ``node_arr`` is None."""
        g = np.asarray(arr, dtype=np.float64)
        if node_arr is None:
            return np.nan_to_num(g, nan=0.0)
        fallback = np.nan_to_num(node_arr[nd], nan=0.0)
        return np.where(np.isfinite(g), g, fallback)

    @staticmethod
    def _demand(
        view: ClusterView, here: NDArray[np.bool_], nd: NDArray[np.int64], gcf: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(received, demand, node_demand)`` in cores: each guest's demand is what it
        received / (1 − cpu full), each node's adds its unattributed residual."""
        n = len(view.node_names)
        gcpu = np.nan_to_num(np.asarray(view.guest_cpu, dtype=np.float64), nan=0.0)
        gmaxcpu = guest_cpu_cap(view)
        demand = np.minimum(gcpu / np.maximum(1.0 - gcf / 100.0, 0.05), np.maximum(gmaxcpu, gcpu))
        demand = np.where(here, demand, 0.0)
        node_cpu = np.asarray(view.node_cpu, dtype=np.float64)
        attributed = np.bincount(nd[here], weights=gcpu[here], minlength=n)[:n]
        residual = np.where(np.isfinite(node_cpu), np.maximum(node_cpu - attributed, 0.0), 0.0)
        node_demand: FloatArray = (
            np.bincount(nd[here], weights=demand[here], minlength=n)[:n].astype(np.float64)
            + residual
        )
        return gcpu, demand, node_demand

    def _costed(
        self,
        view: ClusterView,
        cands: Candidates,
        keep: NDArray[np.bool_],
        memhost: FloatArray,
        gmaxmem: FloatArray,
    ) -> tuple[list[int], list[float]]:
        """The rows of the candidates ``keep`` passes whose bundle is predicted to converge,
        and each one's cost."""
        kept = np.flatnonzero(keep)
        leaders = cands.leader[kept]
        # a bundle costs the same to every target: one cost per leader, in order of appearance
        _, first = np.unique(leaders, return_index=True)
        cost = np.zeros(len(view.sids))
        ok = np.zeros(len(view.sids), dtype=bool)  # False: predicted to abort / not converge
        for g in leaders[np.sort(first)].tolist():
            c = self._bundle_cost(view, cands.members.get(g, (g,)), memhost, gmaxmem)
            if c is not None:
                cost[g], ok[g] = c, True
        passed = ok[leaders]
        return kept[passed].tolist(), cost[leaders[passed]].tolist()

    def _scored(
        self,
        view: ClusterView,
        sub: Candidates,
        relief: FloatArray,
        costs: list[float],
        src_after: FloatArray,
        tgt_after: FloatArray,
        mem_after: FloatArray,
    ) -> list[Candidate]:
        """Each costed candidate with its relief and the pressures it leaves (percent);
        adequate when all stay below ``min_pressure_pct``."""
        min_p = self.config.min_pressure_pct
        columns = zip(
            sub.leader.tolist(),
            sub.target.tolist(),
            relief.tolist(),
            costs,
            src_after.tolist(),
            tgt_after.tolist(),
            mem_after.tolist(),
            strict=True,
        )
        return [
            Candidate(
                view.sids[g],
                view.node_names[d],
                r,
                c,
                sa < min_p and ta < min_p and ma < min_p,
                sa,
                ta,
            )
            for g, d, r, c, sa, ta, ma in columns
        ]

    @staticmethod
    def _members_csr(cands: Candidates) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Each candidate's bundle members (guest indices, leader first as in ``members``) in
        CSR form: ``flat[ptr[i]:ptr[i + 1]]``."""
        if not cands.members:
            return np.arange(len(cands) + 1, dtype=np.int64), cands.leader
        leader = cands.leader
        # a lone leader is its own bundle; the few bundles of several overwrite their rows
        rows_of = [(np.flatnonzero(leader == g), m) for g, m in cands.members.items()]
        size = np.ones(len(cands), dtype=np.int64)
        for rows, members in rows_of:
            size[rows] = len(members)
        ptr = np.zeros(len(cands) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(size)
        flat = np.repeat(leader, size)
        for rows, members in rows_of:
            if rows.size:
                flat[ptr[rows][:, None] + np.arange(len(members))] = members
        return ptr, flat

    def _returning(self, view: ClusterView) -> NDArray[np.bool_]:
        """``[guest, node]``: moving the guest to the node would undo one of our motions within
        ``return_block_s`` (the node it left, still blocked at ``view.t``)."""
        out = np.zeros((len(view.sids), len(view.node_names)), dtype=np.bool_)
        if self.left_until:
            sid_pos = {sid: i for i, sid in enumerate(view.sids)}
            node_pos = {name: i for i, name in enumerate(view.node_names)}
            for (sid, node), until in self.left_until.items():
                g, n = sid_pos.get(sid), node_pos.get(node)
                if g is not None and n is not None and until > view.t:
                    out[g, n] = True
        return out

    # ---------------------------------------------------------------- cost

    def _bundle_cost(
        self,
        view: ClusterView,
        members: tuple[int, ...],
        memhost: FloatArray,
        maxmem: FloatArray,
    ) -> float | None:
        """Σ of the members' predicted motion costs (they run one after another), or None when
        one of them is predicted not to complete."""
        cfg = self.config
        total = 0.0
        for m in members:
            sid = view.sids[m]
            if not sid.startswith("vm:"):
                total += cfg.w_downtime * cfg.ct_downtime_s
                continue
            est = self.predict(sid, float(memhost[m]), float(maxmem[m]))
            if not est.ok:
                return None
            total += (
                cfg.w_gib * est.bytes / GiB
                + cfg.w_migration_s * est.duration_s
                + cfg.w_throttle * est.throttle_s
                + cfg.w_downtime * est.pause_s
            )
        return total

    def predict(self, sid: str, memhost: float, maxmem: float) -> MigrationEstimate:
        """The predicted live migration of ``sid`` (memhost/maxmem in bytes) under the current
        dirty-rate estimate; cached per guest, memhost (to 64 MiB) and estimate."""
        cfg = self.config
        dirty, sens = self.dirty_estimate.get(sid, (cfg.dirty_prior_bps, cfg.sensitivity_prior))
        key = (sid, round(memhost / (64 * MiB)), dirty, sens)
        hit = self._cost_cache.get(key)
        if hit is not None:
            return hit
        est = self._simulate(memhost, maxmem, dirty, sens)
        self._cost_cache[key] = est
        return est

    def _migration_params(
        self, memory: float, resident: float, dirty: float, wws: float, sens: float
    ) -> MigrationParams:
        """The predicted migration's validated parameters (bytes, bytes/s, fraction)."""
        cfg = self.config
        return MigrationParams(
            memory=memory,
            resident=resident,
            bandwidth=cfg.bandwidth_bps,
            dirty_rate=dirty,
            wws=wws,
            throttle_sensitivity=sens,
            downtime_limit_ms=cfg.downtime_limit_ms,
            qemu_server_patched=cfg.abort_factor > 0,
            boost_factor=cfg.boost_factor,
            abort_factor=cfg.abort_factor if cfg.abort_factor > 0 else 4.0,
        )

    def _template(self) -> NDArray[np.float64] | None:
        """:func:`~pvegym.sim.migration.params_array` of the policy's fixed migration settings
        (a placeholder guest of one page), made once; None when they do not validate (then every
        prediction builds its :class:`MigrationParams`, which raises as it always did)."""
        if self._params_template is None:
            try:
                p = self._migration_params(
                    float(PAGE_SIZE), float(PAGE_SIZE), 0.0, float(PAGE_SIZE), 1.0
                )
                self._params_template = params_array(p)
            except ConfigError:
                self._params_template = False
        t = self._params_template
        return t if isinstance(t, np.ndarray) else None

    def _simulate(
        self, memhost: float, maxmem: float, dirty: float, sens: float
    ) -> MigrationEstimate:
        cfg = self.config
        memory = max(maxmem, 4096.0)
        resident = min(max(memhost, 1.0), memory)
        wws = min(cfg.wws_prior_frac * memory, memory)
        template = self._template()
        # the guest's values pass MigrationParams' checks: the template with them is the same
        # parameter vector, without validating the fixed settings again (a kernel call)
        valid = math.isfinite(memory) and memory >= PAGE_SIZE and 0.0 < resident <= memory
        valid = valid and math.isfinite(dirty) and dirty >= 0.0 and math.isfinite(wws)
        valid = valid and 0.0 <= wws <= memory and isinstance(sens, int | float)
        if template is not None and valid and 0.0 <= sens <= 1.0:
            mig = Migration.for_guest(
                template, memory, resident, dirty, wws, sens, 1.0, reuse=self._spare
            ).run(cfg.max_migration_s)
            self._spare = mig  # its estimate is read below: the next prediction reuses it
        else:
            params = self._migration_params(memory, resident, dirty, wws, sens)
            mig = Migration(params, record_timeline=False).run(cfg.max_migration_s)
        return MigrationEstimate(
            mig.outcome == COMPLETED,
            mig.t,
            mig.transferred,
            mig.throttle_integral,
            mig.guest_pause_s,
            mig.passes,
        )

    # ---------------------------------------------------------------- learning

    def _learn(self, view: ClusterView) -> None:
        """Calibrate the dirty-rate estimate of guests we moved from their motions' outcomes."""
        if not view.results:
            return
        cfg = self.config
        for r in view.results:
            moved = self._moved.get(r.t_issued)
            if moved is None:
                continue
            for sid, memhost, maxmem in moved:
                if sid != r.sid:
                    continue
                if r.ok:
                    self.left_until[(sid, r.source)] = view.t + cfg.return_block_s
                if not cfg.learn_dirty or not sid.startswith("vm:"):
                    continue
                if r.ok:
                    observed = r.t_ended - r.t_issued - cfg.lrm_overhead_s
                    self.dirty_estimate[sid] = (
                        self._fit_dirty(observed, memhost, maxmem),
                        cfg.sensitivity_prior,
                    )
                elif "convergence" in r.reason:
                    # dirtying no throttling slows, at twice the stream: never converges
                    self.dirty_estimate[sid] = (2.0 * cfg.bandwidth_bps, 0.0)
        done = {r.t_issued for r in view.results}
        for t in done:
            self._moved.pop(t, None)

    def _fit_dirty(self, observed_s: float, memhost: float, maxmem: float) -> float:
        """The raw dirty rate (B/s) whose predicted duration matches ``observed_s`` (bisection);
        0 when even a clean guest would take that long, capped at 2× the bandwidth."""
        sens = self.config.sensitivity_prior
        lo, hi = 0.0, 2.0 * self.config.bandwidth_bps

        def duration(rate: float) -> float:
            est = self._simulate(memhost, maxmem, rate, sens)
            return est.duration_s if est.ok else math.inf

        if duration(lo) >= observed_s:
            return 0.0
        if duration(hi) <= observed_s:
            return hi
        for _ in range(12):
            mid = 0.5 * (lo + hi)
            if duration(mid) < observed_s:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    # ---------------------------------------------------------------- issuing

    def adopt(self, view: ClusterView, motion: Motion) -> None:
        """Take ``motion``, issued this round by another balancer acting for this one (a learner
        in imitation learning), as if this policy had issued it: its outcome then feeds the
        backoff, cooldown, return block and dirty-rate estimate as for our own motions, so the
        policy's later answers follow the trajectory that really happened."""
        members = [motion.sid]
        for rule in view.rules.resource_affinity:
            if rule.positive and motion.sid in rule.resources:
                members += [s for s in rule.resources if s not in members and s in view.sids]
        self._base.record_issued(view.t, motion.sid, motion.target, tuple(members))
        index = {sid: i for i, sid in enumerate(view.sids)}
        memhost = np.asarray(view.guest_memhost, dtype=np.float64)
        maxmem = np.asarray(view.guest_maxmem, dtype=np.float64)
        self._moved[view.t] = [
            (
                sid,
                float(memhost[index[sid]])
                if math.isfinite(memhost[index[sid]])
                else float(maxmem[index[sid]]),
                float(maxmem[index[sid]]),
            )
            for sid in members
        ]

    def _issue(self, view: ClusterView, cands: Candidates, i: int, chosen: Candidate) -> Motion:
        g = int(cands.leader[i])
        members = cands.members.get(g, (g,))
        sid = view.sids[g]
        target = view.node_names[int(cands.target[i])]
        sids = tuple(view.sids[m] for m in members)
        self._base.record_issued(view.t, sid, target, sids)
        memhost = np.asarray(view.guest_memhost, dtype=np.float64)
        maxmem = np.asarray(view.guest_maxmem, dtype=np.float64)
        self._moved[view.t] = [
            (
                view.sids[m],
                float(memhost[m]) if math.isfinite(memhost[m]) else float(maxmem[m]),
                float(maxmem[m]),
            )
            for m in members
        ]
        task = "migrate" if sid.startswith("vm:") else "relocate"
        self.log.append(
            (
                view.t,
                f"guest-centric - {task} {sid} to {target} (relief {chosen.relief:.0f} s, "
                f"cost {chosen.cost:.0f} s, {'adequate' if chosen.adequate else 'partial'}; "
                f"source cpu some → {chosen.source_after_pct:.0f} %)",
            )
        )
        return Motion(sid=sid, target=target)
