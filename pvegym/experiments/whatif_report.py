"""The what-if report: ``report.md`` an operator reads in two minutes, its plots and JSON.

Order of ``report.md`` (:func:`write_report`): under the title, that no guest is HA-managed
(where none is); the window and resolution it replayed; a node whose guests exceed it, flagged; the
recommendation in the PVE version's own option names and units, before and after the fixes, with
its held-out CI against "off" ("nothing to decide" with its reason where no guest can move, and the
busiest guests made HA replayed, labelled hypothetical, where none is HA-managed); the fixes the operator can make and the window simulated after
them; the sweep (and the settings that would have failed or churned); what PVE would gain from
balancers it does not have; a table of every policy's numbers; per policy the motions it would
have made (repeats grouped: "vm:101 → node2, 246×, all failed: local resource, every 40 s"); what
the real cluster did (its task log); the model-vs-reality panel (held-out errors); what the
scenario leaves out. Everything is scored by :data:`pvegym.sim.cost.BALANCER_COST`.
Plots: ``plots/timeline-<policy>.png`` (:func:`pvegym.experiments.plots.timeline`),
``plots/model-vs-reality.png`` and ``plots/compare.png``.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from pvegym.experiments import plots
from pvegym.experiments.report import fmt
from pvegym.experiments.stats import Estimate, verdict
from pvegym.experiments.whatif import PRESSURE_PCT, PolicyRun, Recommendation, WhatIf, save_json
from pvegym.experiments.whatif_sweep import BLOCKS, FIT_SEEDS, Sweep
from pvegym.provenance import git_commit, package_versions
from pvegym.sim.cost import BALANCER_COST, weighted_cost
from pvegym.sim.metrics import GLANCE, metric_spec, metrics_in
from pvegym.units import GiB

#: what a what-if adds to the registry's at-a-glance table: retries and the network they cost
WHATIF_EXTRA = ("failed_repeats", "migration_bytes", "cpu_shortfall_core_s")
MOTIONS_LISTED = 12  # individual motions listed per policy (all are in whatif.json)
MOTIONS_MARKED = 150  # motions marked on a timeline at most
SWEEP_LISTED = 10  # sweep settings listed per table (all are in whatif.json)


def _utc(t: float) -> str:
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def glance() -> tuple[str, ...]:
    """The report's columns: the metric registry's at-a-glance table plus :data:`WHATIF_EXTRA`."""
    base = metrics_in(GLANCE)
    return (*base, *(m for m in WHATIF_EXTRA if m not in base))


def _metric(run: PolicyRun, key: str) -> str:
    v = run.metrics.get(key)
    return "—" if v is None else fmt(float(v) * metric_spec(key).report_scale)


def cost(run: PolicyRun) -> float:
    """The benchmark's cost of a replay (:data:`pvegym.sim.cost.BALANCER_COST`)."""
    return weighted_cost(BALANCER_COST, run.metrics)


COST_TERMS = " + ".join(f"{w:g}·{m}" for m, w in BALANCER_COST.items())


def _crs_line(mode: str, options: dict[str, Any]) -> str:
    """``datacenter.cfg``'s ``crs`` property string with ``options``."""
    return "crs: " + ",".join([f"ha={mode}", *(f"{k}={v}" for k, v in options.items())])


def _n(x: float) -> str:
    """A mean count: whole numbers as such, else one decimal."""
    return f"{x:.0f}" if x == int(x) else f"{x:.1f}"


def _gain(e: Estimate | None) -> str:
    if e is None:
        return "no value"
    return f"{e.mean:+,.0f} [{e.lo:+,.0f}, {e.hi:+,.0f}]"


def _choice_lines(rec: Recommendation, mode: str, when: str) -> list[str]:
    """One recommendation (before or after the fixes) in the version's option names and units."""
    sw = rec.sweep
    if sw is None or rec.hypothetical:
        # "nothing to decide[ on …]: why" → the verdict in bold, then why
        verdict_, _, why = (rec.reason or "nothing to decide: ").partition(": ")
        return [f"**{when}: {verdict_}.** {why[:1].upper() + why[1:]}.", *_upgrade_lines(rec)]
    if sw.crs:
        return [*_crs_choice_lines(rec, when), *_upgrade_lines(rec)]
    opts = rec.options()
    assert opts is not None
    units = "percent" if rec.percent else "fractions"
    if sw.chosen is None:
        head = f"**{when}: keep `ha-auto-rebalance` off** (`{_crs_line(mode, opts)}`)"
    else:
        head = f"**{when}: switch `ha-auto-rebalance` on with these values** (`{_crs_line(mode, opts)}`; threshold and margin in {units}, as PVE {rec.version} reads them: {rec.units_why})"
    lines = [f"{head} — {sw.why}."]
    if rec.current is not None:
        cur = sw.key(sw.current)
        lines.append(
            f"The cluster runs {sw.current.label(rec.percent) if sw.current else 'off'}: "
            f"fit-part cost {np.mean(sw.fit_cost[cur]):,.0f} against {np.mean(sw.fit_cost['off']):,.0f} off."
        )
    return [*lines, *_held_lines(sw, rec.percent, "off")]


