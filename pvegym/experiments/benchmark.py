"""``pvegym benchmark``: score any policy on a task's test split (``docs/benchmark.md``).

A policy is given as a SPEC, its label in every report:

* ``NAME[,key=value…]`` — a registered policy (``pvegym policies``) or a reference label
  (``patched-tuned``, ``oracle``) with constants (values read as TOML: ``threshold=0.2``);
* ``learned:PATH`` — an SB3 ``model.zip`` (or run directory) through the safe loader;
* ``MODULE:ATTR`` — any importable module (dotted or not, from the current directory or
  ``PYTHONPATH``) and a factory ``ATTR`` called with no arguments, returning a
  :class:`~pvegym.sim.view.Balancer` (``decide(view)``, ``reset(seed)``) or an environment-level
  agent (``act(observation, action_mask) -> action``; ``reset(seed)`` if it has one).

The scores (module :func:`score`): ``normalized_score`` = exactly 100 × (mean ``noop`` cost −
mean policy cost) / (mean ``noop`` cost − mean oracle cost) over the task's test instances, a ratio
of means with a paired percentile bootstrap 95 % CI (instances resampled, the same indices for the
three means); beside it rliable's IQM and probability of improvement (Agarwal et al., "Deep
Reinforcement Learning at the Edge of the Statistical Precipice", NeurIPS 2021; the ``rliable``
package's ``aggregate_iqm`` and ``probability_of_improvement``, each a scipy call, written here
rather than importing rliable and its pandas, seaborn, statsmodels and arch), per-instance wins / losses / ties
against each reference heuristic, and the constraint counts. ``noop`` and the oracle come from the
shipped reference table (:mod:`pvegym.experiments.benchmark_references`), so scoring needs no
oracle run.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pvegym.errors import ConfigError
from pvegym.experiments.benchmark_episodes import (
    ORACLE_LABEL,
    RECORD_METRICS,
    REFERENCE_TABLE,
    REFERENCES,
    EpisodeResult,
    agent_episode,
    balancer_episode,
    make_reference,
    make_task_env,
)
from pvegym.experiments.stats import rng
from pvegym.sim.tasks import Task

#: bootstrap resamples of every CI; the generator is seeded by the task and the label
RESAMPLES = 10_000
#: the reference heuristics every policy is compared with per instance (not noop: its
#: comparison is the score itself)
COMPARED = tuple(label for label in REFERENCES if label != "noop")
#: constraint counts reported per policy (totals over the test instances)
CONSTRAINTS = ("moves_failed", "oscillations", "churn_moves")


@dataclass
class PolicySpec:
    """A parsed SPEC: its label (the SPEC as typed) and a factory of a fresh policy per episode;
    ``kind`` is ``"balancer"`` or ``"agent"``."""

    label: str
    make: Callable[[], Any]
    kind: str
    #: the user's own code (``MODULE:ATTR``): its failure mid-episode is a one-line error
    user: bool = False


def _parse_params(items: list[str], spec: str) -> dict[str, Any]:
    import tomllib

    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--policy {spec}", f"{item!r} is not key=value")
        try:
            params[key] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            params[key] = raw
    return params


def _kind(obj: Any, spec: str) -> str:
    if callable(getattr(obj, "decide", None)):
        return "balancer"
    if callable(getattr(obj, "act", None)):
        return "agent"
    raise ConfigError(
        f"--policy {spec}",
        "the factory's result has neither decide(view) (a Balancer) nor "
        "act(observation, action_mask) (an environment-level agent)",
    )


def _import_factory(module: str, attr: str, spec: str) -> Callable[[], Any]:
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # "from the current directory", as `python -m`
    try:
        mod = importlib.import_module(module)
    except Exception as err:  # ImportError, or the module's own code failing on import
        raise ConfigError(f"--policy {spec}", f"cannot import module {module!r}: {err}") from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise ConfigError(f"--policy {spec}", f"module {module!r} has no callable {attr!r}")
    return factory


def parse_spec(spec: str) -> PolicySpec:
    """A SPEC (module doc) as a :class:`PolicySpec`; bad input is a :class:`ConfigError` naming
    ``--policy SPEC`` (and the constant, when one is wrong)."""
    try:
        return _parse_spec(spec)
    except ConfigError as err:
        where = f"--policy {spec}"
        if err.path.startswith(where):
            raise
        key = err.path.rsplit(".", 1)[-1]
        raise ConfigError(where, f"{key}: {err.message}") from None


def _parse_spec(spec: str) -> PolicySpec:
    from pvegym.policies.registry import available, make_policy

    if spec.startswith("learned:"):
        model = spec.removeprefix("learned:")
        make_policy("learned", "model", model=model)  # fail now, not mid-run

        def learned() -> Any:
            return make_policy("learned", "model", model=model)

        return PolicySpec(spec, learned, "balancer")
    if ":" in spec:
        module, _, attr = spec.rpartition(":")
        if not module or not attr:
            raise ConfigError(f"--policy {spec}", "MODULE:ATTR needs both a module and a name")
        factory = _import_factory(module, attr, spec)
        try:
            first = factory()
        except Exception as err:  # the user's code: its failure is one line, not a traceback
            raise ConfigError(
                f"--policy {spec}", f"{attr}() (called with no arguments) raised {err!r}"
            ) from None
        return PolicySpec(spec, factory, _kind(first, spec), user=True)
    name, *items = spec.split(",")
    params = _parse_params(items, spec)
    if name not in available() and (name in REFERENCES or name == ORACLE_LABEL):
        if params:
            raise ConfigError(f"--policy {spec}", f"{name!r} is a reference: it takes no constants")
        return PolicySpec(spec, lambda: make_reference(name), "balancer")
    if name not in available():
        allowed = ", ".join([*available(), *[r for r in REFERENCES if r not in available()]])
        raise ConfigError(f"--policy {spec}", f"unknown policy {name!r} (allowed: {allowed})")
    make_policy(name, "policy", **params)  # fail now, not mid-run
    return PolicySpec(spec, lambda: make_policy(name, "policy", **params), "balancer")


def run_policy(
    task: Task, spec: PolicySpec, progress: Callable[[int, EpisodeResult], None] | None = None
) -> dict[int, EpisodeResult]:
    """One episode of a fresh policy on every test instance of ``task``."""
    env = make_task_env(task) if spec.kind == "agent" else None
    out: dict[int, EpisodeResult] = {}
    for seed in task.test:
        try:
            policy = spec.make()
            res = (
                agent_episode(task, seed, policy, env)
                if spec.kind == "agent"
                else balancer_episode(task, seed, policy)
            )
        except Exception as err:  # the user's code (or its action) failing: one line, no traceback
            if not spec.user:
                raise
            raise ConfigError(
                f"--policy {spec.label}", f"failed on test instance {seed}: {err!r}"
            ) from None
        out[seed] = res
        if progress is not None:
            progress(seed, res)
    return out


# ---------------------------------------------------------------------------- the reference table
def read_table(path: Path = REFERENCE_TABLE) -> dict[str, Any]:
    from pvegym.config import read_json

    doc: dict[str, Any] = read_json(path, "references", "the benchmark reference table")
    return doc


def reference_costs(table: dict[str, Any], task: Task) -> dict[str, np.ndarray]:
    """label → costs over the task's test seeds (in seed order), for every reference of the table
    that covers the whole split; an incomplete label is left out (its rows say how far it got)."""
    rows = table["tasks"][task.name]["policies"]
    out: dict[str, np.ndarray] = {}
    for label, by_seed in rows.items():
        if all(str(s) in by_seed for s in task.test):
            out[label] = np.array([by_seed[str(s)]["cost"] for s in task.test], dtype=float)
    return out


def reference_counts(table: dict[str, Any], task: Task, label: str) -> dict[str, int]:
    rows = table["tasks"][task.name]["policies"][label]
    return {k: int(sum(rows[str(s)][k] for s in task.test)) for k in RECORD_METRICS}


# ---------------------------------------------------------------------------- the statistics
def normalized(noop: np.ndarray, policy: np.ndarray, oracle: np.ndarray) -> float:
    """100 × (mean noop − mean policy) / (mean noop − mean oracle); NaN where the oracle gains
    nothing on average (the ratio is undefined)."""
    gain = float(noop.mean() - oracle.mean())
    return 100.0 * (float(noop.mean() - policy.mean()) / gain) if gain != 0.0 else math.nan


def normalized_ci(
    noop: np.ndarray, policy: np.ndarray, oracle: np.ndarray, name: str
) -> tuple[float, float]:
    """Paired percentile bootstrap 95 % CI of :func:`normalized` (instances resampled, the same
    indices for the three means; resamples where the denominator is 0 are left out)."""
    n = noop.size
    idx = rng(0, name).integers(0, n, size=(RESAMPLES, n))
    num = noop[idx].mean(axis=1) - policy[idx].mean(axis=1)
    den = noop[idx].mean(axis=1) - oracle[idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(den != 0.0, 100.0 * (num / den), np.nan)
    ratio = ratio[np.isfinite(ratio)]
    if ratio.size == 0:
        return (math.nan, math.nan)
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    return (float(lo), float(hi))


def instance_scores(noop: np.ndarray, costs: np.ndarray, oracle: np.ndarray) -> np.ndarray:
    """Per-instance scores on the task's scale: 100 × (noop_i − cost_i) / (mean noop − mean
    oracle). Their mean is the normalized score; defined on every instance (a per-instance
    denominator is 0 where nothing can be gained). What rliable's IQM and probability of
    improvement are computed over (higher is better)."""
    gain = float(noop.mean() - oracle.mean())
    return 100.0 * ((noop - costs) / gain) if gain != 0.0 else np.full(costs.shape, math.nan)


def iqm(scores: np.ndarray, name: str) -> dict[str, Any]:
    """rliable's IQM (25 % trimmed mean) of the instance scores with a percentile bootstrap
    95 % CI over instances. The value is rliable 1.2.0's ``metrics.aggregate_iqm`` line for
    line: ``scipy.stats.trim_mean(scores, proportiontocut=0.25, axis=None)``."""
    from scipy import stats

    if not np.isfinite(scores).all():
        return {"value": None, "ci95": [None, None]}
    value = float(stats.trim_mean(scores, proportiontocut=0.25, axis=None))
    idx = rng(0, name).integers(0, scores.size, size=(RESAMPLES, scores.size))
    boots = np.sort(scores[idx], axis=1)
    k = int(np.floor(0.25 * scores.size))  # scipy's trim_mean cuts this many off each end
    trimmed = boots[:, k : scores.size - k].mean(axis=1)
    lo, hi = np.percentile(trimmed, [2.5, 97.5])
    return {"value": value, "ci95": [float(lo), float(hi)]}


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """rliable's P(X > Y) of instance scores (Mann–Whitney U / n m; 0.5 when identical): rliable
    1.2.0's ``metrics.probability_of_improvement`` for one task, line for line (Agarwal et al.
    2021, its eq. for the probability of improvement; ties count one half)."""
    from scipy import stats

    if np.array_equal(x, y):
        return 0.5
    u, _ = stats.mannwhitneyu(x, y, alternative="greater")
    return float(u / (x.size * y.size))


def wins_losses_ties(costs: np.ndarray, ref: np.ndarray) -> dict[str, int]:
    """Per instance: a win is a strictly lower cost, a tie an equal one (bit for bit)."""
    return {
        "wins": int((costs < ref).sum()),
        "losses": int((costs > ref).sum()),
        "ties": int((costs == ref).sum()),
    }


def score(
    task: Task, label: str, results: dict[int, EpisodeResult], refs: dict[str, np.ndarray]
) -> dict[str, Any]:
    """Every figure of ``label`` (module doc) against the reference costs ``refs``."""
    seeds = list(task.test)
    costs = np.array([results[s].cost for s in seeds], dtype=float)
    noop, oracle = refs["noop"], refs[ORACLE_LABEL]
    inst = instance_scores(noop, costs, oracle)
    # one resampling of the instances per task, the same for every policy (and every label):
    # identical costs give identical intervals, and two policies' intervals share their draws
    tag = task.name
    value = normalized(noop, costs, oracle)
    lo, hi = normalized_ci(noop, costs, oracle, tag + "|score")
    counts = {k: int(sum(results[s].counts[k] for s in seeds)) for k in RECORD_METRICS}
    compared = {r: refs[r] for r in COMPARED if r in refs}
    return {
        "normalized_score": value,
        "ci95": [lo, hi],
        "mean_cost": float(costs.mean()),
        "costs": {str(s): results[s].cost for s in seeds},
        "iqm": iqm(inst, tag + "|iqm"),
        "probability_of_improvement": {
            r: probability_of_improvement(inst, instance_scores(noop, c, oracle))
            for r, c in compared.items()
        },
        "wins_losses_ties": {r: wins_losses_ties(costs, c) for r, c in compared.items()},
        "moves": counts["moves"],
        "constraints": {k: counts[k] for k in CONSTRAINTS},
    }


def results_from_table(table: dict[str, Any], task: Task, label: str) -> dict[int, EpisodeResult]:
    """A reference's episodes as the table holds them (for the leaderboard's reference rows)."""
    rows = table["tasks"][task.name]["policies"][label]
    return {
        s: EpisodeResult(
            float(rows[str(s)]["cost"]), {k: int(rows[str(s)][k]) for k in RECORD_METRICS}, 0.0
        )
        for s in task.test
    }


def check_table(table: dict[str, Any], task: Task) -> dict[str, np.ndarray]:
    """The table's complete references for ``task``; a table without ``noop`` or the oracle on
    every test instance cannot score (a :class:`ConfigError` naming what is missing)."""
    if task.name not in table.get("tasks", {}):
        raise ConfigError("references", f"the reference table has no task {task.name!r}")
    refs = reference_costs(table, task)
    for need in ("noop", ORACLE_LABEL):
        if need not in refs:
            raise ConfigError(
                f"references.tasks.{task.name}.policies.{need}",
                "missing or incomplete on the test split: regenerate the table "
                "(python -m pvegym.experiments.benchmark_references)",
            )
    return refs


def scores_document(task: Task, env_id: str, policies: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``scores.json``: the issue's schema (``task``, ``test_seeds``, ``policies``)."""
    return {
        "task": task.name,
        "env_id": env_id,
        "test_seeds": list(task.test),
        "score": "normalized_score = 100 × (mean noop − mean policy) / (mean noop − mean oracle) "
        "of BALANCER_COST over the test instances",
        "policies": policies,
    }


