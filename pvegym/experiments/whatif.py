"""``pvegym whatif``: what each balancer would have done on an operator's own cluster.

Read top to bottom, :func:`run_whatif` is the whole experiment:

1. **import** the export (:mod:`pvegym.pve_export`) into ``DIR/scenario.toml`` and
   ``DIR/validation.toml`` with their traces, and load both through the scenario lookup
   (:func:`pvegym.sim.catalog.resolve`) like any scenario file.
2. **validate** (step 6 below) first: what the fit measures about the cluster — the PSI blend —
   is written into ``DIR/scenario.toml`` (:func:`calibrate`), so the replays use it.
3. **replay** the window under each policy — ``noop``, ``upstream`` (with the cluster's configured
   CRS constants), ``patched`` (the field report's defaults), ``patched-tuned`` (a study's best
   constants, when ``--study`` names one) and ``guest-centric`` — recording every motion with what
   the balancer expected of it, and the per-round state for the timelines.
   Where no guest is HA-managed and more than one node is online, the window is replayed once
   more with the busiest guests made HA (:func:`hypothetical_ha`, ``DIR/hypothetical-ha.toml``):
   labelled hypothetical in the report.
4. **recommend** what PVE has: ``ha-auto-rebalance`` off, or on with its four knobs, swept over
   seeds, chosen on the fit part and held out (:mod:`pvegym.experiments.whatif_sweep`), in the
   units the import proved (``CrsSettings.percent_units``); on a version without the balancer
   (PVE < 9.1), its own ``crs`` options (``ha=basic|static``, ``ha-rebalance-on-start``) the same
   way against the cluster's current setting, with the 9.x sweep beside it as a labelled
   hypothetical upgrade — wherever a guest can move (:func:`recommend`).
5. **fix**: the guests whose migrations would fail or loop, with the fix from their config
   (:mod:`pvegym.experiments.whatif_fixes`); the window replayed after every fix, and the
   recommendation recomputed on it. Replays, sweep and fixes all run on the calibrated scenario.
6. **validate** without circularity: the validation scenario's host load was fitted on the first
   part of the window only; replayed under ``noop`` with every real migration, its node CPU, memory
   and (PVE 9) PSI are compared with the export's series on the held-out rest (mean absolute error
   in percentage points), next to a naive baseline (each node's own mean over the fit part). Where
   PVE 9 recorded PSI, the contention model's ``psi.cpu_blend`` is fitted on the fit part too
   (:data:`BLEND_GRID`) and its held-out error reported beside the default's, and apart for the
   rows in which a node was under pressure (:data:`PRESSURE_PCT`).
7. **report** into ``DIR/report.md`` with plots, ``DIR/whatif.json`` (everything the report says,
   machine-readable): :func:`pvegym.experiments.whatif_report.write_report` on the result.

Every replay is deterministic for a seed (the traces carry the workload; the seed draws the
LRM's start offsets and the model's noise). Everything is scored by the benchmark's cost,
:data:`pvegym.sim.cost.BALANCER_COST`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pvegym.errors import ConfigError
from pvegym.experiments.files import write_json_atomic
from pvegym.experiments.record import play
from pvegym.experiments.runner import Trace
from pvegym.experiments.stats import Estimate
from pvegym.experiments.whatif_fixes import GuestFix, find_fixes, overrides
from pvegym.experiments.whatif_sweep import (
    BLOCKS,
    CrsSetting,
    Sweep,
    crs_settings,
    run_crs_sweep,
    run_sweep,
)
from pvegym.policies import make_policy
from pvegym.pve_export.cluster import ClusterExport, read_export
from pvegym.pve_export.notes import Note
from pvegym.pve_export.to_scenario import Import, build_import
from pvegym.pve_export.write import write_import, write_scenario
from pvegym.sim import catalog
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.move_ledger import CHURN_PRESSURE_PCT
from pvegym.sim.scenario import Scenario
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion

FloatArray = NDArray[np.float64]
WHATIF_FORMAT = "pvegym-whatif/1"


@dataclass(frozen=True)
class PolicyEntry:
    label: str
    policy: str
    params: dict[str, Any]
    about: str


@dataclass
class PolicyRun:
    """One policy's replay: its metrics, the motions (with what the balancer expected of each),
    the per-round trace for its timeline and the wall time."""

    entry: PolicyEntry
    metrics: dict[str, Any]
    moves: list[dict[str, Any]]
    trace: dict[str, np.ndarray]
    wall_s: float


@dataclass
class NodeFit:
    """Held-out errors of one node (percentage points; NaN where reality has no value)."""

    node: str
    cpu_mae_pp: float
    cpu_bias_pp: float  # mean of model − reality
    cpu_naive_mae_pp: float  # the node's own fit-part mean as the prediction
    mem_mae_pp: float
    mem_bias_pp: float
    mem_naive_mae_pp: float
    psi_cpu_mae_pp: float  # with the model's default PSI parameters
    psi_cpu_bias_pp: float
    psi_cpu_fitted_mae_pp: float  # with the cpu_blend fitted on the fit part
    psi_mem_mae_pp: float
    # held-out rows under pressure (recorded cpu some ≥ PRESSURE_PCT), the fitted blend's replay
    pressure_rows: int = 0
    pressure_cpu_mae_pp: float = math.nan
    pressure_psi_mae_pp: float = math.nan
    pressure_psi_bias_pp: float = math.nan  # mean of model − reality


@dataclass
class Validation:
    fit_rows: int
    rows: int
    nodes: list[NodeFit]
    model_cpu_pct: FloatArray  # (rows, nodes) per window row
    model_mem_pct: FloatArray
    model_cpu_some: FloatArray
    real_cpu_pct: FloatArray
    real_mem_pct: FloatArray
    real_cpu_some: FloatArray | None
    how: str
    cpu_blend: float = math.nan  # psi.cpu_blend fitted on the fit part (NaN: no recorded PSI)
    cpu_blend_fit_mae_pp: float = math.nan
    default_cpu_blend: float = math.nan
    wall_s: float = 0.0

    @property
    def cpu_mae_pp(self) -> float:
        """Mean over nodes of the held-out node-CPU MAE (the headline figure)."""
        vals = [n.cpu_mae_pp for n in self.nodes if math.isfinite(n.cpu_mae_pp)]
        return float(np.mean(vals)) if vals else math.nan

    def calibration(self) -> dict[str, float]:
        """What the fit measured, as scenario overrides for the replay: ``psi.cpu_blend`` where
        the export recorded PSI. (The host-load fit is the validation's only: the replay has the
        measured host load.)"""
        return {"psi.cpu_blend": self.cpu_blend} if math.isfinite(self.cpu_blend) else {}


@dataclass
class Hypothetical:
    """The window replayed as if the operator had made ``sids`` (their busiest guests) HA: an
    export with no HA-managed guest gives no balancer anything to move."""

    sids: list[str]
    share: float  # of all guests' mean CPU these carry
    scenario: Path
    runs: list[PolicyRun]


@dataclass
class Recommendation:
    """What PVE's own options should be: ``sweep`` None with ``reason`` when there is nothing to
    decide. On a version without the balancer ``sweep`` is over its ``crs`` options
    (:class:`CrsSetting`) and ``upgrade`` the 9.x sweep as if it had the balancer (hypothetical);
    ``hypothetical``: ``sweep`` itself is such a hypothetical (no ``crs`` option to choose)."""

    version: str
    has_balancer: bool
    percent: bool  # the version's threshold/margin unit
    units_why: str  # what proves ``percent`` (the import's ``CrsSettings.units_why``)
    movable: int  # guests a balancer may move (HA-managed, started, auto-rebalance on)
    current: dict[str, Any] | None  # the cluster's crs options when ha-auto-rebalance is on
    reason: str | None
    sweep: Sweep | None
    hypothetical: bool = False
    upgrade: Sweep | None = None
    #: what would make the version's scheduler choose a node (without the balancer), and which
    #: of those the window has
    scheduler_acts_on: tuple[str, ...] = ()
    scheduler_events: tuple[str, ...] = ()

    def options(self) -> dict[str, Any] | None:
        """The recommended ``datacenter.cfg`` crs options (None: nothing to decide)."""
        if self.sweep is None or self.hypothetical:
            return None
        if self.sweep.chosen is None:
            return {"ha-auto-rebalance": 0}
        return self.sweep.chosen.pve(self.percent)


@dataclass
class AfterFix:
    """The window replayed with every fix applied, and the recommendation recomputed on it."""

    overrides: dict[str, Any]
    runs: list[PolicyRun]
    recommendation: Recommendation


@dataclass
class WhatIf:
    imp: Import
    export: ClusterExport
    runs: list[PolicyRun]
    validation: Validation
    recommendation: Recommendation
    fixes: list[GuestFix]
    after: AfterFix | None
    local_disk_bytes: dict[str, float] = field(default_factory=dict)
    hypothetical: Hypothetical | None = None

    @property
    def ha_guests(self) -> list[str]:
        """The scenario's HA-managed guests."""
        return ha_guests(self.imp.scenario)

    @property
    def online_nodes(self) -> list[str]:
        return online_nodes(self.imp.scenario)


