"""The study's report: held-out evaluation of the tuned constants, plots, ``summary.md``.

Tuning scores candidates on the training suite only, so the best training value is optimistic
(it is the maximum of many noisy comparisons). The honest number is the **held-out** one: the best
trial — or, multi-objective, each Pareto-optimal trial (at most ``report.pareto_max``) — is
re-evaluated on the ``[[test]]`` suite (instances disjoint from training) next to ``upstream`` and
the base policy with its default constants (the field report's ``patched``), through the experiments runner
(:func:`pvegym.experiments.runner.plan` / :func:`~pvegym.experiments.runner.execute`, its cell cache
in ``<run dir>/heldout/cells``, its ``metrics.csv`` and ``summary.md`` with 95 % bootstrap CIs
and comparisons with upstream).

A tuned candidate may change scenario settings (``migration.boost_factor``), which the runner
attaches to scenario entries, not policies; each distinct set of scenario overrides is therefore
planned as its own experiment, with the same entry labels, and the rows are merged before the
runner's report functions summarize them — one table, paired by seed.

On top of the runner's tables, this report gives the study's own objective on the test suite with
a paired bootstrap CI of *tuned − default* per scenario and pooled over all test instances, and says
in one line whether the tuned constants beat the defaults, lose, or are not distinguishable — by
the Wilcoxon signed-rank test of the paired differences (:mod:`pvegym.experiments.stats`). Plots: optimisation history, parameter importances (fANOVA, when
there are enough finished trials), the Pareto front (multi-objective).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

import pvegym
from pvegym.experiments import plots as exp_plots
from pvegym.experiments import report as exp_report
from pvegym.experiments import stats
from pvegym.experiments.cells import Row, read_cell, read_trace
from pvegym.experiments.config import (
    Experiment,
    PolicyEntry,
    ReportOptions,
    ScenarioEntry,
)
from pvegym.experiments.executor import Executor
from pvegym.experiments.files import write_json_atomic
from pvegym.experiments.runner import evaluate_cells, plan, unique_cells
from pvegym.experiments.stats import Estimate
from pvegym.provenance import git_commit
from pvegym.sim.metrics import HEADLINE, METRIC_KEYS, metrics_in
from pvegym.tuning.objective import instance_value
from pvegym.tuning.study import count_finished, make_storage, redact, results_dir
from pvegym.tuning.study_config import StudyConfig

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

REFERENCE = "upstream"  # always evaluated next to the tuned constants
#: also always evaluated: constants that "win" by never moving must be told apart from tuning
NOOP_LABEL = "noop"
DEFAULT_LABEL = "default"  # the base policy with the field report's constants (``patched``)
#: parameter importances need a handful of completed trials to mean anything (and to be computable)
MIN_TRIALS_IMPORTANCE = 4


@dataclass
class Candidate:
    """A policy configuration evaluated on the test suite: a label, the policy and constants, the
    scenario overrides it needs, and the trial it comes from (``None`` for the references)."""

    label: str
    policy: str
    params: dict[str, Any]
    overrides: dict[str, Any]
    trial: FrozenTrial | None = None


@dataclass
class ReportInfo:
    out_dir: Path
    verdicts: dict[str, str]
    wall_s: float


# ------------------------------------------------------------------------------------------ trials
def load_study(cfg: StudyConfig, storage_url: str) -> optuna.Study:
    return optuna.load_study(study_name=cfg.name, storage=make_storage(storage_url))


def feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in trial.constraints.values())


def selected_trials(cfg: StudyConfig, study: optuna.Study) -> list[FrozenTrial]:
    """The best feasible trial, or up to ``pareto_max`` feasible Pareto-optimal trials spread
    evenly along the first objective; empty when no trial completed feasibly."""
    if not cfg.multi_objective:
        try:
            return [study.best_trial]
        except ValueError:
            return []
    front = sorted(study.best_trials, key=lambda t: (t.values[0], t.number))
    if len(front) <= cfg.report.pareto_max:
        return front
    idx = np.unique(np.linspace(0, len(front) - 1, cfg.report.pareto_max).round().astype(int))
    return [front[i] for i in idx]


def candidates(cfg: StudyConfig, trials: list[FrozenTrial]) -> list[Candidate]:
    """``upstream`` (its defaults), the base policy with its defaults, and the selected trials."""
    out = [Candidate(NOOP_LABEL, "noop", {}, {}), Candidate(REFERENCE, "upstream", {}, {})]
    base_params = dict(sorted(cfg.policy.params.items()))
    # the defaults run the test entries as they are (migration settings untouched)
    out.append(Candidate(DEFAULT_LABEL, cfg.policy.name, base_params, {}))
    for t in trials:
        params, overrides = cfg.split_values(dict(t.params))
        label = "tuned" if len(trials) == 1 else f"tuned#{t.number}"
        out.append(Candidate(label, cfg.policy.name, params, overrides, t))
    return out


# ------------------------------------------------------------------------------------------ held out
def heldout_experiment(
    cfg: StudyConfig, policies: list[Candidate], overrides: dict[str, Any]
) -> Experiment:
    """The test suite as an experiment: every test entry (scenario overrides added) × policies."""
    entries = tuple(
        dataclasses.replace(e, set={**e.set, **overrides}) if overrides else e for e in cfg.test
    )
    return Experiment(
        name=f"{cfg.name}-heldout",
        scenarios=entries,
        policies=tuple(PolicyEntry(c.policy, c.label, dict(c.params)) for c in policies),
        description=(
            f"Held-out evaluation of study {cfg.name!r}: the test suite (instances disjoint from "
            "training), upstream vs the base policy's defaults vs the tuned constants."
        ),
        metrics=tuple(METRIC_KEYS),
        episode=cfg.episode,
        report=ReportOptions(
            bootstrap_resamples=cfg.report.bootstrap_resamples,
            bootstrap_seed=cfg.report.bootstrap_seed,
            timeline_seeds=cfg.report.timeline_seeds,
        ),
        output=f"{cfg.out_name}-heldout",
    )


def evaluate_heldout(
    cfg: StudyConfig, cands: list[Candidate], out: Path, workers: Executor | int, progress: bool
) -> tuple[Experiment, list[Row], dict[str, dict[str, Any]]]:
    """Run every candidate on the test suite through the runner (cached cells are reused) and
    write the runner's ``metrics.csv``, ``summary.md`` and comparison plots into ``out``."""
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        key = json.dumps(c.overrides, sort_keys=True)
        groups.setdefault(key, []).append(c)
    rows: list[Row] = []
    for key, members in groups.items():
        rows += plan(heldout_experiment(cfg, members, json.loads(key)))
    cells_dir = out / "cells"
    cells = unique_cells(rows)
    evaluate_cells(cells, cells_dir, workers, desc=f"{cfg.name} held-out", progress=progress)
    docs = {c.key: read_cell(cells_dir, c.key) for c in cells}
    # one experiment for the report: the plain test entries, every candidate as a policy label
    exp = heldout_experiment(cfg, cands, {})
    order = {c.label: i for i, c in enumerate(cands)}
    rows.sort(key=lambda r: ([e.key for e in cfg.test].index(r.scenario), r.seed, order[r.policy]))
    exp_report.write_metrics_csv(out / "metrics.csv", rows, docs)
    summary = exp_report.summarize(exp, rows, docs)
    exp_report.write_summary(out / "summary.md", exp, summary)
    timelines = [(r, read_trace(cells_dir, r.cell.key)) for r in rows if r.cell.trace]
    exp_plots.write_plots(out / "plots", exp, summary, timelines)
    return exp, rows, docs


