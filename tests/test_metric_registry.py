"""The metric registry: one entry plus the code that measures it is a metric everywhere.

A metric registered at run time (the seconds the balancer's failed motions took, measured from
the episode's moves) must appear in ``simulate --json`` and its text summary, in a run's
``metrics.csv`` and ``summary.md``, and be usable as a tuning objective and constraint — with
nothing else changed. The built-in registry must agree with the public names of ``docs/metrics.md``.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest

from pvegym.policies import make_policy
from pvegym.sim import catalog
from pvegym.sim.metrics import (
    ABLATION,
    GLANCE,
    HEADLINE,
    METRIC_KEYS,
    Metrics,
    MetricSpec,
    additive_metrics,
    extra_metrics,
    metric_spec,
    metrics_in,
    register_metric,
    unregister_metric,
)
from pvegym.sim.simulation import Simulation
from pvegym.tuning.study import run_study
from pvegym.tuning.study_config import load_study_config
from tests.conftest import RunCli

NAME = "failed_motion_s"

#: docs/metrics.md, in its order: the public names
SECTION_9 = (
    *("sim_seconds", "moves", "moves_succeeded", "moves_failed", "moves_aborted"),
    *("failed_repeats", "oscillations", "max_moves_one_guest", "churn_moves", "stall_cpu_s"),
    *("stall_mem_s", "guest_stall_s", "cpu_shortfall_core_s", "migration_bytes"),
    *("migration_seconds", "downtime_s", "evacuation_latency_s", "imbalance_mean"),
)
#: issue 17's built-ins beyond the first metric set, each after the metric it refines: a live migration that
#: succeeded but paused its guest ≥ 10 s, a guest killed by the OOM killer
BEYOND_9 = {"moves_aborted": "moves_guest_failed", "stall_mem_s": "oom_kills"}
#: issue 16's: what failures and maintenance make measurable, after the first set
FAILURES_16 = ("recovery_s", "services_down_s", "maintenance_moves")
BUILTIN_ORDER = (
    *(name for s9 in SECTION_9 for name in (s9, BEYOND_9.get(s9)) if name is not None),
    *FAILURES_16,
)


def failed_motion_seconds(m: Metrics) -> float:
    """Σ over the motions that ended failed or aborted of their duration (s)."""
    return sum(
        mv.t_end - mv.t
        for mv in m.moves
        if mv.outcome in ("failed", "aborted") and mv.t_end is not None
    )


@pytest.fixture
def extra_metric() -> Iterator[MetricSpec]:
    spec = register_metric(
        MetricSpec(
            NAME,
            "s",
            "lower",
            "Σ duration of the motions that failed",
            True,
            failed_motion_seconds,
            tables=frozenset({GLANCE}),
        )
    )
    try:
        yield spec
    finally:
        unregister_metric(NAME)


def expected_from_moves(moves: list[dict[str, float | str | None]]) -> float:
    total = 0.0
    for mv in moves:
        if mv["outcome"] in ("failed", "aborted") and mv["t_end"] is not None:
            total += float(mv["t_end"]) - float(mv["t"])  # type: ignore[arg-type]
    return total


def test_builtin_registry_is_section_9() -> None:
    assert tuple(METRIC_KEYS) == BUILTIN_ORDER
    assert extra_metrics() == ()
    assert metric_spec("migration_bytes").shown_unit == "GiB"
    assert metrics_in(GLANCE) == (
        "moves",
        "moves_failed",
        "moves_guest_failed",
        "oscillations",
        "churn_moves",
        "stall_cpu_s",
        "guest_stall_s",
        "imbalance_mean",
    )
    assert set(metrics_in(HEADLINE)) <= set(metrics_in(GLANCE))
    assert "evacuation_latency_s" in metrics_in(ABLATION)
    # a mean, a maximum and two latencies do not add up round by round
    assert {s.name for s in additive_metrics()} == set(BUILTIN_ORDER) - {
        "max_moves_one_guest",
        "evacuation_latency_s",
        "imbalance_mean",
        "recovery_s",
    }


def test_registration_is_checked() -> None:
    spec = metric_spec("moves")
    with pytest.raises(ValueError, match="already registered"):
        register_metric(spec)
    with pytest.raises(ValueError, match="unknown tables"):
        register_metric(
            MetricSpec("x_metric", "s", "lower", "", True, lambda m: 0.0, tables=frozenset({"t"}))
        )
    with pytest.raises(ValueError, match="built-in"):
        unregister_metric("moves")
    with pytest.raises(KeyError, match="unknown metric 'movez'"):
        metric_spec("movez")


@pytest.mark.parametrize(
    ("scenario", "sets"),
    [("failure-loop", {}), ("nonconverging-migration", {"migration.qemu_server": "patched"})],
)
def test_additive_metrics_add_up_round_by_round(scenario: str, sets: dict[str, str]) -> None:
    """Each additive built-in metric measured on the running record after every round: an
    accumulation of non-negative per-round contributions (never decreasing — bytes of a running
    migration count as they are sent and stay counted when it ends or aborts), whose last value
    is the episode's result."""
    sim = Simulation(catalog.scenario(scenario, overrides=sets), 0)
    policy = make_policy("upstream")
    policy.reset(0)
    specs = additive_metrics()
    view = sim.reset()
    running = [{s.name: s.measure(sim.metrics) for s in specs}]
    for _ in range(45):
        view = sim.step(policy.decide(view))
        running.append({s.name: s.measure(sim.metrics) for s in specs})
    final = sim.result()["metrics"]
    for s in specs:
        steps = [b[s.name] - a[s.name] for a, b in itertools.pairwise(running)]
        assert min(steps) >= 0, (s.name, steps)
        assert running[-1][s.name] == final[s.name]
    assert final["moves_failed"] > 0 and final["migration_bytes"] >= 0
    if scenario == "nonconverging-migration":  # aborted after 4 passes: bytes kept after the end
        assert final["moves_aborted"] == 1 and final["migration_bytes"] > 4 * 20 * 2**30


