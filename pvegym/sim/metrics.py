"""Episode metrics (``docs/metrics.md``): what a policy achieved and what it cost — and their registry.

The names are part of the public interface. Pressure and stall metrics integrate the *true*
instantaneous pressure of each round (not the telemetry a policy sees); counts come from the
motions the balancer issued (a bundle counts once, under its leader).

**One registry.** Every metric is one :class:`MetricSpec`: its name, unit, which way is better, a
one-line description, whether it adds up round by round, and the code that measures it from the
running :class:`Metrics` of an episode. Everything else derives from the registry: the keys of
``simulate --json`` and of ``metrics.csv`` (:data:`METRIC_KEYS`, in registry order), the units and
tables of the reports, the charts, the tuning objectives and constraints, the ablation table.
Adding a metric is one :func:`register_metric` call (or one entry in :data:`BUILTIN`) plus the
code that measures it; ``tests/sim/test_metric_registry.py`` adds one at run time and finds it in
``simulate --json``, a report and a tuning objective.

**Additive metrics.** A metric is *additive* when its value is the sum of per-round
contributions: measured on the running :class:`Metrics` after round r minus the value after round
r − 1 is what round r added, and the per-round contributions of an episode sum to its final value
(``moves``, ``stall_cpu_s``, ``migration_bytes``, …). Only additive metrics may be reward terms
(a reward is paid per step). Means and maxima (``imbalance_mean``, ``max_moves_one_guest``) and
latencies (``evacuation_latency_s``) are not additive.

**Beyond the first metric set.** ``moves_guest_failed`` counts live migrations the HA manager reports as succeeded
that paused their guest for at least :attr:`Metrics.pause_failure_s` (10 s): the unpatched
non-converging case's ≈ 23 s switchover (``docs/model.md``, Live migration) is a success for the pipeline and a failure
for the guest, and the reports say so. ``oom_kills`` counts guests the kernel's OOM killer killed
because their node's memory in use went past MemTotal + swap (an overcommitted target).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, overload

from pvegym.units import GiB

Better = Literal["lower", "higher"] | None

#: Tables that show a chosen subset of the metrics (``MetricSpec.tables``): the "at a glance" table
#: of an experiment's ``summary.md``, the held-out headline table of a study's report, the
#: ablation table of ``pvegym ablate``.
GLANCE = "glance"
HEADLINE = "headline"
ABLATION = "ablation"
TABLES = (GLANCE, HEADLINE, ABLATION)


@dataclass(frozen=True)
class MetricSpec:
    """One metric (``docs/metrics.md``).

    * ``name`` — the key in ``simulate --json``, ``metrics.csv``, study files.
    * ``unit`` — the unit of the measured value (``s``, ``count``, ``B``, ``core·s``, …).
    * ``better`` — ``"lower"`` (a cost), ``"higher"``, or ``None`` (neither: an outcome to read,
      such as ``moves_succeeded``, or the episode length).
    * ``description`` — one line: what is measured.
    * ``additive`` — the value is the sum of per-round contributions (module docstring): what a
      reward term may use.
    * ``measure`` — the value from an episode's running :class:`Metrics` (at any round: the value
      so far; ``None`` when there is none, e.g. no motion left the hot node).
    * ``report_unit``, ``report_scale`` — how reports show it (``migration_bytes`` in GiB:
      ``"GiB"``, ``2**-30``); default the ``unit``, unscaled.
    * ``compared`` — reports compare policies on it (``False`` for the episode length, the same for
      every policy by construction).
    * ``tables`` — the chosen-subset tables that show it (:data:`TABLES`).
    """

    name: str
    unit: str
    better: Better
    description: str
    additive: bool
    measure: Callable[[Metrics], float | int | None]
    report_unit: str = ""
    report_scale: float = 1.0
    compared: bool = True
    tables: frozenset[str] = frozenset()

    @property
    def shown_unit(self) -> str:
        """The unit reports show."""
        return self.report_unit or self.unit

    def value(self, metrics: Metrics) -> float | int | None:
        """The metric on an episode's running :class:`Metrics` (see ``measure``)."""
        return self.measure(metrics)


