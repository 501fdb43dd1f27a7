"""The environment's observation and action mask, computed from a :class:`ClusterView` alone.

Why: a learned agent is trained on ``pvegym/Cluster-v0``, whose observation is written by the
compiled kernels of :mod:`pvegym.env.encoding` straight from the simulation's arrays. To deploy the
same agent as a :class:`~pvegym.sim.view.Balancer` — in ``pvegym simulate``, the experiment runner,
or against a real cluster's telemetry — it must see *exactly* the same vector, built from nothing
but what a balancer is given. :func:`encode_view` and :func:`mask_from_view` are that, in plain
NumPy, following the kernels operation by operation (including where they round to float32
in the middle of a computation), so ``tests/env/test_view_encoding.py`` can compare them bit for
bit with the environment over whole episodes.

Layout, scales and units: :data:`~pvegym.env.cluster_env.GLOBAL_FEATURES`, ``NODE_FEATURES``,
``GUEST_FEATURES`` (feature-major blocks padded to ``max_nodes``/``max_guests``).

Known limits of "exactly" (both documented in the tests):

* ``guest.mem`` is ``memhost · mem_ratio / maxmem``. The environment multiplies
  ``(memhost · (1/maxmem)) · mem_ratio``; the view only carries the product ``memhost · mem_ratio``,
  so here it is ``(memhost · mem_ratio) · (1/maxmem)``. The two float64 values can differ in the
  last bit; after rounding to float32 they agree unless the value sits within ~1e-16 of a float32
  rounding boundary (probability ~2⁻²⁸ per value — never seen in the tests).
* ``missing_<field>`` flags: the environment reads the scenario's ``telemetry.disabled`` list; the
  view only shows the field as NaN. A guest field of a cluster with *no* HA guests has no values to
  be NaN, so its flag reads 0 here (the environment would say 1). Negative-affinity partners that
  are not HA-managed are invisible in the view (families make every guest HA-managed).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from pvegym.env.cluster_env import (
    CORES_SCALE,
    GLOBAL_FEATURES,
    GUEST_CPU_SCALE,
    GUEST_FEATURES,
    GUEST_MEM_SCALE,
    NODE_FEATURES,
    NODE_MEM_SCALE,
)
from pvegym.sim.affinity import allowed_targets, rebalance_movable
from pvegym.sim.scenario import TELEMETRY_FIELDS
from pvegym.sim.view import STARTED, ClusterView, guest_cpu_cap

_N_GL, _N_NF, _N_GF = len(GLOBAL_FEATURES), len(NODE_FEATURES), len(GUEST_FEATURES)
_G = {name: i for i, name in enumerate(GLOBAL_FEATURES)}
_NF = {name: i for i, name in enumerate(NODE_FEATURES)}
_GF = {name: i for i, name in enumerate(GUEST_FEATURES)}


def observation_size(max_nodes: int, max_guests: int) -> int:
    """Length of the observation vector for these padded sizes."""
    return _N_GL + _N_NF * max_nodes + _N_GF * max_guests


def _unit(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Clip to [0, 1] with NaN → 0 (the kernels' ``_unit``)."""
    with np.errstate(invalid="ignore"):
        return np.where(x > 0.0, np.minimum(x, 1.0), 0.0)


def _check_sizes(view: ClusterView, max_nodes: int, max_guests: int) -> tuple[int, int]:
    n, g = len(view.node_names), len(view.sids)
    if n > max_nodes or g > max_guests:
        raise ValueError(
            f"the view has {n} nodes / {g} HA guests, more than the encoding's "
            f"{max_nodes} / {max_guests} (a model trained on a smaller family cannot act here)"
        )
    return n, g


def _guest_counts(guest_node: NDArray[np.int64], n: int, max_guests: int) -> NDArray[np.float32]:
    """HA guests per node / max_guests, accumulated as the kernel does: one float32 add per guest
    (``nodef[9, node] += 1/max_guests``), so the rounding after each add is reproduced."""
    counts = np.bincount(guest_node, minlength=n)[:n]
    inv_mg = 1.0 / max_guests
    table = np.zeros(int(counts.max(initial=0)) + 1, dtype=np.float32)
    acc = np.float32(0.0)
    for k in range(1, table.size):
        acc = np.float32(float(acc) + inv_mg)
        table[k] = acc
    return table[counts]