def ha_guests(scenario: dict[str, Any]) -> list[str]:
    """The HA-managed guests of a scenario dict (``ha`` defaults to true)."""
    return [g["sid"] for g in scenario["guests"] if g.get("ha", True)]


def online_nodes(scenario: dict[str, Any]) -> list[str]:
    """The online nodes of a scenario dict (``online`` defaults to true)."""
    return [n["name"] for n in scenario["nodes"] if n.get("online", True)]


# ------------------------------------------------------------------------------------------ policies
def policy_entries(
    imp: Import, study: Path | None, agents: tuple[str, ...] = ()
) -> list[PolicyEntry]:
    """The policies the what-if replays, in report order (``agents``: learned models by run
    name or path, ``learned:<name>``)."""
    up = dict(imp.policy_params.get("upstream", {}))
    entries = [
        PolicyEntry(
            "noop",
            "noop",
            {},
            "never moves anything (the cluster as it ran, minus its own balancer's moves)",
        ),
        PolicyEntry(
            "upstream",
            "upstream",
            up,
            "pve-ha-manager's balancer"
            + (" with this cluster's CRS constants" if up else " with its defaults"),
        ),
        PolicyEntry("patched", "patched", {}, "the field report's patch series, its defaults"),
    ]
    if study is not None:
        params = _study_params(study)
        entries.append(
            PolicyEntry(
                "patched-tuned", "patched", params, f"patched with the constants of {study}"
            )
        )
    entries.append(
        PolicyEntry(
            "guest-centric",
            "guest-centric",
            {},
            "contention-driven, migratability and migration cost first",
        )
    )
    names = [Path(agent).name for agent in agents]
    for agent, name in zip(agents, names, strict=True):
        if names.count(name) > 1:  # whatif.json keys policies by label, timelines by file name
            raise ConfigError(
                "--agent",
                f"{agent!r}: another agent has the same name {name!r} (label learned:{name})",
            )
        entries.append(
            PolicyEntry(
                f"learned:{name}",
                "learned",
                {"model": agent},
                f"the learned agent {agent} (pvegym train)",
            )
        )
    for e in entries:  # unknown constants are a one-line error before anything runs
        make_policy(e.policy, f"policies.{e.label}", **e.params)
    return entries


