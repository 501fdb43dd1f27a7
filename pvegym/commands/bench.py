"""``pvegym bench``: step cost of the environment against ``CartPole-v1``, a simulated day, and
how the step scales with cluster size (:mod:`pvegym.experiments.bench` measures; the figures and
their ``--json`` keys are documented there)."""

from __future__ import annotations

import argparse
import json

from pvegym.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure environment step cost and simulator speed")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--quick", action="store_true", help="a few seconds: fewer steps and sizes")
    p.add_argument(
        "--ha-stack",
        choices=("model", "full", "engine"),
        default=None,
        help="the scenarios' HA stack (scenario key ha_stack): the model's round (default), the "
        "port of pve-ha-manager (full) or the compiled engine's CRM round with the port's LRMs "
        "(engine; both: no vector-env figures); not with --only ha-round, which measures the full "
        "stack's round",
    )
    p.add_argument(
        "--only",
        choices=["ha-round"],
        help="measure one figure alone: ha-round (a full round of the HA stack vs CartPole)",
    )
    p.add_argument(
        "--out", metavar="FILE", help="also write the figures (with provenance) as JSON to FILE"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pvegym.experiments.bench import bench, provenance

    if args.only == "ha-round" and args.ha_stack is not None:
        raise ConfigError("--ha-stack", "not with --only ha-round (it measures the full stack)")
    if args.out:
        from pvegym.config import check_out_file

        check_out_file(args.out, "--out")  # before minutes of measuring
    if args.only == "ha-round":
        from pvegym.experiments.bench import bench_only_ha_round

        doc = bench_only_ha_round(quick=args.quick)
    else:
        doc = bench(quick=args.quick, ha_stack=args.ha_stack or "model")
    doc["provenance"] = provenance()
    if args.out:
        from pathlib import Path

        from pvegym.experiments.files import write_json_atomic

        write_json_atomic(Path(args.out), doc)
    if args.json:
        print(json.dumps(doc, sort_keys=True))
        return 0
    if args.only == "ha-round":
        print(f"CartPole-v1                 {doc['cartpole_step_us']:10.1f} µs/step")
        print(
            f"full HA round (4×12)        {doc['ha_round_us']:10.1f} µs/round"
            f"  ×{doc['ha_round_ratio']:.1f} CartPole"
        )
        return 0
    print(f"CartPole-v1                 {doc['cartpole_step_us']:10.1f} µs/step")
    for key, label in (("small", "bench-small (8×64)"), ("large", "bench-large (64×2000)")):
        print(
            f"{label:<27} {doc[f'{key}_step_us']:10.1f} µs/step "
            f"(step() {doc[f'{key}_env_step_us']:.1f})  ×{doc[f'{key}_ratio']:.1f} CartPole"
        )
    note = " (extrapolated from 1 h)" if doc["day_extrapolated"] else ""
    for name, secs in doc["day_s"].items():
        print(
            f"simulated day, {name:<13} {secs:10.2f} s{note}  ×{doc['day_ratio'][name]:.1f} "
            f"CartPole day, decide {doc['day_decide_us'][name]:.1f} µs/round"
        )
    for row in doc["vector"]:
        label = f"vector {row['scenario']} N={row['n']}"
        print(
            f"{label:<27} {row['step_us']:10.1f} µs/sub-step  ×{row['ratio']:.1f} CartPole, "
            f"×{row['sync_ratio']:.1f} SyncVectorEnv(CartPole) ({row['sync_step_us']:.1f} µs)"
        )
    for key, run in doc["vec_wait"].items():
        print(
            f"learner waits on the env    {run['share']:10.3f} of {run['learn_s']:.1f} s "
            f"({key}, {run['timesteps']} steps)"
        )
    print("scaling (nodes × guests → µs/step)")
    for row in doc["scaling"]:
        print(f"  {row['nodes']:>3} × {row['guests']:<5} {row['step_us']:10.1f}")
    print(f"  exponent vs guests: {doc['scaling_exponent']:.2f}")
    return 0
