"""``pvegym simulate``: one scenario, one policy, one seed — its metrics and the moves."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pvegym.errors import ConfigError
from pvegym.limits import MAX_DURATION_S, MAX_SEED, check_number, whole_number
from pvegym.units import parse_duration

# the model (NumPy, numba) is imported when a command runs, not by `pvegym --help` (cli.py)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="simulate a scenario under a policy and print its metrics")
    p.add_argument(
        "--scenario",
        required=True,
        help="a named scenario or family (see `pvegym scenarios`) or a .toml file",
    )
    p.add_argument("--policy", default="noop", help="a named policy (see `pvegym policies`)")
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="episode seed (workload noise, LRM timing); for a family also the instance",
    )
    p.add_argument(
        "--duration", default=None, help="simulated time, e.g. 20m, 8h (default: the scenario's)"
    )
    p.add_argument(
        "--qemu-server",
        choices=("unpatched", "patched"),
        default=None,
        help="qemu-server without/with the non-convergence patch (default: the scenario's)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. migration.bandwidth=1GiB/s or nodes[0].maxcpu=8",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a policy constant, e.g. threshold=0.4",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def simulate(
    scenario: str,
    policy: str = "noop",
    seed: int = 0,
    duration: str | float | None = None,
    qemu_server: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one episode; the ``simulate --json`` document."""
    from pvegym.experiments.progress import bar
    from pvegym.experiments.record import play
    from pvegym.policies import make_policy
    from pvegym.sim import catalog
    from pvegym.sim.simulation import Simulation

    sets = catalog.parse_overrides(overrides, "--set")
    if qemu_server is not None:
        sets["migration.qemu_server"] = qemu_server
    scn = catalog.resolve(scenario, seed, sets, name_key="--scenario", set_key="--set").scenario
    pol = make_policy(policy, "--policy", param_key="--param", **(params or {}))
    whole_number(seed, "--seed", ge=0, le=MAX_SEED)
    seconds = None
    if duration is not None:
        seconds = check_number(
            parse_duration(duration, "--duration"),
            "--duration",
            gt=0.0,
            le=MAX_DURATION_S,
            unit="duration",
        )
    sim = Simulation(scn, seed)
    rounds = round((scn.duration if seconds is None else seconds) / sim.round_s)
    # a bar (stderr, on a terminal) for episodes longer than an hour; gone when done
    show = None if rounds > LONG_ROUNDS else False
    with bar(rounds, scn.name, "round", show, leave=False) as progress:
        pol.reset(seed)
        result, _ = play(sim, pol.decide, seconds, lambda _sim: progress.update())
    return {"scenario": scn.name, "policy": pol.name, "seed": seed, **result}


LONG_ROUNDS = 360  # 1 h of 10 s rounds: a longer episode shows a progress bar


def _params(items: list[str]) -> dict[str, Any]:
    from pvegym.config import parse_value

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError("--param", f"{item!r} is not KEY=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = parse_value(v.strip())
    return out


def run(args: argparse.Namespace) -> int:
    doc = simulate(
        args.scenario,
        args.policy,
        args.seed,
        args.duration,
        args.qemu_server,
        args.set,
        _params(args.param),
    )
    if args.json:
        print(json.dumps(doc, sort_keys=True))
        return 0
    print(format_summary(doc))
    return 0


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return str(v)


_BETTER = {"lower": "↓", "higher": "↑", None: " "}


def format_summary(doc: dict[str, Any]) -> str:
    """The human summary: every registered metric (value in its report unit, which way is better,
    what it measures), then the first moves."""
    from pvegym.sim.metrics import metric_specs

    m = doc["metrics"]
    lines = [
        f"scenario {doc['scenario']}  policy {doc['policy']}  seed {doc['seed']}  "
        f"simulated {m['sim_seconds'] / 3600:.2f} h",
        "",
        f"  {'metric':<21} {'value':>12} {'unit':<10}   what (↓ lower is better)",
    ]
    for spec in metric_specs():
        v = m.get(spec.name)
        shown = (
            v * spec.report_scale if isinstance(v, int | float) and spec.report_scale != 1 else v
        )
        lines.append(
            f"  {spec.name:<21} {_fmt(shown):>12} {spec.shown_unit:<10} {_BETTER[spec.better]} "
            f"{spec.description}"
        )
    if doc["moves"]:
        lines += ["", "moves (t, guest, source → target, outcome)"]
        lines += [
            f"  {mv['t']:>7.0f} s  {mv['guest']}  {mv['source']} → {mv['target']}  {mv['outcome']}"
            for mv in doc["moves"][:30]
        ]
        if len(doc["moves"]) > 30:
            lines.append(f"  … {len(doc['moves']) - 30} more (use --json)")
    return "\n".join(lines)
