"""The differential check of the HA engine against the port (issue 31 item 2).

    .venv/bin/python scripts/engine_diff.py --examples 300 --seed 0
    .venv/bin/python scripts/engine_diff.py --lrm --examples 300 --seed 0

Runs ``--examples`` random examples (:mod:`pvegym.sim.engine.differential`: a random cluster and
history, ``--rounds`` CRM rounds each, seeds ``seed, seed+1, …``) through the port and the engine
and compares them round by round. ``--lrm``: the CRM with every node's LRM
(``run_lrm_example``: the LRM results are the LRMs' output, their states, workers, results and
log lines are compared too) instead of the CRM alone with the LRM results as an input. Prints progress, then how often each feature was exercised
(events and state changes of the engine's log, summed over all examples), then as its last line
exactly ``N of N identical`` or the first difference.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from pvegym.sim.engine.differential import run_example, run_lrm_example


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--examples", type=int, default=100, help="random examples (default 100)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first example (default 0)")
    ap.add_argument("--rounds", type=int, default=60, help="CRM rounds per example (default 60)")
    ap.add_argument("--lrm", action="store_true", help="the CRM with the LRMs (run_lrm_example)")
    args = ap.parse_args(argv)
    if args.examples < 1 or args.rounds < 1 or args.seed < 0:
        print("engine_diff: --examples and --rounds must be >= 1, --seed >= 0", file=sys.stderr)
        return 2
    features: Counter[str] = Counter()
    t0 = time.monotonic()
    for i in range(args.examples):
        seed = args.seed + i
        run = run_lrm_example if args.lrm else run_example
        out = run(seed, rounds=args.rounds)
        if not out.identical:
            print(f"{i} of {args.examples} identical; first difference: {out.difference}")
            return 1
        features.update(out.features)
        if (i + 1) % max(1, args.examples // 20) == 0:
            print(f"  {i + 1}/{args.examples} ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    print("features exercised (engine events and LRM states, summed):")
    for name in sorted(features):
        print(f"  {name:28s} {features[name]}")
    print(f"{args.examples} of {args.examples} identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