@dataclass
class Comparison:
    """The study's objective on the test suite: per policy the mean with its CI, and the paired
    difference of each tuned candidate from the defaults (and from upstream)."""

    est: dict[tuple[str, str], Estimate | None]  # (scope, label) -> estimate
    diff: dict[tuple[str, str, str], Estimate | None]  # (scope, label, ref)
    change: dict[tuple[str, str, str], Estimate | None]
    n: dict[str, int]


def compare(
    cfg: StudyConfig,
    cands: list[Candidate],
    rows: list[Row],
    docs: dict[str, dict[str, Any]],
    objective_index: int = 0,
) -> Comparison:
    """Bootstrap the objective per test scenario and pooled over all test instances ("all"),
    paired by (scenario, seed) — the same instance for every policy."""
    obj = cfg.objectives[objective_index]
    value: dict[tuple[str, str, int], float] = {}
    for r in rows:
        value[(r.scenario, r.policy, r.seed)] = instance_value(obj, docs[r.cell.key]["metrics"])
    scopes = {e.key: [(e.key, s) for s in e.seeds] for e in cfg.test}
    scopes["all"] = [inst for insts in list(scopes.values()) for inst in insts]
    resamples, bseed = cfg.report.bootstrap_resamples, cfg.report.bootstrap_seed
    labels = [c.label for c in cands]
    tuned = [c.label for c in cands if c.trial is not None]
    cmp = Comparison({}, {}, {}, {})
    for scope, insts in scopes.items():
        cmp.n[scope] = len(insts)
        col = {
            label: np.array([value[(sc, label, seed)] for sc, seed in insts], dtype=float)
            for label in labels
        }
        for label in labels:
            name = f"{scope}|{label}|{obj.label}"
            cmp.est[(scope, label)] = stats.bootstrap(col[label], resamples, bseed, name)
        for label in tuned:
            for ref in (DEFAULT_LABEL, REFERENCE, NOOP_LABEL):
                name = f"{scope}|{label}-{ref}|{obj.label}"
                cmp.diff[(scope, label, ref)] = stats.paired_difference(
                    col[label], col[ref], resamples, bseed, name
                )
                cmp.change[(scope, label, ref)] = stats.bootstrap_change(
                    col[label], col[ref], resamples, bseed, name
                )
    return cmp


