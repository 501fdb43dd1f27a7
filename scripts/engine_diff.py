"""The differential check of the HA engine against the port (issue 31 item 2).

    .venv/bin/python scripts/engine_diff.py --examples 300 --seed 0
    .venv/bin/python scripts/engine_diff.py --lrm --examples 300 --seed 0
    .venv/bin/python scripts/engine_diff.py --scenarios all --seeds 10

``--scenarios`` (names, scenario files, or ``all``: every catalog scenario and every file of
``experiments/scenarios/``) runs whole episodes instead, scenario × policy × seed, on the full
stack and on the engine stack (:mod:`pvegym.experiments.engine_check`), with the HA manager's
placement scheduler ``basic`` on both (the engine's only one so far) unless ``--native``, and
compares metrics, moves and every log line. ``--native`` keeps the scenario's scheduler and
reports, per pair, whether metrics and moves agree and whether the logs do once the port's
``using scheduler mode`` line is left out (the engine logs none: it places by the basic
scheduler). The last line is ``N of N identical`` or counts and names the differences.

Runs ``--examples`` random examples (:mod:`pvegym.sim.engine.differential`: a random cluster with
rules, HA groups and a CRS mode, and a random history, ``--rounds`` CRM rounds each, seeds
``seed, seed+1, …``) through the port and the engine and compares them round by round. ``--lrm``:
the CRM with every node's LRM (``run_lrm_example``: the LRM results are the LRMs' output, their
states, workers, results and log lines are compared too) instead of the CRM alone with the LRM
results as an input. ``--jobs J`` runs the examples in J processes (the results are taken in seed
order, so the output is that of one process). Prints progress, then how often each feature was
exercised (events and state changes of the engine's log and its placement counters, summed over
all examples), then as its last line exactly ``N of N identical`` or the first difference.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Iterator

from pvegym.sim.engine.differential import Outcome, run_example, run_lrm_example


def _run(seed: int, rounds: int, lrm: bool) -> Outcome:
    return (run_lrm_example if lrm else run_example)(seed, rounds=rounds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--examples", type=int, default=100, help="random examples (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first example (default 0)")
    ap.add_argument("--rounds", type=int, default=60, help="CRM rounds per example (default 60)")
    ap.add_argument(
        "--scenarios", help="comma-separated scenarios or files, or 'all': whole episodes instead"
    )
    ap.add_argument("--seeds", type=int, default=3, help="with --scenarios: seeds from --seed")
    ap.add_argument(
        "--policies", default="upstream,patched", help="with --scenarios (default upstream,patched)"
    )
    ap.add_argument(
        "--native", action="store_true", help="with --scenarios: keep the scenario's scheduler"
    )
    ap.add_argument(
        "--exclude", default="", help="with --scenarios all: comma-separated names to leave out"
    )
    ap.add_argument(
        "--duration", type=float, help="with --scenarios: end each episode after this many s"
    )
    ap.add_argument("--lrm", action="store_true", help="the CRM with the LRMs (run_lrm_example)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    args = ap.parse_args(argv)
    if args.scenarios:
        return _scenarios(args)
    if args.examples < 1 or args.rounds < 1 or args.seed < 0 or args.jobs < 1:
        print(
            "engine_diff: --examples, --rounds and --jobs must be >= 1, --seed >= 0",
            file=sys.stderr,
        )
        return 2
    features: Counter[str] = Counter()
    t0 = time.monotonic()
    seeds = range(args.seed, args.seed + args.examples)
    run = functools.partial(_run, rounds=args.rounds, lrm=args.lrm)
    pool = multiprocessing.Pool(args.jobs) if args.jobs > 1 else None
    outcomes: Iterator[Outcome] = pool.imap(run, seeds, chunksize=4) if pool else map(run, seeds)
    try:
        for i, out in enumerate(outcomes):
            if not out.identical:
                print(f"{i} of {args.examples} identical; first difference: {out.difference}")
                return 1
            features.update(out.features)
            if (i + 1) % max(1, args.examples // 20) == 0:
                print(f"  {i + 1}/{args.examples} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        if pool:
            pool.terminate()
    print("features exercised (engine events, LRM states and placement counters, summed):")
    for name in sorted(features):
        print(f"  {name:36s} {features[name]}")
    print(f"{args.examples} of {args.examples} identical")
    return 0


def _scenarios(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pvegym.experiments.engine_check import first_difference, run
    from pvegym.sim import catalog

    names = args.scenarios.split(",")
    if names == ["all"]:
        files = sorted(Path("experiments/scenarios").glob("*.toml"))
        names = catalog.names() + [str(f) for f in files]
        names = [n for n in names if n not in args.exclude.split(",")]
    policies = args.policies.split(",")
    if args.seeds < 1 or args.seed < 0:
        print("engine_diff: --seeds must be >= 1, --seed >= 0", file=sys.stderr)
        return 2
    pairs = [
        (n, p, s) for n in names for p in policies for s in range(args.seed, args.seed + args.seeds)
    ]
    same, differ = 0, []
    t0 = time.monotonic()
    for i, (name, policy, seed) in enumerate(pairs):
        full = run(name, policy, seed, "full", not args.native, args.duration)
        engine = run(name, policy, seed, "engine", not args.native, args.duration)
        if args.native:
            full.log = [x for x in full.log if "using scheduler mode" not in x[1]]
        diff = first_difference(full, engine)
        label = f"{name} {policy} seed {seed}"
        if diff:
            differ.append(f"{label}: {diff}")
        else:
            same += 1
        print(
            f"  {i + 1}/{len(pairs)} {label}: {diff or 'identical'}"
            f" ({time.monotonic() - t0:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
    if differ:
        print(f"{len(differ)} of {len(pairs)} differ:")
        for line in differ:
            print(f"  {line}")
        print(f"{same} of {len(pairs)} identical; first difference: {differ[0]}")
        return 1
    print(f"{same} of {len(pairs)} identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