def encode_view(
    view: ClusterView,
    max_nodes: int,
    max_guests: int,
    episode_seconds: float,
    round_s: float = 10.0,
) -> NDArray[np.float32]:
    """The ``pvegym/Cluster-v0`` observation of ``view`` (float32, in [0, 1]).

    ``episode_seconds`` is the training episode length (s) that ``time_frac`` divides by, rounded
    to whole rounds of ``round_s`` s as the environment does; ``max_nodes``/``max_guests`` are the
    padded sizes of the model's spaces (the family's maxima). Raises ``ValueError`` for a view
    larger than those sizes.
    """
    n, g = _check_sizes(view, max_nodes, max_guests)
    obs = np.zeros(observation_size(max_nodes, max_guests), dtype=np.float32)
    glob = obs[:_N_GL]
    nodef = obs[_N_GL : _N_GL + _N_NF * max_nodes].reshape(_N_NF, max_nodes)
    guestf = obs[_N_GL + _N_NF * max_nodes :].reshape(_N_GF, max_guests)

    # ---------------------------------------------------------------- nodes
    online = np.asarray(view.node_online, dtype=bool)
    nodef[_NF["present"], :n] = 1.0
    nodef[_NF["online"], :n] = online
    nodef[_NF["maxcpu"], :n] = view.node_maxcpu / CORES_SCALE
    nodef[_NF["maxmem"], :n] = view.node_maxmem / NODE_MEM_SCALE
    cpu = _unit(view.node_cpu * (1.0 / view.node_maxcpu))  # float64, as the kernel keeps it
    mem = _unit(view.node_mem * (1.0 / view.node_maxmem))
    nodef[_NF["cpu"], :n] = cpu
    nodef[_NF["mem"], :n] = mem
    nodef[_NF["cpu_some"], :n] = _unit(view.node_cpu_some * 0.01)
    nodef[_NF["mem_some"], :n] = _unit(view.node_mem_some * 0.01)
    nodef[_NF["mem_full"], :n] = _unit(view.node_mem_full * 0.01)
    guest_node = np.asarray(view.guest_node, dtype=np.int64)
    if g:
        nodef[_NF["guests"], :n] = _guest_counts(guest_node, n, max_guests)

    # ---------------------------------------------------------------- guests
    if g:
        inv_mn = 1.0 / max_nodes
        target = np.asarray(view.guest_target, dtype=np.int64)
        moving = target >= 0
        guestf[_GF["present"], :g] = 1.0
        guestf[_GF["node"], :g] = (guest_node + 1) * inv_mn
        guestf[_GF["target"], :g] = np.where(moving, (target + 1) * inv_mn, 0.0)
        guestf[_GF["started"], :g] = [s == STARTED for s in view.guest_state]
        guestf[_GF["moving"], :g] = moving
        guestf[_GF["running"], :g] = view.guest_running
        cap = guest_cpu_cap(view)  # no CPU limit: its node's CPUs
        guestf[_GF["maxcpu"], :g] = cap / GUEST_CPU_SCALE
        guestf[_GF["maxmem"], :g] = view.guest_maxmem / GUEST_MEM_SCALE
        inv_mem = 1.0 / view.guest_maxmem
        guestf[_GF["cpu"], :g] = _unit(view.guest_cpu * (1.0 / cap))
        guestf[_GF["mem"], :g] = _unit(view.guest_mem * inv_mem)  # see the module docstring
        guestf[_GF["memhost"], :g] = _unit(view.guest_memhost * inv_mem)
        guestf[_GF["cpu_some"], :g] = _unit(view.guest_cpu_some * 0.01)
        guestf[_GF["cpu_full"], :g] = _unit(view.guest_cpu_full * 0.01)
        guestf[_GF["mem_some"], :g] = _unit(view.guest_mem_some * 0.01)
        guestf[_GF["mem_full"], :g] = _unit(view.guest_mem_full * 0.01)
        guestf[_GF["migratable"], :g] = view.guest_migratable

    # ---------------------------------------------------------------- globals
    rounds = max(1, round(episode_seconds / round_s))
    glob[_G["time_frac"]] = _unit(np.array(view.t / (rounds * round_s)))
    glob[_G["motion_active"]] = float(view.motion_active)
    glob[_G["nodes_frac"]] = n / max_nodes
    glob[_G["guests_frac"]] = g / max_guests
    glob[_G["imbalance"]] = _imbalance(
        cpu, mem, nodef[_NF["cpu"], :n], nodef[_NF["mem"], :n], online
    )
    glob[_G["result_ok"]] = float(any(r.ok for r in view.results))
    glob[_G["result_failed"]] = float(any(not r.ok for r in view.results))
    for name in TELEMETRY_FIELDS:
        values = np.asarray(getattr(view, name))
        glob[_G[f"missing_{name}"]] = float(values.size > 0 and bool(np.isnan(values).all()))
    return obs


