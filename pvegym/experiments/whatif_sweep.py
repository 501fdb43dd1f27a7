"""What ``pvegym whatif`` recommends: PVE's own balancer, off or on with which of its four knobs.

PVE has one automatic balancer, pve-ha-manager's (``upstream``), configured in ``datacenter.cfg``
by ``ha-auto-rebalance`` and its ``-threshold``, ``-hold-duration``, ``-margin`` and ``-method``
(pve-ha-manager 5.2.0; percent units from pve-cluster 9.1.5, fractions before). The recommendation
is a choice among exactly those settings, scored by the benchmark's cost
(:data:`pvegym.sim.cost.BALANCER_COST`, ``docs/benchmark.md``, *The score*):

1. **Split the window** into :data:`BLOCKS` equal blocks, alternately *fit* and *held-out* (an
   event of the window — a stress run, a night — lands in both parts; a first-half split would put
   a single event in one part only). A run always replays the whole window (a block starts from the
   placement the setting itself produced); its cost is attributed to blocks at their edges
   (:class:`pvegym.sim.cost.RunningCost`, exact: the cost's terms add up round by round).
2. **Fit**: every setting of :func:`grid` (plus the cluster's own, when it is not on the grid)
   and ``off`` (:mod:`noop <pvegym.policies>`: nothing moves) over :data:`FIT_SEEDS` seeds of the
   model's own randomness; the setting with the lowest mean fit-part cost is chosen. Settings whose
   paired difference from it has a 95 % CI containing 0 *tie* with it: from a tie no winner is
   named — ``off`` when it ties (switching on buys nothing shown), else the cluster's current
   setting when it ties, else the most conservative tied setting (named as such).
3. **Held out**: the chosen setting (when ``off`` is chosen: the cluster's current setting, or
   PVE's defaults when it runs with the balancer off — what keeping it on would cost) against ``off`` on the held-out blocks with :data:`HELD_SEEDS` fresh seeds:
   the mean paired gain with its bootstrap CI (:func:`pvegym.experiments.stats.paired_difference`).
   The CI covers the model's randomness (LRM offsets, telemetry and physics noise), not the one
   recorded window: another week would have other loads.

On a version without the balancer (PVE < 9.1) the recommendation is a choice among *that*
version's CRS options (:func:`crs_settings`, :func:`run_crs_sweep`): ``ha=basic|static`` and
``ha-rebalance-on-start=0|1``, each replayed with nothing balancing (:class:`CrsSetting`), chosen
on the fit part the same way, and held out against the cluster's current setting — the "off" of
a version whose only choice is where the scheduler places a starting or recovered guest.

Runs are independent cells on the project's process pool
(:class:`pvegym.experiments.executor.LocalPool`); the scenario is loaded before the pool forks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.experiments.executor import LocalPool
from pvegym.experiments.record import play
from pvegym.experiments.stats import Estimate, paired_difference
from pvegym.policies import make_policy
from pvegym.policies.upstream import METHODS, UpstreamPolicy
from pvegym.sim import catalog
from pvegym.sim.cost import BALANCER_COST, RunningCost
from pvegym.sim.scenario import Scenario
from pvegym.sim.simulation import Simulation

#: the grid, in the policy's units (fractions of the imbalance, rounds); pve-ha-manager's defaults
#: 0.3 / 3 / 0.1 / bruteforce (``DataCenterConfig.pm``, docs/model.md) are on it
THRESHOLDS = (0.1, 0.2, 0.3, 0.5)
HOLDS = (3, 6, 12)
MARGINS = (0.1, 0.25)
_UP = UpstreamPolicy.Config()
#: the cluster's settings when its ``crs`` options leave a knob unset: upstream's defaults
DEFAULT = {"threshold": _UP.threshold, "hold_duration": int(_UP.hold_duration),
           "margin": _UP.margin, "method": _UP.method}  # fmt: skip
BLOCKS = 24  # fit/held-out blocks of the window (a day: one hour each)
FIT_SEEDS = 3
HELD_SEEDS = 6
RESAMPLES = 2000
#: relative cost difference below which two runs are the same (float64 summation order, ~1e-16
#: per term over ~10⁴ rounds: far below any cost a metric can add)
SAME = 1e-9
#: the metrics kept per run (the cost's terms and what "churned or failed" reads)
KEPT = ("moves", "moves_failed", "failed_repeats", "oscillations", "churn_moves", "guest_stall_s",
        "cpu_shortfall_core_s")  # fmt: skip


@dataclass(frozen=True, order=True)
class Setting:
    """``ha-auto-rebalance`` on with these knobs (policy units: fractions and rounds)."""

    threshold: float
    hold_duration: int
    margin: float
    method: str

    @property
    def params(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "hold_duration": self.hold_duration,
            "margin": self.margin,
            "method": self.method,
        }

    def pve(self, percent: bool) -> dict[str, Any]:
        """The setting as ``datacenter.cfg``'s ``crs`` options in the version's units."""
        scale = 100.0 if percent else 1.0
        return {
            "ha-auto-rebalance": 1,
            "ha-auto-rebalance-threshold": _num(self.threshold * scale),
            "ha-auto-rebalance-hold-duration": self.hold_duration,
            "ha-auto-rebalance-margin": _num(self.margin * scale),
            "ha-auto-rebalance-method": self.method,
        }

    def label(self, percent: bool) -> str:
        o = self.pve(percent)
        return (
            f"on, threshold {o['ha-auto-rebalance-threshold']:g}, hold-duration "
            f"{self.hold_duration}, margin {o['ha-auto-rebalance-margin']:g}, method {self.method}"
        )

    def conservative_key(self) -> tuple[float, ...]:
        """Larger is more conservative: acts later and on bigger gains (method: the default)."""
        return (self.hold_duration, self.threshold, self.margin, self.method == "bruteforce")

    @property
    def key(self) -> str:
        """The setting's label in the sweep (policy units): ``threshold/hold/margin/method``."""
        return f"{self.threshold:g}/{self.hold_duration}/{self.margin:g}/{self.method}"