def _study_params(study: Path) -> dict[str, Any]:
    f = study / "best_params.json" if study.is_dir() else study
    try:
        doc = json.loads(f.read_text())
        policy = doc["best"]["policy"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ConfigError(
            "--study", f"{str(f)!r} is not a study's best_params.json: {err}"
        ) from None
    if policy.get("name") != "patched":
        raise ConfigError("--study", f"the study tuned {policy.get('name')!r}, not 'patched'")
    params = policy.get("params", {})
    if not isinstance(params, dict):
        raise ConfigError("--study", "best.policy.params must be a table")
    return dict(params)


# ------------------------------------------------------------------------------------------ replay
def replay(scn: Scenario, entry: PolicyEntry, seed: int) -> PolicyRun:
    """One policy over the window: metrics, motions with the balancer's own expectation, trace."""
    policy = make_policy(entry.policy, f"policies.{entry.label}", **entry.params)
    expected: dict[tuple[float, str], str] = {}

    def decide(view: ClusterView) -> Motion | None:
        m = policy.decide(view)
        if m is not None:
            expected[(view.t, m.sid)] = _expectation(m, policy, view.t)
        return m

    sim = Simulation(scn, seed)
    trace = Trace()
    started = time.perf_counter()
    policy.reset(seed)
    result, _ = play(sim, decide, None, trace)
    moves = [{**mv, "expected": expected.get((mv["t"], mv["guest"]), "")} for mv in result["moves"]]
    return PolicyRun(
        entry, result["metrics"], moves, trace.arrays(sim), time.perf_counter() - started
    )


def _expectation(m: Motion, policy: Any, t: float) -> str:
    """What the balancer expected of a motion: upstream's logged imbalance change, or the
    parenthesised reasoning of its last log line of this round."""
    if m.imbalance_before is not None and m.imbalance_after is not None:
        return f"imbalance {m.imbalance_before:.2f} → {m.imbalance_after:.2f}"
    for when, line in reversed(getattr(policy, "log", [])):
        if when != t:
            break
        if "(" in line and line.rstrip().endswith(")"):
            return line[line.index("(") + 1 : -1]
    return ""


# ------------------------------------------------------------------------------------------ validation
class _Rows:
    """Per-round node state for the validation run (cores, bytes, cpu some avg10 %)."""

    def __init__(self) -> None:
        self.t: list[float] = []
        self.cpu: list[np.ndarray] = []
        self.mem: list[np.ndarray] = []
        self.some: list[np.ndarray] = []
        self.mem_some: list[np.ndarray] = []

    def __call__(self, sim: Simulation) -> None:
        cl = sim.cluster
        cpu_some, mem_some, _ = cl.node_avg10()
        self.t.append(sim.t)
        self.cpu.append(cl.node_cpu.copy())
        self.mem.append(cl.node_mem.copy())
        self.some.append(cpu_some.copy())
        self.mem_some.append(mem_some.copy())


def _per_row(t: FloatArray, values: FloatArray, step: int, n: int) -> FloatArray:
    """Mean of the rounds ending in each row's interval ``(k·step, (k+1)·step]``."""
    k = np.ceil(t / step).astype(int) - 1
    out = np.full((n, values.shape[1]), np.nan)
    for r in range(n):
        sel = k == r
        if sel.any():
            out[r] = values[sel].mean(axis=0)
    return out


def _mae(a: FloatArray, b: FloatArray) -> tuple[float, float]:
    ok = np.isfinite(a) & np.isfinite(b)
    if not ok.any():
        return math.nan, math.nan
    d = a[ok] - b[ok]
    return float(np.mean(np.abs(d))), float(np.mean(d))


#: a node row is under pressure when its recorded PSI cpu some avg10 is at least this (percent):
#: the metrics' own line between pressure and none (``churn_moves``, docs/metrics.md)
PRESSURE_PCT = CHURN_PRESSURE_PCT

#: the PSI blend weights tried on the fit part (``PsiModel.cpu_blend``: per-runqueue ρ² vs M/M/c,
#: ``docs/model.md``, *Contention and PSI*: the blend is a modelling choice, fitted on RRD pairs
#: of cpu and pressure)
BLEND_GRID = tuple(round(0.1 * k, 1) for k in range(11))


def _replay_rows(scn: Scenario, seed: int, imp: Import, rows: int) -> dict[str, FloatArray]:
    """The noop replay of the first ``rows`` window rows: per-row means of node cores busy, bytes
    in use and PSI some avg10 (percent), nodes in the export's order."""
    sim = Simulation(scn, seed)
    rec = _Rows()
    play(sim, lambda view: None, rows * imp.window.step, rec)
    order = [sim.cluster.node_names.index(n) for n in imp.reality.node_names]
    t = np.asarray(rec.t)
    return {
        key: _per_row(t, np.asarray(getattr(rec, key))[:, order], imp.window.step, rows)
        for key in ("cpu", "mem", "some", "mem_some")
    }


def fit_cpu_blend(imp: Import, path: Path, seed: int) -> tuple[float, float]:
    """The ``psi.cpu_blend`` whose replay of the *fit* rows is closest to the recorded node
    cpu some (mean absolute error over nodes and rows): ``(blend, its fit-part MAE)``."""
    f, real = imp.fit_rows, imp.reality
    assert real.cpu_some is not None
    best = (math.nan, math.inf)
    for blend in BLEND_GRID:
        scn = catalog.resolve(str(path), overrides={"psi.cpu_blend": blend}).scenario
        some = _replay_rows(scn, seed, imp, f)["some"]
        err = _mae(some, real.cpu_some[:f])[0]
        if err < best[1]:
            best = (blend, err)
    return best


def validate(imp: Import, path: Path, seed: int) -> Validation:
    """The validation run (noop, every real migration, fitted host load) against the export's
    series on the held-out rows; with PVE 9's PSI, the PSI blend is fitted on the fit rows too."""
    started = time.perf_counter()
    w, real = imp.window, imp.reality
    vscn = catalog.resolve(str(path)).scenario
    model = _replay_rows(vscn, seed, imp, w.n)
    blend, blend_fit_mae = math.nan, math.nan
    fitted_some = None
    if real.cpu_some is not None:
        blend, blend_fit_mae = fit_cpu_blend(imp, path, seed)
        scn = catalog.resolve(str(path), overrides={"psi.cpu_blend": blend}).scenario
        fitted_some = _replay_rows(scn, seed, imp, w.n)["some"]
    model_cpu = 100.0 * model["cpu"] / real.maxcpu
    model_mem = 100.0 * model["mem"] / real.maxmem
    real_cpu = 100.0 * real.cpu / real.maxcpu
    real_mem = 100.0 * real.mem / real.maxmem
    f = imp.fit_rows
    nodes = []
    for j, name in enumerate(real.node_names):
        c_mae, c_bias = _mae(model_cpu[f:, j], real_cpu[f:, j])
        m_mae, m_bias = _mae(model_mem[f:, j], real_mem[f:, j])
        c_naive, _ = _mae(np.full(w.n - f, real_cpu[:f, j].mean()), real_cpu[f:, j])
        m_naive, _ = _mae(np.full(w.n - f, real_mem[:f, j].mean()), real_mem[f:, j])
        p_mae = p_bias = pm_mae = p_fit_mae = math.nan
        under = np.zeros(w.n - f, dtype=bool)
        pressure = (math.nan, math.nan, math.nan)
        if real.cpu_some is not None and real.mem_some is not None and fitted_some is not None:
            p_mae, p_bias = _mae(model["some"][f:, j], real.cpu_some[f:, j])
            p_fit_mae = _mae(fitted_some[f:, j], real.cpu_some[f:, j])[0]
            pm_mae = _mae(model["mem_some"][f:, j], real.mem_some[f:, j])[0]
            under = real.cpu_some[f:, j] >= PRESSURE_PCT
            if under.any():
                sel = np.flatnonzero(under) + f
                pressure = (
                    _mae(model_cpu[sel, j], real_cpu[sel, j])[0],
                    *_mae(fitted_some[sel, j], real.cpu_some[sel, j]),
                )
        nodes.append(
            NodeFit(
                name,
                c_mae,
                c_bias,
                c_naive,
                m_mae,
                m_bias,
                m_naive,
                p_mae,
                p_bias,
                p_fit_mae,
                pm_mae,
                int(under.sum()),
                *pressure,
            )
        )
    return Validation(
        fit_rows=f,
        rows=w.n,
        nodes=nodes,
        model_cpu_pct=model_cpu,
        model_mem_pct=model_mem,
        model_cpu_some=model["some"] if fitted_some is None else fitted_some,
        real_cpu_pct=real_cpu,
        real_mem_pct=real_mem,
        real_cpu_some=real.cpu_some,
        how=imp.fit_how,
        cpu_blend=blend,
        cpu_blend_fit_mae_pp=blend_fit_mae,
        default_cpu_blend=vscn.psi.cpu_blend,
        wall_s=time.perf_counter() - started,
    )


# ------------------------------------------------------------------------------------------ recommend
#: the first pve-manager with ``ha-auto-rebalance``: pve-ha-manager 5.2.0's balancer (f0f21bc) came
#: in PVE 9.1's updates (pve-manager 9.1.13/9.1.14 changelog entries on its options;
#: the spec's pve-ha-manager reference, §10); PVE 8.4 has CRS placement at start and recovery only
BALANCER_SINCE = (9, 1)


def has_balancer(export: ClusterExport) -> bool:
    """The version has ``ha-auto-rebalance``: by its number, or because the export sets it."""
    crs = export.crs
    configured = crs.auto_rebalance or any(
        v is not None for v in (crs.threshold, crs.margin, crs.hold_duration, crs.method)
    )
    return configured or export.version_numbers[:2] >= BALANCER_SINCE


def movable_guests(scenario: dict[str, Any]) -> int:
    """Guests a balancer may pick: HA-managed, started, ``auto-rebalance`` not off."""
    return sum(
        1
        for g in scenario["guests"]
        if g.get("ha", True)
        and g.get("auto_rebalance", True) is not False
        and g.get("state", "started") == "started"
    )


def recommend(
    imp: Import,
    export: ClusterExport,
    path: Path,
    sets: dict[str, Any],
    seed: int,
    workers: int,
    name: str,
    say: Any,
    hypothetical: bool = True,
) -> Recommendation:
    """Step 4 of the module docstring on the scenario at ``path`` with ``sets`` applied: nothing
    to decide (``reason``) where no guest can move — one online node, no HA-managed guest, or none
    started with auto-rebalance on — else the sweep. On a version without the balancer the sweep
    is over its ``crs`` options and the 9.x sweep (``hypothetical``: run it) is the upgrade's.
    Units: those the import proved (``CrsSettings.percent_units``, ``units_why``); without the
    balancer, the percent units every version that has it reads."""
    scenario = _with_sets(imp.scenario, sets)
    crs = export.crs
    has = has_balancer(export)
    percent, units_why = (
        (crs.percent_units, crs.units_why)
        if has
        else (True, "a version with ha-auto-rebalance (pve-cluster ≥ 9.1.5) reads percent")
    )
    up = imp.policy_params.get("upstream", {})
    current = dict(up) if crs.auto_rebalance else None
    movable = movable_guests(scenario)
    online, ha = len(online_nodes(scenario)), len(ha_guests(scenario))
    base: dict[str, Any] = dict(version=export.version, has_balancer=has, percent=percent,
                                units_why=units_why, movable=movable, current=current)  # fmt: skip
    reason = None
    if online < 2:
        reason = (
            f"nothing to decide: the cluster has {online} online node"
            f"{'' if online == 1 else 's'}, so no guest can move"
        )
    elif ha == 0:
        reason = (
            "nothing to decide: no guest is HA-managed (the HA manager moves only HA "
            "resources), so no balancer can move anything"
        )
    elif movable == 0:
        reason = (
            "nothing to decide: no HA-managed guest is started with auto-rebalance on, "
            "so no balancer can move anything"
        )
    if reason is not None:
        return Recommendation(**base, reason=reason, sweep=None)
    if has:
        sweep = run_sweep(path, sets, current, seed, workers, name, say)
        return Recommendation(**base, reason=None, sweep=sweep)
    # without the balancer: the version's own crs options, and the 9.x sweep as a hypothetical
    upgrade = run_sweep(path, sets, current, seed, workers, name, say) if hypothetical else None
    settings = crs_settings(export.version_numbers)
    if not settings:
        reason = (
            f"nothing to decide on PVE {export.version}: it has no CRS option (`crs` came with "
            "PVE 7.3) and no automatic rebalancing (`ha-auto-rebalance`, PVE 9.1)"
        )
        return Recommendation(**base, reason=reason, sweep=upgrade, hypothetical=True)
    cur = CrsSetting(crs.mode, crs.rebalance_on_start)
    say(f"  PVE {export.version}'s own crs options ({len(settings)} settings) …")
    sweep = run_crs_sweep(path, sets, cur, settings, seed, workers, name, say)
    events = tuple(scheduler_events(scenario))
    if sweep.all_tie() and not events:
        sweep.why += (
            ": nothing in the window starts or recovers a guest, so the scheduler never "
            "chooses a node"
        )
    return Recommendation(
        **base,
        reason=None,
        sweep=sweep,
        upgrade=upgrade,
        scheduler_acts_on=SCHEDULER_ACTS_ON,
        scheduler_events=events,
    )


#: what makes a PVE 7.3–9.0 HA manager's scheduler (``select_service_node`` with the ``crs``
#: mode; pve-ha-manager 4.0's ``Manager.pm``) choose a node: recovery of a fenced node's guests
#: (``next_state_recovery``), a start request with ``ha-rebalance-on-start``
#: (``next_state_request_start``), and a started guest whose node is not (or no longer) among
#: its group's or rule's best — maintenance, a node back online with failback, a failed start
#: (``next_state_started``)
SCHEDULER_ACTS_ON = (
    "a node failure (its HA guests are recovered to the node the `ha` mode picks)",
    "a start of a stopped HA guest (with `ha-rebalance-on-start=1` it starts where the "
    "scheduler picks)",
    "a node entering maintenance, or coming back with failback on (its guests move to the "
    "picked node)",
)
#: the scenario events that reach those code paths
SCHEDULER_EVENT_TYPES = (
    "power-off",
    "network-off",
    "power-on",
    "network-on",
    "set-state",
    "maintenance-enable",
    "maintenance-disable",
)


def scheduler_events(scenario: dict[str, Any]) -> list[str]:
    """The events of a scenario dict that make the scheduler choose a node
    (:data:`SCHEDULER_EVENT_TYPES`), as ``"<type> <node or sid> at <t> s"``."""
    out = []
    for ev in scenario.get("events", []):
        kind = ev.get("type", "migrate")
        if kind in SCHEDULER_EVENT_TYPES:
            out.append(f"{kind} {ev.get('node') or ev.get('sid', '')} at {float(ev['t']):g} s")
    return out


def _with_sets(scenario: dict[str, Any], sets: dict[str, Any]) -> dict[str, Any]:
    """The import's scenario dict with ``guests[i].key`` overrides applied (a copy)."""
    import copy

    from pvegym.config import set_path

    out = copy.deepcopy(scenario)
    for key, value in sets.items():
        set_path(out, key, value)
    return out


# ------------------------------------------------------------------------------------------ experiment
def run_whatif(
    export_path: Path,
    out: Path,
    window: str = "week",
    fit_fraction: float = 2.0 / 3.0,
    dirty_rate: float = 0.0,
    study: Path | None = None,
    seed: int = 0,
    crs_units: str | None = None,
    progress: Any = None,
    workers: int = 1,
    agents: tuple[str, ...] = (),
) -> WhatIf:
    """Steps 1–6 of the module docstring (the scenario files land in ``out``); the report is
    :func:`pvegym.experiments.whatif_report.write_report` of the result."""
    say = progress or (lambda msg: None)
    out.mkdir(parents=True, exist_ok=True)
    export = read_export(export_path, crs_units)
    imp = build_import(export, window, "scenario", fit_fraction, dirty_rate)
    write_import(imp, out / "scenario.toml", validation_out=out / "validation.toml")
    path = out / "scenario.toml"
    entries = policy_entries(imp, study, agents)
    say("validation runs (fitted host load and PSI blend, held-out comparison) …")
    val = validate(imp, out / "validation.toml", seed)
    calibrate(imp, val, path)
    scn = catalog.resolve(str(path)).scenario
    say(f"window: {imp.window.describe()}; {imp.window.duration // 10} rounds per policy")
    runs = _replay_all(scn, entries, seed, say)
    say("recommendation: ha-auto-rebalance off vs on over its knobs …")
    rec = recommend(imp, export, path, {}, seed, workers, "before", say)
    fixes = find_fixes(export, imp.scenario, {r.entry.label: r.moves for r in runs})
    after = _after_fixes(imp, export, path, fixes, entries, rec, seed, workers, say)
    result = WhatIf(imp, export, runs, val, rec, fixes, after, _local_disks(export))
    if not result.ha_guests and len(result.online_nodes) > 1:
        say("no guest is HA-managed: replaying with the busiest guests made HA (hypothetical) …")
        result.hypothetical = hypothetical_ha(imp, out / "hypothetical-ha.toml", entries, seed, say)
    return result


def _after_fixes(
    imp: Import,
    export: ClusterExport,
    path: Path,
    fixes: list[GuestFix],
    entries: list[PolicyEntry],
    rec: Recommendation,
    seed: int,
    workers: int,
    say: Any,
) -> AfterFix | None:
    """Step 5: the calibrated scenario at ``path`` with every fix applied, replayed under noop and
    upstream, and the recommendation recomputed on it (None without fixes)."""
    if not fixes:
        return None
    sets = overrides(fixes)
    say(f"after the fixes ({', '.join(f.sid for f in fixes)}): replays and recommendation …")
    fixed = catalog.resolve(str(path), overrides=sets).scenario
    after_runs = [replay(fixed, e, seed) for e in entries[:2]]  # noop, upstream
    # without the balancer in the version, the hypothetical upgrade's sweep is not run twice
    after_rec = recommend(
        imp, export, path, sets, seed, workers, "after", say, hypothetical=rec.has_balancer
    )
    return AfterFix(sets, after_runs, after_rec)


def _replay_all(scn: Scenario, entries: list[PolicyEntry], seed: int, say: Any) -> list[PolicyRun]:
    runs = []
    for e in entries:
        say(f"replaying {e.label} …")
        runs.append(replay(scn, e, seed))
        say(f"  {e.label}: {runs[-1].metrics['moves']} motions in {runs[-1].wall_s:.1f} s")
    return runs


def calibrate(imp: Import, val: Validation, path: Path) -> None:
    """Write what the fit measured (:meth:`Validation.calibration`) into the scenario at ``path``
    (``imp.scenario``), with a note: the replay, and ``pvegym simulate`` of the file, use it."""
    overrides = val.calibration()
    if not overrides:
        return
    for key, value in overrides.items():
        section, name = key.split(".", 1)
        imp.scenario.setdefault(section, {})[name] = value
    imp.notes.append(
        Note(
            "info",
            "psi",
            f"psi.cpu_blend = {val.cpu_blend:g}, fitted on the first {val.fit_rows} rows "
            f"(fit-part MAE {val.cpu_blend_fit_mae_pp:.2f} pp; the default "
            f"{val.default_cpu_blend:g}): the replay uses it",
        )
    )
    imp.meta["calibration"] = overrides
    imp.meta["notes"] = [n.__dict__ for n in imp.notes]
    write_import(imp, path)


#: the busiest guests a hypothetical HA replay makes HA: the fewest, busiest first, that carry
#: this share of all guests' mean CPU (a presentation choice: "the guests that matter")
HYPOTHETICAL_SHARE = 0.5


def busiest_guests(imp: Import) -> tuple[list[str], float]:
    """The running guests carrying :data:`HYPOTHETICAL_SHARE` of all guests' mean CPU (cores),
    busiest first, and the share they carry."""
    load = {}
    for g in imp.scenario["guests"]:
        comp = g["cpu"]
        if isinstance(comp, list) and comp:
            tr = imp.traces[comp[0]["source"].split("/", 1)[1]]
            load[g["sid"]] = float(np.mean(tr.cpu)) * tr.cpu_capacity
    total = sum(load.values())
    if total <= 0:
        return [], 0.0
    chosen: list[str] = []
    for sid in sorted(load, key=lambda s: (-load[s], s)):
        chosen.append(sid)
        if sum(load[x] for x in chosen) >= HYPOTHETICAL_SHARE * total:
            break
    return chosen, sum(load[x] for x in chosen) / total


def hypothetical_ha(
    imp: Import, path: Path, entries: list[PolicyEntry], seed: int, say: Any
) -> Hypothetical | None:
    """The window replayed with :func:`busiest_guests` made HA (``ha = true``), written to
    ``path`` beside the scenario (same traces); None when no guest ran."""
    import copy

    sids, share = busiest_guests(imp)
    if not sids:
        return None
    data = copy.deepcopy(imp.scenario)
    data["name"] = f"{imp.scenario['name']}-hypothetical-ha"
    for g in data["guests"]:
        if g["sid"] in sids:
            g.pop("ha", None)
    write_scenario(imp, path, data, traces_of=path.with_name("scenario.toml"))
    scn = catalog.resolve(str(path)).scenario
    return Hypothetical(sids, share, path, _replay_all(scn, entries, seed, say))


def _local_disks(export: ClusterExport) -> dict[str, float]:
    from pvegym.pve_export.blockers import ct_migratability, vm_migratability

    out = {}
    for g in export.guests.values():
        mig = (
            vm_migratability(g.config, export.storages, export.pci_live_capable)
            if g.kind == "qemu"
            else ct_migratability(g.config, export.storages)
        )
        if mig.local_disk_bytes:
            out[g.sid] = mig.local_disk_bytes
    return out


def _runs_json(runs: list[PolicyRun]) -> dict[str, Any]:
    return {
        r.entry.label: {
            "policy": r.entry.policy,
            "params": r.entry.params,
            "about": r.entry.about,
            "cost": weighted_cost(BALANCER_COST, r.metrics),
            "metrics": r.metrics,
            "moves": r.moves,
            "wall_s": round(r.wall_s, 3),
        }
        for r in runs
    }


def estimate_json(e: Estimate | None) -> dict[str, Any] | None:
    return None if e is None else {"mean": e.mean, "lo": e.lo, "hi": e.hi, "n": e.n, "p": e.p}


def sweep_json(rec: Recommendation, upgrade: bool = False) -> dict[str, Any] | None:
    """The sweep's evidence (``upgrade``: the hypothetical 9.x sweep of a version without the
    balancer, in percent units)."""
    sw = rec.upgrade if upgrade else rec.sweep
    if sw is None:
        return None
    percent = True if upgrade or sw.crs else rec.percent
    rows: list[dict[str, Any]] = (
        [] if sw.crs else [{"setting": "off", "options": {"ha-auto-rebalance": 0}}]
    )
    rows += [
        {"setting": sw.key(st), "options": st.pve(percent), "params": st.params}
        for st in sw.settings
    ]
    for row in rows:
        row["fit_cost"] = sw.fit_cost[row["setting"]]
        row["metrics"] = sw.metrics[row["setting"]]
        row["tie"] = row["setting"] in sw.tie
    return {
        "cost": "BALANCER_COST",
        "weights": BALANCER_COST,
        "blocks": BLOCKS,
        "fit_part": "even blocks",
        "held_out_part": "odd blocks",
        "fit_seeds": sw.fit_seeds,
        "held_seeds": sw.held_seeds,
        "settings": rows,
        "chosen": sw.key(sw.chosen),
        "why": sw.why,
        "tie": sw.tie,
        "compared": None if sw.compared is None else sw.key(sw.compared),
        "baseline": sw.baseline,
        "held_out_gain_vs_off": estimate_json(sw.held_gain),
        "held_out_cost": sw.held_cost,
        "held_out_metrics": sw.held_metrics,
        "churned_or_failed": [sw.key(st) for st, _ in sw.churned_or_failed()],
        "ci_covers": "the model's randomness over fresh seeds, not the one recorded window",
        **(
            {
                "replayed_as": "noop (no balancer) with the scenario's crs_mode from params; "
                "ha-rebalance-on-start acts only on a start request, which the replay has none of"
            }
            if sw.crs
            else {}
        ),
    }


def recommendation_json(rec: Recommendation) -> dict[str, Any] | None:
    """The recommended PVE options with their evidence; None where there is nothing to decide.
    Without the balancer ``off`` is the cluster's current ``crs`` setting (``baseline``), and
    ``every_setting_ties``/``would_matter_on``/``scheduler_events`` say when none matters."""
    opts = rec.options()
    if opts is None:
        return None
    sw = rec.sweep
    assert sw is not None
    doc: dict[str, Any] = {
        "pve_version": rec.version,
        "units": None if sw.crs else "percent" if rec.percent else "fraction",
        "units_why": "the crs options ha and ha-rebalance-on-start have no units"
        if sw.crs
        else rec.units_why,
        "options": opts,
        "current": None if sw.current is None else sw.current.pve(rec.percent),
        "why": sw.why,
        "baseline": "off" if not sw.crs else sw.baseline,
        "held_out": {
            "compared": None if sw.compared is None else sw.key(sw.compared),
            "baseline": sw.baseline,
            "gain_vs_off": estimate_json(sw.held_gain),
        },
    }
    if sw.crs:
        doc["every_setting_ties"] = sw.all_tie()
        doc["would_matter_on"] = list(rec.scheduler_acts_on)
        doc["scheduler_events"] = list(rec.scheduler_events)
    return doc


def save_json(result: WhatIf, path: Path, extra: dict[str, Any]) -> None:
    rec, after = result.recommendation, result.after
    doc = {
        "format": WHATIF_FORMAT,
        "import": result.imp.meta,
        "recommendation": recommendation_json(rec),
        "reason": rec.reason,
        "sweep": sweep_json(rec),
        "hypothetical_upgrade": _upgrade_doc(rec),
        "fixes": [f.as_json() for f in result.fixes],
        "after_fixes": None
        if after is None
        else {
            "overrides": after.overrides,
            "policies": _runs_json(after.runs),
            "recommendation": recommendation_json(after.recommendation),
            "reason": after.recommendation.reason,
            "sweep": sweep_json(after.recommendation),
        },
        "policies": _runs_json(result.runs),
        "validation": {
            "fit_rows": result.validation.fit_rows,
            "rows": result.validation.rows,
            "how": result.validation.how,
            "cpu_mae_pp": result.validation.cpu_mae_pp,
            "cpu_blend": result.validation.cpu_blend,
            "cpu_blend_fit_mae_pp": result.validation.cpu_blend_fit_mae_pp,
            "default_cpu_blend": result.validation.default_cpu_blend,
            "nodes": [n.__dict__ for n in result.validation.nodes],
        },
        "hypothetical_ha": _hypothetical_doc(result.hypothetical),
        **extra,
    }
    write_json_atomic(path, _finite(doc))


def _upgrade_doc(rec: Recommendation) -> dict[str, Any] | None:
    """The 9.x sweep of a version without the balancer: what PVE 9.1's ``ha-auto-rebalance``
    would choose (hypothetical; percent units)."""
    sw = rec.upgrade
    if sw is None:
        return None
    return {
        "hypothetical": "as if this cluster ran a PVE with ha-auto-rebalance (9.1 or later)",
        "would_choose": {"ha-auto-rebalance": 0} if sw.chosen is None else sw.chosen.pve(True),
        "sweep": sweep_json(rec, upgrade=True),
    }


def _hypothetical_doc(hyp: Hypothetical | None) -> dict[str, Any] | None:
    if hyp is None:
        return None
    return {
        "guests_made_ha": hyp.sids,
        "cpu_share": hyp.share,
        "scenario": hyp.scenario.name,
        "policies": _runs_json(hyp.runs),  # keyed by label, as the real replay's
    }


def _finite(x: Any) -> Any:
    """NaN/inf → null (JSON has no NaN)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x
