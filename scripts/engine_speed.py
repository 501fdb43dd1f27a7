"""One CRM round of the port vs the engine on the same cluster, as a ratio in one run.

    .venv/bin/python scripts/engine_speed.py --nodes 8 --guests 64 --rounds 300

Both sides (:mod:`pvegym.sim.engine.differential`) play the same random history of ``--rounds``
rounds (seed ``--seed``) on one cluster of ``--nodes`` nodes and ``--guests`` guests; the script
prints the mean wall time per round of each (the port's full round: its environment gives no
quiescence token) and their ratio. A ratio, not an absolute speed: both run in this process,
interleaved round by round, so machine load affects both alike. Also checks that the two logs
are equal round by round.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from pvegym.sim.engine.differential import Cluster, EngineCRM, History, PortCRM


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--guests", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if not (2 <= args.nodes <= 14 and args.guests >= 1 and args.rounds >= 1):
        print("engine_speed: --nodes 2..14, --guests >= 1, --rounds >= 1", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    nn, ng = args.nodes, args.guests
    cl = Cluster(
        nodes=[f"node{i + 1:02d}" for i in range(nn)],
        sids=sorted(f"vm:{100 + i}" for i in range(ng)),
        cfg_node=[i % nn for i in range(ng)],
        cfg_state=[0] * ng,
        max_relocate=[1] * ng,
        failback=[1] * ng,
        rebalance_on_start=False,
    )
    hist = History(cl, rng)
    port, engine = PortCRM(cl), EngineCRM(cl)
    inputs = [hist.next() for _ in range(args.rounds)]
    engine.round(inputs[0])  # compile / load the cache outside the timing
    engine = EngineCRM(cl)
    t_port = t_engine = t_log = t_kernel = 0.0
    for inp in inputs:
        t0 = time.perf_counter()
        port.step(inp)
        t1 = time.perf_counter()
        engine.load(inp)
        tk = time.perf_counter()
        engine.call()
        t2 = time.perf_counter()
        log = engine.snapshot().log  # the log formatted, as the port writes one
        t3 = time.perf_counter()
        t_port += t1 - t0
        t_engine += t2 - t1
        t_log += t3 - t2
        t_kernel += t2 - tk
        assert log == port.env.logs
    n = len(inputs)
    print(f"port                 {1e6 * t_port / n:9.1f} µs per round")
    print(f"engine               {1e6 * t_engine / n:9.1f} µs per round (inputs loaded in Python)")
    print(f"engine kernel alone  {1e6 * t_kernel / n:9.1f} µs per round")
    print(f"engine + snapshot/log{1e6 * (t_engine + t_log) / n:9.1f} µs per round")
    print(f"ratio port/kernel {t_port / t_kernel:.1f}")
    print(
        f"ratio port/engine {t_port / t_engine:.1f} (with snapshot and log {t_port / (t_engine + t_log):.1f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