#: pve-cluster's ``datacenter.cfg`` ``crs`` options before ``ha-auto-rebalance``, by the first PVE
#: release that has them (``src/PVE/DataCenterConfig.pm``'s ``$crs_format``): ``ha`` basic|static
#: came with pve-cluster 7.2-3 (b466e48, PVE 7.3; pve-ha-manager 3.5.0's static scheduler,
#: 561e7f4), ``ha-rebalance-on-start`` with pve-cluster 7.3-3 (1a75f4d, PVE 7.4; pve-ha-manager
#: 3.6.0, 314ef25); pve-cluster 8.1.0 (PVE 8.4) still has exactly these two
CRS_MODE_SINCE = (7, 3)
REBALANCE_ON_START_SINCE = (7, 4)
#: the model's ``crs_mode`` for each PVE ``ha`` mode: the model has no ``basic`` (it counts only
#: services, and only when a guest starts or recovers); the import's stand-in is ``dynamic``
#: (``pvegym.pve_export.to_scenario``), which, like ``basic``, nothing in a replay without a
#: balancer reads
MODEL_CRS_MODE = {"basic": "dynamic", "static": "static"}


@dataclass(frozen=True, order=True)
class CrsSetting:
    """A setting of PVE's ``crs`` options on a version without ``ha-auto-rebalance``: the
    scheduler's mode (``basic``: count services; ``static``: the guests' configured CPU and
    memory) and whether a start request goes through it. Nothing balances: the replay is
    ``noop`` on the scenario with :attr:`params`."""

    mode: str  # basic | static
    rebalance_on_start: bool

    @property
    def params(self) -> dict[str, Any]:
        """The scenario overrides that replay it (``ha-rebalance-on-start`` has no model key: it
        acts only on a start request, which a replay without events never makes)."""
        return {"crs_mode": MODEL_CRS_MODE.get(self.mode, self.mode)}

    def pve(self, percent: bool) -> dict[str, Any]:
        """The setting as ``datacenter.cfg``'s ``crs`` options (``percent``: no unit applies)."""
        return {"ha": self.mode, "ha-rebalance-on-start": int(self.rebalance_on_start)}

    def label(self, percent: bool) -> str:
        return f"ha={self.mode}, ha-rebalance-on-start={int(self.rebalance_on_start)}"

    def conservative_key(self) -> tuple[float, ...]:
        """Larger is more conservative: PVE's defaults (basic, no rebalance on start)."""
        return (self.mode == "basic", not self.rebalance_on_start)

    @property
    def key(self) -> str:
        return f"{self.mode}/{int(self.rebalance_on_start)}"