def test_a_metric_registered_at_run_time_is_in_simulate(
    extra_metric: MetricSpec, cli: RunCli
) -> None:
    code, out, _ = cli(
        "simulate", "--scenario", "failure-loop", "--policy", "upstream", "--duration", "5m",
        "--json",
    )  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert list(doc["metrics"]) == sorted([*METRIC_KEYS])  # sorted keys, every metric
    value = doc["metrics"][NAME]
    assert value == pytest.approx(expected_from_moves(doc["moves"]))
    assert value > 0  # failure-loop's upstream retries a failing motion
    code, text, _ = cli("simulate", "--scenario", "failure-loop", "--duration", "5m")
    assert code == 0 and f"  {NAME} " in text


def test_a_metric_registered_at_run_time_is_in_a_report(
    extra_metric: MetricSpec, cli: RunCli, tmp_path: Path
) -> None:
    exp = tmp_path / "extra.toml"
    exp.write_text(
        'name = "extra"\n[episode]\nduration = "3m"\n[report]\ntimeline_seeds = 0\n'
        'bootstrap_resamples = 100\n[[scenarios]]\nname = "failure-loop"\nseeds = [0, 1]\n'
        '[[policies]]\nname = "noop"\n[[policies]]\nname = "upstream"\n'
    )
    out = tmp_path / "out"
    code, _, err = cli("run", str(exp), "--out", str(out), "--quiet")
    assert code == 0, err
    with (out / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[-1] == NAME
    records = {(r["policy"], r["seed"]): r for r in rows}
    for (policy, seed), row in records.items():
        rec = json.loads(
            (out / "records" / "failure-loop" / policy / f"seed-{seed}.json").read_text()
        )
        assert float(row[NAME]) == pytest.approx(rec["metrics"][NAME])
    assert float(records[("upstream", "0")][NAME]) > 0
    assert float(records[("noop", "0")][NAME]) == 0
    summary = (out / "summary.md").read_text()
    assert f"| `{NAME}` | s |" in summary  # the per-scenario table
    assert f"{NAME} (s)" in summary  # the at-a-glance table it asked for
    assert (out / "plots" / "compare-failure-loop.png").is_file()


def test_a_metric_registered_at_run_time_is_a_tuning_objective(
    extra_metric: MetricSpec, tmp_path: Path
) -> None:
    study = tmp_path / "t-extra.toml"
    study.write_text(
        'name = "t-extra"\nn_trials = 2\n'
        f'constraints = ["{NAME} <= 100000"]\n'
        '[policy]\nname = "patched"\n'
        "[params.backoff_base_s]\nlow = 10.0\nhigh = 300.0\n"
        f'[[objectives]]\nmetric = "{NAME}"\n'
        "[sampler]\nseed = 3\nn_startup_trials = 2\n"
        '[[train]]\nname = "failure-loop"\nseeds = [0]\nduration = "5m"\n'
        '[[test]]\nname = "failure-loop"\nseeds = [10]\nduration = "5m"\n'
    )
    cfg = load_study_config(study)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    run_study(cfg, url, progress=False)
    trials = optuna.load_study(study_name="t-extra", storage=url).trials
    assert len(trials) == 2
    for t in trials:
        assert t.values[0] == pytest.approx(t.user_attrs["metrics_mean"][NAME])
        assert t.values[0] > 0  # patched still tries the failing motion, backing off
        assert t.user_attrs["constraints"] == {
            f"{NAME} <= 100000": pytest.approx(t.values[0] - 1e5)
        }
