"""``pvegym/Cluster-v1``: ``Cluster-v0``'s round, action and reward, with an observation that
makes the right move learnable."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from pvegym.env.cluster_env import ClusterEnv
from pvegym.env.encoding_v1 import encode_v1, fill_mask_v1
from pvegym.env.memory import MotionMemory
from pvegym.env.observation_layout import N_INDEX, Layout, MemoryOptions
from pvegym.errors import ConfigError, show
from pvegym.limits import MAX_RATE
from pvegym.sim import layout as R
from pvegym.sim.kernel import entry_point
from pvegym.sim.scenario import Scenario

_N_AVG10 = R.N_AVG + R.AVG10 * R.N_SERIES
_G_AVG10 = R.G_AVG + R.AVG10 * R.G_SERIES
#: rows of ClusterState.node_rows (and of pvestatd's samples, laid out alike) holding cpu, mem and
#: PSI avg10 cpu some / mem some / mem full (pvegym.env.encoding_v1's NODE_* order)
#: the node-state rows, adjacent in the layout in Simulation.node_flags's order
_NF_MAINTENANCE = N_INDEX["maintenance"]
assert N_INDEX["fenced"] == _NF_MAINTENANCE + 1

_NODE_TELEMETRY_ROWS = np.array(
    [R.N_CPU, R.N_MEM, _N_AVG10 + R.N_CPU_SOME, _N_AVG10 + R.N_MEM_SOME, _N_AVG10 + R.N_MEM_FULL],
    dtype=np.int64,
)
#: rows of ClusterState.guest_rows (and of the samples) holding received, memhost, memhost ·
#: mem_ratio (two factors), run fraction and PSI avg10 cpu some / cpu full / mem some / mem full
#: (encoding_v1's G_* order)
_GUEST_TELEMETRY_ROWS = np.array(
    [
        R.G_RECEIVED,
        R.G_MEMHOST,
        R.G_MEMHOST,
        R.G_MEM_RATIO,
        R.G_RUN_FRACTION,
        _G_AVG10 + R.G_CPU_SOME,
        _G_AVG10 + R.G_CPU_FULL,
        _G_AVG10 + R.G_MEM_SOME,
        _G_AVG10 + R.G_MEM_FULL,
    ],
    dtype=np.int64,
)


def memory_options(value: MemoryOptions | Mapping[str, Any] | None) -> MemoryOptions:
    """``MemoryOptions`` from a dict of its fields (unknown or non-positive ones are ConfigErrors)."""
    if value is None:
        return MemoryOptions()
    if isinstance(value, MemoryOptions):
        return value
    known = {f.name for f in dataclasses.fields(MemoryOptions)}
    for key, v in value.items():
        if key not in known:
            raise ConfigError(
                f"memory.{key}", f"unknown option (allowed: {', '.join(sorted(known))})"
            )
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= MAX_RATE:
            # MAX_RATE (2^50) bounds the largest of them, the bandwidth in bytes/s
            raise ConfigError(f"memory.{key}", f"must be a number in (0, 2^50], not {show(v)}")
    opts = MemoryOptions(**{k: float(v) for k, v in value.items()})
    if opts.backoff_factor < 1.0:
        raise ConfigError("memory.backoff_factor", "must be >= 1")
    return opts


class ClusterEnvV1(ClusterEnv):
    """A Proxmox VE HA cluster whose automatic load balancer is the agent (observation v1).

    ## Description

    As ``pvegym/Cluster-v0`` (:class:`~pvegym.env.cluster_env.ClusterEnv`: one step is one CRM
    round, at most one motion, reward in the metrics' vocabulary); only the observation differs,
    and the mask may leave out guests that cannot migrate.

    ## Observation Space

    ``Box(0, 1, (Layout.size,), float32)``: the four blocks of :mod:`pvegym.env.observation_layout` — globals,
    node features, guest features and guest × node pair features — with the per-guest motion
    memory an HA manager keeps (last outcome and when, failures within a window, backoff, when it
    left each node), what a cost-aware balancer estimates (first-pass transfer time, a target's
    load and memory after receiving the guest), per-guest pressure and node state (online,
    maintenance, fenced). Built from telemetry and motion results only.

    ## Action Space

    As v0. ``mask_unmigratable=True`` also masks every motion of a guest that telemetry marks as
    not migratable (a local resource: its motions fail after the precheck) — what a balancer that
    checks migratability first never tries; ``mask_headroom`` masks targets without memory room.

    ## Arguments

    Those of ``Cluster-v0``, plus:

    * ``mask_unmigratable`` — see above (default ``False``: the agent must learn it).
    * ``mask_headroom`` — with a value ≥ 0, also mask targets whose memory in use plus the
      guest's host footprint (telemetry) exceeds ``1 − mask_headroom`` of their memory: the LRM's
      precheck refuses a target without room (0), a margin keeps it out of reclaim (guest-centric
      keeps 0.05). Default ``None``: off.
    * ``memory`` — :class:`~pvegym.env.observation_layout.MemoryOptions` or a dict of its fields (window,
      backoff, pressure gate, migration bandwidth).
    """

    def __init__(
        self,
        scenario: str | Scenario = "small",
        *,
        mask_unmigratable: bool = False,
        mask_headroom: float | None = None,
        memory: MemoryOptions | Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.mask_unmigratable = bool(mask_unmigratable)
        if mask_headroom is not None and not (
            isinstance(mask_headroom, int | float) and 0.0 <= float(mask_headroom) < 1.0
        ):
            raise ConfigError("mask_headroom", f"must be in [0, 1) or none, not {mask_headroom!r}")
        self.mask_headroom = None if mask_headroom is None else float(mask_headroom)
        self.memory_options = memory_options(memory)
        super().__init__(scenario, **kwargs)

    # ------------------------------------------------------------------ hooks of ClusterEnv
    def _init_observation(self) -> None:
        self.layout = Layout(self.max_nodes, self.max_guests)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.layout.size,), dtype=np.float32)
        self._obs = np.zeros(self.layout.size, dtype=np.float32)

    def _mask_guests(self) -> NDArray[np.bool_]:
        if not self.mask_unmigratable:
            return super()._mask_guests()
        return super()._mask_guests() & np.asarray(self.view.guest_migratable, dtype=bool)

    def _setup_observation(self) -> None:
        sim, view, cl = self.sim, self.view, self.sim.cluster
        # what pvestatd sampled (pvegym.sim.telemetry: phase, first sample, RRD mode), as the
        # view has it; the state's own rows when the telemetry is the truth
        tel = sim.telemetry
        seen = tel.view
        opts = self.memory_options
        idx = self._ha_idx
        self.memory = MotionMemory(self._n_guests, self._n_nodes, opts)
        self._view_index = np.full(cl.n_guests, -1, dtype=np.int64)
        self._view_index[idx] = np.arange(idx.size)
        node_cap = np.stack([cl.node_maxcpu, cl.node_maxmem])
        guest_static = np.stack(
            [
                cl.guest_maxcpu[idx],
                cl.guest_maxmem[idx],
                np.asarray(view.guest_migratable, dtype=np.float64),
                np.array([sid.startswith("ct:") for sid in view.sids], dtype=np.float64),
            ]
        ).reshape(4, idx.size)
        window_opts = np.array([opts.window_s, opts.backoff_cap_s, 1.0 / opts.bandwidth_bps])
        mem = self.memory
        self._enc_args_v1: tuple[Any, ...] = (
            self._obs, self.max_nodes, self.max_guests, self._disabled,
            sim.node_usable, node_cap, tel.node_rows, _NODE_TELEMETRY_ROWS,
            idx, sim.svc_place, sim.svc_started, cl.running, tel.guest_rows,
            _GUEST_TELEMETRY_ROWS, guest_static,
            mem.guest, mem.failures, mem.pair, mem.pressure_rounds, window_opts,
        )  # fmt: skip
        # the node-state rows maintenance and fenced of the observation (the kernel fills
        # online): with the full HA stack the HA manager's (Simulation.node_flags)
        lay = self.layout
        nodef = self._obs[lay.node_offset : lay.guest_offset].reshape(-1, self.max_nodes)
        self._node_rows = nodef[_NF_MAINTENANCE : _NF_MAINTENANCE + 2]  # a view: adjacent rows
        self._encode_v1: Any = entry_point(
            encode_v1, *self._enc_args_v1, 0.0, 0.0, False, False, False
        )
        # the mask with the memory-room check (telemetry: NaN when switched off fails open)
        off = self.scenario.telemetry.disabled
        nan_g = np.full(cl.n_guests, np.nan)
        self._mask_args_v1: tuple[Any, ...] = (
            *self._mask_args,
            np.full(self._n_nodes, np.nan) if "node_mem" in off else seen.node_mem,
            cl.node_maxmem,
            nan_g if "guest_memhost" in off else seen.memhost,
            -1.0 if self.mask_headroom is None else self.mask_headroom,
        )
        self._mask_args = self._mask_args_v1
        self._fill_mask = entry_point(fill_mask_v1, *self._mask_args_v1)
        # the pressure the memory counts: telemetry (NaN when switched off), as the view shows it
        cs, ms, _ = seen.node_avg10()
        nan = np.full(self._n_nodes, np.nan)
        self._pressure_src = (
            sim.node_usable,
            nan if "node_cpu_some" in self.scenario.telemetry.disabled else cs,
            nan if "node_mem_some" in self.scenario.telemetry.disabled else ms,
        )

    def _option_allows(self, g: int, n: int) -> bool:
        if self.mask_unmigratable or self.mask_headroom is not None:
            return bool(self.action_masks()[1 + g * self.max_nodes + n])
        return super()._option_allows(g, n)

    def _on_round(self) -> None:
        mem = self.memory
        for g, source, target, ok, t_issued, t_end in self.sim.ended_motions():
            mem.record(int(self._view_index[g]), source, target, ok, t_issued, t_end)
        mem.observe_pressure(*self._pressure_src)

    def _encode(self) -> NDArray[np.float32]:
        sim = self.sim
        ok, failed = sim.result_flags()
        self._encode_v1(
            *self._enc_args_v1,
            sim.t,
            sim.t / self._episode_len_s,
            sim.motion_active(),
            ok,
            failed,
        )
        if sim.ha_stack is not None:  # the HA manager's node states (the model stack: none)
            self._node_rows[:, : self._n_nodes] = sim.node_flags
        return self._obs.copy() if self.copy_observation else self._obs


__all__ = ["ClusterEnvV1", "memory_options"]