#: a setting of the sweep: ``ha-auto-rebalance`` on with its knobs, or a pre-9.1 ``crs`` setting
Knob = Setting | CrsSetting


def crs_settings(version: tuple[int, ...]) -> list[CrsSetting]:
    """The ``crs`` settings a PVE version without the balancer has (:data:`CRS_MODE_SINCE`);
    empty before PVE 7.3 (no ``crs`` option: the scheduler counts services)."""
    if version[:2] < CRS_MODE_SINCE:
        return []
    starts = (False, True) if version[:2] >= REBALANCE_ON_START_SINCE else (False,)
    return [CrsSetting(m, r) for m in ("basic", "static") for r in starts]


def _num(x: float) -> float | int:
    r = round(x, 6)
    return int(r) if r == int(r) else r


OFF = "off"


def grid(current: Mapping[str, Any] | None) -> list[Setting]:
    """The swept settings; the cluster's own (``current``: upstream's params, defaults filled in)
    is added when it is not on the grid."""
    out = [
        Setting(t, h, m, me)
        for t, h, m, me in itertools.product(THRESHOLDS, HOLDS, MARGINS, METHODS)
    ]
    if current is not None:
        c = setting_of(current)
        if c not in out:
            out.append(c)
    return out


def setting_of(params: Mapping[str, Any]) -> Setting:
    p = {**DEFAULT, **params}
    return Setting(
        float(p["threshold"]), int(p["hold_duration"]), float(p["margin"]), str(p["method"])
    )


# ------------------------------------------------------------------------------------------ cells
@dataclass(frozen=True)
class Cell:
    path: str
    overrides: tuple[tuple[str, Any], ...]
    setting: Knob | None  # None: off
    seed: int


@dataclass
class CellResult:
    cell: Cell
    blocks: list[float]  # cost per block
    metrics: dict[str, float]


_SCENARIOS: dict[tuple[str, tuple[tuple[str, Any], ...]], Scenario] = {}


def scenario(path: str, overrides: tuple[tuple[str, Any], ...]) -> Scenario:
    """The scenario of ``path`` with ``overrides``, loaded once per process (the parent loads it
    before the pool forks, so workers inherit it)."""
    key = (path, overrides)
    if key not in _SCENARIOS:
        _SCENARIOS[key] = catalog.resolve(path, overrides=dict(overrides)).scenario
    return _SCENARIOS[key]


def block_edges(rounds: int) -> list[int]:
    """The rounds at which blocks 1 … :data:`BLOCKS` − 1 start."""
    return [round(b * rounds / BLOCKS) for b in range(1, BLOCKS)]


def run_cell(cell: Cell) -> CellResult:
    """One replay of the whole window; its cost per block (to the round)."""
    if isinstance(cell.setting, CrsSetting):
        scn = scenario(
            cell.path, tuple(sorted({**dict(cell.overrides), **cell.setting.params}.items()))
        )
    else:
        scn = scenario(cell.path, cell.overrides)
    if cell.setting is None or isinstance(cell.setting, CrsSetting):
        policy = make_policy("noop", "sweep")
    else:
        policy = make_policy("upstream", "sweep", **cell.setting.params)
    policy.reset(cell.seed)
    sim = Simulation(scn, cell.seed)
    cost = RunningCost(BALANCER_COST)
    edges = set(block_edges(round(scn.duration / sim.round_s)))
    marks = [0.0]
    r = 0

    def on_round(s: Simulation) -> None:
        nonlocal r
        if r in edges:
            marks.append(cost(s))
        r += 1

    result, _ = play(sim, policy.decide, None, on_round)
    marks.append(cost(sim))
    m = result["metrics"]
    return CellResult(cell, list(np.diff(marks)), {k: float(m.get(k) or 0.0) for k in KEPT})


