"""Episodes and their records: the round loop, a small JSON record of any episode, exact replay.

A record holds what determines an episode — the scenario (by name, or its resolved data), the seed,
the duration, the scenario overrides, the policy (name and constants) — and what the policy did: the
motions it committed, as ``[round_index, sid, target]``. Replaying feeds those motions to a fresh
:class:`~pvegym.sim.simulation.Simulation` at the same rounds, without the policy: the model alone must
reproduce the recorded metrics *exactly* (float equality). So a record is a regression test of the
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
from pvegym.config import check_text, read_json
from pvegym.errors import ConfigError, show
from pvegym.experiments.files import write_json_atomic
from pvegym.limits import MAX_DURATION_S, MAX_SEED, check_number, whole_number
from pvegym.sim import catalog
from pvegym.sim.metrics import METRIC_KEYS
from pvegym.sim.scenario import Scenario, scenario_from_dict
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion

RECORD_FORMAT = "pvegym-episode-record/1"

Decide = Callable[[ClusterView], Motion | None]
MotionRow = tuple[int, str, str]  # (round index, sid, target)


#: what an episode's result depends on, relative to the source root: this module (the episode
#: loop), the model, the policies, the config loader and units
MODEL_SOURCES = (
    "pvegym/experiments/record.py",
    "pvegym/sim",
    "pvegym/policies",
    "pvegym/config.py",
    "pvegym/units.py",
)


def model_sources(root: Path | None = None) -> list[Path]:
    """The files :func:`model_fingerprint` hashes, in its order (every ``.py`` of a folder)."""
    root = Path(__file__).resolve().parents[2] if root is None else root
    files: list[Path] = []
    for src in MODEL_SOURCES:
        p = root / src
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return files


def model_fingerprint(root: Path | None = None) -> str:
    """SHA-256 of the source of everything an episode's result depends on (:data:`MODEL_SOURCES`
    under ``root``, by default the installed tree). Part of every cell's key, so a cell computed by
    older code is never mixed into a report of newer code (it is recomputed)."""
    root = Path(__file__).resolve().parents[2] if root is None else root
    files = model_sources(root)
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
    # model_fingerprint() of the simulator and policy code that recorded it ("" = unknown)
    code_sha256: str = ""

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "format": RECORD_FORMAT,
            "pvegym_version": self.pvegym_version,
            "code_sha256": self.code_sha256,
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
        """A record from its JSON document, every field checked (a record is user input: it may
        have been edited or be a stranger's); errors are one line at ``where`` and the key."""
        if not isinstance(doc, dict) or doc.get("format") != RECORD_FORMAT:
            raise ConfigError(where, f"not a pvegym episode record (format {RECORD_FORMAT!r})")
        for key in ("scenario", "seed", "duration", "policy", "motions", "metrics"):
            if key not in doc:
                raise ConfigError(f"{where}: {key}", "is required")
        policy = _table(doc["policy"], f"{where}: policy")
        motions = doc["motions"]
        if not isinstance(motions, list) or len(motions) > MAX_MOTIONS:
            raise ConfigError(f"{where}: motions", f"must be a list of at most {MAX_MOTIONS}")
        rows: list[MotionRow] = []
        for i, m in enumerate(motions):
            at = f"{where}: motions[{i}]"
            if not (isinstance(m, list) and len(m) == 3):
                raise ConfigError(at, f"must be [round, sid, target], not {show(m)}")
            rows.append(
                (whole_number(m[0], at, ge=0, le=MAX_ROUNDS), _text(m[1], at), _text(m[2], at))
            )
        metrics = _table(doc["metrics"], f"{where}: metrics")
        for key, v in metrics.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise ConfigError(
                    f"{where}: metrics.{show(key, 40, quote=False)}",
                    f"must be a number, not {show(v)}",
                )
        data = doc.get("scenario_data")
        return EpisodeRecord(
            scenario=_text(doc["scenario"], f"{where}: scenario"),
            seed=whole_number(doc["seed"], f"{where}: seed", ge=0, le=MAX_SEED),
            duration=_duration(doc["duration"], f"{where}: duration"),
            policy=_text(policy.get("name"), f"{where}: policy.name"),
            params=_table(policy.get("params", {}), f"{where}: policy.params"),
            overrides=_table(doc.get("overrides", {}), f"{where}: overrides"),
            motions=rows,
            metrics=metrics,
            scenario_data=None if data is None else _table(data, f"{where}: scenario_data"),
            pvegym_version=_text(doc.get("pvegym_version", "unknown"), f"{where}: pvegym_version"),
            code_sha256=_code_sha256(doc, where),
        )

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


#: most motions a record may hold / highest round index (a 31-day episode of 10 s rounds)
MAX_MOTIONS = 1_000_000
MAX_ROUNDS = int(MAX_DURATION_S // 2)


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a table, not {show(value)}")
    return dict(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(where, f"must be a string, not {show(value)}")
    return check_text(value, where)


#: the code fingerprint's key in records and run manifests before it was ``code_sha256`` (a
#: training manifest's ``model_sha256`` is its ``model.zip``'s hash): still read, and a provenance
#: key, so a file that has it is left as it is by a rerun that reproduces it
LEGACY_CODE_KEY = "model_sha256"


def _code_sha256(doc: dict[str, Any], where: str) -> str:
    """A record's code fingerprint: ``code_sha256``, or in an older record ``model_sha256``."""
    key = "code_sha256" if "code_sha256" in doc else LEGACY_CODE_KEY
    return _text(doc.get(key, ""), f"{where}: {key}")


def _duration(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(where, f"must be a number of seconds, not {show(value)}")
    return check_number(float(value), where, gt=0.0, le=MAX_DURATION_S)


#: who produced a record (not what it says): kept when a rerun reproduces the record
RECORD_PROVENANCE = ("code_sha256", LEGACY_CODE_KEY, "pvegym_version")


def write_json_stable(path: Path, doc: dict[str, Any], provenance: tuple[str, ...]) -> bool:
    """Write ``doc`` atomically unless ``path`` already holds the same document apart from its
    ``provenance`` keys (who produced it: commit, code hash, versions). Returns whether it wrote.

    Why: a rerun that reproduces a committed result must leave its files as they are (``git
    status`` stays clean on any machine), and the provenance then still names the code that first
    produced it — equally true, since the rerun got the same bits. What differs between two runs
    of the same result (when, where, how long) goes to the run's untracked ``run.json``.
    """
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = None
    if isinstance(old, dict):
        plain = json.loads(json.dumps(doc))  # tuples → lists, as the file holds them
        if {k: v for k, v in old.items() if k not in provenance} == {
            k: v for k, v in plain.items() if k not in provenance
        }:
            return False
    write_json_atomic(path, doc)
    return True


def save_record(record: EpisodeRecord, path: str | Path) -> Path:
    p = Path(path)
    write_json_stable(p, record.to_json(), RECORD_PROVENANCE)
    return p


def load_record(path: str | Path) -> EpisodeRecord:
    p = Path(path)
    doc = read_json(p, "RECORD", "record")
    return EpisodeRecord.from_json(doc, show(str(p), 100, quote=False))


def replay(record: EpisodeRecord) -> dict[str, Any]:
    """Re-run the record's episode, feeding its motions at their rounds; the resulting metrics."""
    by_round: dict[int, Motion] = {}
    scenario = record.build_scenario()
    sids = {g.sid for g in scenario.guests}
    nodes = {n.name for n in scenario.nodes}
    for i, (r, sid, target) in enumerate(record.motions):
        if r in by_round:
            raise ConfigError("record.motions", f"two motions in round {r} (one per round)")
        if sid not in sids or target not in nodes:
            bad = f"guest {show(sid)}" if sid not in sids else f"node {show(target)}"
            raise ConfigError(f"record.motions[{i}]", f"unknown {bad} in this scenario")
        by_round[r] = Motion(sid, target)
    sim = Simulation(scenario, record.seed)

    def decide(view: ClusterView) -> Motion | None:
        return by_round.get(round(view.t / sim.round_s) - 1)

    result, _ = play(sim, decide, record.duration)
    metrics: dict[str, Any] = result["metrics"]
    return metrics


def metric_diff(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """Lines ``key: recorded X, replayed Y`` for every metric that differs (exact comparison)."""
    lines = []
    for key in sorted(set(METRIC_KEYS) | set(expected) | set(actual)):
        a, b = expected.get(key), actual.get(key)
        if a != b:  # exact: JSON round-trips floats bit for bit
            lines.append(f"{key}: recorded {a!r}, replayed {b!r}")
    return lines