_REGISTRY: dict[str, MetricSpec] = {}


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Add ``spec`` to the registry (after the metrics already there); returns it.

    A name that is already registered is a ``ValueError`` (names are the public interface); so is
    an unknown table name or a ``better`` other than ``"lower"``, ``"higher"`` or ``None``.
    """
    if spec.name in _REGISTRY:
        raise ValueError(f"metric {spec.name!r} is already registered")
    if not spec.name.isidentifier():
        raise ValueError(f"metric name {spec.name!r} must be an identifier (a CSV column, a key)")
    if spec.better not in ("lower", "higher", None):
        raise ValueError(f"metric {spec.name!r}: better must be 'lower', 'higher' or None")
    unknown = sorted(spec.tables - set(TABLES))
    if unknown:
        raise ValueError(f"metric {spec.name!r}: unknown tables {unknown} (allowed: {TABLES})")
    _REGISTRY[spec.name] = spec
    return spec


def unregister_metric(name: str) -> None:
    """Remove a metric registered at run time (tests); a built-in one cannot be removed."""
    if name in _BUILTIN_NAMES:
        raise ValueError(f"{name!r} is a built-in metric")
    del _REGISTRY[name]


def metric_spec(name: str) -> MetricSpec:
    """The spec of metric ``name``; ``KeyError`` naming the allowed ones if there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r} (allowed: {', '.join(_REGISTRY)})") from None


def metric_specs() -> tuple[MetricSpec, ...]:
    """Every registered metric, in registry order (built-ins first, in ``docs/metrics.md``'s order)."""
    return tuple(_REGISTRY.values())


def metrics_in(table: str) -> tuple[str, ...]:
    """The names of the metrics a chosen-subset table shows (:data:`TABLES`), in registry order."""
    if table not in TABLES:
        raise KeyError(f"unknown table {table!r} (allowed: {', '.join(TABLES)})")
    return tuple(s.name for s in _REGISTRY.values() if table in s.tables)


def extra_metrics() -> tuple[str, ...]:
    """The names of the metrics registered at run time (not built in), in registry order: a
    result computed without them lacks them (the runner keys its cells on these names)."""
    return tuple(name for name in _REGISTRY if name not in _BUILTIN_NAMES)


def additive_metrics() -> tuple[MetricSpec, ...]:
    """The metrics that add up round by round: what a reward term may use."""
    return tuple(s for s in _REGISTRY.values() if s.additive)


class _MetricKeys(Sequence[str]):
    """The registered metric names, read live from the registry (so a metric registered at run
    time is in every loop over :data:`METRIC_KEYS`, wherever it was imported)."""

    def __len__(self) -> int:
        return len(_REGISTRY)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[str, ...]: ...
    def __getitem__(self, i: int | slice) -> str | tuple[str, ...]:
        return tuple(_REGISTRY)[i]

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_REGISTRY))

    def __contains__(self, name: object) -> bool:
        return name in _REGISTRY

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _MetricKeys | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # live, hence unhashable (like a list)

    def __repr__(self) -> str:
        return repr(tuple(_REGISTRY))


#: The metric names, in registry order: a live view of the registry (``tuple(METRIC_KEYS)`` for a
#: snapshot).
METRIC_KEYS: Sequence[str] = _MetricKeys()


@dataclass(slots=True)
class MoveRecord:
    """One balancer motion (``moves`` list of ``simulate --json``)."""

    t: float
    guest: str
    source: str
    target: str
    outcome: str = "running"  # running | succeeded | failed | aborted
    reason: str = ""
    t_end: float | None = None
    pause_s: float = 0.0  # guest-visible pause of the motion (s): switchover or container down

    def as_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "guest": self.guest,
            "source": self.source,
            "target": self.target,
            "outcome": self.outcome,
            "t_end": self.t_end,
            "reason": self.reason,
            "pause_s": self.pause_s,
        }


def _nothing_in_flight() -> tuple[float, float]:
    return 0.0, 0.0