# ------------------------------------------------------------------------------------------ sweep
@dataclass
class Sweep:
    """The sweep's evidence and its choice (``chosen`` None: ``off``). On a version without the
    balancer the settings are :class:`CrsSetting` and ``baseline`` (the "off" the held-out gain
    is against) is the cluster's current one."""

    settings: list[Knob]
    current: Knob | None  # the cluster's configured setting (None: auto-rebalance off)
    fit_seeds: list[int]
    held_seeds: list[int]
    fit_cost: dict[str, list[float]]  # label -> per fit seed, the fit part's cost
    metrics: dict[str, dict[str, float]]  # label -> mean over fit seeds (whole window)
    chosen: Knob | None
    tie: list[str]
    why: str
    compared: Knob | None  # the setting held out against the baseline
    held_gain: Estimate | None  # baseline − compared, held out (positive: compared is cheaper)
    held_cost: dict[str, list[float]] = field(default_factory=dict)  # baseline / compared
    held_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    baseline: str = OFF  # the label the held-out gain is against

    def key(self, s: Knob | None) -> str:
        return OFF if s is None else setting_key(s)

    @property
    def crs(self) -> bool:
        """The settings are a pre-9.1 version's ``crs`` options (:class:`CrsSetting`)."""
        return any(isinstance(s, CrsSetting) for s in self.settings)

    def all_tie(self) -> bool:
        """Every setting ties with the cheapest on the fit part."""
        return len(self.tie) == len(self.fit_cost)

    def churned_or_failed(self) -> list[tuple[Knob, dict[str, float]]]:
        """Settings whose fit runs failed, repeated failures, oscillated or churned (means)."""
        out = []
        for s in self.settings:
            m = self.metrics[setting_key(s)]
            if m["moves_failed"] or m["oscillations"] or m["churn_moves"]:
                out.append((s, m))
        return out


def setting_key(s: Knob) -> str:
    """A setting's label in the sweep (:attr:`Setting.key`, :attr:`CrsSetting.key`)."""
    return s.key


def _fit_part(blocks: list[float]) -> float:
    return float(sum(blocks[0::2]))


def _held_part(blocks: list[float]) -> float:
    return float(sum(blocks[1::2]))


def run_sweep(
    path: Path,
    overrides: Mapping[str, Any],
    current: Mapping[str, Any] | None,
    seed: int,
    workers: int,
    name: str,
    progress: Callable[[str], None] | None = None,
) -> Sweep:
    """Fit, choose, hold out (module docstring). ``current``: the cluster's upstream params when
    its ``ha-auto-rebalance`` is on, else None; ``name`` tags the bootstrap's generator."""
    say = progress or (lambda msg: None)
    ov = tuple(sorted(overrides.items()))
    scenario(str(path), ov)  # loaded before the fork
    cur = setting_of(current) if current is not None else None
    settings: list[Knob] = list(grid(current))
    fit_seeds = [seed + i for i in range(FIT_SEEDS)]
    held_seeds = [seed + FIT_SEEDS + i for i in range(HELD_SEEDS)]
    cells = [Cell(str(path), ov, s, k) for s in [None, *settings] for k in fit_seeds]
    cells += [Cell(str(path), ov, None, k) for k in held_seeds]
    say(
        f"  {len(cells)} replays of the window ({len(settings)} settings + off) on {workers} workers …"
    )
    results = list(LocalPool(workers).map_unordered(run_cell, cells))
    by: dict[tuple[str, int], CellResult] = {}
    for res in results:
        by[(OFF if res.cell.setting is None else setting_key(res.cell.setting), res.cell.seed)] = (
            res
        )
    labels = [OFF, *(setting_key(s) for s in settings)]
    fit_cost = {lab: [_fit_part(by[(lab, k)].blocks) for k in fit_seeds] for lab in labels}
    metrics = {
        lab: {m: float(np.mean([by[(lab, k)].metrics[m] for k in fit_seeds])) for m in KEPT}
        for lab in labels
    }
    setting_by = {setting_key(s): s for s in settings}
    chosen, tie, why = choose(fit_cost, setting_by, cur, seed, name)
    # off chosen: what keeping (or switching to) PVE's balancer would cost — the cluster's
    # current setting, else pve-ha-manager's defaults
    compared = chosen if chosen is not None else (cur or setting_of({}))
    sweep = Sweep(settings, cur, fit_seeds, held_seeds, fit_cost, metrics, chosen, tie, why,
                  compared, None)  # fmt: skip
    if compared is not None:
        say(f"  held out: {setting_key(compared)} vs off, {len(held_seeds)} fresh seeds …")
        held = list(
            LocalPool(workers).map_unordered(
                run_cell, [Cell(str(path), ov, compared, k) for k in held_seeds]
            )
        )
        on_by = {res.cell.seed: res for res in held}
        off_h = np.array([_held_part(by[(OFF, k)].blocks) for k in held_seeds])
        on_h = np.array([_held_part(on_by[k].blocks) for k in held_seeds])
        sweep.held_cost = {OFF: list(off_h), setting_key(compared): list(on_h)}
        sweep.held_metrics = {
            OFF: {m: float(np.mean([by[(OFF, k)].metrics[m] for k in held_seeds])) for m in KEPT},
            setting_key(compared): {
                m: float(np.mean([on_by[k].metrics[m] for k in held_seeds])) for m in KEPT
            },
        }
        sweep.held_gain = paired_difference(off_h, on_h, RESAMPLES, seed, f"whatif|{name}|held")
    return sweep


