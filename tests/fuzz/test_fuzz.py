"""The fuzz suite: every input kind, mutated; each case exits 0 with valid output or 2 with one
line — never a traceback, a hang (10 s) or a memory overrun (1 GiB). ``tests/fuzz/conftest.py``
judges the cases; ``kinds.py`` and ``mutate.py`` make them.

CI runs a derandomized sample (``CI_CASES`` per kind, ≥ 1,000 in all); ``pytest tests/fuzz
--fuzz`` runs ten times as many with fresh random draws (``--fuzz-scale X`` for X times). The
per-kind table is printed at the end of the session. Every kind must also run (pass validation
and produce output) in at least a quarter of its cases: mutations of valid inputs, not only
garbage.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from kinds import (  # type: ignore[import-not-found]
    EXPERIMENT,
    STORAGE_STUDY,
    Case,
    _agent_files,
    cli_case,
    experiment_case,
    model_case,
    record_case,
    scenario_bases,
    scenario_case,
    set_case,
    storage_case,
    study_case,
    trace_case,
    train_case,
    upstream_case,
)
from mutate import to_toml  # type: ignore[import-not-found]

pytest.importorskip("sb3_contrib")

#: cases per kind in CI (derandomized); ``--fuzz`` multiplies them by 10. The kinds that start a
#: process or run episodes (cli, experiment, study, storage, train: ~0.9 CPU-s a case) have fewer
#: cases than the in-process kinds (~0.05 CPU-s), so that the CI mode's ≥ 1,000 cases fit in 3 min
CI_CASES = {
    "scenario": 220,
    "set": 240,
    "cli": 50,
    "record": 140,
    "trace": 120,
    "upstream": 190,
    "model": 90,
    "experiment": 15,
    "study": 10,
    "storage": 20,
    "train": 10,
}


@pytest.fixture(scope="module")
def records(fuzz: Any, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    exp = {**EXPERIMENT, "policies": [{"name": "upstream"}, {"name": "patched"}]}
    d = tmp_path_factory.mktemp("records")
    from pvegym.experiments.config import load_experiment
    from pvegym.experiments.runner import run_experiment

    (d / "exp.toml").write_text(to_toml(exp))
    run_experiment(load_experiment(d / "exp.toml"), d / "out", progress=False)
    docs = [json.loads(p.read_text()) for p in sorted((d / "out" / "records").rglob("*.json"))]
    from pvegym.sim.scenarios import scenario_data

    with_data = dict(docs[0])
    with_data["scenario_data"] = scenario_data(docs[0]["scenario"])
    return [*docs, with_data]


@pytest.fixture(scope="module")
def valid_db(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    d = tmp_path_factory.mktemp("db")
    from pvegym.tuning.study import run_study
    from pvegym.tuning.study_config import study_from_dict

    run_study(study_from_dict(STORAGE_STUDY), f"sqlite:///{d}/s.db", progress=False)
    return (d / "s.db").read_bytes()


def _fuzz_kind(fuzz: Any, kind: str, strategy: st.SearchStrategy[Case]) -> None:
    @settings(
        max_examples=fuzz.cases(CI_CASES[kind]),
        derandomize=not fuzz.long,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def body(case: Case) -> None:
        batch.append(case)
        if len(batch) >= 4 * fuzz.jobs:  # run on parallel fork servers, a batch at a time
            fuzz.run_all(batch)
            batch.clear()

    batch: list[Case] = []
    body()
    fuzz.run_all(batch)
    stats = fuzz.tally.kinds[kind]
    problems = [f"{len(v)}× {k}" for k, v in sorted(stats.signatures.items())]
    assert not problems, f"{kind}: {stats.failures} of {stats.cases} cases failed: " + "; ".join(
        problems
    )
    ran = stats.verdicts["ran"]
    assert ran * 4 >= stats.cases, f"{kind}: only {ran} of {stats.cases} cases ran (want ≥ 1/4)"


def test_scenario_files(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "scenario", scenario_case(scenario_bases()))


def test_set_values(fuzz: Any) -> None:
    from pvegym.sim.scenarios import scenario_data

    names = ("failure-loop", "dominant-oscillation", "pressure-evacuation", "contended-3node")
    bases = {n: json.loads(json.dumps(scenario_data(n))) for n in names}
    _fuzz_kind(fuzz, "set", set_case(bases))


def test_cli_flags(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "cli", cli_case())


def test_records(fuzz: Any, records: list[dict[str, Any]]) -> None:
    _fuzz_kind(fuzz, "record", record_case(records))


def test_traces(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "trace", trace_case())


def test_upstream_test_directories(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "upstream", upstream_case())


def test_model_files(fuzz: Any) -> None:
    names = ("train-ppo", "train-maskable-ppo", "train-proposals-explore")
    agents = {n: _agent_files(n) for n in names}
    _fuzz_kind(fuzz, "model", model_case(agents))


def test_experiment_files(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "experiment", experiment_case())


def test_study_files(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "study", study_case())


def test_study_storages(fuzz: Any, valid_db: bytes) -> None:
    _fuzz_kind(fuzz, "storage", storage_case(valid_db))


def test_train_files(fuzz: Any) -> None:
    _fuzz_kind(fuzz, "train", train_case())