@dataclass
class Metrics:
    """The running record of an episode that every :class:`MetricSpec` is measured from.

    The simulation adds each round (:meth:`add_round`), each motion issued and ended, and the
    bytes, seconds and downtime of each ended migration; ``in_flight`` reports a live migration
    that has not ended yet (bytes sent, seconds so far), so that the migration metrics count it.
    """

    oscillation_window_s: float = 3600.0
    pause_failure_s: float = 10.0
    """A live migration that paused its guest this long (s) failed the guest although the HA
    manager counts it as succeeded: ``docs/model.md``'s Targets bar for the unpatched non-converging case ("ends
    with a guest pause ≥ 10 s"), where qemu-server was told the limit is 0.1 s
    (``migrate_downtime``)."""
    sim_seconds: float = 0.0
    stall_cpu_s: float = 0.0
    stall_mem_s: float = 0.0
    guest_stall_s: float = 0.0
    cpu_shortfall_core_s: float = 0.0
    migration_bytes: float = 0.0  # of ended migrations
    migration_seconds: float = 0.0  # of ended migrations
    downtime_s: float = 0.0
    failed_repeats: int = 0
    oom_kills: int = 0  # guests the kernel's OOM killer killed (a node past MemTotal + swap)
    moves_failed: int = 0  # running count (failed + aborted), so per-step readers need no scan
    oscillations: int = 0
    churn_moves: int = 0
    moves: list[MoveRecord] = field(default_factory=list)
    imbalance_sum: float = 0.0  # Σ over rounds of the normalized imbalance
    rounds: int = 0
    _failed_pairs: set[tuple[str, str]] = field(default_factory=set)
    _departures: dict[tuple[str, str], float] = field(default_factory=dict)
    per_guest: dict[str, int] = field(default_factory=dict)  # sid -> moves issued
    onsets: list[tuple[float, str]] = field(default_factory=list)  # pressure onsets (t, node)
    #: HA service-seconds requested started but not up (not running, or on a node cut off from
    #: the quorate partition)
    services_down_s: float = 0.0
    #: node failures (power or network off): [t of the failure, t when every HA service that was
    #: up on the node is up again or None] (s)
    failures: list[list[float | None]] = field(default_factory=list)
    #: balancer motions issued while the HA manager's maintenance moves were pending
    maintenance_moves: int = 0
    in_flight: Callable[[], tuple[float, float]] = _nothing_in_flight

    def add_round(
        self,
        dt: float,
        stall_cpu: float,
        stall_mem: float,
        guest_stall: float,
        shortfall: float,
        imbalance: float,
    ) -> None:
        """One round of ``dt`` s: Σ over online nodes of cpu/memory some (fractions 0–1), Σ over
        guests of cpu + memory some, Σ CPU shortfall (cores) and the normalized imbalance."""
        self.sim_seconds += dt
        self.stall_cpu_s += stall_cpu * dt
        self.stall_mem_s += stall_mem * dt
        self.guest_stall_s += guest_stall * dt
        self.cpu_shortfall_core_s += shortfall * dt
        self.imbalance_sum += imbalance
        self.rounds += 1

    def move_issued(self, rec: MoveRecord, churn: bool) -> None:
        self.moves.append(rec)
        self.per_guest[rec.guest] = self.per_guest.get(rec.guest, 0) + 1
        left = self._departures.get((rec.guest, rec.target))
        if left is not None and rec.t - left < self.oscillation_window_s:
            self.oscillations += 1
        if churn:
            self.churn_moves += 1

    def move_ended(
        self,
        rec: MoveRecord,
        ok: bool,
        aborted: bool,
        reason: str,
        t_end: float,
        pause_s: float = 0.0,
    ) -> None:
        rec.t_end = t_end
        rec.reason = reason
        rec.pause_s = pause_s
        if ok:
            rec.outcome = "succeeded"
            self._departures[(rec.guest, rec.source)] = t_end
        else:
            rec.outcome = "aborted" if aborted else "failed"
            self.moves_failed += 1
            pair = (rec.guest, rec.target)
            if pair in self._failed_pairs:
                self.failed_repeats += 1
            self._failed_pairs.add(pair)

    def result(self) -> dict[str, Any]:
        """Every registered metric, measured now (registry order)."""
        return {spec.name: spec.measure(self) for spec in _REGISTRY.values()}


# ------------------------------------------------------------------------------ measurements
def _evacuation_latency(m: Metrics) -> float | None:
    """From each pressure onset to the first motion off that node issued at or after it: the
    smallest such delay (s), ``None`` when no motion left a node after its onset."""
    latency: float | None = None
    for t0, node in m.onsets:
        after = [mv.t - t0 for mv in m.moves if mv.source == node and mv.t >= t0]
        if after:
            latency = min(after) if latency is None else min(latency, min(after))
    return latency


def _recovery(m: Metrics) -> float | None:
    """From each node failure until every HA service that was up on the node is up again: the
    longest (s); a failure not recovered by the end counts until the end (a lower bound);
    ``None`` without a failure."""
    if not m.failures:
        return None
    return max((m.sim_seconds if t1 is None else t1) - t0 for t0, t1 in m.failures)  # type: ignore[operator]


def _guest_failed(m: Metrics) -> int:
    """Live migrations (``vm:``; a container restarts by design) the HA manager counts as
    succeeded whose guest pause reached :attr:`Metrics.pause_failure_s`."""
    return sum(
        mv.outcome == "succeeded" and mv.guest.startswith("vm:") and mv.pause_s >= m.pause_failure_s
        for mv in m.moves
    )


def _count_outcome(outcome: str) -> Callable[[Metrics], int]:
    def measure(m: Metrics) -> int:
        return sum(mv.outcome == outcome for mv in m.moves)

    return measure


