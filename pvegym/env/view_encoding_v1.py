"""The ``pvegym/Cluster-v1`` observation and mask of a deployed agent, from :class:`ClusterView`\\ s.

A learned balancer acts through the :class:`~pvegym.sim.view.Balancer` interface: it is handed one
view per CRM round and nothing else. :class:`ViewEncoderV1` turns that stream of views into exactly
the vector the environment gave the agent in training: it keeps the same
:class:`~pvegym.env.memory.MotionMemory` from ``view.results`` and the node PSI round by round,
and calls the same compiled kernel (:func:`~pvegym.env.encoding_v1.encode_v1`) with the view's
arrays. ``tests/env/test_view_encoding_v1.py`` compares the two bit for bit over whole episodes.

Call :meth:`ViewEncoderV1.observe` on *every* round's view (also while the pipeline is busy and no
decision is needed: that is when results arrive), then :meth:`~ViewEncoderV1.encode` and
:meth:`~ViewEncoderV1.mask` when a decision is wanted.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pvegym.env.encoding_v1 import encode_v1
from pvegym.env.memory import MotionMemory
from pvegym.env.observation_layout import N_INDEX, Layout, MemoryOptions
from pvegym.env.view_encoding import mask_from_view, negative_partners
from pvegym.sim.scenario import TELEMETRY_FIELDS
from pvegym.sim.view import STARTED, ClusterView

_NODE_ROWS = np.arange(5, dtype=np.int64)
_GUEST_ROWS = np.arange(9, dtype=np.int64)


class ViewEncoderV1:
    """Observation v1 (and its mask) of a stream of views of one cluster.

    ``episode_seconds`` is the training episode length that ``time_frac`` divides by (rounded to
    whole rounds of ``round_s``, as the environment does); ``memory`` and ``mask_unmigratable``
    are the environment options the agent was trained with.
    """

    def __init__(
        self,
        max_nodes: int,
        max_guests: int,
        episode_seconds: float,
        memory: MemoryOptions | None = None,
        mask_unmigratable: bool = False,
        round_s: float = 10.0,
        mask_headroom: float | None = None,
    ) -> None:
        self.layout = Layout(max_nodes, max_guests)
        self.options = memory or MemoryOptions()
        self.mask_unmigratable = mask_unmigratable
        self.mask_headroom = mask_headroom
        self.episode_len_s = max(1, round(episode_seconds / round_s)) * round_s
        self._opts = np.array(
            [self.options.window_s, self.options.backoff_cap_s, 1.0 / self.options.bandwidth_bps]
        )
        self.reset()

    def reset(self) -> None:
        """Forget the cluster (a new episode)."""
        self.memory: MotionMemory | None = None
        # keyed by the rules object itself (an id() can be reused once the object is freed)
        self._partners: tuple[object, list[list[int]]] | None = None
        self._last_t: float | None = None

    def _check(self, view: ClusterView) -> MotionMemory:
        n, g = len(view.node_names), len(view.sids)
        if n > self.layout.max_nodes or g > self.layout.max_guests:
            raise ValueError(
                f"the view has {n} nodes / {g} HA guests, more than the encoding's "
                f"{self.layout.max_nodes} / {self.layout.max_guests} (a model trained on a "
                "smaller family cannot act here)"
            )
        if self.memory is None:
            self.memory = MotionMemory(g, n, self.options)
            self._sid_index = {s: i for i, s in enumerate(view.sids)}
            self._node_index = {s: i for i, s in enumerate(view.node_names)}
        return self.memory

    def observe(self, view: ClusterView) -> None:
        """Remember this round's motion results and node pressure (once per round)."""
        memory = self._check(view)
        if self._last_t is not None and view.t <= self._last_t:
            return  # the same round again
        self._last_t = view.t
        for r in view.results:
            g = self._sid_index.get(r.sid)
            if g is None:
                continue
            memory.record(
                g,
                self._node_index[r.source],
                self._node_index[r.target],
                r.ok,
                r.t_issued,
                r.t_ended,
            )
        memory.observe_pressure(
            np.asarray(view.node_online, dtype=bool),
            np.asarray(view.node_cpu_some, dtype=np.float64),
            np.asarray(view.node_mem_some, dtype=np.float64),
        )

    def encode(self, view: ClusterView) -> NDArray[np.float32]:
        """The observation of ``view`` (after :meth:`observe` of it)."""
        memory = self._check(view)
        lay = self.layout
        g = len(view.sids)
        disabled = np.array(
            [
                np.asarray(getattr(view, f)).size > 0 and bool(np.isnan(getattr(view, f)).all())
                for f in TELEMETRY_FIELDS
            ]
        )
        node_cap = np.stack([view.node_maxcpu, view.node_maxmem]).astype(np.float64)
        node_src = np.stack(
            [
                view.node_cpu,
                view.node_mem,
                view.node_cpu_some,
                view.node_mem_some,
                view.node_mem_full,
            ]
        ).astype(np.float64)
        place = (
            np.stack([np.asarray(view.guest_node), np.asarray(view.guest_target)])
            .astype(np.int64)
            .reshape(2, g)
        )
        started = np.array([s == STARTED for s in view.guest_state], dtype=np.bool_)
        ones = np.ones(g)
        guest_src = np.stack(
            [
                np.asarray(view.guest_cpu, dtype=np.float64).reshape(g),
                np.asarray(view.guest_memhost, dtype=np.float64).reshape(g),
                np.asarray(view.guest_mem, dtype=np.float64).reshape(g),
                ones,
                ones,
                np.asarray(view.guest_cpu_some, dtype=np.float64).reshape(g),
                np.asarray(view.guest_cpu_full, dtype=np.float64).reshape(g),
                np.asarray(view.guest_mem_some, dtype=np.float64).reshape(g),
                np.asarray(view.guest_mem_full, dtype=np.float64).reshape(g),
            ]
        ).reshape(9, g)
        guest_static = np.stack(
            [
                np.asarray(view.guest_maxcpu, dtype=np.float64).reshape(g),
                np.asarray(view.guest_maxmem, dtype=np.float64).reshape(g),
                np.asarray(view.guest_migratable, dtype=np.float64).reshape(g),
                np.array([s.startswith("ct:") for s in view.sids], dtype=np.float64).reshape(g),
            ]
        ).reshape(4, g)
        ok = any(r.ok for r in view.results)
        failed = any(not r.ok for r in view.results)
        obs = np.zeros(lay.size, dtype=np.float32)
        encode_v1(
            obs, lay.max_nodes, lay.max_guests, disabled,
            np.asarray(view.node_online, dtype=np.bool_), node_cap, node_src, _NODE_ROWS,
            np.arange(g, dtype=np.int64), place, started,
            np.asarray(view.guest_running, dtype=np.bool_).reshape(g), guest_src, _GUEST_ROWS,
            guest_static, memory.guest, memory.failures, memory.pair, memory.pressure_rounds,
            self._opts, view.t, view.t / self.episode_len_s, view.motion_active, ok, failed,
        )  # fmt: skip
        if view.node_maintenance is not None and view.node_fenced is not None:
            nodef = obs[lay.node_offset : lay.guest_offset].reshape(-1, lay.max_nodes)
            n = len(view.node_names)
            nodef[N_INDEX["maintenance"], :n] = view.node_maintenance
            nodef[N_INDEX["fenced"], :n] = view.node_fenced
        return obs

    def mask(self, view: ClusterView) -> NDArray[np.bool_]:
        """``ClusterEnvV1.action_masks()`` of ``view``."""
        rules = view.rules
        if self._partners is None or self._partners[0] is not rules:
            self._partners = (rules, negative_partners(view))
        mask = mask_from_view(
            view, self.layout.max_nodes, self.layout.max_guests, self._partners[1]
        )
        g, n, mn = len(view.sids), len(view.node_names), self.layout.max_nodes
        grid = mask[1:].reshape(self.layout.max_guests, mn)
        if self.mask_unmigratable:
            grid[:g] &= np.asarray(view.guest_migratable, dtype=bool)[:, None]
        if self.mask_headroom is not None:
            node_mem = np.asarray(view.node_mem, dtype=np.float64)
            memhost = np.asarray(view.guest_memhost, dtype=np.float64)
            limit = (1.0 - self.mask_headroom) * np.asarray(view.node_maxmem, dtype=np.float64)
            with np.errstate(invalid="ignore"):  # NaN telemetry: no check (fail open)
                full = node_mem[None, :] + memhost[:, None] > limit[None, :]
            grid[:g, :n] &= ~full
        return mask


__all__ = ["ViewEncoderV1"]