def _tie(
    fit_cost: dict[str, list[float]], prefer: str, seed: int, name: str
) -> tuple[str, list[str]]:
    """The cheapest label on the fit part (``prefer`` among equal means) and every label that
    ties with it: the same runs, or a paired 95 % CI of the difference containing 0."""
    mean = {lab: float(np.mean(v)) for lab, v in fit_cost.items()}
    best = min(mean, key=lambda lab: (mean[lab], lab != prefer))
    ref = np.array(fit_cost[best])
    tie = []
    for lab, v in fit_cost.items():
        x = np.array(v)
        if np.all(np.abs(x - ref) <= SAME * np.maximum(np.abs(ref), 1.0)):
            tie.append(lab)  # the same runs, up to the order of a float sum
            continue
        d = paired_difference(x, ref, RESAMPLES, seed, f"whatif|{name}|tie|{lab}")
        if d is None or (d.lo <= 0.0 <= d.hi):
            tie.append(lab)
    return best, tie


def choose(
    fit_cost: dict[str, list[float]],
    setting_by: dict[str, Knob],
    current: Knob | None,
    seed: int,
    name: str,
) -> tuple[Knob | None, list[str], str]:
    """The choice of step 2 of the module docstring: ``(setting or None for off, the tie, why)``."""
    best, tie = _tie(fit_cost, OFF, seed, name)
    if OFF in tie:
        if best == OFF:
            why = "no setting made the fit part cheaper than leaving the guests where they were"
        else:
            why = (
                f"the cheapest setting ({best}) is within the noise of off on the fit part: "
                "switching on shows no gain"
            )
        return None, tie, why if len(tie) == 1 else f"{why} ({len(tie) - 1} settings tie with off)"
    if current is not None and setting_key(current) in tie:
        return (
            current,
            tie,
            (
                "the cluster's current setting is the cheapest on the fit part"
                if len(tie) == 1
                else f"the cluster's current setting ties with the cheapest ({len(tie)} settings tie): keep it"
            ),
        )
    tied = [setting_by[lab] for lab in tie]
    pick = max(tied, key=lambda st: st.conservative_key())
    if len(tied) == 1:
        return pick, tie, "the cheapest setting on the fit part, beyond the noise of every other"
    return (
        pick,
        tie,
        (
            f"{len(tied)} settings tie for the cheapest on the fit part; no winner among them: "
            "the most conservative (longest hold, highest threshold, largest margin) is shown"
        ),
    )


