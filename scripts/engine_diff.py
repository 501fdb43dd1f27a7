"""The differential check of the HA engine against the port (issue 31 item 2).

    .venv/bin/python scripts/engine_diff.py --examples 300 --seed 0

Runs ``--examples`` random examples (:mod:`pvegym.sim.engine.differential`: a random cluster with
rules, HA groups and a CRS mode, and a random history, ``--rounds`` CRM rounds each, seeds
``seed, seed+1, …``) through the port and the engine and compares them round by round
(``--jobs`` processes share the seeds; the result is the same). Prints progress, then how often
each feature was exercised (events and state changes of the engine's log and its placement
counters, summed over all examples), then as its last line exactly ``N of N identical`` or the
first difference (by seed).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections import Counter
from functools import partial

from pvegym.sim.engine.differential import Outcome, run_example


def _run(seed: int, rounds: int) -> Outcome:
    return run_example(seed, rounds=rounds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--examples", type=int, default=100, help="random examples (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first example (default 0)")
    ap.add_argument("--rounds", type=int, default=60, help="CRM rounds per example (default 60)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    args = ap.parse_args(argv)
    if args.examples < 1 or args.rounds < 1 or args.seed < 0 or args.jobs < 1:
        print(
            "engine_diff: --examples, --rounds and --jobs must be >= 1, --seed >= 0",
            file=sys.stderr,
        )
        return 2
    features: Counter[str] = Counter()
    t0 = time.monotonic()
    seeds = range(args.seed, args.seed + args.examples)
    run = partial(_run, rounds=args.rounds)
    pool = multiprocessing.Pool(args.jobs) if args.jobs > 1 else None
    results = pool.imap(run, seeds, chunksize=4) if pool else map(run, seeds)
    try:
        for i, out in enumerate(results):
            if not out.identical:
                print(f"{i} of {args.examples} identical; first difference: {out.difference}")
                return 1
            features.update(out.features)
            if (i + 1) % max(1, args.examples // 20) == 0:
                print(f"  {i + 1}/{args.examples} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        if pool:
            pool.terminate()
    print("features exercised (engine events and placement counters, summed):")
    for name in sorted(features):
        print(f"  {name:36s} {features[name]}")
    print(f"{args.examples} of {args.examples} identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
