"""Study files: a bad one is one line on stderr naming the key path, exit code 2 (``pvegym tune``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvegym.tuning.study import redact
from pvegym.tuning.study_config import load_study_config
from tests.conftest import RunCli, variant

GOOD = """
name = "cfg-tiny"
n_trials = 2
constraints = ["failed_repeats <= 0"]
[policy]
name = "patched"
[params.min_improvement]
low = 0.0
high = 0.3
[params.ema_alpha]
low = 0.05
high = 1.0
log = true
[params.hold_duration]
low = 1
high = 5
int = true
[params.boost_factor]
target = "scenario.migration.boost_factor"
low = 1.1
high = 2.5
[[objectives]]
name = "cost"
weights = { guest_stall_s = 1.0, moves = 60.0 }
[[train]]
name = "failure-loop"
seeds = [0, 1]
[[train]]
name = "small"
seeds = [0]
[[test]]
name = "failure-loop"
seeds = [10, 11]
[[test]]
name = "small"
seeds = [1000000]
"""


def test_the_good_file_loads_with_defaults_and_splits(tmp_path: Path) -> None:
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    cfg = load_study_config(path)
    assert cfg.train[1].split == "train" and cfg.test[1].split == "test"
    assert cfg.params["min_improvement"].target == "policy.min_improvement"
    assert cfg.defaults()["boost_factor"] == 1.5
    policy, scenario = cfg.split_values({"min_improvement": 0.2, "boost_factor": 2.0})
    assert policy == {"min_improvement": 0.2}
    assert scenario == {"migration.boost_factor": 2.0}
    assert cfg.study_hash() != cfg.config_hash()  # the budget is not part of the study's identity


def test_the_default_objective_is_the_benchmark_cost(tmp_path: Path) -> None:
    from pvegym.sim.cost import BALANCER_COST

    path = tmp_path / "no-objective.toml"
    path.write_text(
        GOOD.replace(
            '[[objectives]]\nname = "cost"\nweights = { guest_stall_s = 1.0, moves = 60.0 }\n', ""
        )
    )
    cfg = load_study_config(path)
    assert [o.terms() for o in cfg.objectives] == [BALANCER_COST]


@pytest.mark.parametrize(
    ("change", "key"),
    [
        # unknown parameter: not a constant of the policy
        (("[params.min_improvement]", "[params.min_improvment]"), "params.min_improvment.target"),
        # unknown parameter: not a migration setting
        (("scenario.migration.boost_factor", "scenario.migration.boost"), "params.boost_factor"),
        # an empty range
        (("low = 0.0\nhigh = 0.3", "low = 0.3\nhigh = 0.1"), "params.min_improvement.high"),
        # a log scale over zero
        (
            ("low = 0.05\nhigh = 1.0\nlog = true", "low = 0.0\nhigh = 1.0\nlog = true"),
            "ema_alpha.low",
        ),
        # a bound the policy itself refuses (ema_alpha must be in (0, 1])
        (("low = 0.05\nhigh = 1.0", "low = 0.05\nhigh = 2.0"), "params.ema_alpha.high"),
        # int with a fractional bound
        (("low = 1\nhigh = 5", "low = 1.5\nhigh = 5"), "params.hold_duration.low"),
        # unknown metric in an objective, in a constraint
        (("guest_stall_s = 1.0", "guest_stal_s = 1.0"), "objectives[0].weights.guest_stal_s"),
        (('"failed_repeats <= 0"', '"failed_repeat <= 0"'), "constraints[0]"),
        # overlapping train/test instances
        (("seeds = [10, 11]", "seeds = [10, 1]"), "test[0].seeds[1]"),
        # a family's test seed in the training suite
        (('name = "small"\nseeds = [0]', 'name = "small"\nseeds = [1000001]'), "train[1].seeds[0]"),
        # Wilcoxon with several objectives
        (
            (
                '[[objectives]]\nname = "cost"',
                '[pruner]\ntype = "wilcoxon"\n[[objectives]]\nmetric = "moves"\n[[objectives]]\nname = "cost"',
            ),
            "pruner.type",
        ),
        (
            ("[params.min_improvement]", "[params.min_improvement]\nfoo = 1"),
            "params.min_improvement.foo",
        ),
    ],
)
def test_bad_study_files_are_one_line_naming_the_key(
    tmp_path: Path, cli: RunCli, change: tuple[str, str], key: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(variant(GOOD, change, count=1))
    code, out, err = cli("tune", str(path), "--storage", f"sqlite:///{tmp_path}/s.db")
    assert code == 2, err
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert key in err, err
    assert not (tmp_path / "s.db").exists()  # refused before any study was created


def test_a_missing_file_is_exit_2(tmp_path: Path, cli: RunCli) -> None:
    code, _, err = cli("tune", str(tmp_path / "nope.toml"))
    assert code == 2 and "nope.toml" in err


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u@h/db", "postgresql://u@h/db"),  # no password: nothing to hide
        (
            "postgresql+psycopg://user:s3cr%40t@host:5432/db",
            "postgresql+psycopg://user:***@host:5432/db",
        ),
        ("sqlite:///results/t/study.db", "sqlite:///results/t/study.db"),
        ("not a url with:secret@", "<storage URL>"),
    ],
)
def test_storage_urls_are_shown_without_their_password(url: str, shown: str) -> None:
    assert redact(url) == shown
