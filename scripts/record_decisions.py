"""Record every decision of the heuristic balancers, to prove a speed change leaves them identical.

    .venv/bin/python scripts/record_decisions.py --out /tmp/before.json     # before the change
    .venv/bin/python scripts/record_decisions.py --check /tmp/before.json   # after: must be equal

For each heuristic configuration (``upstream`` — default, TOPSIS, static mode, raw CV —,
``patched`` — default and every patch off —, ``guest-centric``) over the field scenarios (with and
without the qemu-server patch), ``contended-3node``, test instances of the ``small``, ``medium`` and
``trace`` families and the ``bench-small`` family, it plays each episode and keeps, round by round,
the motion decided (``sid``, ``target``, and the imbalances the balancer reported, as ``repr``
strings so that one bit of difference shows), the balancer's own log and the episode's metrics.
Decisions feed back into the simulation, so a single differing decision also changes everything
after it. It also replays every upstream regression directory in ``tests/data/upstream-tests``
(decisions and log lines). ``--check`` exits 1 and names the first differing episode and round.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pvegym.harness import replay_dir
from pvegym.policies.registry import make_policy
from pvegym.sim import catalog
from pvegym.sim.simulation import Simulation
from pvegym.sim.view import ClusterView, Motion

ROOT = Path(__file__).resolve().parent.parent

POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "upstream": ("upstream", {}),
    "upstream-topsis": ("upstream", {"method": "topsis"}),
    "upstream-static": ("upstream", {"mode": "static"}),
    "upstream-raw": ("upstream", {"normalized": False}),
    "patched": ("patched", {}),
    "patched-off": (
        "patched",
        {
            "outcome_tracking": False,
            "use_memhost": False,
            "dead_band": False,
            "residual_ema": False,
            "pressure_gate": False,
        },
    ),
    "guest-centric": ("guest-centric", {}),
}

FIELD = (
    "failure-loop",
    "dominant-oscillation",
    "idle-night",
    "pressure-evacuation",
    "nonconverging-migration",
    "nonconverging-with-alternative",
    "contended-3node",
)
# (scenario or family, seeds, overrides)
SUITE: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    *((name, (0, 1), {}) for name in FIELD),
    ("nonconverging-migration", (0, 1), {"migration.qemu_server": "patched"}),
    ("small", tuple(range(1_000_000, 1_000_012)), {}),
    ("medium", (1_000_000, 1_000_001, 1_000_002), {}),
    ("trace", (1_000_000, 1_000_001, 1_000_002, 1_000_003), {}),
    ("bench-small", (0,), {}),
]


def play(policy_key: str, scenario: str, seed: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """One episode: every round's decision, the balancer's log and the metrics."""
    name, params = POLICIES[policy_key]
    policy = make_policy(name, **params)
    scn = catalog.scenario(scenario, seed, overrides)
    sim = Simulation(scn, seed)
    policy.reset(seed)
    decisions: list[list[Any]] = []
    rounds = 0

    def decide(view: ClusterView) -> Motion | None:
        nonlocal rounds
        motion = policy.decide(view)
        if motion is not None:
            decisions.append(
                [
                    rounds,
                    motion.sid,
                    motion.target,
                    repr(motion.imbalance_before),
                    repr(motion.imbalance_after),
                ]
            )
        rounds += 1
        return motion

    result = sim.run(decide)
    policy_log = [[repr(t), line] for t, line in getattr(policy, "log", [])]
    return {
        "decisions": decisions,
        "log": policy_log,
        "metrics": {k: repr(v) for k, v in sorted(result["metrics"].items())},
        "rounds": rounds,
    }


def upstream_replays() -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = ROOT / "tests" / "data" / "upstream-tests"
    for d in sorted(p for p in base.glob("test-*") if p.is_dir()):
        res = replay_dir(str(d))
        out[d.name] = {
            "decisions": [
                {k: repr(v) for k, v in sorted(x.as_dict().items())} for x in res.decisions
            ],
            "log": [line.format() for line in res.log],
        }
    return out


def record(only: str | None) -> dict[str, Any]:
    episodes: dict[str, Any] = {}
    for scenario, seeds, overrides in SUITE:
        for seed in seeds:
            for key in POLICIES:
                label = f"{scenario}{'+' if overrides else ''}{json.dumps(overrides) if overrides else ''}/{seed}/{key}"
                if only and only not in label:
                    continue
                t0 = time.perf_counter()
                episodes[label] = play(key, scenario, seed, overrides)
                print(
                    f"{label}: {len(episodes[label]['decisions'])} motions, "
                    f"{time.perf_counter() - t0:.2f} s",
                    file=sys.stderr,
                )
    return {"episodes": episodes, "upstream_replays": upstream_replays()}


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}/{k}: present on one side only"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", help="write the recording to this JSON file")
    g.add_argument("--check", help="record again and compare with this JSON file")
    ap.add_argument("--only", help="only episodes whose label contains this string")
    args = ap.parse_args()
    doc = record(args.only)
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True))
        n = sum(len(e["decisions"]) for e in doc["episodes"].values())
        print(f"recorded {len(doc['episodes'])} episodes, {n} motions → {args.out}")
        return 0
    expected = json.loads(Path(args.check).read_text())
    if args.only:
        expected["episodes"] = {k: v for k, v in expected["episodes"].items() if args.only in k}
    diff = first_difference(expected, doc)
    if diff:
        print(f"DIFFERENT: {diff}")
        return 1
    n = sum(len(e["decisions"]) for e in doc["episodes"].values())
    print(f"identical: {len(doc['episodes'])} episodes, {n} motions, upstream replays")
    return 0


if __name__ == "__main__":
    sys.exit(main())