def _crs_line_of(options: dict[str, Any]) -> str:
    """``crs: ha=…,ha-rebalance-on-start=…`` of a pre-9.1 setting's options."""
    return "crs: " + ",".join(f"{k}={v}" for k, v in options.items())


def _crs_choice_lines(rec: Recommendation, when: str) -> list[str]:
    """A version without the balancer: its ``crs`` setting, held out against the current one."""
    sw = rec.sweep
    assert sw is not None and sw.current is not None and sw.chosen is not None
    chosen = _crs_line_of(sw.chosen.pve(False))
    current = _crs_line_of(sw.current.pve(False))
    g = sw.held_gain
    none_matters = sw.chosen == sw.current and sw.all_tie() and (g is None or g.lo <= 0.0 <= g.hi)
    if none_matters:
        head = (
            f"**{when}: keep `{current}` — no setting of this version changes this window's "
            f"cost.** {sw.why[:1].upper() + sw.why[1:]}."
        )
    elif sw.chosen == sw.current:
        head = f"**{when}: keep `{current}`** — {sw.why}."
    else:
        head = f"**{when}: change to `{chosen}`** (the cluster runs `{current}`) — {sw.why}."
    lines = [head, *_held_lines(sw, False, f"the current `{current}`")]
    acts = "; ".join(rec.scheduler_acts_on)
    if rec.scheduler_events:
        lines += ["", f"In this window the scheduler acts on: {', '.join(rec.scheduler_events)}."]
    else:
        lines += [
            "",
            f"The setting would matter on an event this window does not have: {acts}.",
        ]
    return lines


def _upgrade_lines(rec: Recommendation) -> list[str]:
    """The 9.x sweep of a version without the balancer, labelled hypothetical."""
    sw = rec.sweep if rec.hypothetical else rec.upgrade
    if sw is None or sw.crs:
        return []
    pick = "off" if sw.chosen is None else sw.chosen.label(True)
    return [
        "",
        f"*Hypothetical upgrade* — on a PVE with `ha-auto-rebalance` (9.1 or later, percent "
        f"units), the sweep below would choose **{pick}** ({sw.why}).",
        *_held_lines(sw, True, "off"),
    ]


def _held_lines(sw: Sweep, percent: bool, against: str) -> list[str]:
    if sw.compared is None or sw.held_gain is None:
        return []
    on = sw.compared.label(percent)
    g = sw.held_gain
    word = verdict(g, "higher")
    return [
        "",
        f"Held out (the other {BLOCKS // 2} blocks, {len(sw.held_seeds)} fresh seeds): "
        f"{on} against {against} gains **{_gain(g)}** cost units (mean, 95 % CI; positive: "
        f"cheaper than {against}; {word}). The CI covers the model's randomness, not the one "
        "recorded window: another window would have other loads.",
    ]


def recommendation(result: WhatIf) -> list[str]:
    """The report's first section: what PVE's own options should be, before and after the fixes."""
    rec, after = result.recommendation, result.after
    mode = result.export.crs.mode
    how = (
        f"by the benchmark's cost ({COST_TERMS}, docs/benchmark.md; lower is better), on "
        f"alternate blocks of the window (the *fit* part: {BLOCKS // 2} of {BLOCKS} blocks, "
        f"{FIT_SEEDS} seeds), then held out"
    )
    if rec.sweep is None:  # no guest can move: nothing was swept
        lines = []
    elif rec.has_balancer:
        lines = [f"Chosen among the settings PVE {rec.version} has, {how}.", ""]
    elif rec.sweep.crs:
        names = sorted({k for st in rec.sweep.settings for k in st.pve(False)})
        lines = [
            f"PVE {rec.version} has no automatic balancer (`ha-auto-rebalance` came with "
            "pve-ha-manager 5.2.0, PVE 9.1); its CRS options "
            f"({', '.join(f'`{n}`' for n in names)}: `ha=basic|static` since PVE 7.3, "
            "`ha-rebalance-on-start` since 7.4) only choose the node a guest starts or recovers "
            f"on. Chosen among them, {how} against the cluster's current setting. Each is "
            "replayed with nothing balancing; the model has no `basic` mode (it is replayed as "
            "the import's stand-in) and `ha-rebalance-on-start` acts only on a start request.",
            "",
        ]
    else:
        lines = [
            f"PVE {rec.version} has no automatic balancer; the sweep below is scored {how}.",
            "",
        ]
    lines += [
        *_choice_lines(rec, mode, "As it is" if after is not None else "Recommendation"),
        *hypothetical_lines(result),
    ]
    if after is not None:
        lines += [
            "",
            *_choice_lines(after.recommendation, mode, "After the fixes below"),
            "",
            "The second applies once the fixes of the next section are made (the window is "
            "replayed with them).",
        ]
    return lines


