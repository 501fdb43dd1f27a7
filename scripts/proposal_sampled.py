"""Sampled-action validation of a proposal agent (issue 32, item 2), beside the deterministic
figures its training run wrote: the agent's sampled actions (seeded by the instance, so
repeatable) against ``patched-tuned`` on the run's selection instances (the first 30 of the
validation split) and its held-out ones (40 from 9,500), never the test split.

    .venv/bin/python scripts/proposal_sampled.py results/train-proposals-explore

Writes ``RUN/sampled.json`` (W/L/T, mean paired difference and its bootstrap CI per block).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pvegym.experiments.benchmark_episodes import balancer_episode, make_reference
from pvegym.experiments.files import write_json_atomic
from pvegym.learning.proposal_train import HOLDOUT_OFFSET, compare
from pvegym.policies.registry import make_policy
from pvegym.sim.tasks import TASKS


def main(run: Path) -> None:
    t = TASKS["small"]
    v = list(t.validation)
    out = {}
    blocks = (("validation", v[:30]), ("holdout", v[HOLDOUT_OFFSET : HOLDOUT_OFFSET + 40]))
    for name, seeds in blocks:
        mine, ref = {}, {}
        for s in seeds:
            p = make_policy("learned", "model", model=str(run / "model.zip"), deterministic=False)
            mine[s] = balancer_episode(t, s, p).cost
            ref[s] = balancer_episode(t, s, make_reference("patched-tuned")).cost
        out[name] = compare(mine, ref, f"{run.name}/sampled/{name}")
        keys = ("wins", "losses", "ties", "mean_difference", "ci95")
        print(name, {k: out[name][k] for k in keys}, flush=True)
    write_json_atomic(run / "sampled.json", out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