def verdict(d: Estimate | None, direction: str) -> str:
    """better / worse / no significant difference / identical: the Wilcoxon signed-rank test of
    the paired differences (:func:`pvegym.experiments.stats.verdict`)."""
    return stats.verdict(d, "lower" if direction == "minimize" else "higher")


# ------------------------------------------------------------------------------------------ plots
def write_study_plots(cfg: StudyConfig, study: optuna.Study, plots_dir: Path) -> dict[str, str]:
    """Optimisation history, parameter importances (fANOVA), Pareto front; name -> file or a note
    saying why a plot is missing (e.g. too few finished trials)."""
    with warnings.catch_warnings():  # optuna's matplotlib plots are all "experimental"
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return _write_study_plots(cfg, study, plots_dir)


def _write_study_plots(cfg: StudyConfig, study: optuna.Study, plots_dir: Path) -> dict[str, str]:
    from optuna.visualization import matplotlib as ovm

    plots_dir.mkdir(parents=True, exist_ok=True)
    done: dict[str, str] = {}
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    for k, obj in enumerate(cfg.objectives):
        target = None if not cfg.multi_objective else (lambda t, k=k: t.values[k])
        suffix = "" if not cfg.multi_objective else f"-{obj.label}"
        name = f"history{suffix}.png"
        if not complete:
            done[name] = "no completed trial"
            continue
        try:
            ax = ovm.plot_optimization_history(study, target=target, target_name=obj.label)
            _save_ax(ax, plots_dir / name)
            done[name] = f"plots/{name}"
        except Exception as err:  # a plot is never worth losing the report over
            done[name] = f"not drawn: {err}"
        name = f"importances{suffix}.png"
        if len(complete) < MIN_TRIALS_IMPORTANCE:
            done[name] = f"too few completed trials ({len(complete)} < {MIN_TRIALS_IMPORTANCE})"
            continue
        try:
            ev, _ = importance_evaluator()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                ax = ovm.plot_param_importances(
                    study, evaluator=ev, target=target, target_name=obj.label
                )
            _save_ax(ax, plots_dir / name)
            done[name] = f"plots/{name}"
        except Exception as err:
            done[name] = f"not drawn: {err}"
    if cfg.multi_objective:
        name = "pareto.png"
        try:
            ax = ovm.plot_pareto_front(
                study, target_names=[o.label for o in cfg.objectives], include_dominated_trials=True
            )
            _save_ax(ax, plots_dir / name)
            done[name] = f"plots/{name}"
        except Exception as err:
            done[name] = f"not drawn: {err}"
    return done


