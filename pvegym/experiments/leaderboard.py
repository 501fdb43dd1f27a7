"""``results/benchmark/leaderboard.md``: every task × every reference and committed agent.

``python -m pvegym.experiments.leaderboard`` (``docs/benchmark.md``) scores, per task, the
reference heuristics and the oracle from the shipped reference table (whose figures the test
suite re-simulates) and the committed learned agents by simulation — each exactly as
``pvegym benchmark TASK --policy SPEC`` scores it — and writes ``results/benchmark/<task>/``
(``report.md``, ``scores.json``) and the leaderboard. A flat agent (one output per padded slot)
is ``n/a`` on a task whose clusters do not fit its layout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pvegym.experiments.benchmark import (
    COMPARED,
    check_table,
    finite_or_none,
    parse_spec,
    read_table,
    report_lines,
    results_from_table,
    run_policy,
    score,
    scores_document,
)
from pvegym.experiments.benchmark_episodes import ORACLE_LABEL, REFERENCE_LABELS
from pvegym.experiments.files import write_bytes_durable, write_json_atomic
from pvegym.registration import task_id
from pvegym.sim import catalog
from pvegym.sim.tasks import TASKS, Task

#: the committed learned agents: leaderboard label → (SPEC, the run directory under results/)
LEARNED: dict[str, tuple[str, str]] = {
    "learned-best": ("learned:results/train-pair-scorer", "results/train-pair-scorer"),
    "ppo (flat)": ("learned:results/train-ppo", "results/train-ppo"),
    "maskable-ppo (flat)": ("learned:results/train-maskable-ppo", "results/train-maskable-ppo"),
}


def _fits(run: Path, task: Task) -> bool:
    """Whether the agent of ``run`` can act on every instance of ``task`` (a flat agent's padded
    layout must hold the family's largest cluster; the pair scorer fits any)."""
    from pvegym.policies.learned import resolve_model

    info = resolve_model(str(run), "model")
    if info.policy == "PairScorer":
        return True
    nodes, guests = catalog.max_sizes(task.family)
    return info.max_nodes >= nodes and info.max_guests >= guests


def training(run: Path) -> str:
    """An agent's training budget, seeds and objective, from its run's ``config.json`` and
    ``manifest.json``."""
    cfg = json.loads((run / "config.json").read_text())
    man = (
        json.loads((run / "manifest.json").read_text()) if (run / "manifest.json").is_file() else {}
    )
    seeds = cfg.get("seeds") or [cfg.get("seed")]
    parts = [f"{cfg['algo']}, {cfg['total_timesteps']:,} steps per seed, seeds {seeds}"]
    imitation = cfg.get("imitation") or {}
    if imitation.get("expert"):
        parts.append(f"cloned from {imitation['expert']} first")
    selected = man.get("selected")
    if selected:
        parts.append(
            f"selected seed {man.get('selected_seed')} at {selected.get('timesteps'):,} PPO steps "
            f"on validation instances {cfg['selection']['seeds'][0]}–{cfg['selection']['seeds'][-1]}"
        )
    weights = cfg.get("env", {}).get("reward_weights")
    parts.append(f"trained on {cfg['env']['scenario']} with reward weights {weights}")
    return "; ".join(parts)


def build(table: dict[str, Any], out: Path, root: Path, progress: bool = True) -> list[str]:
    """Score everything, write each task's files under ``out``, return the leaderboard's lines."""
    rows: dict[str, dict[str, dict[str, Any] | None]] = {}
    for name, t in TASKS.items():
        refs = check_table(table, t)
        policies: dict[str, dict[str, Any]] = {}
        for label in REFERENCE_LABELS:
            if label in refs:
                policies[label] = score(t, label, results_from_table(table, t, label), refs)
        for label, (spec, run) in LEARNED.items():
            if not _fits(root / run, t):
                continue
            parsed = parse_spec(spec)
            policies[label] = score(t, label, run_policy(t, parsed), refs)
            if progress:
                print(f"{name} {label}: {policies[label]['normalized_score']:.1f}", flush=True)
        doc = finite_or_none(scores_document(t, task_id(name, t.version), policies))
        task_dir = out / name
        task_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(task_dir / "scores.json", doc)
        _write_text(task_dir / "report.md", "\n".join(report_lines(doc)) + "\n")
        rows[name] = {label: doc["policies"].get(label) for label in [*REFERENCE_LABELS, *LEARNED]}
    return _lines(table, rows, root)


def _write_text(path: Path, text: str) -> None:
    write_bytes_durable(path, lambda fh: fh.write(text.encode()))


def _cell(p: dict[str, Any] | None) -> list[str]:
    if p is None:
        return ["n/a"] * 5
    s, (lo, hi) = p["normalized_score"], p["ci95"]
    w = p["wins_losses_ties"].get("patched-tuned")
    c = p["constraints"]
    return [
        f"{_f(s)} [{_f(lo)}, {_f(hi)}]",
        f"{w['wins']}/{w['losses']}/{w['ties']}" if w else "—",
        str(p["moves"]),
        f"{c['moves_failed']} / {c['oscillations']} / {c['churn_moves']}",
        f"{p['mean_cost']:,.0f}",
    ]


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def _lines(table: dict[str, Any], rows: dict[str, Any], root: Path) -> list[str]:
    lines = [
        "# pvegym benchmark leaderboard",
        "",
        "Regenerated by `python -m pvegym.experiments.leaderboard` (docs/benchmark.md). Score: "
        "100 × (mean noop − mean policy) / (mean noop − mean oracle) of `BALANCER_COST` over "
        "each task's test instances, paired bootstrap 95 % CI; W/L/T per instance against "
        "`patched-tuned`; moves and failed / oscillation / churn counts are totals over the "
        "test episodes. Per-task reports with IQM, probability of improvement "
        "and W/L/T against every reference: `results/benchmark/<task>/report.md`.",
        "",
    ]
    for name, by_label in rows.items():
        t = TASKS[name]
        lines += [
            f"## {task_id(name, t.version)} ({name}: {t.description})",
            "",
            f"{len(t.test)} test instances, seeds {t.test.start}–{t.test.stop - 1}.",
            "",
            "| policy | score [95 % CI] | W/L/T vs patched-tuned | moves | failed / osc / churn "
            "| mean cost |",
            "|---|---|---|---:|---|---:|",
        ]
        for label, p in by_label.items():
            lines.append("| " + " | ".join([f"`{label}`", *_cell(p)]) + " |")
        oracle = table["tasks"][name]["policies"].get(ORACLE_LABEL, {})
        below = _oracle_below(table, t)
        lines += [
            "",
            f"The oracle ran on {len(oracle)} of {len(t.test)} test instances "
            f"({table['tasks'][name]['mean_wall_s'].get(ORACLE_LABEL, 0):.1f} s per episode); "
            + "per instance its cost is at most each reference's on "
            + ", ".join(f"{n}/{len(t.test)} (vs {r})" for r, n in below.items())
            + ".",
            "",
        ]
    lines += ["## The learned agents' training", ""]
    for label, (_, run) in LEARNED.items():
        lines.append(f"* `{label}` (`{run}`): {training(root / run)}.")
    lines += [
        "",
        "Reference definitions (the oracle's frozen constants, patched-tuned's trial-181 "
        "constants): `pvegym/data/benchmark/references.json` → `definitions`.",
    ]
    return lines


def _oracle_below(table: dict[str, Any], t: Task) -> dict[str, int]:
    rows = table["tasks"][t.name]["policies"]
    oracle = rows.get(ORACLE_LABEL, {})
    out = {}
    for r in COMPARED:
        ref = rows.get(r, {})
        out[r] = sum(
            1
            for s in map(str, t.test)
            if s in oracle and s in ref and oracle[s]["cost"] <= ref[s]["cost"]
        )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pvegym.experiments.leaderboard")
    p.add_argument("--out", type=Path, default=Path("results/benchmark"))
    p.add_argument("--root", type=Path, default=Path("."), help="where results/train-* live")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    lines = build(read_table(), args.out, args.root, progress=not args.quiet)
    _write_text(args.out / "leaderboard.md", "\n".join(lines) + "\n")
    print(f"leaderboard → {args.out / 'leaderboard.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
