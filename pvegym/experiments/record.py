"""Episodes and their records: the round loop, a small JSON record of any episode, exact replay.

A record holds what determines an episode — the scenario (by name, or its resolved data), the seed,
the duration, the scenario overrides, the policy (name and constants) — and what the policy did: the
motions it committed, as ``[round_index, sid, target]``. Replaying feeds those motions to a fresh
:class:`~pvegym.sim.simulation.Simulation` at the same rounds, without the policy: the model alone must
reproduce the recorded §9 metrics *exactly* (float equality). So a record is a regression test of the
model, and a shareable, reviewable account of what a balancer did.

The loop :func:`play` is the same as :meth:`Simulation.run` (``tests/experiments`` checks it gives
identical metrics) with two additions: it collects the committed motions and calls ``on_round`` after
each round's physics (the runner's per-round traces for the timeline plots).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pvegym
from pvegym.errors import ConfigError
from pvegym.experiments.files import write_json_atomic
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import Scenario, scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion

RECORD_FORMAT = "pvegym-episode-record/1"

Decide = Callable[[ClusterView], Motion | None]
MotionRow = tuple[int, str, str]  # (round index, sid, target)


MODEL_SOURCES = ("pvegym/sim", "policies", "pvegym/config.py", "pvegym/units.py")


def model_fingerprint() -> str:
    """SHA-256 of the source of everything an episode's result depends on: the model, the
    policies, the config loader and the episode loop. Part of every cell's key, so a cell
    computed by older code is never mixed into a report of newer code (it is recomputed)."""
    root = Path(__file__).resolve().parents[2]
    files: list[Path] = [Path(__file__)]
    for src in MODEL_SOURCES:
        p = root / src
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def play(
    sim: Simulation,
    decide: Decide,
    duration: float | None = None,
    on_round: Callable[[Simulation], None] | None = None,
) -> tuple[dict[str, Any], list[MotionRow]]:
    """Run one episode of ``duration`` s (default: the scenario's) from ``sim.reset()``.

    Round ``r`` (0-based) is: physics up to ``t = (r + 1)·round_s``, ``on_round(sim)``, then the
    policy's decision on that round's view, committed before the next round's physics — exactly the
    order of :meth:`Simulation.run`. Returns the ``simulate --json`` result and the committed motions.
    """
    duration = sim.scenario.duration if duration is None else duration
    rounds = round(duration / sim.round_s)
    motions: list[MotionRow] = []
    view = sim.reset()
    for r in range(rounds):
        if on_round is not None:
            on_round(sim)
        motion = decide(view)
        if motion is not None:
            motions.append((r, motion.sid, motion.target))
        if r < rounds - 1:
            view = sim.step(motion)
        else:
            sim.commit(motion)
    return sim.result(), motions


@dataclass
class EpisodeRecord:
    """One episode: enough to rebuild it, the motions its policy committed, the metrics it got.

    ``scenario`` is a named scenario, a family (then ``seed`` is also the instance seed) or a
    ``.toml`` path; ``scenario_data``, when present, is the resolved scenario itself and wins (a
    record that survives changes to the named scenarios). ``overrides`` are dotted keys with TOML
    values (``{"migration.qemu_server": "patched"}``); ``duration`` is simulated seconds.
    """

    scenario: str
    seed: int
    duration: float
    policy: str
    params: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    motions: list[MotionRow] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    scenario_data: dict[str, Any] | None = None
    pvegym_version: str = pvegym.__version__
    model_sha256: str = ""  # model_fingerprint() of the code that recorded it ("" = unknown)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": RECORD_FORMAT,
            "pvegym_version": self.pvegym_version,
            "model_sha256": self.model_sha256,
            "scenario": self.scenario,
            "seed": self.seed,
            "duration": self.duration,
            "overrides": self.overrides,
            "policy": {"name": self.policy, "params": self.params},
            "motions": [list(m) for m in self.motions],
            "metrics": self.metrics,
        }
        if self.scenario_data is not None:
            doc["scenario_data"] = self.scenario_data
        return doc

    @staticmethod
    def from_json(doc: Any, where: str = "record") -> EpisodeRecord:
        if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
            raise ConfigError(where, f"not a pvegym episode record (format {RECORD_FORMAT!r})")
        try:
            motions = [(int(r), str(sid), str(target)) for r, sid, target in doc["motions"]]
            return EpisodeRecord(
                scenario=str(doc["scenario"]),
                seed=int(doc["seed"]),
                duration=float(doc["duration"]),
                policy=str(doc["policy"]["name"]),
                params=dict(doc["policy"].get("params", {})),
                overrides=dict(doc.get("overrides", {})),
                motions=motions,
                metrics=dict(doc["metrics"]),
                scenario_data=doc.get("scenario_data"),
                pvegym_version=str(doc.get("pvegym_version", "unknown")),
                model_sha256=str(doc.get("model_sha256", "")),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ConfigError(where, f"malformed episode record: {err!r}") from None

    def build_scenario(self) -> Scenario:
        """The scenario of this episode (resolved data if recorded, else by name + overrides)."""
        if self.scenario_data is not None:
            return scenario_from_dict(self.scenario_data, "scenario_data")
        return catalog.resolve(
            self.scenario,
            self.seed,
            self.overrides,
            name_key="record.scenario",
            set_key="record.overrides",
        ).scenario


def save_record(record: EpisodeRecord, path: str | Path) -> Path:
    p = Path(path)
    write_json_atomic(p, record.to_json())
    return p


def load_record(path: str | Path) -> EpisodeRecord:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError("RECORD", f"cannot read {str(p)!r}: {err}") from None
    return EpisodeRecord.from_json(doc, str(p))


def replay(record: EpisodeRecord) -> dict[str, Any]:
    """Re-run the record's episode, feeding its motions at their rounds; the resulting metrics."""
    by_round: dict[int, Motion] = {}
    for r, sid, target in record.motions:
        if r in by_round:
            raise ConfigError("record.motions", f"two motions in round {r} (one per round)")
        by_round[r] = Motion(sid, target)
    sim = Simulation(record.build_scenario(), record.seed)

    def decide(view: ClusterView) -> Motion | None:
        return by_round.get(round(view.t / sim.round_s) - 1)

    result, _ = play(sim, decide, record.duration)
    metrics: dict[str, Any] = result["metrics"]
    return metrics


def metric_diff(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Lines ``key: recorded X, replayed Y`` for every §9 metric that differs (exact comparison)."""
    lines = []
    for key in sorted(set(METRIC_KEYS) | set(expected) | set(actual)):
        a, b = expected.get(key), actual.get(key)
        if a != b:  # exact: JSON round-trips floats bit for bit
            lines.append(f"{key}: recorded {a!r}, replayed {b!r}")
    return lines
