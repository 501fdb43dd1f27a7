"""The field scenarios under noop, upstream and patched with each HA stack (scenario key
``ha_stack``): mean metrics over the seeds and how many seeds hold the target
(``pvegym.experiments.ablation.check_target``, the ``simulate`` loop of ``run_episode``).

    .venv/bin/python scripts/ha_stack_field.py [SEEDS=10] [OUT.json]
"""

import json
import sys
import time

from pvegym.experiments.ablation import check_target, needed, qemu_server_for, run_episode
from pvegym.sim.metrics import ABLATION, GLANCE, metrics_in
from pvegym.sim.scenarios import FIELD_SCENARIOS

#: the headline's glance metrics and the ablation's (the metric registry), plus what a motion costs
KEYS = list(
    dict.fromkeys(
        [
            *metrics_in(GLANCE),
            *metrics_in(ABLATION),
            "moves_succeeded",
            "migration_seconds",
            "downtime_s",
        ]
    )
)
seeds = range(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
rows = []
for scenario in FIELD_SCENARIOS:
    for policy in ("noop", "upstream", "patched"):
        for stack in ("model", "full"):
            t0 = time.process_time()
            judged = "upstream" if policy == "upstream" else "patched"
            qemu = qemu_server_for(scenario, judged)
            eps = [
                run_episode(scenario, policy, s, qemu_server=qemu, overrides={"ha_stack": stack})
                for s in seeds
            ]
            res = [check_target(ep, policy) for ep in eps] if policy != "noop" else []
            passes = sum(1 for ok, _ in res if ok)
            none = all(ok is None for ok, _ in res) if res else True
            means = {}
            for k in KEYS:
                vals = [ep.metrics[k] for ep in eps if ep.metrics.get(k) is not None]
                means[k] = sum(vals) / len(vals) if vals else None
            row = {
                "scenario": scenario,
                "policy": policy,
                "stack": stack,
                "means": means,
                "target_passes": None if none else passes,
                "needed": needed(len(seeds)),
                "figures": [d for _, d in res],
                "cpu_s": time.process_time() - t0,
            }
            rows.append(row)
            print(
                json.dumps(
                    {k: row[k] for k in ("scenario", "policy", "stack", "target_passes", "cpu_s")}
                ),
                flush=True,
            )
out = sys.argv[2] if len(sys.argv) > 2 else "ha_stack_field.json"
with open(out, "w") as f:
    json.dump(rows, f, indent=1)
print("done")