def _imbalance(
    cpu: NDArray[np.float64],
    mem: NDArray[np.float64],
    cpu32: NDArray[np.float32],
    mem32: NDArray[np.float32],
    online: NDArray[np.bool_],
) -> float:
    """Normalized CV of the online nodes' telemetry loads, clipped to [0, 1].

    The kernel sums the mean from the float64 loads but the deviations from the *stored* float32
    features (their sum in float32), node by node; this follows it so the result is bit-identical.
    """
    load_sum, count = 0.0, 0
    for j in np.flatnonzero(online):
        load_sum += (float(cpu[j]) + float(mem[j])) / 2.0
        count += 1
    if count < 2 or not load_sum > 0.0:
        return 0.0
    mean = load_sum / count
    var = 0.0
    for j in np.flatnonzero(online):
        d = float(cpu32[j] + mem32[j]) / 2.0 - mean  # float32 + float32, then float64
        var += d * d
    imb = math.sqrt(var / count) / mean / math.sqrt(count - 1.0)
    return 0.0 if not imb > 0.0 else min(imb, 1.0)


def negative_partners(view: ClusterView) -> list[list[int]]:
    """For each HA guest of the view (by index), its negative-affinity partners' view indices."""
    index = {sid: i for i, sid in enumerate(view.sids)}
    partners: list[list[int]] = [[] for _ in view.sids]
    for rule in view.rules.resource_affinity:
        if rule.positive:
            continue
        members = [index[s] for s in rule.resources if s in index]
        for m in members:
            partners[m].extend(x for x in members if x != m and x not in partners[m])
    return partners


def mask_from_view(
    view: ClusterView,
    max_nodes: int,
    max_guests: int,
    partners: list[list[int]] | None = None,
) -> NDArray[np.bool_]:
    """``ClusterEnv.action_masks()`` from the view: action 0 always; ``1 + g·max_nodes + n`` when
    the HA manager would queue guest ``g`` → node ``n`` now (idle pipeline, ``started`` guest,
    another online node its node-affinity rules allow, no negative-affinity partner on or moving
    to it, its ``auto-rebalance`` flag and its positive partners' on).

    ``partners`` (from :func:`negative_partners`) may be passed in to skip rebuilding it each round.
    """
    n, g = _check_sizes(view, max_nodes, max_guests)
    mask = np.zeros(1 + max_nodes * max_guests, dtype=bool)
    mask[0] = True
    if view.motion_active or g == 0:
        return mask
    grid = mask[1:].reshape(max_guests, max_nodes)
    started = np.array([s == STARTED for s in view.guest_state], dtype=bool)
    guest_node = np.asarray(view.guest_node, dtype=np.int64)
    target = np.asarray(view.guest_target, dtype=np.int64)
    sub = grid[:g, :n]
    sub[:] = started[:, None] & np.asarray(view.node_online, dtype=bool)[None, :]
    sub[np.arange(g), guest_node] = False
    sub &= allowed_targets(view.rules, view.sids, view.node_names, np.asarray(view.node_online))
    movable = rebalance_movable(view.rules, view.sids, view.guest_auto_rebalance)
    if movable is not None:  # auto-rebalance off: never the balancer's
        sub &= movable[:, None]
    if partners is None:
        partners = negative_partners(view)
    for i, ps in enumerate(partners):
        if not started[i]:
            continue
        for p in ps:
            sub[i, guest_node[p]] = False
            if target[p] >= 0:
                sub[i, target[p]] = False
    return mask


__all__ = ["encode_view", "mask_from_view", "negative_partners", "observation_size"]
