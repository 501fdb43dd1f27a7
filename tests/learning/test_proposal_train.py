"""The proposal trainer's file, instances and teachers (the training itself: results/train-proposals)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pvegym.errors import ConfigError
from pvegym.learning.proposal_train import Instances, load_config, teacher_action
from pvegym.sim.tasks import TASKS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "name", ["train-proposals", "train-proposals-nocurriculum", "train-proposals-explore"]
)
def test_committed_files_load_and_train_on_the_train_split_only(name: str) -> None:
    cfg = load_config(ROOT / "experiments" / f"{name}.toml")
    env = cfg.resolved()["env"]
    assert env["version"] == "proposals"
    assert env["train_seeds"] == [0, 8999]
    assert env["proposals"]["patched"]  # patched-tuned's constants, written out


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('name = "x"\nbogus = 1\n', "bogus"),
        ('name = "x"\ncurriculum = 1.5\n', "curriculum"),
        ('name = "x"\nbaseline = "noop"\n', "baseline"),
        ('name = "x"\ncandidates = 0\n', "candidates"),
        ('name = "x"\ntask = "huge"\n', "task"),
    ],
)
def test_bad_files_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    p = tmp_path / "t.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert key in str(err.value)


def test_instances_come_from_the_train_split_and_replay_lost_ones() -> None:
    train = TASKS["small"].train
    inst = Instances(train, 1.0, seed=0)
    first, replay = inst.draw()
    assert first in train and not replay
    inst.record(first, -3.0, False, 10)  # the baseline won there
    assert inst.draw() == (first, True)
    inst.record(first, 0.0, True, 20)  # a tie: no longer lost
    drawn = [inst.draw() for _ in range(50)]
    assert all(s in train and not r for s, r in drawn)
    assert max(s for s, _ in drawn) < TASKS["small"].validation.start


def test_teachers() -> None:
    from pvegym.policies.proposals import GLOBAL_FEATURES, SLOT_FEATURES, observation_size

    obs = np.zeros(observation_size(3), dtype=np.float32)
    mask = np.array([True, True, True, True, False])
    assert teacher_action(obs, mask, "patched") == 1
    assert teacher_action(obs, mask, "guest-centric") == 0  # no slot flagged: noop
    ng, nf = len(GLOBAL_FEATURES), len(SLOT_FEATURES)
    obs[ng + 3 * nf + SLOT_FEATURES.index("gc_choice")] = 1.0
    assert teacher_action(obs, mask, "guest-centric") == 3
    assert teacher_action(obs, np.array([True, False, True, True, False]), "patched") == 0
