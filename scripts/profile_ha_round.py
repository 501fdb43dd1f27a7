"""cProfile of the full HA rounds ``pvegym bench --only ha-round`` times, by own time.

    .venv/bin/python scripts/profile_ha_round.py [--rounds 500] [--top 40] [--sort tottime]

The rounds are :class:`pvegym.experiments.bench_ha.HARoundLoop`'s (4 nodes, 12 services, a
migration pending: every CRM and LRM iteration in full).
"""

from __future__ import annotations

import argparse
import sys

from pvegym.experiments.bench_ha import profile_rounds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sort", default="tottime", choices=["tottime", "cumulative"])
    args = ap.parse_args()
    profile_rounds(args.rounds, top=args.top, sort=args.sort)
    return 0


if __name__ == "__main__":
    sys.exit(main())
