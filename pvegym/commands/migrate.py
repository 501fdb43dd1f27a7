"""``pvegym migrate``: simulate one live migration (``docs/model.md``, *Live migration*; ``docs/cli.md``)."""

from __future__ import annotations

import argparse
import json
import math

from pvegym.errors import ConfigError
from pvegym.sim.migration import Migration, MigrationParams
from pvegym.units import GiB, parse_duration, parse_rate, parse_size


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
        raise ConfigError(flag, f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(flag, f"{text!r} is not a finite number")
    return value


def params_from_args(args: argparse.Namespace) -> MigrationParams:
    """Parse and validate the flags; every error names its flag."""
    patched_text = str(args.qemu_server).lower()
    if patched_text not in ("patched", "unpatched"):
        raise ConfigError("--qemu-server", f"{args.qemu_server!r}: allowed are patched, unpatched")
    return MigrationParams(
        memory=parse_size(args.memory, "--memory"),
        bandwidth=parse_rate(args.bandwidth, "--bandwidth"),
        dirty_rate=parse_rate(args.dirty_rate, "--dirty-rate"),
        wws=None if args.wws is None else parse_size(args.wws, "--wws"),
        throttle_sensitivity=_number(args.throttle_sensitivity, "--throttle-sensitivity"),
        downtime_limit_ms=parse_duration(args.downtime_limit, "--downtime-limit") * 1000.0,
        qemu_server_patched=patched_text == "patched",
        sync_timer=not args.no_sync_timer,
        boost_factor=_number(args.boost_factor, "--boost-factor"),
        abort_factor=_number(args.abort_factor, "--abort-factor"),
        xbzrle=not args.no_xbzrle,
        xbzrle_delta=_number(args.xbzrle_delta, "--xbzrle-delta"),
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
    params = params_from_args(args)
    duration = parse_duration(args.duration, "--duration")
    if not (math.isfinite(duration) and duration > 0):
        raise ConfigError("--duration", "must be a positive duration")
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