def _fixes_section(result: WhatIf) -> list[str]:
    lines = ["## Fixes you can make", ""]
    if not result.fixes:
        return [*lines, "No HA-managed guest's migration would fail or loop.", ""]
    lines += [
        "Guests whose migrations would fail or loop (reason from the guest's config), the fix, and "
        "how often each balancer's replay tried them:",
        "",
        "| guest | problem | reason | fix | motions in the replays |",
        "|---|---|---|---|---|",
    ]
    for f in result.fixes:
        tried = ", ".join(f"{k} {n}" for k, n in f.attempts.items()) or "—"
        lines.append(
            f"| {f.sid} | {f.problem} | {f.reason} | {'; '.join(x.fix for x in f.fixes)} | {tried} |"
        )
    after = result.after
    assert after is not None
    sets = ", ".join(f"`{k} = {str(v).lower()}`" for k, v in after.overrides.items())
    lines += [
        "",
        f"### The window after the fixes (simulated: {sets})",
        "",
        "| policy | | moves | failed | churn | oscillations | guest stall (s) | cost |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    before = {r.entry.label: r for r in result.runs}
    for r in after.runs:
        for tag, run in (("as it is", before[r.entry.label]), ("after the fixes", r)):
            m = run.metrics
            lines.append(
                f"| {r.entry.label} | {tag} | {m['moves']} | {m['moves_failed']} | {m['churn_moves']} | "
                f"{m['oscillations']} | {float(m['guest_stall_s']):,.0f} | {cost(run):,.0f} |"
            )
    return [*lines, ""]


def _sweep_section(result: WhatIf) -> list[str]:
    lines = ["## The sweep: every setting tried", ""]
    recs = [("as it is", result.recommendation.sweep, result.recommendation)]
    if result.recommendation.upgrade is not None:
        recs.append(
            (
                "hypothetical upgrade to PVE ≥ 9.1 (`ha-auto-rebalance`, percent units)",
                result.recommendation.upgrade,
                result.recommendation,
            )
        )
    if result.after is not None:
        recs.append(
            ("after the fixes", result.after.recommendation.sweep, result.after.recommendation)
        )
    for tag, sw, rec in recs:
        if sw is None:
            continue
        percent = True if sw is rec.upgrade or rec.hypothetical else rec.percent
        mean = {k: float(np.mean(v)) for k, v in sw.fit_cost.items()}
        order = sorted(mean, key=lambda k: (mean[k], k))
        shown = order[:SWEEP_LISTED]
        for k in dict.fromkeys([sw.baseline, *([sw.key(sw.current)] if sw.current else [])]):
            if k not in shown:
                shown.append(k)
        by = {sw.key(st): st for st in sw.settings}
        what = "off and the current setting" if not sw.crs else "the current setting"
        lines += [
            f"### {tag}: the {min(SWEEP_LISTED, len(mean))} cheapest settings on the fit part, with {what} "
            f"(of {len(sw.settings)}{'' if sw.crs else ' + off'}; all in `whatif.json`)",
            "",
            "| setting | fit cost (mean of seeds) | moves | failed | churn | oscillations | tie with the cheapest |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for k in shown:
            m = sw.metrics[k]
            name = "off" if k == "off" else by[k].label(percent)
            lines.append(
                f"| {name} | {mean[k]:,.0f} | {_n(m['moves'])} | {_n(m['moves_failed'])} | "
                f"{_n(m['churn_moves'])} | {_n(m['oscillations'])} | {'yes' if k in sw.tie else ''} |"
            )
        bad = sw.churned_or_failed()
        lines.append("")
        if bad:
            fails = sum(1 for _, m in bad if m["moves_failed"])
            churn = sum(1 for _, m in bad if m["churn_moves"])
            osc = sum(1 for _, m in bad if m["oscillations"])
            lines.append(
                f"Settings that would have failed or churned ({len(bad)} of {len(sw.settings)}): "
                f"{fails} with failed migrations, {churn} with churn moves, {osc} with oscillations "
                "(means over the fit seeds, whole window):"
            )
            lines.append("")
            for st, m in bad[:SWEEP_LISTED]:
                lines.append(
                    f"- {st.label(percent)}: {_n(m['moves_failed'])} failed, "
                    f"{_n(m['churn_moves'])} churn, {_n(m['oscillations'])} oscillations"
                )
            if len(bad) > SWEEP_LISTED:
                lines.append(
                    f"- … {len(bad) - SWEEP_LISTED} more in `whatif.json` (`sweep.churned_or_failed`)"
                )
        else:
            lines.append("No setting would have failed, churned or oscillated.")
        lines.append("")
    return lines if len(lines) > 2 else []


def _others_section(result: WhatIf) -> list[str]:
    """Balancers PVE does not have, against the replays of what it has (one seed each)."""
    runs = {r.entry.label: r for r in result.runs}
    costs = {label: cost(r) for label, r in runs.items()}
    lines = [
        "## What PVE would gain if it had them (not in PVE)",
        "",
        "The field report's patched balancer, guest-centric (with `--study`, patched with a "
        "study's constants; with `--agent RUN`, learned agents) are not options of any PVE "
        "release. One replay each, same cost; `noop` is `ha-auto-rebalance` off, `upstream` "
        "PVE's balancer with this cluster's settings."
        + (
            ""
            if any(r.entry.policy == "learned" for r in result.runs)
            else " No learned agent was named (`--agent`)."
        ),
        "",
        "| policy | in PVE | cost | vs noop | vs upstream |",
        "|---|---|---:|---:|---:|",
    ]
    for label, c in sorted(costs.items(), key=lambda kv: (kv[1], kv[0])):
        in_pve = "yes" if label in ("noop", "upstream") else "no"
        lines.append(
            f"| {label} | {in_pve} | {fmt(c)} | {c - costs['noop']:+,.0f} | {c - costs['upstream']:+,.0f} |"
        )
    lowest = min(costs.values())
    best = sorted(k for k, c in costs.items() if c == lowest)
    lines.append("")
    if len(best) > 1:
        lines.append(f"{', '.join(f'`{k}`' for k in best)} cost the same: no winner among them.")
    else:
        lines.append(f"`{best[0]}` costs least in this one replay.")
    for label, r in runs.items():
        if r.metrics["failed_repeats"]:
            fails = _groups(r.moves)[0] if r.moves else None
            what = (
                f" (mostly {fails['guest']} → {fails['target']}: {fails['reason']})"
                if fails
                else ""
            )
            lines.append(
                f"- `{label}` repeats migrations that cannot succeed: {r.metrics['moves_failed']} "
                f"failed, {r.metrics['failed_repeats']} of them repeats{what}."
            )
        if r.metrics["oscillations"]:
            lines.append(
                f"- `{label}` moves guests back and forth: {r.metrics['oscillations']} oscillations."
            )
        if r.metrics["churn_moves"]:
            lines.append(
                f"- `{label}` moves guests while no node is under pressure: "
                f"{r.metrics['churn_moves']} churn moves."
            )
    return [*lines, ""]


def _groups(moves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Motions grouped by (guest, source, target, outcome, reason), largest group first."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for m in moves:
        groups[(m["guest"], m["source"], m["target"], m["outcome"], m["reason"])].append(m)
    out = []
    for (guest, source, target, outcome, reason), ms in groups.items():
        ts = [m["t"] for m in ms]
        gaps = np.diff(ts)
        out.append(
            {
                "guest": guest,
                "source": source,
                "target": target,
                "outcome": outcome,
                "reason": reason or "—",
                "count": len(ms),
                "first": ts[0],
                "last": ts[-1],
                "median_gap_s": float(np.median(gaps)) if gaps.size else math.nan,
            }
        )
    return sorted(out, key=lambda g: (-g["count"], g["first"]))


def _motion_section(result: WhatIf, run: PolicyRun) -> list[str]:
    start = result.imp.window.start
    moves = run.moves
    lines = [f"### {run.entry.label}", "", f"{run.entry.about}."]
    if not moves:
        return [*lines, "", "No motions.", ""]
    disks = result.local_disk_bytes
    extra = sum(disks.get(m["guest"], 0.0) for m in moves if m["outcome"] == "succeeded")
    lines += [
        "",
        f"{len(moves)} motions; migration traffic {run.metrics['migration_bytes'] / GiB:,.1f} GiB "
        f"in {run.metrics['migration_seconds']:,.0f} s, guest downtime {run.metrics['downtime_s']:.2f} s"
        + (f", plus {extra / GiB:,.0f} GiB of local disks the model does not send" if extra else "")
        + ".",
        "",
        "| guest | from → to | motions | outcome | why | first | last | every |",
        "|---|---|---:|---|---|---|---|---:|",
    ]
    for g in _groups(moves):
        every = "—" if math.isnan(g["median_gap_s"]) else f"{g['median_gap_s']:.0f} s"
        lines.append(
            f"| {g['guest']} | {g['source']} → {g['target']} | {g['count']} | {g['outcome']} | "
            f"{g['reason']} | {_utc(start + g['first'])} | {_utc(start + g['last'])} | {every} |"
        )
    lines += ["", "First motions:", "", "| when | guest | from → to | expected | outcome | took |",
              "|---|---|---|---|---|---:|"]  # fmt: skip
    for m in moves[:MOTIONS_LISTED]:
        took = "—" if m["t_end"] is None else f"{m['t_end'] - m['t']:.0f} s"
        outcome = m["outcome"] + (f" ({m['reason']})" if m["reason"] else "")
        lines.append(
            f"| {_utc(start + m['t'])} | {m['guest']} | {m['source']} → {m['target']} | "
            f"{m['expected'] or '—'} | {outcome} | {took} |"
        )
    if len(moves) > MOTIONS_LISTED:
        lines.append(f"| … {len(moves) - MOTIONS_LISTED} more in `whatif.json` | | | | | |")
    return [*lines, ""]


def _reality_section(result: WhatIf) -> list[str]:
    imp = result.imp
    start = imp.window.start
    lines = ["## What the real cluster did (its task log)", ""]
    if any("tasks.json" in m for m in result.export.missing):
        lines.append("The export has no task lists: unknown.")
        return [*lines, ""]
    moved = imp.migrations
    if moved:
        lines += ["| when | guest | from → to | by |", "|---|---|---|---|"]
        for m in moved:
            lines.append(
                f"| {_utc(start + m.t)} | {m.sid} | {m.source} → {m.target} | {m.origin} |"
            )
        lines.append("")
    else:
        lines.append("No successful migration in the window.")
    if imp.failed:
        by: dict[str, list[float]] = defaultdict(list)
        for m in imp.failed:
            by[f"{m.sid} (from {m.source})"].append(m.t)
        lines.append("Failed migrations:")
        lines.append("")
        for who, ts in sorted(by.items(), key=lambda kv: -len(kv[1])):
            gaps = np.diff(ts)
            every = f", median every {np.median(gaps):.0f} s" if gaps.size else ""
            lines.append(
                f"- {who}: {len(ts)} failed tasks, {_utc(start + ts[0])} … {_utc(start + ts[-1])}{every}"
            )
        up = next((r for r in result.runs if r.entry.label == "upstream"), None)
        if up is not None:
            lines.append(
                f"- for comparison, `upstream` replayed on the model: {up.metrics['moves_failed']} "
                "failed motions in the same window."
            )
    return [*lines, ""]


def _validation_section(result: WhatIf) -> list[str]:
    v, w = result.validation, result.imp.window
    t_fit = w.start + v.fit_rows * w.step
    lines = [
        "## How far to trust it: model vs reality (held out)",
        "",
        f"The validation run replays the window under `noop` with every real migration, the "
        f"guests' measured series, and each node's own load **fitted on the first {v.fit_rows} of "
        f"{v.rows} rows only** ({v.how}). It is compared with the export's node series on the "
        f"held-out rows after {_utc(t_fit)} (row averages, percentage points of the node). "
        '"naive" predicts each node\'s own mean over the fit part: the model should beat it.',
        "",
        "| node | CPU MAE (pp) | CPU bias (pp) | naive CPU MAE | memory MAE (pp) | memory bias (pp) | naive memory MAE | PSI cpu some MAE (pp), default | PSI cpu some MAE (pp), fitted blend | PSI memory some MAE (pp) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in v.nodes:
        cells = [
            n.cpu_mae_pp,
            n.cpu_bias_pp,
            n.cpu_naive_mae_pp,
            n.mem_mae_pp,
            n.mem_bias_pp,
            n.mem_naive_mae_pp,
            n.psi_cpu_mae_pp,
            n.psi_cpu_fitted_mae_pp,
            n.psi_mem_mae_pp,
        ]
        lines.append(
            f"| {n.node} | "
            + " | ".join("—" if math.isnan(c) else f"{c:.2f}" for c in cells)
            + " |"
        )
    lines += [
        "",
        f"Held-out node CPU error, mean over nodes: **{v.cpu_mae_pp:.2f} pp**.",
        *pressure_error_lines(result),
    ]
    if result.imp.reality.cpu_some is None:
        ex = result.export
        lines.append(
            f"PSI: this export's RRD format records no pressure (PVE {ex.version}, "
            f"{ex.rrd_format} format): not compared."
        )
    else:
        lines.append(
            "PSI: the model's node pressure against PVE 9's recorded `pressurecpusome`/"
            "`pressurememorysome` (avg10 averaged per row), once with the contention model's "
            f"default `psi.cpu_blend` = {v.default_cpu_blend:g} and once with the blend fitted on "
            f"the fit part ({v.cpu_blend:g}: fit-part MAE {v.cpu_blend_fit_mae_pp:.2f} pp; "
            "`docs/model.md`, Contention and PSI). At coarse resolutions the replay loses the "
            "within-row variance that drives real pressure, so the model tends to read low."
        )
    return [*lines, "", "![model vs reality](plots/model-vs-reality.png)", ""]


def ha_lines(result: WhatIf) -> list[str]:
    """Right under the title when no guest is HA-managed: nothing could have moved; on more than
    one node, what the busiest guests made HA would have seen (hypothetical)."""
    if result.ha_guests:
        return []
    nodes = result.online_nodes
    if len(nodes) <= 1:
        return [
            f"**No guest is HA-managed**, and the cluster has {len(nodes)} online node: nothing "
            "can move, whatever the balancer. Nothing to decide.",
            "",
        ]
    lines = [
        "**No guest is HA-managed**: the HA manager moves only HA resources, so no balancer "
        "could have moved anything in this window (every policy below replays the same cluster "
        "untouched).",
        "",
    ]
    return lines


def hypothetical_lines(result: WhatIf) -> list[str]:
    """In the recommendation when no guest is HA-managed on more than one node: what the busiest
    guests made HA would have seen (:func:`pvegym.experiments.whatif.hypothetical_ha`), labelled
    hypothetical."""
    if result.ha_guests or len(result.online_nodes) <= 1:
        return []
    hyp = result.hypothetical
    if hyp is None:
        return ["", "No guest ran in the window: no hypothetical replay."]
    lines = [
        "",
        f"*Hypothetical* — if the busiest guests ({', '.join(f'`{s}`' for s in hyp.sids)}, "
        f"{hyp.share * 100:.0f} % of the guests' mean CPU) had been HA-managed "
        f"(`ha-manager add <sid>`; `{hyp.scenario.name}`):",
        "",
        "| policy (hypothetical HA) | motions | failed | guest stall (s) | stall cpu (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in hyp.runs:
        m = r.metrics
        lines.append(
            f"| {r.entry.label} | {m['moves']} | {m['moves_failed']} | "
            f"{fmt(float(m['guest_stall_s']))} | {fmt(float(m['stall_cpu_s']))} |"
        )
    if not any(r.metrics["moves"] for r in hyp.runs):
        lines += ["", "Even then no balancer would have moved anything in this window."]
    return lines


def excess_lines(result: WhatIf) -> list[str]:
    """Beside the trust statement: nodes whose guests' load exceeds the node's own in every row
    (the export places guests where they were not: the replay starts from a wrong cluster)."""
    by_node: dict[str, list[str]] = defaultdict(list)
    rows: dict[str, int] = {}
    for e in result.imp.excess:
        if e.every_row:
            by_node[e.node].append(f"{e.what} (by up to {e.by:.2f} {e.unit})")
            rows[e.node] = e.of
    lines = [
        f"**Warning — {node}:** its guests' {' and '.join(what)} exceed the node's own in every "
        f"one of the {rows[node]} rows. On a real cluster that means guests are not where the "
        "export lists them (a migration the task log lacks): the replay starts from a cluster "
        "that did not exist; read its figures for this node with care.  "
        for node, what in by_node.items()
    ]
    return [*lines, ""] if lines else []


def pressure_error_lines(result: WhatIf) -> list[str]:
    """The held-out error while a node was under pressure (recorded PSI cpu some ≥ 10 %), apart
    from the whole window's: a mostly idle window's average hides the stress."""
    v = result.validation
    if result.imp.reality.cpu_some is None:
        return []
    rows = [n for n in v.nodes if n.pressure_rows]
    if not rows:
        return [
            "",
            f"No held-out row had a node under pressure (PSI cpu some ≥ {PRESSURE_PCT:g} %).",
        ]
    lines = [
        "",
        f"During pressure (held-out rows with the node's recorded PSI cpu some ≥ {PRESSURE_PCT:g} "
        f"%), with the fitted blend {v.cpu_blend:g} the replay uses:",
        "",
        "| node | rows under pressure | CPU MAE (pp) | PSI cpu some MAE (pp) | PSI bias (pp) | whole held-out PSI MAE (pp) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for n in rows:
        lines.append(
            f"| {n.node} | {n.pressure_rows} | {n.pressure_cpu_mae_pp:.2f} | "
            f"{n.pressure_psi_mae_pp:.2f} | {n.pressure_psi_bias_pp:+.2f} | "
            f"{n.psi_cpu_fitted_mae_pp:.2f} |"
        )
    return [*lines, ""]


def _resolution_caveat(result: WhatIf) -> str:
    real, w = result.imp.reality, result.imp.window
    gap = (real.cpu_max - real.cpu) / real.maxcpu * 100.0
    worst = float(np.max(np.mean(gap, axis=0))) if gap.size else 0.0
    return (
        f"Each replayed row is a {w.step // 60}-minute average ({w.cf}); the model interpolates "
        f"between rows and cannot see what happened inside one. Inside a row the busiest minute "
        f"was on average {worst:.1f} pp of a node above the row's average (MAX vs AVERAGE series): "
        "decisions driven by shorter peaks are not reproduced."
        if w.step > 60
        else f"Rows are {w.step} s averages; the model interpolates between them."
    )


def write_report(result: WhatIf, out: Path, study: Path | None, seed: int) -> Path:
    """``report.md``, its plots and ``whatif.json`` (both written atomically).

    The sections in order (each a function; insert new ones here): the title and the header
    (:func:`_title_lines` with :func:`ha_lines`, :func:`_header_lines`: window, resolution,
    cluster, export, :func:`excess_lines`), the recommendation (:func:`recommendation`), the fixes and the window after them, the sweep, what
    PVE would gain from balancers it does not have, the at-a-glance table, each balancer's motions,
    the real cluster's task log, the trust panel (:func:`_validation_section`) and what the
    scenario leaves out."""
    w = result.imp.window
    plots_dir = out / "plots"
    for run in result.runs:
        trace, title = _thinned(run.trace)
        plots.timeline(
            trace,
            f"{run.entry.label} on the imported cluster (time 0 = {_utc(w.start)}){title}",
            plots_dir / _timeline_file(run.entry.label),
        )
    _model_vs_reality_plot(result, plots_dir / "model-vs-reality.png")
    _compare_plot(result, plots_dir / "compare.png")
    lines = [
        *_title_lines(result),
        *_header_lines(result),
        "## Recommendation",
        "",
        *recommendation(result),
        "",
        *_fixes_section(result),
        *_sweep_section(result),
        *_others_section(result),
        *_glance_lines(result),
        "",
        "## The motions each balancer would have made",
        "",
    ]
    for run in result.runs:
        lines += _motion_section(result, run)
        lines += [f"![{run.entry.label}](plots/{_timeline_file(run.entry.label)})", ""]
    lines += _reality_section(result)
    lines += _validation_section(result)
    lines += _leaves_out_lines(result)
    commit, dirty = git_commit()
    lines += [
        "",
        "## Files",
        "",
        "`scenario.toml` (the imported cluster; `pvegym simulate --scenario scenario.toml` runs it), "
        "`validation.toml`, `scenario-traces/`, `scenario.import.json`, `whatif.json` (the "
        "recommendation, the sweep, the fixes, every motion and metric), `plots/`. pvegym "
        f"{package_versions(('pvegym',))['pvegym']} at {commit}"
        + (" (dirty)" if dirty else "")
        + f", seed {seed}.",
    ]
    report = out / "report.md"
    tmp = report.with_name(".report.md.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(report)
    save_json(
        result,
        out / "whatif.json",
        {
            "seed": seed,
            "study": None if study is None else str(study),
            "cost": {
                "source": "BALANCER_COST (pvegym/sim/cost.py, docs/benchmark.md)",
                "weights": BALANCER_COST,
            },
            "commit": commit,
            "dirty": dirty,
            "versions": package_versions(),
        },
    )
    return report


def _timeline_file(label: str) -> str:
    """``timeline-<label>.png``, a learned agent's ``learned:<run>`` as ``learned-<run>``."""
    return f"timeline-{label.replace(':', '-')}.png"


def _leaves_out_lines(result: WhatIf) -> list[str]:
    notes = result.imp.notes
    lines = ["## What the scenario leaves out or assumes", ""]
    lines += [f"- **{n.kind}** {n.subject}: {n.text}" for n in notes if n.kind != "info"]
    lines += ["", "Other facts of the import:", ""]
    return lines + [f"- {n.subject}: {n.text}" for n in notes if n.kind == "info"]


def _title_lines(result: WhatIf) -> list[str]:
    """The title and, right under it, that no guest is HA-managed (:func:`ha_lines`)."""
    return ["# What each balancer would have done on this cluster", "", *ha_lines(result)]


def _header_lines(result: WhatIf) -> list[str]:
    """Window, resolution, cluster and export, and the resolution's caveat."""
    w, ex = result.imp.window, result.export
    return [
        f"**Window:** {_utc(w.start)} → {_utc(w.end)} ({w.duration / 3600:g} h).  ",
        f"**Resolution:** the `{w.timeframe}` RRD series, one row every {w.step} s ({w.cf}), "
        f"replayed in 10 s HA rounds.  ",
        f"**Cluster:** PVE {ex.version} ({ex.rrd_format} RRD format), {len(ex.nodes)} nodes, "
        f"{sum(not g.template for g in ex.guests.values())} guests; CRS {ex.crs.mode}, "
        f"ha-auto-rebalance {'on' if ex.crs.auto_rebalance else 'off'}.  ",
        f"**Export:** `{ex.path}`, created {_utc(ex.created)}.",
        "",
        _resolution_caveat(result),
        "",
        *excess_lines(result),
    ]


def _glance_lines(result: WhatIf) -> list[str]:
    """The at-a-glance table of every balancer and the pressure each relieved against ``noop``."""
    lines = [
        "## At a glance",
        "",
        "| policy | " + " | ".join(f"{k} ({metric_spec(k).shown_unit})" for k in glance()) + " |",
        "|---|" + "---:|" * len(glance()),
    ]
    for run in result.runs:
        lines.append(
            f"| {run.entry.label} | " + " | ".join(_metric(run, k) for k in glance()) + " |"
        )
    noop = result.runs[0]
    lines += [
        "",
        "Pressure relieved against `noop` (Σ over nodes of ∫ PSI some, and Σ over guests):",
        "",
    ]
    for run in result.runs[1:]:
        rel: list[str] = []
        for key in ("stall_cpu_s", "stall_mem_s", "guest_stall_s"):
            a, b = float(run.metrics[key]), float(noop.metrics[key])
            rel.append(f"{key} {a - b:+,.0f} s" + (f" ({(a - b) / b * 100:+.1f} %)" if b else ""))
        lines.append(f"- `{run.entry.label}`: " + ", ".join(rel))
    return [*lines, "", "![comparison](plots/compare.png)"]


def _thinned(trace: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """At most :data:`MOTIONS_MARKED` motions for a timeline (every k-th; drawing thousands of
    failed retries takes minutes and shows nothing more), and the title's note saying so."""
    n = len(trace["move_t"])
    if n <= MOTIONS_MARKED:
        return trace, ""
    k = -(-n // MOTIONS_MARKED)
    keep = {key: v[::k] for key, v in trace.items() if key.startswith("move_")}
    return {**trace, **keep}, f"\nevery {k}th of its {n} motions marked"


def _model_vs_reality_plot(result: WhatIf, path: Path) -> None:
    v, w, real = result.validation, result.imp.window, result.imp.reality
    t = (np.arange(1, w.n + 1) * w.step - w.step / 2) / 3600.0
    t_fit = v.fit_rows * w.step / 3600.0
    panels = [("CPU busy (% of cores)", v.real_cpu_pct, v.model_cpu_pct),
              ("memory in use (% of RAM)", v.real_mem_pct, v.model_mem_pct)]  # fmt: skip
    if v.real_cpu_some is not None:
        panels.append(("PSI cpu some avg10 (%)", v.real_cpu_some, v.model_cpu_some))
    n_nodes = len(real.node_names)
    fig = Figure(
        figsize=(11, 2.6 * len(panels) * max(1, (n_nodes + 1) // 2) ** 0.5 + 1),
        dpi=plots.DPI,
        layout="constrained",
    )
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    fig.suptitle(
        "model (dashed) vs reality (solid); fitted left of the line, held out right of it",
        fontsize=11,
    )
    for ax, (label, real_v, model_v) in zip(axes, panels, strict=True):
        for j, name in enumerate(real.node_names):
            c = plots.NODE_COLORS[j % len(plots.NODE_COLORS)]
            ax.plot(t, real_v[:, j], color=c, lw=1.0, label=name)
            ax.plot(t, model_v[:, j], color=c, lw=1.0, ls="--")
        ax.axvline(t_fit, color="black", lw=0.8, ls=":")
        ax.set_ylabel(label, fontsize=9)
        ax.set_ylim(bottom=0)
    axes[0].legend(
        title="node", fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
    )
    axes[-1].set_xlabel("hours into the window")
    plots._save(fig, path)


def _compare_plot(result: WhatIf, path: Path) -> None:
    keys = glance()
    ncols = 4
    nrows = -(-len(keys) // ncols)
    fig = Figure(figsize=(13, 2.8 * nrows), dpi=plots.DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    labels = [r.entry.label for r in result.runs]
    colors = [plots.POLICY_COLORS[i % len(plots.POLICY_COLORS)] for i in range(len(labels))]
    for ax, key in zip(axes, keys, strict=False):
        spec = metric_spec(key)
        vals = [float(r.metrics.get(key) or 0.0) * spec.report_scale for r in result.runs]
        ax.bar(np.arange(len(labels)), vals, color=colors)
        ax.set_title(key, fontsize=9)
        ax.set_ylabel(spec.shown_unit, fontsize=8)
        ax.set_xticks(np.arange(len(labels)), labels, fontsize=7, rotation=25)
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    fig.suptitle("one replay of the window per policy", fontsize=11)
    plots._save(fig, path)
