"""The heuristics' proposals as an action space (issue 32, item 2): :class:`HeuristicProposer`.

Each round it runs, on the :class:`~pvegym.sim.view.ClusterView` alone:

* ``patched`` with the constants it is given (the benchmark passes ``patched-tuned``'s): its
  motion is **slot 1** whenever it makes one — never masked, so an agent that always takes it
  replays ``patched-tuned`` exactly;
* ``guest-centric`` (its own constants): on a round it attempts, its own choice is **slot 2** and
  the next best of its scored candidates by relief minus cost fill **slots 3 … K + 1**
  (``candidates`` = K), skipping a motion already in a slot and one the HA manager would not
  queue (:func:`~pvegym.env.view_encoding.mask_from_view`).

Slot 0 is noop. What was committed is told to both heuristics (:meth:`adopt`, as the ``planner``
does), so their backoff, cooldown and dirty-rate estimates follow the episode that happened.

The observation (:data:`GLOBAL_FEATURES`, then :data:`SLOT_FEATURES` for each slot) is built from
the view and the heuristics' scores only — telemetry an HA manager has — and its size depends on
K alone, not on the cluster's size: an agent trained on ``small`` runs on ``medium`` and
``trace``. Every feature is clipped to [0, 1]; telemetry switched off (NaN) reads 0.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.config import field
from pvegym.env.proposal_env import Proposals
from pvegym.env.view_encoding import mask_from_view, negative_partners
from pvegym.errors import ConfigError
from pvegym.policies.guest_centric import Candidate, GuestCentricPolicy
from pvegym.policies.patched import PatchedPolicy
from pvegym.sim.metrics import Metrics
from pvegym.sim.move_ledger import CHURN_PRESSURE_PCT
from pvegym.sim.view import ClusterView, Motion, guest_cpu_cap

#: guest-centric slots at most (each a slot of the network's input and output)
MAX_CANDIDATES = 8
#: metrics' window for an oscillation (s), its one owner :class:`~pvegym.sim.metrics.Metrics`
OSCILLATION_WINDOW_S = float(Metrics.oscillation_window_s)
#: scales of the score features (cost units): a relief of 5,000 guest-stall s reads 1; a cost
#: of 500 reads 1 (a move is priced 60 by BALANCER_COST)
RELIEF_SCALE = 5000.0
COST_SCALE = 500.0

GLOBAL_FEATURES: tuple[str, ...] = (
    "peak_cpu_some",  # max over online nodes of PSI cpu some avg10 / 100
    "peak_mem_some",
    "mean_cpu_util",  # mean over online nodes of cpu / maxcpu
    "spread_cpu_util",  # max − min of cpu / maxcpu over online nodes
    "churn",  # 1: no online node reaches the churn threshold (a move now is a churn move)
    "patched_proposes",
    "gc_proposes",
)
SLOT_FEATURES: tuple[str, ...] = (
    "present",
    "guest_cpu",  # cores / vCPUs
    "guest_share",  # cores / the source's maxcpu
    "guest_mem",  # memhost / the target's maxmem
    "guest_cpu_some",  # PSI avg10 / 100
    "guest_cpu_full",
    "guest_mem_some",
    "src_cpu",  # cpu / maxcpu
    "src_mem",
    "src_cpu_some",
    "src_mem_some",
    "dst_cpu",
    "dst_mem",
    "dst_cpu_some",
    "dst_mem_some",
    "dst_cpu_after",  # (target cpu + guest cpu) / target maxcpu
    "dst_mem_after",
    "gc_choice",  # the motion guest-centric itself would make
    "scored",  # guest-centric scored this motion (the next five are its)
    "relief",  # / RELIEF_SCALE
    "cost",  # / COST_SCALE
    "adequate",
    "src_after_pct",  # guest-centric's predicted PSI / 100
    "dst_after_pct",
    "returns",  # the guest left this target less than an hour ago (an oscillation)
    "since_move",  # time since the guest last changed node / 1 h (1: never or long ago)
)


@dataclasses.dataclass(frozen=True)
class ProposerConfig:
    """``candidates``: guest-centric slots (its choice plus the next best); ``patched`` and
    ``guest_centric``: the heuristics' constants (empty: their defaults)."""

    candidates: int = field(3, ge=1, le=MAX_CANDIDATES)
    patched: dict[str, Any] = dataclasses.field(default_factory=dict)
    guest_centric: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def n_slots(self) -> int:
        return 2 + self.candidates

    def as_dict(self) -> dict[str, Any]:
        return {
            "candidates": self.candidates,
            "patched": dict(self.patched),
            "guest_centric": dict(self.guest_centric),
        }