# ------------------------------------------------------------------------------------------ crs
def run_crs_sweep(
    path: Path,
    overrides: Mapping[str, Any],
    current: CrsSetting,
    settings: list[CrsSetting],
    seed: int,
    workers: int,
    name: str,
    progress: Callable[[str], None] | None = None,
) -> Sweep:
    """The recommendation on a version without the balancer: every ``crs`` setting of the
    version over the fit seeds, chosen as :func:`choose_crs` says, then the cluster's
    ``current`` setting (the baseline) against the chosen one — or, when the current one is
    chosen, against the cheapest other — on the held-out blocks with fresh seeds. Settings that
    replay the same scenario (:attr:`CrsSetting.params`) share their runs."""
    say = progress or (lambda msg: None)
    ov = tuple(sorted(overrides.items()))
    if current not in settings:
        settings = [*settings, current]
    fit_seeds = [seed + i for i in range(FIT_SEEDS)]
    held_seeds = [seed + FIT_SEEDS + i for i in range(HELD_SEEDS)]
    replayed = {s: tuple(sorted(s.params.items())) for s in settings}
    for model in set(replayed.values()):
        scenario(str(path), tuple(sorted({**dict(ov), **dict(model)}.items())))
    say(
        f"  {len(set(replayed.values())) * len(fit_seeds)} replays of the window ({len(settings)} "
        f"crs settings, {len(set(replayed.values()))} distinct in the model) on {workers} workers …"
    )
    runs = _run_distinct(settings, fit_seeds, replayed, path, ov, workers)
    fit_cost = {
        s.key: [_fit_part(runs[(replayed[s], k)].blocks) for k in fit_seeds] for s in settings
    }
    metrics = {
        s.key: {m: float(np.mean([runs[(replayed[s], k)].metrics[m] for k in fit_seeds])) for m in KEPT}
        for s in settings
    }  # fmt: skip
    chosen, tie, why = choose_crs(fit_cost, {s.key: s for s in settings}, current, seed, name)
    mean = {k: float(np.mean(v)) for k, v in fit_cost.items()}
    others = [s for s in settings if s != current]
    compared: CrsSetting | None = chosen
    if chosen == current:  # kept: held out against the cheapest other, one replayed otherwise first
        compared = (
            min(others, key=lambda s: (mean[s.key], replayed[s] == replayed[current], s.key))
            if others
            else None
        )
    sweep = Sweep(list(settings), current, fit_seeds, held_seeds, fit_cost, metrics, chosen,
                  tie, why, compared, None, baseline=current.key)  # fmt: skip
    if compared is None:
        return sweep
    say(f"  held out: {compared.key} vs {current.key}, {len(held_seeds)} fresh seeds …")
    held = _run_distinct([current, compared], held_seeds, replayed, path, ov, workers)
    base = np.array([_held_part(held[(replayed[current], k)].blocks) for k in held_seeds])
    alt = np.array([_held_part(held[(replayed[compared], k)].blocks) for k in held_seeds])
    sweep.held_cost = {current.key: list(base), compared.key: list(alt)}
    sweep.held_metrics = {
        s.key: {m: float(np.mean([held[(replayed[s], k)].metrics[m] for k in held_seeds])) for m in KEPT}
        for s in (current, compared)
    }  # fmt: skip
    sweep.held_gain = paired_difference(base, alt, RESAMPLES, seed, f"whatif|{name}|crs-held")
    return sweep


Replayed = tuple[tuple[str, Any], ...]


def _run_distinct(
    settings: list[CrsSetting],
    seeds: list[int],
    replayed: dict[CrsSetting, Replayed],
    path: Path,
    ov: Replayed,
    workers: int,
) -> dict[tuple[Replayed, int], CellResult]:
    """One run per distinct replayed scenario and seed (settings the model replays alike share
    it), keyed by ``(the setting's model overrides, seed)``."""
    todo: dict[tuple[Replayed, int], Cell] = {}
    for s in settings:
        for k in seeds:
            todo.setdefault((replayed[s], k), Cell(str(path), ov, s, k))
    key_of = {cell: key for key, cell in todo.items()}
    return {
        key_of[r.cell]: r for r in LocalPool(workers).map_unordered(run_cell, list(todo.values()))
    }


def choose_crs(
    fit_cost: dict[str, list[float]],
    setting_by: dict[str, CrsSetting],
    current: CrsSetting,
    seed: int,
    name: str,
) -> tuple[CrsSetting, list[str], str]:
    """The choice among a pre-9.1 version's ``crs`` settings: the cheapest on the fit part,
    unless the cluster's current setting ties with it (then keep it: changing buys nothing
    shown); from a tie without it, the most conservative (PVE's defaults first)."""
    _, tie = _tie(fit_cost, current.key, seed, name)
    if current.key in tie:
        if len(tie) == len(fit_cost):
            why = "every setting of this version ties on the fit part"
        elif len(tie) == 1:
            why = "the cluster's current setting is the cheapest on the fit part"
        else:
            why = f"the cluster's current setting ties with the cheapest ({len(tie)} settings tie): keep it"
        return current, tie, why
    tied = [setting_by[lab] for lab in tie]
    pick = max(tied, key=lambda st: st.conservative_key())
    if len(tied) == 1:
        return (
            pick,
            tie,
            "the cheapest setting on the fit part, beyond the noise of the current one",
        )
    return (
        pick,
        tie,
        f"{len(tied)} settings tie for the cheapest on the fit part, the current one not among "
        "them; no winner among them: the most conservative (closest to PVE's defaults) is shown",
    )
