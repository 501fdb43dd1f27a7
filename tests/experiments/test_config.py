"""Experiment files: validation errors name the key path; ``extends`` merges; configs round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest

from pvegym.config import load
from pvegym.errors import ConfigError
from pvegym.experiments.config import Experiment, load_experiment
from pvegym.sim.metrics import METRIC_KEYS
from tests.conftest import variant

GOOD = """
description = "tiny"
[episode]
duration = "2m"
[[scenarios]]
name = "failure-loop"
seeds = [0, 1]
[[policies]]
name = "noop"
[[policies]]
name = "upstream"
params = { threshold = 0.4 }
"""


def _write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(tmp_path: Path, text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_experiment(_write(tmp_path, text))
    return info.value


def test_a_good_file_loads_with_defaults(tmp_path: Path) -> None:
    exp = load_experiment(_write(tmp_path, GOOD, "tiny-one.toml"))
    assert exp.name == "tiny-one"  # the file's stem
    assert exp.out_name == "tiny-one"
    assert exp.metrics == METRIC_KEYS
    assert exp.episode.duration == 120.0
    assert [s.seeds for s in exp.scenarios] == [(0, 1)]
    assert [p.key for p in exp.policies] == ["noop", "upstream"]
    assert exp.policies[1].params == {"threshold": 0.4}


def test_seed_ranges_and_family_splits(tmp_path: Path) -> None:
    exp = load_experiment(
        _write(
            tmp_path,
            GOOD.replace("seeds = [0, 1]", "seeds = { start = 3, count = 4 }")
            + '[[scenarios]]\nname = "small"\nseeds = { start = 1000000, count = 2 }\n'
            + '[[scenarios]]\nname = "small"\nlabel = "small-train"\nsplit = "train"\nseeds = [5]\n',
        )
    )
    assert exp.scenarios[0].seeds == (3, 4, 5, 6)
    assert exp.scenarios[1].seeds == (1000000, 1000001)
    assert exp.scenarios[2].key == "small-train"


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (('name = "upstream"', 'name = "upstreem"'), "policies[1].name"),
        (("seeds = [0, 1]", "seed = [0, 1]"), "scenarios[0].seed"),
        (("[[policies]]", "[[polices]]"), "polices"),
        (("seeds = [0, 1]", "seeds = []"), "scenarios[0].seeds"),
        (('name = "failure-loop"', 'name = "failure-lop"'), "scenarios[0].name"),
        (("threshold = 0.4", "threshold = -1"), "policies[1].params.threshold"),
        (("threshold = 0.4", "treshold = 0.4"), "policies[1].params.treshold"),
        (("seeds = [0, 1]", "seeds = [0, 0]"), "scenarios[0].seeds[1]"),
        (("seeds = [0, 1]", "seeds = { start = 0, count = 0 }"), "scenarios[0].seeds.count"),
        (('duration = "2m"', 'duration = "two minutes"'), "episode.duration"),
        (
            ("seeds = [0, 1]", 'seeds = [0]\nset = { "nodes[0].maxcpu" = 0 }'),
            "scenarios[0].set",
        ),
        (("seeds = [0, 1]", 'seeds = [0]\nset = { "nodez.x" = 1 }'), "scenarios[0].set"),
        (("seeds = [0, 1]", 'seeds = [0]\nqemu_server = "yes"'), "scenarios[0].qemu_server"),
    ],
)
def test_errors_name_the_key_path(tmp_path: Path, change: tuple[str, str], path: str) -> None:
    err = _error(tmp_path, variant(GOOD, change))
    assert err.path.startswith(path), str(err)
    assert "\n" not in str(err)


def test_family_seeds_must_be_test_seeds_unless_train(tmp_path: Path) -> None:
    family = '[[scenarios]]\nname = "small"\n'
    err = _error(tmp_path, GOOD + family + "seeds = [1000000, 7]\n")
    assert err.path == "scenarios[1].seeds[1]"
    assert "test seed" in err.message
    err = _error(tmp_path, GOOD + family + 'split = "train"\nseeds = [1000000]\n')
    assert err.path == "scenarios[1].seeds[0]"
    load_experiment(_write(tmp_path, GOOD + family + 'split = "train"\nseeds = [7]\n'))
    assert _error(
        tmp_path, GOOD.replace("seeds = [0, 1]", 'seeds = [0]\nsplit = "train"')
    ).path == ("scenarios[0].split")


def test_duplicate_entries_need_labels_and_metrics_are_checked(tmp_path: Path) -> None:
    err = _error(tmp_path, GOOD + '[[policies]]\nname = "noop"\n')
    assert err.path == "policies[2]"
    load_experiment(_write(tmp_path, GOOD + '[[policies]]\nname = "noop"\nlabel = "noop-2"\n'))
    err = _error(tmp_path, 'metrics = ["moves", "movez"]\n' + GOOD)
    assert err.path == "metrics[1]"


def test_extends_deep_merges_tables_and_replaces_lists(tmp_path: Path) -> None:
    _write(
        tmp_path, 'name = "base"\n' + GOOD + "[report]\nbootstrap_resamples = 500\n", "base.toml"
    )
    (tmp_path / "sub").mkdir()
    child = _write(
        tmp_path,
        'extends = "../base.toml"\n'
        "[report]\ntimeline_seeds = 0\n"
        '[[policies]]\nname = "upstream"\nlabel = "upstream-0.2"\nparams = { threshold = 0.2 }\n',
        "sub/child.toml",
    )
    exp = load_experiment(child)
    assert exp.name == "child"  # not inherited
    assert exp.description == "tiny"  # inherited
    assert exp.episode.duration == 120.0  # inherited
    assert (exp.report.bootstrap_resamples, exp.report.timeline_seeds) == (500, 0)  # merged
    assert [p.key for p in exp.policies] == ["upstream-0.2"]  # lists are replaced
    assert [s.name for s in exp.scenarios] == ["failure-loop"]


def test_extends_errors(tmp_path: Path) -> None:
    assert _error(tmp_path, 'extends = "missing.toml"\n' + GOOD).path == "extends"
    _write(tmp_path, 'extends = "b.toml"\n', "a.toml")
    _write(tmp_path, 'extends = "a.toml"\n', "b.toml")
    with pytest.raises(ConfigError, match="cycle"):
        load_experiment(tmp_path / "a.toml")


def test_resolved_config_round_trips(tmp_path: Path) -> None:
    exp = load_experiment(_write(tmp_path, GOOD))
    again = load(Experiment, exp.resolved())
    assert again == exp
    assert again.config_hash() == exp.config_hash()
    changed = load_experiment(_write(tmp_path, GOOD.replace("0.4", "0.5"), "other.toml"))
    assert changed.config_hash() != exp.config_hash()