def proposer_config(raw: Any, path: str = "proposals") -> ProposerConfig:
    """A :class:`ProposerConfig` from a table; errors name ``path``'s keys."""
    from pvegym.config import load

    if isinstance(raw, ProposerConfig):
        return raw
    if not isinstance(raw, dict):
        raise ConfigError(path, "must be a table (candidates, patched, guest_centric)")
    cfg = load(ProposerConfig, raw, path)
    HeuristicProposer(cfg, path)  # the heuristics' constants are checked by building them
    return cfg


def observation_size(candidates: int) -> int:
    return len(GLOBAL_FEATURES) + (2 + candidates) * len(SLOT_FEATURES)


def _num(x: Any) -> float:
    v = float(x)
    return v if math.isfinite(v) else 0.0


def _ratio(a: Any, b: Any) -> float:
    a, b = _num(a), _num(b)
    return a / b if b > 0 else 0.0


class HeuristicProposer:
    """``patched`` + ``guest-centric`` proposals and their observation (module doc)."""

    def __init__(self, config: ProposerConfig | None = None, path: str = "proposals") -> None:
        from pvegym.policies.registry import make_policy  # the registry names this layer

        self.config = config or ProposerConfig()
        self.n_slots = self.config.n_slots
        self.observation_size = observation_size(self.config.candidates)
        self._patched: PatchedPolicy = make_policy(  # type: ignore[assignment]
            "patched", f"{path}.patched", **self.config.patched
        )
        self._gc: GuestCentricPolicy = make_policy(  # type: ignore[assignment]
            "guest-centric", f"{path}.guest_centric", **self.config.guest_centric
        )
        self.reset(None)

    def reset(self, seed: int | None = None) -> None:
        self._patched.reset(seed)
        self._gc.reset(seed)
        self._where: dict[str, str] = {}  # sid -> node last seen on
        self._moved_at: dict[str, float] = {}  # sid -> t it was last seen on another node (s)
        self._left: dict[tuple[str, str], float] = {}  # (sid, node) -> t it was seen leaving
        # keyed by the rules object itself (an id() can be reused once the object is freed)
        self._partners: tuple[object, list[list[int]]] | None = None
        self._shadow: Motion | None = None

    # ---------------------------------------------------------------- the round
    def propose(self, view: ClusterView) -> Proposals:
        self._track(view)
        shadow = self._patched.decide(view)
        scored = self._gc.propose(view)
        choice = self._gc.last_choice if scored else None
        self._shadow = shadow
        k = self.config.candidates
        motions: list[Motion | None] = [None] * self.n_slots
        cands: list[Candidate | None] = [None] * self.n_slots
        if view.motion_active:
            shadow, scored, choice = None, [], None
        if shadow is not None:
            motions[1] = shadow
        if scored:
            legal = self._legal(view)
            taken = {(shadow.sid, shadow.target)} if shadow is not None else set()
            ranked = sorted(scored, key=lambda c: c.relief - c.cost, reverse=True)
            order = ([choice] if choice is not None else []) + ranked
            slot = 2
            for c in order:
                if slot >= 2 + k:
                    break
                key = (c.sid, c.target)
                if key in taken or not legal(c.sid, c.target):
                    continue
                taken.add(key)
                motions[slot] = Motion(c.sid, c.target)
                cands[slot] = c
                slot += 1
            by_key = {(c.sid, c.target): c for c in scored}
            if shadow is not None:
                cands[1] = by_key.get((shadow.sid, shadow.target))
        mask = np.array([True] + [m is not None for m in motions[1:]], dtype=bool)
        mine = None if choice is None else (choice.sid, choice.target)
        obs = self.encode(view, motions, cands, mine)
        return Proposals(tuple(motions), mask, obs)

    def adopt(self, view: ClusterView, motion: Motion | None) -> None:
        """Tell the heuristics what was committed on the round last proposed (the planner's
        rule: guest-centric adopts any motion; patched records one it did not make itself)."""
        if motion is None:
            return
        self._gc.adopt(view, motion)
        shadow = self._shadow
        if shadow is None or (shadow.sid, shadow.target) != (motion.sid, motion.target):
            self._patched.record_issued(view.t, motion.sid, motion.target, (motion.sid,))

    # ---------------------------------------------------------------- internals
    def _track(self, view: ClusterView) -> None:
        for i, sid in enumerate(view.sids):
            g = int(view.guest_node[i])
            node = view.node_names[g] if g >= 0 else ""
            before = self._where.get(sid)
            if before is not None and before != node:
                self._left[(sid, before)] = view.t
                self._moved_at[sid] = view.t
            self._where[sid] = node

    def _legal(self, view: ClusterView) -> Any:
        rules = view.rules
        if self._partners is None or self._partners[0] is not rules:
            self._partners = (rules, negative_partners(view))
        n, g = len(view.node_names), len(view.sids)
        mask = mask_from_view(view, n, g, self._partners[1])
        gi = {s: i for i, s in enumerate(view.sids)}
        ni = {s: i for i, s in enumerate(view.node_names)}

        def legal(sid: str, target: str) -> bool:
            return bool(mask[1 + gi[sid] * n + ni[target]])

        return legal

    def encode(
        self,
        view: ClusterView,
        motions: list[Motion | None],
        cands: list[Candidate | None],
        gc_choice: tuple[str, str] | None = None,
    ) -> NDArray[np.float32]:
        """The observation (module doc) of ``view`` and its slots; ``gc_choice``: guest-centric's
        own motion (sid, target)."""
        ng, nf = len(GLOBAL_FEATURES), len(SLOT_FEATURES)
        out = np.zeros(ng + self.n_slots * nf, dtype=np.float64)
        on = np.asarray(view.node_online, dtype=bool)
        cs = np.nan_to_num(np.asarray(view.node_cpu_some, dtype=np.float64))
        ms = np.nan_to_num(np.asarray(view.node_mem_some, dtype=np.float64))
        maxcpu = np.asarray(view.node_maxcpu, dtype=np.float64)
        maxmem = np.asarray(view.node_maxmem, dtype=np.float64)
        cap = guest_cpu_cap(view)
        ncpu = np.nan_to_num(np.asarray(view.node_cpu, dtype=np.float64))
        nmem = np.nan_to_num(np.asarray(view.node_mem, dtype=np.float64))
        util = ncpu / maxcpu
        if on.any():
            out[0] = cs[on].max() / 100.0
            out[1] = ms[on].max() / 100.0
            out[2] = util[on].mean()
            out[3] = util[on].max() - util[on].min()
            out[4] = float(bool(np.all(np.fmax(cs[on], ms[on]) < CHURN_PRESSURE_PCT)))
        out[5] = float(motions[1] is not None)
        out[6] = float(any(m is not None for m in motions[2:]))
        gi = {s: i for i, s in enumerate(view.sids)}
        ni = {s: i for i, s in enumerate(view.node_names)}
        for k, m in enumerate(motions):
            if m is None:
                continue
            g, d = gi[m.sid], ni[m.target]
            s = int(view.guest_node[g])
            gcpu = _num(view.guest_cpu[g])
            gmem = _num(view.guest_memhost[g])
            c = cands[k]
            moved = self._moved_at.get(m.sid)
            left = self._left.get((m.sid, m.target))
            row = [
                1.0,
                _ratio(gcpu, cap[g]),
                _ratio(gcpu, maxcpu[s]),
                _ratio(gmem, maxmem[d]),
                _num(view.guest_cpu_some[g]) / 100.0,
                _num(view.guest_cpu_full[g]) / 100.0,
                _num(view.guest_mem_some[g]) / 100.0,
                _ratio(ncpu[s], maxcpu[s]),
                _ratio(nmem[s], maxmem[s]),
                cs[s] / 100.0,
                ms[s] / 100.0,
                _ratio(ncpu[d], maxcpu[d]),
                _ratio(nmem[d], maxmem[d]),
                cs[d] / 100.0,
                ms[d] / 100.0,
                _ratio(ncpu[d] + gcpu, maxcpu[d]),
                _ratio(nmem[d] + gmem, maxmem[d]),
                float((m.sid, m.target) == gc_choice),
                float(c is not None),
                0.0 if c is None else max(c.relief, 0.0) / RELIEF_SCALE,
                0.0 if c is None else max(c.cost, 0.0) / COST_SCALE,
                float(c is not None and c.adequate),
                0.0 if c is None else _num(c.source_after_pct) / 100.0,
                0.0 if c is None else _num(c.target_after_pct) / 100.0,
                float(left is not None and view.t - left < OSCILLATION_WINDOW_S),
                1.0 if moved is None else min((view.t - moved) / 3600.0, 1.0),
            ]
            out[ng + k * nf : ng + (k + 1) * nf] = row
        return np.clip(out, 0.0, 1.0).astype(np.float32)


__all__ = [
    "GLOBAL_FEATURES",
    "MAX_CANDIDATES",
    "SLOT_FEATURES",
    "HeuristicProposer",
    "ProposerConfig",
    "observation_size",
    "proposer_config",
]