def report_lines(doc: dict[str, Any]) -> list[str]:
    """``report.md``: one row per policy."""
    head = (
        "| policy | score [95 % CI] | IQM | mean cost | moves | failed / osc / churn | "
        + " | ".join(f"W/L/T vs {r}" for r in COMPARED)
        + " |"
    )
    lines = [
        f"# Benchmark: {doc['env_id']} ({doc['task']}), {len(doc['test_seeds'])} test instances "
        f"({doc['test_seeds'][0]}–{doc['test_seeds'][-1]})",
        "",
        "Score: " + doc["score"] + "; noop = 0, oracle = 100 (docs/benchmark.md).",
        "",
        head,
        "|" + "---|" * (6 + len(COMPARED)),
    ]
    for label, p in doc["policies"].items():
        wlt = p["wins_losses_ties"]
        c = p["constraints"]
        q = p["iqm"]["value"]
        cells = [
            f"`{label}`",
            f"{_num(p['normalized_score'])} [{_num(p['ci95'][0])}, {_num(p['ci95'][1])}]",
            _num(q),
            f"{p['mean_cost']:,.0f}",
            str(p["moves"]),
            f"{c['moves_failed']} / {c['oscillations']} / {c['churn_moves']}",
            *(
                f"{wlt[r]['wins']}/{wlt[r]['losses']}/{wlt[r]['ties']}" if r in wlt else "n/a"
                for r in COMPARED
            ),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def finite_or_none(doc: Any) -> Any:
    """``doc`` with every non-finite float as ``None`` (JSON has no NaN: an undefined score)."""
    if isinstance(doc, dict):
        return {k: finite_or_none(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [finite_or_none(v) for v in doc]
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    return doc


def _num(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.1f}"


def _progress(label: str, total: int) -> Callable[[int, EpisodeResult], None]:
    """A one-line counter on stderr for ``label``'s episodes."""
    done = [0]

    def tick(seed: int, res: EpisodeResult) -> None:
        done[0] += 1
        end = "\n" if done[0] == total else ""
        print(f"\r{label}: {done[0]}/{total} instances", end=end, file=sys.stderr)
        sys.stderr.flush()

    return tick


def run_benchmark(
    task: Task,
    specs: list[PolicySpec],
    out: Path,
    table: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Score every ``specs`` policy on ``task`` and write ``out/scores.json`` and
    ``out/report.md`` (atomically); returns the scores document."""
    from pvegym.experiments.files import write_bytes_durable, write_json_atomic
    from pvegym.registration import task_id

    table = read_table() if table is None else table
    refs = check_table(table, task)
    policies: dict[str, dict[str, Any]] = {}
    for spec in specs:
        results = run_policy(
            task, spec, _progress(spec.label, len(task.test)) if progress else None
        )
        policies[spec.label] = score(task, spec.label, results, refs)
    doc = scores_document(task, task_id(task.name, task.version), policies)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "scores.json", finite_or_none(doc))
    text = "\n".join(report_lines(doc)) + "\n"
    write_bytes_durable(out / "report.md", lambda fh: fh.write(text.encode()))
    return doc


__all__ = [
    "COMPARED",
    "CONSTRAINTS",
    "RESAMPLES",
    "PolicySpec",
    "check_table",
    "finite_or_none",
    "instance_scores",
    "iqm",
    "normalized",
    "normalized_ci",
    "parse_spec",
    "probability_of_improvement",
    "read_table",
    "report_lines",
    "results_from_table",
    "run_benchmark",
    "run_policy",
    "score",
    "scores_document",
    "wins_losses_ties",
]
