"""The nodes' migration links: how concurrent live-migration streams share them.

A node has one migration link (``migration.link_bandwidth``, or the node's ``link_bandwidth``),
full duplex: what the node sends (migrations from it) and what it receives (migrations to it)
each have the link's bandwidth. One stream is capped below the link (``migration.bandwidth``:
QEMU's single migration thread and, for PVE's default ``secure`` migration type, the ssh
tunnel's cipher — one CPU-bound hop). Several streams on a link share it as TCP flows do in
the long run: max-min fair (progressive filling / water-filling, Bertsekas & Gallager, *Data
Networks*, 6.5.2): every stream's rate grows at the same pace until it reaches its cap or one of
its two links (the source's sending side, the target's receiving side) is full; the streams of a
full link keep the rate they have, the others grow on.

:func:`fair_rates` is pure: the simulation calls it whenever a stream starts or ends
(:meth:`pvegym.sim.motions.MotionPipeline._share_links`). The links are the scenario's constants
(> 0): a cut network is not a bandwidth but a stall of the streams on it, which take no share
while they stand still (``MotionPipeline._stalls_in_round``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: a stream or link within this relative distance of its limit counts as at it (float sums)
_EPS = 1e-12


def fair_rates(
    streams: Sequence[tuple[int, int]], cap: float, link: Sequence[float]
) -> list[float]:
    """Max-min fair rates (bytes/s) of ``streams`` — ``(source node, target node)`` each — with
    a per-stream ``cap`` (bytes/s) and each node's full-duplex ``link`` bandwidth (bytes/s, by
    node index). A lone stream gets ``min(cap, link[source], link[target])``."""
    k = len(streams)
    # resources: a node's sending side (2 n) and receiving side (2 n + 1)
    uses = [(2 * s, 2 * t + 1) for s, t in streams]
    if _all_fit(uses, cap, link):  # the usual case: every stream at its cap
        return [cap] * k
    left: dict[int, float] = {}
    for (out, inc), (s, t) in zip(uses, streams, strict=True):
        left[out] = link[s]
        left[inc] = link[t]
    rates = [0.0] * k
    active = list(range(k))
    level = 0.0
    while active:
        users: dict[int, int] = {}
        for i in active:
            for r in uses[i]:
                users[r] = users.get(r, 0) + 1
        step = cap - level
        for r, n in users.items():
            step = min(step, max(left[r], 0.0) / n)
        level += step
        for r, n in users.items():
            left[r] -= step * n
        full = {r for r in users if left[r] <= _EPS * max(link[r // 2], 1.0)}
        capped = level >= cap * (1.0 - _EPS)
        still: list[int] = []
        for i in active:
            if capped or uses[i][0] in full or uses[i][1] in full:
                rates[i] = level
            else:
                still.append(i)
        active = still
    return rates


def _all_fit(uses: list[tuple[int, int]], cap: float, link: Sequence[float]) -> bool:
    """Every link carries its streams at the cap (``uses``: each stream's two resources)."""
    count: dict[int, int] = {}
    for pair in uses:
        for r in pair:
            count[r] = count.get(r, 0) + 1
    return all(n * cap <= link[r // 2] for r, n in count.items())
