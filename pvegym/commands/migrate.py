"""``pvegym migrate``: simulate one live migration (``docs/model.md``, *Live migration*; ``docs/cli.md``)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from pvegym.errors import ConfigError, show
from pvegym.limits import MAX_DURATION_S, MAX_MEMORY_BYTES, MAX_RATE, check_number
from pvegym.units import GiB, parse_duration, parse_rate, parse_size

if TYPE_CHECKING:  # the model (NumPy, numba) is imported when the command runs (cli.py)
    from pvegym.sim.migration import Migration, MigrationParams


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg,unused-ignore]
    parser = sub.add_parser("migrate", help="simulate one live migration of a guest")
    parser.add_argument("--memory", required=True, help="guest memory, e.g. 24GiB")
    parser.add_argument("--bandwidth", required=True, help="migration throughput, e.g. 430MiB/s")
    parser.add_argument("--dirty-rate", required=True, help="raw guest write rate, e.g. 680MiB/s")
    parser.add_argument("--wws", default=None, help="writable working set (default: all memory)")
    parser.add_argument(
        "--throttle-sensitivity",
        default="1.0",
        help="fraction 0..1 of writes the auto-converge throttle slows (default 1.0)",
    )
    parser.add_argument("--downtime-limit", default="100ms", help="start downtime limit (100ms)")
    parser.add_argument(
        "--qemu-server",
        default="unpatched",
        help="patched (the convergence patch: throttle boost and abort) or unpatched (default)",
    )
    parser.add_argument("--duration", default="10m", help="simulated time at most (10m)")
    parser.add_argument("--no-sync-timer", action="store_true", help="QEMU < 9.2: no 5 s timer")
    parser.add_argument("--boost-factor", default="1.5", help="passes before the throttle boost")
    parser.add_argument("--abort-factor", default="4", help="passes before the abort")
    parser.add_argument(
        "--xbzrle-delta",
        default="1.0",
        help="share 0..1 of a page changed when re-sent (XBZRLE; default 1.0: no gain)",
    )
    parser.add_argument("--no-xbzrle", action="store_true", help="XBZRLE capability off")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def _number(text: str, flag: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(flag, f"{show(text)} is not a number") from None
    return check_number(value, flag)


def params_from_args(args: argparse.Namespace) -> MigrationParams:
    """Parse and validate the flags; every error names its flag."""
    from pvegym.sim.migration import MigrationParams

    patched_text = str(args.qemu_server).lower()
    if patched_text not in ("patched", "unpatched"):
        raise ConfigError(
            "--qemu-server", f"{show(args.qemu_server)}: allowed are patched, unpatched"
        )
    memory = check_number(
        parse_size(args.memory, "--memory"), "--memory", gt=0.0, le=MAX_MEMORY_BYTES, unit="size"
    )
    return MigrationParams(
        memory=memory,
        bandwidth=check_number(
            parse_rate(args.bandwidth, "--bandwidth"),
            "--bandwidth",
            gt=0.0,
            le=MAX_RATE,
            unit="rate",
        ),
        dirty_rate=check_number(
            parse_rate(args.dirty_rate, "--dirty-rate"),
            "--dirty-rate",
            ge=0.0,
            le=MAX_RATE,
            unit="rate",
        ),
        wws=None
        if args.wws is None
        else check_number(parse_size(args.wws, "--wws"), "--wws", gt=0.0, le=memory, unit="size"),
        throttle_sensitivity=check_number(
            _number(args.throttle_sensitivity, "--throttle-sensitivity"),
            "--throttle-sensitivity",
            ge=0.0,
            le=1.0,
        ),
        downtime_limit_ms=check_number(
            parse_duration(args.downtime_limit, "--downtime-limit"),
            "--downtime-limit",
            gt=0.0,
            le=86400.0,
            unit="duration",
        )
        * 1000.0,
        qemu_server_patched=patched_text == "patched",
        sync_timer=not args.no_sync_timer,
        boost_factor=check_number(
            _number(args.boost_factor, "--boost-factor"), "--boost-factor", gt=0.0, le=1000.0
        ),
        abort_factor=check_number(
            _number(args.abort_factor, "--abort-factor"), "--abort-factor", gt=0.0, le=1000.0
        ),
        xbzrle=not args.no_xbzrle,
        xbzrle_delta=check_number(
            _number(args.xbzrle_delta, "--xbzrle-delta"), "--xbzrle-delta", gt=0.0, le=1.0
        ),
    )


def result_json(m: Migration) -> dict[str, object]:
    """The ``migrate --json`` document of ``docs/cli.md``."""
    return {
        "outcome": m.outcome,
        "duration_s": m.t,
        "passes": m.passes,
        "transferred_bytes": m.transferred,
        "downtime_limit_ms": m.downtime_limit_ms,
        "downtime_ms": m.downtime_s * 1000.0,
        "max_throttle_pct": m.max_throttle_pct_seen,
        "timeline": [
            {
                "t": e.t,
                "transferred_bytes": e.transferred_bytes,
                "remaining_bytes": e.remaining_bytes,
                "throttle_pct": e.throttle_pct,
                "downtime_limit_ms": e.downtime_limit_ms,
            }
            for e in m.timeline
        ],
    }


def run(args: argparse.Namespace) -> int:
    from pvegym.sim.migration import Migration

    params = params_from_args(args)
    duration = check_number(
        parse_duration(args.duration, "--duration"),
        "--duration",
        gt=0.0,
        le=MAX_DURATION_S,
        unit="duration",
    )
    m = Migration(params).run(duration)
    if args.json:
        print(json.dumps(result_json(m)))
        return 0
    print(f"outcome:          {m.outcome}" + (f" ({m.error})" if m.error else ""))
    print(f"duration:         {m.t:.1f} s")
    print(f"transferred:      {m.transferred / GiB:.2f} GiB ({m.passes:.2f} passes)")
    if m.pass1_end_s is not None:
        print(f"pass 1 ended:     {m.pass1_end_s:.1f} s")
    print(f"downtime limit:   {m.downtime_limit_ms:.0f} ms")
    if m.outcome == "completed":
        print(
            f"downtime:         {m.downtime_s * 1000:.0f} ms (guest pause ≈ {m.guest_pause_s:.2f} s)"
        )
    print(
        f"max throttle:     {m.max_throttle_pct_seen} % (lost vCPU time {m.throttle_integral:.1f} s)"
    )
    for t, message in m.log:
        print(f"  {t:7.1f} s  {message}")
    return 0
