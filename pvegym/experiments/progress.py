"""Progress bars for long work, with an ETA that does not count numba compilation.

The first call of each compiled kernel in a process compiles it — or loads it from numba's on-disk
cache —, which takes seconds on a fresh install or after a code change and is not part of the work:
a bar whose clock included it would promise a wrong ETA. :func:`bar` therefore first runs every
kernel of an episode once on a tiny problem (:func:`warm_up`: a minute of a scenario whose
balancer starts a live migration at once) and only then starts the clock. Bars go to stderr, are
off when it is not a terminal (pipes, CI logs) or when asked (``--quiet``).
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm

_warm = False


def warm_up() -> None:
    """Compile (or load) the round kernel, the workload pass and the live-migration event loop:
    60 s of ``nonconverging-migration`` under ``upstream``, which migrates at t = 30 s."""
    global _warm
    if _warm:
        return
    from pvegym.policies.registry import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    Simulation(catalog.scenario("nonconverging-migration"), 0).run(make_policy("upstream"), 60.0)
    _warm = True


def bar(total: int, desc: str, unit: str, enabled: bool | None = None, **kw: Any) -> tqdm:
    """A tqdm bar on stderr whose clock starts after :func:`warm_up`. ``enabled``: True/False, or
    None for "when stderr is a terminal"."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if show:
        warm_up()
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not show,
        dynamic_ncols=True,
        **kw,
    )