#: The built-in metrics, in ``docs/metrics.md``'s order (the order of ``metrics.csv``'s columns).
BUILTIN: tuple[MetricSpec, ...] = (
    MetricSpec(
        "sim_seconds", "s", None, "simulated time of the episode", True,
        lambda m: m.sim_seconds, compared=False,
    ),
    MetricSpec(
        "moves", "count", "lower", "motions issued (a bundle counts once)", True,
        lambda m: len(m.moves), tables=frozenset({GLANCE, HEADLINE, ABLATION}),
    ),
    MetricSpec(
        "moves_succeeded", "count", None, "motions that ended with the guest on its target",
        True, _count_outcome("succeeded"),
    ),
    MetricSpec(
        "moves_failed", "count", "lower",
        "motions that failed (precheck, migration error) or were aborted", True,
        lambda m: m.moves_failed, tables=frozenset({GLANCE, HEADLINE, ABLATION}),
    ),
    MetricSpec(
        "moves_aborted", "count", "lower",
        "motions failed by the non-convergence abort (qemu-server patch)", True,
        _count_outcome("aborted"),
    ),
    MetricSpec(
        "moves_guest_failed", "count", "lower",
        "live migrations that succeeded for the HA manager but paused their guest ≥ 10 s", True,
        _guest_failed, tables=frozenset({GLANCE, HEADLINE, ABLATION}),
    ),
    MetricSpec(
        "failed_repeats", "count", "lower",
        "failed motions whose (guest, target) had already failed earlier in the episode", True,
        lambda m: m.failed_repeats, tables=frozenset({ABLATION}),
    ),
    MetricSpec(
        "oscillations", "count", "lower",
        "moves taking a guest back to a node it left less than oscillation_window_s before", True,
        lambda m: m.oscillations, tables=frozenset({GLANCE, HEADLINE, ABLATION}),
    ),
    MetricSpec(
        "max_moves_one_guest", "count", "lower", "the most moves of any single guest", False,
        lambda m: max(m.per_guest.values(), default=0), tables=frozenset({ABLATION}),
    ),
    MetricSpec(
        "churn_moves", "count", "lower",
        "moves issued while no node's true cpu or memory some avg10 was ≥ 10 %", True,
        lambda m: m.churn_moves, tables=frozenset({GLANCE, HEADLINE, ABLATION}),
    ),
    MetricSpec(
        "stall_cpu_s", "s", "lower", "Σ over online nodes of ∫ cpu some-pressure dt", True,
        lambda m: m.stall_cpu_s, tables=frozenset({GLANCE, ABLATION}),
    ),
    MetricSpec(
        "stall_mem_s", "s", "lower", "Σ over online nodes of ∫ memory some-pressure dt", True,
        lambda m: m.stall_mem_s,
    ),
    MetricSpec(
        "oom_kills", "count", "lower",
        "guests the OOM killer killed (a node's memory in use past MemTotal + swap)", True,
        lambda m: m.oom_kills,
    ),
    MetricSpec(
        "guest_stall_s", "s", "lower", "Σ over guests of ∫ (cpu some + memory some) dt", True,
        lambda m: m.guest_stall_s, tables=frozenset({GLANCE, HEADLINE}),
    ),
    MetricSpec(
        "cpu_shortfall_core_s", "core·s", "lower",
        "Σ over guests of ∫ (demand − received) CPU dt, throttling included", True,
        lambda m: m.cpu_shortfall_core_s,
    ),
    MetricSpec(
        "migration_bytes", "B", "lower", "bytes sent by live migrations (one running counts)",
        True, lambda m: m.migration_bytes + m.in_flight()[0],
        report_unit="GiB", report_scale=1.0 / GiB,
    ),
    MetricSpec(
        "migration_seconds", "s", "lower", "time spent migrating (one running counts)", True,
        lambda m: m.migration_seconds + m.in_flight()[1],
    ),
    MetricSpec(
        "downtime_s", "s", "lower", "guest time paused or down by motions (switchover, relocate)",
        True, lambda m: m.downtime_s,
    ),
    MetricSpec(
        "evacuation_latency_s", "s", "lower",
        "from a pressure onset to the first motion off that node (none: no value)", False,
        _evacuation_latency, tables=frozenset({ABLATION}),
    ),
    MetricSpec(
        "imbalance_mean", "CV/√(n−1)", "lower",
        "mean over rounds of the normalized imbalance of the true node loads", False,
        lambda m: m.imbalance_sum / m.rounds if m.rounds else 0.0,
        tables=frozenset({GLANCE}),
    ),
    MetricSpec(
        "recovery_s", "s", "lower",
        "from a node failure until every HA service that was up on it runs again (the longest; "
        "none: no failure)", False, _recovery,
    ),
    MetricSpec(
        "services_down_s", "s", "lower",
        "Σ over HA services requested started of the time they were not up", True,
        lambda m: m.services_down_s,
    ),
    MetricSpec(
        "maintenance_moves", "count", "lower",
        "balancer motions issued while the HA manager's maintenance moves were pending", True,
        lambda m: m.maintenance_moves,
    ),
)  # fmt: skip

for _spec in BUILTIN:
    register_metric(_spec)
_BUILTIN_NAMES = frozenset(s.name for s in BUILTIN)
