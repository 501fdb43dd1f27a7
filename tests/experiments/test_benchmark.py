"""The benchmark (issue 30, docs/benchmark.md): tasks and splits, the score's definition, any
policy by SPEC, the shipped reference table re-simulated bit for bit, the oracle on top."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.experiments import benchmark as B
from pvegym.experiments.benchmark_episodes import (
    ORACLE_LABEL,
    PATCHED_TUNED,
    REFERENCES,
    balancer_episode,
    make_reference,
)
from pvegym.sim.families import FAMILIES, TEST_SEEDS
from pvegym.sim.tasks import RESERVED_SEEDS, TASKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table() -> dict:
    return B.read_table()


# ---------------------------------------------------------------------------- tasks and splits
@pytest.mark.parametrize("name", list(TASKS))
def test_splits_are_fixed_disjoint_and_where_the_issue_puts_them(name: str) -> None:
    t = TASKS[name]
    assert range(1_000_000, 1_001_000) == TEST_SEEDS
    assert t.test.start == 1_000_000 and len(t.test) >= 50 and t.test.step == 1
    assert set(t.test) <= set(TEST_SEEDS) and not set(t.test) & set(RESERVED_SEEDS)
    family = FAMILIES[t.family]
    assert set(t.train) | set(t.validation) <= set(family.train_seeds)
    assert not set(t.train) & set(t.validation)


def _seeds(doc: object) -> list[int]:
    """Every seed a config names: the values under any key with "seed" in its name (a list, a
    ``{start, count}`` block or one number), anywhere in the document."""
    out: list[int] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if "seed" in str(key):
                if isinstance(value, dict) and {"start", "count"} <= set(value):
                    out += list(range(value["start"], value["start"] + value["count"]))
                elif isinstance(value, list):
                    out += [v for v in value if isinstance(v, int)]
                elif isinstance(value, int) and not isinstance(value, bool):
                    out.append(value)
            out += _seeds(value)
    elif isinstance(doc, list):
        for value in doc:
            out += _seeds(value)
    return out


def test_no_committed_experiment_or_result_uses_a_reserved_seed() -> None:
    docs = {p: tomllib.loads(p.read_text()) for p in (ROOT / "experiments").glob("*.toml")}
    docs.update({p: json.loads(p.read_text()) for p in (ROOT / "results").glob("*/config.json")})
    found = {p.name: _seeds(d) for p, d in docs.items()}
    assert sum(len(v) for v in found.values()) > 100  # the walker finds the seeds at all
    used = [(name, s) for name, seeds in found.items() for s in seeds if s in RESERVED_SEEDS]
    assert not used


@pytest.mark.parametrize("name", list(TASKS))
def test_registered_spec_carries_the_task_settings(name: str) -> None:
    import gymnasium as gym

    from pvegym.registration import task_ids
    from pvegym.sim import catalog
    from pvegym.sim.cost import BALANCER_COST

    env_id = task_ids()[name]
    assert env_id == f"pvegym/{name.capitalize()}-v1"
    spec = gym.spec(env_id)
    scn = catalog.scenario(TASKS[name].family, TASKS[name].test.start)
    assert spec.max_episode_steps == round(scn.duration / scn.round_s)  # the real episode
    assert spec.kwargs["reward_weights"] == BALANCER_COST
    assert spec.kwargs["reward_baseline"] == "noop"


def test_info_carries_the_action_mask_through_make() -> None:
    import gymnasium as gym

    env = gym.make("pvegym/Small-v1")
    _, info = env.reset(seed=1_000_000)
    masks = env.unwrapped.action_masks()  # type: ignore[attr-defined]
    assert np.array_equal(info["action_mask"], masks)
    rng = np.random.default_rng(0)
    for _ in range(30):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        _, _, _, _, info = env.step(action)
        assert np.array_equal(info["action_mask"], env.unwrapped.action_masks())  # type: ignore[attr-defined]


def test_vector_infos_batch_the_action_mask() -> None:
    import gymnasium as gym

    venv = gym.make_vec("pvegym/Small-v1", num_envs=2, autoreset_mode="same_step")
    _, infos = venv.reset(seed=1_000_000)
    assert np.array_equal(infos["action_mask"], venv.action_masks())  # type: ignore[attr-defined]
    for _ in range(5):
        _, _, _, _, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert np.array_equal(infos["action_mask"], venv.action_masks())  # type: ignore[attr-defined]


def test_the_return_with_the_noop_twin_is_the_score_numerator() -> None:
    """Small-v1's reward is measured against the noop twin: an episode's return is noop cost −
    policy cost, the cost being BALANCER_COST."""
    import gymnasium as gym

    from pvegym.policies.env_adapter import HeuristicAgent

    t, seed = TASKS["small"], 1_000_003
    env = gym.make("pvegym/Small-v1")
    got = HeuristicAgent("patched").run_episode(env, seed=seed)
    noop = balancer_episode(t, seed, make_reference("noop")).cost
    policy = balancer_episode(t, seed, make_reference("patched")).cost
    # the return telescopes 360 per-round float increments: equal up to their rounding
    assert got["return"] == pytest.approx(noop - policy, rel=1e-9, abs=1e-6)


# ---------------------------------------------------------------------------- the statistics
def test_normalized_score_is_the_ratio_of_means() -> None:
    noop = np.array([10.0, 20.0, 30.0, 40.0])
    oracle = np.array([10.0, 10.0, 20.0, 20.0])  # instance 0: nothing to gain
    policy = np.array([12.0, 15.0, 30.0, 25.0])
    expected = 100 * (noop.mean() - policy.mean()) / (noop.mean() - oracle.mean())
    assert B.normalized(noop, policy, oracle) == pytest.approx(expected)
    assert B.normalized(noop, noop, oracle) == 0.0
    assert B.normalized(noop, oracle, oracle) == 100.0
    assert math.isnan(B.normalized(noop, policy, noop))  # undefined, not 0 or inf
    assert B.instance_scores(noop, policy, oracle).mean() == pytest.approx(expected)


def test_bootstrap_resamples_the_three_means_with_the_same_indices() -> None:
    rng = np.random.default_rng(1)
    noop = rng.uniform(100, 200, 30)
    oracle = noop - rng.uniform(10, 50, 30)
    lo, hi = B.normalized_ci(noop, noop, oracle, "t")
    assert lo == hi == 0.0  # paired: noop against itself is 0 in every resample
    lo, hi = B.normalized_ci(noop, oracle, oracle, "t")
    assert lo == hi == 100.0
    policy = noop - 0.5 * (noop - oracle) + rng.normal(0, 5, 30)
    lo, hi = B.normalized_ci(noop, policy, oracle, "t")
    assert lo < B.normalized(noop, policy, oracle) < hi


def test_rliable_figures() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 100.0, -100.0, 5.0, 6.0])
    assert B.iqm(x, "t")["value"] == pytest.approx(np.sort(x)[2:6].mean())
    assert B.probability_of_improvement(x + 1000.0, x) == 1.0
    assert B.probability_of_improvement(x, x) == 0.5
    assert B.wins_losses_ties(np.array([1.0, 2, 3]), np.array([2.0, 2, 2])) == {
        "wins": 1,
        "losses": 1,
        "ties": 1,
    }


def test_iqm_and_probability_of_improvement_are_rliables_bit_for_bit() -> None:
    """The two figures are rliable 1.2.0's functions written with scipy (rliable is not a
    dependency); where rliable is installed, they agree with it exactly."""
    metrics = pytest.importorskip("rliable.metrics")
    gen = np.random.default_rng(7)
    for n in (1, 2, 7, 50):
        x = gen.normal(50, 30, n)
        y = np.round(gen.normal(50, 30, n))
        assert B.iqm(x, "t")["value"] == float(metrics.aggregate_iqm(x[:, None]))
        for a, b in ((x, y), (y, x), (x, x), (y, y.copy())):
            assert B.probability_of_improvement(a, b) == float(
                metrics.probability_of_improvement(a[:, None], b[:, None])
            )


# ---------------------------------------------------------------------------- any policy
def test_a_module_attr_agent_whose_action_is_invalid_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad_agents.py").write_text(
        "class Wild:\n"
        "    def act(self, observation, action_mask):\n"
        "        return len(action_mask)\n"  # one past the last action
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = B.parse_spec("bad_agents:Wild")
    with pytest.raises(ConfigError) as err:
        B.run_policy(TASKS["small"], spec)
    assert err.value.path == "--policy bad_agents:Wild"
    assert "test instance 1000000" in err.value.message and "outside Discrete" in err.value.message


def test_module_attr_scores_like_the_registered_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_agents.py").write_text(
        "from pvegym.policies.patched import PatchedPolicy\n"
        "def balancer():\n"
        "    return PatchedPolicy()\n"
        "class Idle:\n"
        "    def act(self, observation, action_mask):\n"
        "        assert action_mask[0]\n"
        "        return 0\n"
    )
    monkeypatch.chdir(tmp_path)
    t = TASKS["small"]
    registered = B.run_policy(t, B.parse_spec("patched"))
    by_module = B.run_policy(t, B.parse_spec("my_agents:balancer"))
    assert {s: r.cost for s, r in by_module.items()} == {s: r.cost for s, r in registered.items()}
    assert any(r.counts["moves"] for r in registered.values())  # not a policy that never moves
    idle = B.run_policy(t, B.parse_spec("my_agents:Idle"))  # through the environment
    noop = B.run_policy(t, B.parse_spec("noop"))
    assert {s: r.cost for s, r in idle.items()} == {s: r.cost for s, r in noop.items()}


def test_a_registered_policy_takes_constants_a_reference_label_does_not() -> None:
    spec = B.parse_spec("patched,threshold=0.2,hold_duration=2")
    assert spec.label == "patched,threshold=0.2,hold_duration=2"
    policy = spec.make()
    assert policy.config.threshold == 0.2 and policy.config.hold_duration == 2
    with pytest.raises(ConfigError, match="reference"):
        B.parse_spec("patched-tuned,threshold=0.2")


@pytest.mark.parametrize(
    "spec",
    [
        "nosuch",
        "patched,nosuch=1",
        "patched,threshold=x",
        "no_such_module:make",
        "pvegym.sim.tasks:nothing",
        "noop,x=1",
        "os:system",  # a factory that raises when called with no arguments
        "os:getcwd",  # neither a Balancer nor an agent
        ":",
        "learned:no-such-run",
    ],
)
def test_a_bad_spec_is_one_config_error(spec: str) -> None:
    with pytest.raises(ConfigError) as err:
        B.parse_spec(spec)
    assert err.value.path == f"--policy {spec}"


def test_patched_tuned_is_the_studys_best_trial() -> None:
    best = json.loads((ROOT / "results/tune-patched/best_params.json").read_text())
    assert best["best"]["policy"]["params"] == PATCHED_TUNED


# ---------------------------------------------------------------------------- the reference table
@pytest.mark.parametrize("name", list(TASKS))
@pytest.mark.parametrize("label", ["noop", "patched"])
def test_reference_table_is_bit_for_bit_current(table: dict, name: str, label: str) -> None:
    t = TASKS[name]
    rows = table["tasks"][name]["policies"][label]
    for seed in (t.test.start, t.test.stop - 1):
        got = balancer_episode(t, seed, make_reference(label)).record()
        assert got == rows[str(seed)], f"{name} {label} {seed}: regenerate the table"


def test_reference_table_oracle_row_is_bit_for_bit_current(table: dict) -> None:
    """The oracle defines 100: a change to the look-ahead (not part of the model fingerprint the
    noop/patched check guards) must not leave its rows stale either (~1 s on small)."""
    t = TASKS["small"]
    seed = t.test.stop - 1  # the last, as the noop/patched check (8 oracle moves on small)
    got = balancer_episode(t, seed, make_reference(ORACLE_LABEL)).record()
    assert got == table["tasks"]["small"]["policies"][ORACLE_LABEL][str(seed)], "regenerate"


@pytest.mark.parametrize("name", list(TASKS))
def test_table_covers_every_test_instance(table: dict, name: str) -> None:
    rows = table["tasks"][name]["policies"]
    for label in [*REFERENCES, ORACLE_LABEL]:
        assert set(rows[label]) == {str(s) for s in TASKS[name].test}, label


@pytest.mark.parametrize("name", list(TASKS))
def test_oracle_mean_cost_is_below_every_reference(table: dict, name: str) -> None:
    refs = B.reference_costs(table, TASKS[name])
    oracle = refs.pop(ORACLE_LABEL)
    for label, costs in refs.items():
        assert oracle.mean() < costs.mean(), label


# ---------------------------------------------------------------------------- the command
def test_cli_scores_noop_zero_without_warnings(tmp_path: Path, table: dict) -> None:
    out = tmp_path / "D"
    proc = subprocess.run(
        [sys.executable, "-m", "pvegym", "benchmark", "small", "--policy", "noop",
         "--policy", "patched", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warn" not in (proc.stdout + proc.stderr).lower()
    doc = json.loads((out / "scores.json").read_text())
    assert doc["task"] == "small" and doc["test_seeds"] == list(TASKS["small"].test)
    noop, patched = doc["policies"]["noop"], doc["policies"]["patched"]
    assert noop["normalized_score"] == 0.0
    for key in ("normalized_score", "ci95", "mean_cost", "costs", "iqm", "wins_losses_ties"):
        assert key in patched
    assert patched["costs"] == {
        s: r["cost"] for s, r in table["tasks"]["small"]["policies"]["patched"].items()
    }
    assert (out / "report.md").read_text().count("`patched`") == 1
    # the committed leaderboard's figures (python -m pvegym.experiments.leaderboard) are these
    board = json.loads((ROOT / "results/benchmark/small/scores.json").read_text())
    for label in ("noop", "patched"):
        for key in ("normalized_score", "ci95", "costs", "iqm", "wins_losses_ties", "constraints"):
            assert doc["policies"][label][key] == board["policies"][label][key], (label, key)


def test_cli_bad_spec_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pvegym", "benchmark", "small", "--policy", "nosuch",
         "--out", str(tmp_path / "D")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "nosuch" in proc.stderr
