"""``pvegym import EXPORT --out scenario.toml``: an operator's cluster export as a scenario.

Reads what ``scripts/pve-export.sh`` wrote (a directory or a tarball), maps it onto the scenario
schema over a window of its RRD series (:mod:`pvegym.pve_export.to_scenario`) and writes the
scenario, its traces beside it (``<stem>-traces/rrd/*.csv``) and ``<stem>.import.json`` (window,
resolution, migrations, notes). Prints the window and every note: what the scenario leaves out or
had to assume. A bad or partial export ends in one line naming the file and the field, exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pvegym.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="turn a Proxmox VE cluster export into a scenario file")
    p.add_argument("export", help="the directory or tarball scripts/pve-export.sh wrote")
    p.add_argument("--out", required=True, help="the scenario file to write (.toml)")
    add_window_options(p)
    p.set_defaults(func=run)


def add_window_options(p: argparse.ArgumentParser) -> None:
    """Options ``import`` and ``whatif`` share."""
    p.add_argument(
        "--window",
        default="week",
        help="hour | day | week (that series' whole span) or a duration such as 36h: the finest "
        "exported series that covers it is used (default: week)",
    )
    p.add_argument(
        "--fit-fraction",
        type=float,
        default=2.0 / 3.0,
        help="share of the window the validation run's host load is fitted on (default 2/3)",
    )
    p.add_argument(
        "--crs-units",
        choices=("percent", "fraction"),
        default=None,
        help="units of crs ha-auto-rebalance-threshold/-margin where the export cannot prove them "
        "(percent since libpve-cluster-perl 9.1.5, a 0–1 fraction before)",
    )
    p.add_argument(
        "--dirty-rate",
        default="0",
        help="raw dirty rate assumed for every VM (PVE records none), e.g. 50MiB/s (default 0)",
    )


def dirty_rate(text: str) -> float:
    from pvegym.units import parse_rate

    rate = parse_rate(text, "--dirty-rate") if text not in ("0", "0.0") else 0.0
    if rate < 0:
        raise ConfigError("--dirty-rate", "must be ≥ 0")
    return rate


def run(args: argparse.Namespace) -> int:
    from pvegym.pve_export.cluster import read_export
    from pvegym.pve_export.to_scenario import build_import
    from pvegym.pve_export.write import write_import
    from pvegym.sim import catalog

    out = Path(args.out)
    if out.suffix != ".toml":
        raise ConfigError("--out", f"{args.out!r} must name a .toml file")
    if not out.parent.is_dir():
        raise ConfigError("--out", f"no such directory {str(out.parent)!r}")
    export = read_export(Path(args.export), args.crs_units)
    imp = build_import(
        export, args.window, out.stem, args.fit_fraction, dirty_rate(args.dirty_rate)
    )
    written = write_import(imp, out)
    scn = catalog.resolve(str(out)).scenario  # what was written loads and validates
    print(f"imported PVE {export.version} ({export.rrd_format} RRD format)")
    crs = export.crs
    if crs.threshold is not None or crs.margin is not None:
        units = "percent" if crs.percent_units else "fraction"
        print(f"crs threshold and margin in {units} ({crs.units_why})")
    print(f"window: {imp.window.describe()}")
    print(
        f"{len(scn.nodes)} nodes, {len(scn.guests)} guests "
        f"({sum(g.ha for g in scn.guests)} HA, {sum(g.local_resources for g in scn.guests)} "
        f"cannot migrate), {len(scn.node_affinity)} node-affinity and "
        f"{len(scn.resource_affinity)} resource-affinity rules, {len(scn.events)} replayed "
        "migrations"
    )
    for kind, heading in (
        ("dropped", "not represented by the scenario"),
        ("assumed", "assumed (not in the export)"),
        ("info", "other facts"),
    ):
        lines = [n for n in imp.notes if n.kind == kind]
        if lines:
            print(f"{heading}:")
            for n in lines:
                print(f"  {n.subject}: {n.text}")
    print(f"wrote {out} and {len(written) - 1} files beside it")
    return 0
