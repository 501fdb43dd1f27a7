"""The engine stack against the full stack on whole scenarios (issue 31, items 1 and 3).

:func:`compare` runs one scenario × policy × seed twice — the full stack (``ha_stack = "full"``:
the port's CRM and LRMs) and the engine stack (``"engine"``: the compiled engine's CRM round, the
port's LRMs; :mod:`pvegym.sim.engine_stack`) — on the same hardware and compares the episode's
metrics, the balancer's moves and the log, line by line. ``scripts/engine_diff.py --scenarios``
runs any number of pairs.

``basic=True`` sets the HA manager's placement scheduler (datacenter ``crs.ha``) to ``basic`` on
both sides before the first round: the engine places by the basic scheduler's scores only (a
service count per node; :mod:`pvegym.sim.engine`, *Not yet*), so only then may both agree where
a scenario's recovery or maintenance places a service. The policy's view keeps the scenario's
``crs_mode``. Without it the two differ by the port's ``using scheduler mode`` line at least.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pvegym.policies import make_policy
from pvegym.sim import catalog
from pvegym.sim.simulation import Simulation


@dataclass
class Run:
    metrics: dict[str, Any]
    moves: list[dict[str, Any]]
    log: list[tuple[float, str]]


def run(
    scenario: str,
    policy: str,
    seed: int,
    stack: str,
    basic: bool = False,
    duration: float | None = None,
) -> Run:
    """One episode of ``scenario`` on HA stack ``stack`` (``simulate``'s loop,
    :meth:`Simulation.run`, with the scheduler override applied before the first round)."""
    scn = catalog.scenario(scenario, seed, {"ha_stack": stack})
    sim = Simulation(scn, seed)
    ha = sim.ha_stack
    if ha is None:
        raise ValueError(f"ha_stack {stack!r} runs no HA stack to compare")
    if basic:
        ha.cfs.datacenter["crs"]["ha"] = "basic"
    pol = make_policy(policy, "--policy")
    pol.reset(seed)
    rounds = round((scn.duration if duration is None else duration) / sim.round_s)
    sim.advance()  # reset() without rebuilding the stack
    view = sim.observe()
    for _ in range(rounds - 1):
        view = sim.step(pol.decide(view))
    sim.commit(pol.decide(view))
    res = sim.result()
    return Run(res["metrics"], res["moves"], sim.log)


def first_difference(a: Run, b: Run) -> str:
    """The first difference of two runs (metrics, then moves, then log lines), or ''."""
    for key in sorted(set(a.metrics) | set(b.metrics)):
        x, y = a.metrics.get(key), b.metrics.get(key)
        if x != y and not (x != x and y != y):  # NaN equals NaN here
            return f"metric {key}: full {x!r} engine {y!r}"
    if a.moves != b.moves:
        for i, (x, y) in enumerate(zip(a.moves, b.moves, strict=False)):
            if x != y:
                return f"move {i}: full {x} engine {y}"
        return f"moves: full {len(a.moves)} engine {len(b.moves)}"
    for i, (x, y) in enumerate(zip(a.log, b.log, strict=False)):
        if x != y:
            return f"log line {i}: full {x} engine {y}"
    if len(a.log) != len(b.log):
        return f"log: full {len(a.log)} lines, engine {len(b.log)}"
    return ""


def compare(
    scenario: str, policy: str, seed: int, basic: bool = True, duration: float | None = None
) -> str:
    """The first difference of the full and the engine stack on one episode, or ''."""
    full = run(scenario, policy, seed, "full", basic, duration)
    engine = run(scenario, policy, seed, "engine", basic, duration)
    return first_difference(full, engine)