def _save_ax(ax: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    axes = np.atleast_1d(ax)
    fig = axes.flat[0].figure
    fig.set_size_inches(9, 5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def importance_evaluator() -> tuple[Any, str]:
    """Optuna's fANOVA evaluator when scikit-learn is installed (Optuna 5 builds fANOVA's random
    forest with it), else Optuna's PED-ANOVA, which needs nothing beyond NumPy/SciPy."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return optuna.importance.PedAnovaImportanceEvaluator(), "PED-ANOVA (no scikit-learn)"
    return optuna.importance.FanovaImportanceEvaluator(seed=0), "fANOVA"


def importances(cfg: StudyConfig, study: optuna.Study) -> tuple[dict[str, float] | str, str]:
    """Importances of the first objective (or why there are none), and the evaluator's name."""
    evaluator, ev_name = importance_evaluator()
    n = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if n < MIN_TRIALS_IMPORTANCE:
        return f"too few completed trials ({n} < {MIN_TRIALS_IMPORTANCE})", ev_name
    try:
        target = None if not cfg.multi_objective else (lambda t: t.values[0])
        with warnings.catch_warnings():  # PED-ANOVA's note on "low target values is better"
            warnings.simplefilter("ignore", UserWarning)
            imp = optuna.importance.get_param_importances(study, evaluator=evaluator, target=target)
        return imp, ev_name
    except Exception as err:
        return f"not computed: {err}", ev_name


# ------------------------------------------------------------------------------------------ write
def write_report(
    cfg: StudyConfig,
    storage_url: str,
    out_dir: Path | None = None,
    workers: Executor | int = 1,
    progress: bool = True,
    tune_wall_s: float | None = None,
) -> ReportInfo:
    """Everything in ``results/<study>/``: ``summary.md``, ``best_params.json``,
    ``plots/*.png``, ``heldout/`` (the runner's tables and cells). The held-out cells run on
    ``workers`` (an executor, or the size of a local pool)."""
    t0 = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else results_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = load_study(cfg, storage_url)
    trials = study.get_trials(deepcopy=False)
    chosen = selected_trials(cfg, study)
    cands = candidates(cfg, chosen)
    heldout = out / "heldout"
    _, rows, docs = evaluate_heldout(cfg, cands, heldout, workers, progress)
    cmps = [compare(cfg, cands, rows, docs, k) for k in range(len(cfg.objectives))]
    figs = write_study_plots(cfg, study, out / "plots")
    imp, ev_name = importances(cfg, study)
    verdicts = {
        c.label: verdict(
            cmps[0].diff.get(("all", c.label, DEFAULT_LABEL)), cfg.objectives[0].direction
        )
        for c in cands
        if c.trial is not None
    }
    write_best_params(cfg, study, cands, out / "best_params.json")
    text = summary_text(
        cfg,
        study,
        trials,
        cands,
        cmps,
        rows,
        docs,
        figs,
        (imp, ev_name),
        verdicts,
        storage_url,
        tune_wall_s,
    )
    (out / "summary.md").write_text(text)
    return ReportInfo(out, verdicts, time.perf_counter() - t0)


def write_best_params(
    cfg: StudyConfig, study: optuna.Study, cands: list[Candidate], path: Path
) -> None:
    """The selected trial(s): parameters by name, the resulting policy constants and scenario
    overrides (ready for an experiment file), training values, and the field report's defaults."""
    tuned = []
    for c in cands:
        if c.trial is None:
            continue
        t = c.trial
        tuned.append(
            {
                "label": c.label,
                "trial": t.number,
                "values": dict(zip([o.label for o in cfg.objectives], t.values, strict=True)),
                "params": dict(t.params),
                "policy": {"name": c.policy, "params": c.params},
                "scenario_overrides": c.overrides,
                "constraints": dict(t.constraints),
                "train_metrics_mean": t.user_attrs.get("metrics_mean", {}),
            }
        )
    doc = {
        "study": cfg.name,
        "config_sha256": cfg.config_hash(),
        "study_sha256": cfg.study_hash(),
        "git_commit": study.user_attrs.get("git_commit", "unknown"),
        "objectives": [
            {"name": o.label, "direction": o.direction, "weights": o.terms()}
            for o in cfg.objectives
        ],
        "defaults": cfg.defaults(),
        "best" if not cfg.multi_objective else "pareto": tuned[0]
        if (tuned and not cfg.multi_objective)
        else tuned,
    }
    write_json_atomic(path, json.loads(json.dumps(doc, default=_jsonable)))


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


def _fmt(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else exp_report.fmt(x)


def _est(e: Estimate | None) -> str:
    if e is None:
        return "—"
    text = exp_report.fmt(e.mean)
    if e.hi > e.lo:
        text += f" [{exp_report.fmt(e.lo)}, {exp_report.fmt(e.hi)}]"
    return text


def _diff(d: Estimate | None, ch: Estimate | None) -> str:
    if d is None:
        return "—"
    if d.p is None:
        return "="
    text = f"{d.mean:+.4g} [{d.lo:+.4g}, {d.hi:+.4g}]"
    if ch is not None:
        text += f" ({100 * ch.mean:+.0f} % [{100 * ch.lo:+.0f}, {100 * ch.hi:+.0f}])"
    return f"{text} {stats.fmt_p(d.p)}"


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def summary_text(
    cfg: StudyConfig,
    study: optuna.Study,
    trials: list[FrozenTrial],
    cands: list[Candidate],
    cmps: list[Comparison],
    rows: list[Row],
    docs: dict[str, dict[str, Any]],
    figs: dict[str, str],
    importance: tuple[dict[str, float] | str, str],
    verdicts: dict[str, str],
    storage_url: str,
    tune_wall_s: float | None,
) -> str:
    tuned = [c for c in cands if c.trial is not None]
    out = _study_lines(cfg, study, trials, storage_url, tune_wall_s)
    if not tuned:
        out += ["**No trial completed feasibly: nothing to evaluate on the test suite.**", ""]
    out += _constants_lines(cfg, trials, tuned)
    out += findings_lines(cfg, trials, tuned, cmps[0] if cmps else None)
    if tuned:
        out += _heldout_lines(cfg, cands, tuned, cmps, rows, docs, verdicts)
    out += _closing_lines(cfg, figs, importance)
    return "\n".join(out)


def _study_lines(
    cfg: StudyConfig,
    study: optuna.Study,
    trials: list[FrozenTrial],
    storage_url: str,
    tune_wall_s: float | None,
) -> list[str]:
    """The title, provenance and "The study" section: trials by state, workers, sampler, suites and
    objectives."""
    states = {s.name: 0 for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    for t in trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    n_feasible = sum(1 for t in trials if t.state == TrialState.COMPLETE and feasible(t))
    starts = [t.datetime_start for t in trials if t.datetime_start is not None]
    ends = [t.datetime_complete for t in trials if t.datetime_complete is not None]
    span = (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0
    trial_s = sum(
        (t.datetime_complete - t.datetime_start).total_seconds()
        for t in trials
        if t.datetime_start is not None and t.datetime_complete is not None
    )
    workers = sorted({str(t.user_attrs.get("worker", "?")) for t in trials})
    commit, dirty = git_commit()
    out = [
        f"# {cfg.name}",
        "",
        cfg.description,
        "",
        f"Optuna study `{cfg.name}` in `{redact(storage_url)}`; study config SHA-256 "
        f"`{cfg.study_hash()[:16]}` (stored with the study, see `best_params.json`); study created "
        f"at git commit `{str(study.user_attrs.get('git_commit', 'unknown'))[:12]}`, report written "
        f"at `{commit[:12]}`{' (local changes)' if dirty else ''}, pvegym {pvegym.__version__}, "
        f"optuna {optuna.__version__}.",
        "",
        "## The study",
        "",
        f"- **Trials:** {len(trials)} — {states['COMPLETE']} complete ({n_feasible} feasible), "
        f"{states['PRUNED']} pruned (Wilcoxon), {states['FAIL']} failed"
        + (f", {states.get('RUNNING', 0)} still running" if states.get("RUNNING") else "")
        + f"; budget `n_trials = {cfg.n_trials}`.",
        f"- **Workers:** {len(workers)} process(es); first trial start to last trial end "
        f"{span / 60:.1f} min wall, {trial_s / 60:.1f} min of trial time"
        + (f"; this run's tuning wall time {tune_wall_s / 60:.1f} min" if tune_wall_s else "")
        + ".",
        f"- **Sampler:** {cfg.sampler.type.upper()} (seed {cfg.sampler.seed}); pruner: "
        f"{cfg.pruner.type}; constraints: "
        + (", ".join(f"`{c}`" for c in cfg.constraints) or "none")
        + " (mean over the training instances).",
        "- **Training suite** (scored during tuning): "
        + ", ".join(f"{e.key} × {len(e.seeds)}" for e in cfg.train)
        + f" = {sum(len(e.seeds) for e in cfg.train)} episodes per trial.",
        "- **Test suite** (held out): "
        + ", ".join(f"{e.key} × {len(e.seeds)}" for e in cfg.test)
        + f" = {sum(len(e.seeds) for e in cfg.test)} episodes per policy.",
        "- **Objective(s):** "
        + "; ".join(
            f"{o.direction} `{o.label}` = "
            + " + ".join(f"{w:g}·`{m}`" for m, w in o.terms().items())
            + " per instance, mean over instances"
            for o in cfg.objectives
        )
        + ".",
        "",
    ]
    return out


def _constants_lines(
    cfg: StudyConfig, trials: list[FrozenTrial], tuned: list[Candidate]
) -> list[str]:
    """The "Tuned constants" section: each parameter's range, default and tuned values, then the
    training-suite objective of the defaults and of each tuned candidate."""
    defaults = cfg.defaults()
    out = ["## Tuned constants", ""]
    head = "| parameter | target | range | default | " + " | ".join(c.label for c in tuned) + " |"
    out += [head, "|---|---|---|---:|" + "---:|" * len(tuned)]
    for name, spec in cfg.params.items():
        if spec.choices is not None:
            rng = "{" + ", ".join(map(str, spec.choices)) + "}"
        else:
            rng = f"[{_value(spec.low)}, {_value(spec.high)}]" + (" log" if spec.log else "")
            rng += " int" if spec.int else ""
        vals = [_value(c.trial.params.get(name)) for c in tuned if c.trial is not None]
        out.append(
            f"| `{name}` | `{spec.target}` | {rng} | {_value(defaults[name])} | "
            + " | ".join(vals)
            + " |"
        )
    default_trial = next(
        (t for t in trials if t.user_attrs.get("role") == "defaults" and t.values), None
    )
    if tuned:
        out += ["", "Training-suite objective (mean over the training instances):", ""]
        if default_trial is not None:
            out.append(
                f"- defaults (trial {default_trial.number}): "
                + ", ".join(f"{v:.5g}" for v in default_trial.values)
            )
        for c in tuned:
            trial = tuned_trial(c)
            out.append(
                f"- {c.label} (trial {trial.number}): "
                + ", ".join(f"{v:.5g}" for v in trial.values)
            )
    return out


def tuned_trial(c: Candidate) -> FrozenTrial:
    """The trial a tuned candidate comes from. A reference candidate (``trial`` ``None``: the
    defaults, upstream, noop) passed as a tuned one is a caller's mistake: a :class:`ValueError`
    naming it (not an ``assert``, which ``python -O`` removes)."""
    if c.trial is None:
        raise ValueError(f"candidate {c.label!r} is a reference, not a tuned trial")
    return c.trial


def findings_lines(
    cfg: StudyConfig, trials: list[FrozenTrial], tuned: list[Candidate], cmp: Comparison | None
) -> list[str]:
    """ "What the study found", said plainly: whether the best value is shared by several trials
    (a flat objective: the "tuned" constants are one of many equivalent sets), whether the
    defaults trial is infeasible (so it never competed), and how each tuned candidate compares
    with ``noop`` on the test suite (constants that never move tie it on every instance)."""
    out = ["", "## What the study found", ""]
    complete = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
    good = [t for t in complete if feasible(t)]
    for c in tuned:
        trial = tuned_trial(c)
        ties = [t for t in good if t.values == trial.values]
        if len(ties) > 1:
            out.append(
                f"- **The objective is flat at the optimum**: {len(ties)} of {len(complete)} "
                f"complete trials tie with {c.label} (trial {trial.number}) at "
                + ", ".join(f"{v:.5g}" for v in trial.values)
                + " — it is one of several equivalent sets of constants, not a unique optimum."
            )
    default_trial = next((t for t in complete if t.user_attrs.get("role") == "defaults"), None)
    if default_trial is not None and not feasible(default_trial):
        broken = ", ".join(
            f"`{k}` ({v:.5g})" for k, v in default_trial.constraints.items() if v > 0
        )
        out.append(
            f"- **The defaults are infeasible** (trial {default_trial.number} violates {broken}): "
            "they never competed for best; the held-out table still compares with them."
        )
    for c in tuned:
        d = cmp.diff.get(("all", c.label, NOOP_LABEL)) if cmp is not None else None
        if d is None:
            continue
        main = cfg.objectives[0]
        if d.mean == 0.0 and d.lo == 0.0 and d.hi == 0.0:
            out.append(
                f"- **{c.label} behaves exactly like `noop`** on every held-out instance "
                f"(`{main.label}` identical): these constants never move there."
            )
        else:
            out.append(
                f"- {c.label} − `noop` on the test suite (`{main.label}`, paired mean "
                f"[95 % CI]): {_fmt(d.mean)} [{_fmt(d.lo)}, {_fmt(d.hi)}]."
            )
    if len(out) == 3:
        out.append("- one best trial, feasible defaults; no candidate to compare with `noop`.")
    return out


def _heldout_lines(
    cfg: StudyConfig,
    cands: list[Candidate],
    tuned: list[Candidate],
    cmps: list[Comparison],
    rows: list[Row],
    docs: dict[str, dict[str, Any]],
    verdicts: dict[str, str],
) -> list[str]:
    """The "Held-out result" section: the verdicts and the paired test-suite table of each tuned
    candidate, then the headline metrics."""
    main = cfg.objectives[0]
    out = [
        "",
        "## Held-out result",
        "",
        f"The study's objective `{main.label}` ({main.direction}) on the test suite, mean over "
        "its instances with a 95 % BCa bootstrap CI (`scipy.stats.bootstrap`); *tuned − "
        "default* and *tuned − upstream* are paired by instance (same scenario, same seed), "
        "with the relative change in parentheses and the p-value of the Wilcoxon signed-rank "
        "test of the paired differences (`scipy.stats.wilcoxon`, two-sided), which decides "
        f"the verdict at {stats.ALPHA:g}. `all` pools every test instance (the `small` "
        "instances, with the largest stall, weigh most).",
        "",
    ]
    for c in tuned:
        out.append(
            f"**Verdict ({c.label} vs the field report's defaults, all test instances): "
            f"{verdicts[c.label]}** — " + _verdict_sentence(verdicts[c.label], cmps[0], c.label)
        )
        out.append("")
    labels = [c.label for c in cands]
    for c in tuned:
        out += [
            f"| test scope | n | {' | '.join(labels)} | {c.label} − default | "
            f"{c.label} − upstream |",
            "|---|---:|" + "---:|" * (len(labels) + 2),
        ]
        for scope in [*(e.key for e in cfg.test), "all"]:
            ests = [_est(cmps[0].est[(scope, lab)]) for lab in labels]
            d1 = _diff(
                cmps[0].diff[(scope, c.label, DEFAULT_LABEL)],
                cmps[0].change[(scope, c.label, DEFAULT_LABEL)],
            )
            d2 = _diff(
                cmps[0].diff[(scope, c.label, REFERENCE)],
                cmps[0].change[(scope, c.label, REFERENCE)],
            )
            name = f"**{scope}**" if scope == "all" else scope
            out.append(f"| {name} | {cmps[0].n[scope]} | " + " | ".join(ests) + f" | {d1} | {d2} |")
        out.append("")
    out += _headline_metrics(cfg, cands, rows, docs)
    out += [
        "Every metric per test scenario, with CIs and paired comparisons with upstream: "
        "[`heldout/summary.md`](heldout/summary.md) (data: `heldout/metrics.csv`).",
        "",
    ]
    return out


def _closing_lines(
    cfg: StudyConfig, figs: dict[str, str], importance: tuple[dict[str, float] | str, str]
) -> list[str]:
    """Parameter importances, the plots and the commands that reproduce the study."""
    imp, ev_name = importance
    out = [f"## Parameter importances ({ev_name}, first objective, completed trials)", ""]
    if isinstance(imp, str):
        out += [f"Not available: {imp}.", ""]
    else:
        out += ["| parameter | importance |", "|---|---:|"]
        out += [f"| `{k}` | {v:.3f} |" for k, v in imp.items()]
        out.append("")
    out += ["## Plots", ""]
    for name, where in figs.items():
        if where.startswith("plots/"):
            out.append(f"- [{name}]({where})")
        else:
            out.append(f"- {name}: {where}")
    out += [
        "",
        "## Reproduce",
        "",
        "```",
        f"pvegym tune experiments/{cfg.name}.toml --out DIR  # resumes the study in DIR; "
        "n_trials is the total",
        f"pvegym tune experiments/{cfg.name}.toml --out DIR --report-only",
        "optuna-dashboard sqlite:///DIR/study.db",
        "```",
        "",
    ]
    return out


def _verdict_sentence(v: str, cmp: Comparison, label: str) -> str:
    d = cmp.diff[("all", label, DEFAULT_LABEL)]
    if d is None:
        return "no paired values."
    ci = (
        f"difference {d.mean:+.4g}, 95 % CI [{d.lo:+.4g}, {d.hi:+.4g}], Wilcoxon {stats.fmt_p(d.p)}"
    )
    if v == "better":
        return f"the tuned constants cost less than the defaults on held-out instances ({ci})."
    if v == "worse":
        return f"the tuned constants cost more than the defaults on held-out instances ({ci})."
    if v == "identical":
        return "the tuned constants behave exactly like the defaults on every held-out instance."
    return (
        f"the paired differences are not significant ({ci}): no evidence that the tuned "
        "constants beat the defaults."
    )


def _headline_metrics(
    cfg: StudyConfig, cands: list[Candidate], rows: list[Row], docs: dict[str, dict[str, Any]]
) -> list[str]:
    """Means per test scenario of the metrics the field report is about (the registry's
    headline table), per policy."""
    headline = metrics_in(HEADLINE)
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r.scenario, r.policy), []).append(docs[r.cell.key]["metrics"])
    out = [
        "Held-out means per test scenario (every metric with CIs: `heldout/summary.md`):",
        "",
        "| scenario | policy | " + " | ".join(f"`{m}`" for m in headline) + " |",
        "|---|---|" + "---:|" * len(headline),
    ]
    for e in cfg.test:
        for c in cands:
            ms = by.get((e.key, c.label), [])
            vals = []
            for m in headline:
                xs = [float(x[m]) for x in ms if x.get(m) is not None]
                vals.append(_fmt(float(np.mean(xs))) if xs else "—")
            out.append(f"| {e.key} | {c.label} | " + " | ".join(vals) + " |")
    out.append("")
    return out


def finished_trials(cfg: StudyConfig, storage_url: str) -> int:
    return count_finished(load_study(cfg, storage_url))


__all__ = [
    "Candidate",
    "ReportInfo",
    "ScenarioEntry",
    "compare",
    "evaluate_heldout",
    "finished_trials",
    "selected_trials",
    "verdict",
    "write_report",
]
