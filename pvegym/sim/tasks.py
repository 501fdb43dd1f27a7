"""The benchmark's tasks: one table, :data:`TASKS` (``docs/benchmark.md``).

A task is a scenario family with the benchmark's fixed settings — the episode (the family's
duration, one decision per 10 s CRM round), the environment's mask and reward options, the
reward's ``noop`` twin — and three fixed, disjoint splits of its instance seeds:

* ``train`` (0–8,999) for training and tuning;
* ``validation`` (9,000–9,999, from the family's train range) for selecting checkpoints,
  constants and hyperparameters;
* ``test`` (1,000,000–1,000,049, the first 50 of :data:`~pvegym.sim.families.TEST_SEEDS`): the
  instances every reported score is measured on, fixed before any agent was scored.

Seeds from :data:`RESERVED_SEEDS` (1,000,100 on) are reserved: valid anywhere a test seed is
(``pvegym run``), never used for training, selection, tuning or any committed result (a future
second test split). A new task is one more entry in :data:`TASKS`: ``pvegym/registration.py``
registers its environment id, ``pvegym scenarios`` lists it and ``pvegym benchmark`` scores it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pvegym.errors import ConfigError
from pvegym.sim.families import FAMILIES, TEST_SEEDS, TRAIN_SEEDS
from pvegym.sim.scenario import Scenario

#: test-range seeds kept out of every committed result (a second test split, if one is ever needed)
RESERVED_SEEDS = range(1_000_100, TEST_SEEDS.stop)
#: the validation block of every task: the last 1,000 seeds of the family's train range
VALIDATION_SEEDS = range(9_000, TRAIN_SEEDS.stop)


@dataclass(frozen=True)
class Task:
    """A benchmark task (module doc). ``version`` is the ``-vN`` of its environment id: bump it
    whenever the task's settings or splits change, so that old scores are never compared with new.

    Environment settings (``pvegym/Cluster-v1``'s arguments): ``mask_unmigratable`` (the mask
    also hides a guest whose motions fail after the precheck), ``reward_baseline`` (``"noop"``:
    the reward is measured against a ``noop`` twin, so an episode's return is exactly
    ``noop`` cost − policy cost, the numerator of the normalized score)."""

    name: str
    family: str
    description: str
    version: int = 1
    train: range = range(TRAIN_SEEDS.start, VALIDATION_SEEDS.start)
    validation: range = VALIDATION_SEEDS
    test: range = range(TEST_SEEDS.start, TEST_SEEDS.start + 50)
    mask_unmigratable: bool = False
    reward_baseline: str = "noop"

    @property
    def episode_seconds(self) -> float:
        """The episode's simulated seconds: the family's duration."""
        return FAMILIES[self.family].duration

    @property
    def episode_steps(self) -> int:
        """Decisions per episode (one per CRM round of the scenarios' default ``round_s``)."""
        return round(self.episode_seconds / Scenario.round_s)

    def env_kwargs(self) -> dict[str, object]:
        """The environment arguments of the task (what its registered spec carries)."""
        return {
            "scenario": self.family,
            "mask_unmigratable": self.mask_unmigratable,
            "reward_baseline": self.reward_baseline,
        }

    def split(self, name: str) -> range:
        """The seeds of split ``name`` (``train``, ``validation`` or ``test``)."""
        if name not in SPLITS:
            raise ConfigError("split", f"{name!r} is not a split (allowed: {', '.join(SPLITS)})")
        seeds: range = getattr(self, name)
        return seeds


SPLITS = ("train", "validation", "test")

#: Every benchmark task, by name. The HA-engine family (``failures``) joins here when it exists.
TASKS: dict[str, Task] = {
    "small": Task("small", "small", "2–4 nodes, 5–40 guests, 1 h"),
    "medium": Task("medium", "medium", "8 nodes, 100 guests, 1 h"),
    "trace": Task("trace", "trace", "2–8 nodes replaying real VM traces (test traces), 2 h"),
}


def task(name: str, path: str = "task") -> Task:
    """The task ``name``; an unknown one is a :class:`ConfigError` at ``path``."""
    if name not in TASKS:
        raise ConfigError(path, f"unknown task {name!r} (allowed: {', '.join(TASKS)})")
    return TASKS[name]


def names() -> list[str]:
    return list(TASKS)


__all__ = ["RESERVED_SEEDS", "SPLITS", "TASKS", "VALIDATION_SEEDS", "Task", "names", "task"]
