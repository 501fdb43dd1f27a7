"""The pictures of a run (PNG, matplotlib's Agg renderer, no display needed).

* ``plots/timelines/<scenario>/<policy>-seed<n>.png`` — one episode round by round: node CPU and
  memory load (percent of the node), node PSI some avg10 (percent), the normalized imbalance of the
  true node loads, and every balancer motion as a vertical line coloured by its outcome (succeeded,
  failed, aborted by the non-convergence abort, still running at the end) with a shaded band while
  it ran. This is where a reader sees *why* a policy's numbers are what they are.
* ``plots/compare-<scenario>.png`` — each reported metric as bars per policy (mean over seeds) with
  95 % bootstrap CI error bars: the summary table, at a glance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from pvegym.config import path_component
from pvegym.experiments.cells import Row
from pvegym.experiments.config import Experiment
from pvegym.experiments.report import Summary
from pvegym.sim.metrics import metric_spec

OUTCOME_COLORS = {
    "succeeded": "#2ca02c",
    "failed": "#d62728",
    "aborted": "#ff7f0e",
    "running": "#7f7f7f",
}
NODE_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
POLICY_COLORS = ("#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")
PRESSURE_LINE_PCT = 10.0  # MODEL.md §9 churn_pressure_pct, and the patched gate's default
DPI = 110
MOTION_LIST = 10  # list the motions of an episode by name when there are at most this many
#: legends sit right of the panels, so they never hide data or motion markers
_OUTSIDE: dict[str, Any] = {
    "loc": "upper left",
    "bbox_to_anchor": (1.01, 1.0),
    "fontsize": 8,
    "title_fontsize": 8,
    "frameon": False,
}


def write_plots(
    plots_dir: Path,
    exp: Experiment,
    summary: Summary,
    timelines: list[tuple[Row, dict[str, np.ndarray]]],
) -> None:
    plots_dir.mkdir(parents=True, exist_ok=True)
    for row, trace in timelines:
        path = (
            plots_dir
            / "timelines"
            / path_component(row.scenario)
            / f"{path_component(row.policy)}-seed{row.seed}.png"
        )
        timeline(trace, f"{row.scenario} — {row.policy}, seed {row.seed}", path)
    for sc in summary.scenarios:
        comparison(summary, sc, plots_dir / f"compare-{path_component(sc)}.png")


def _time_axis(t_s: np.ndarray) -> tuple[float, str]:
    """Seconds → minutes for episodes up to 2 h, else hours: (divisor, axis label)."""
    return (3600.0, "simulated time (h)") if t_s[-1] > 7200 else (60.0, "simulated time (min)")


def timeline(trace: dict[str, np.ndarray], title: str, path: Path) -> None:
    """One episode, four panels sharing the time axis, motions marked across all of them."""
    div, xlabel = _time_axis(trace["t"])
    t = trace["t"] / div
    names = [str(n) for n in trace["node_names"]]
    fig = Figure(figsize=(11, 9.5), dpi=DPI, layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    fig.suptitle(title, fontsize=13)

    panels = (
        ("cpu_pct", "CPU busy\n(% of cores)", "node CPU load"),
        ("mem_pct", "memory in use\n(% of RAM)", "node memory load"),
    )
    for ax, (key, ylabel, heading) in zip(axes[:2], panels, strict=True):
        for j, name in enumerate(names):
            ax.plot(
                t, trace[key][:, j], color=NODE_COLORS[j % len(NODE_COLORS)], lw=1.1, label=name
            )
        ax.set_ylabel(ylabel)
        ax.set_title(heading, loc="left", fontsize=10)
        ax.set_ylim(bottom=0)
    axes[0].legend(title="node", **_OUTSIDE)

    ax = axes[2]
    for j, _name in enumerate(names):
        c = NODE_COLORS[j % len(NODE_COLORS)]
        ax.plot(t, trace["cpu_some"][:, j], color=c, lw=1.1)
        ax.plot(t, trace["mem_some"][:, j], color=c, lw=1.1, ls="--")
    ax.axhline(PRESSURE_LINE_PCT, color="black", lw=0.8, ls=":")
    ax.set_ylabel("some avg10 (%)")
    ax.set_title("node pressure (PSI, true values)", loc="left", fontsize=10)
    ax.set_ylim(bottom=0, top=max(15.0, float(np.nanmax(trace["cpu_some"])) * 1.1 + 1.0))
    ax.legend(
        handles=[
            Line2D([], [], color="black", lw=1.1, label="cpu some"),
            Line2D([], [], color="black", lw=1.1, ls="--", label="memory some"),
            Line2D(
                [], [], color="black", lw=0.8, ls=":", label=f"{PRESSURE_LINE_PCT:g} % (churn line)"
            ),
        ],
        title="PSI series",
        **_OUTSIDE,
    )

    ax = axes[3]
    ax.plot(t, trace["imbalance"], color="black", lw=1.1)
    ax.set_ylabel("imbalance\n(CV ÷ √(n−1))")
    ax.set_title("imbalance of true node loads (cpu% + mem%)/2", loc="left", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(xlabel)
    ax.set_xlim(0, t[-1])

    _mark_motions(axes, trace, div, float(trace["t"][-1]))
    _save(fig, path)


def _mark_motions(axes: Any, trace: dict[str, np.ndarray], div: float, t_last: float) -> None:
    """A vertical line at each motion's start (colour = outcome), a light band until it ended,
    and a legend with the count per outcome on the bottom panel."""
    starts, ends, outcomes = trace["move_t"], trace["move_t_end"], trace["move_outcome"]
    for t0, t1, outcome in zip(starts, ends, outcomes, strict=True):
        color = OUTCOME_COLORS.get(str(outcome), "#7f7f7f")
        end = t_last if np.isnan(t1) else float(t1)
        for ax in axes:
            ax.axvline(t0 / div, color=color, lw=1.0, alpha=0.85, zorder=0)
            ax.axvspan(t0 / div, end / div, color=color, alpha=0.10, lw=0, zorder=0)
    counts = {o: int((outcomes == o).sum()) for o in OUTCOME_COLORS}
    handles = [
        Line2D([], [], color=OUTCOME_COLORS[o], lw=2, label=f"{o} ({n})")
        for o, n in counts.items()
        if n
    ]
    if not handles:
        handles = [Line2D([], [], color="none", label="none")]
    axes[3].legend(handles=handles, title="balancer motions", **_OUTSIDE)
    if 0 < len(starts) <= MOTION_LIST:
        # few motions: list them (start time, guest, source → target) in the right margin, so they
        # can be read even when they bunch together on a long time axis
        axes[1].legend(
            handles=[
                Line2D(
                    [],
                    [],
                    color=OUTCOME_COLORS.get(str(o), "#7f7f7f"),
                    lw=2,
                    label=f"{_clock(float(t0))}  {label}",
                )
                for t0, o, label in zip(starts, outcomes, trace["move_label"], strict=True)
            ],
            title="motions (start, h:mm:ss)",
            **_OUTSIDE,
        )


def _clock(t: float) -> str:
    t = round(t)
    return f"{t // 3600}:{t % 3600 // 60:02d}:{t % 60:02d}"


def comparison(s: Summary, scenario: str, path: Path) -> None:
    """Small multiples: one panel per reported metric, a bar per policy with its 95 % CI."""
    metrics = [m for m in s.metrics if metric_spec(m).compared]
    ncols = min(4, max(len(metrics), 1))
    nrows = max(1, -(-len(metrics) // ncols))
    fig = Figure(figsize=(3.3 * ncols, 2.6 * nrows + 0.9), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    n = len(s.seeds[scenario])
    fig.suptitle(f"{scenario}: mean over {n} seeds, error bars = 95 % bootstrap CI", fontsize=12)
    x = np.arange(len(s.policies))
    colors = [POLICY_COLORS[i % len(POLICY_COLORS)] for i in range(len(s.policies))]
    for ax, metric in zip(axes, metrics, strict=False):
        spec = metric_spec(metric)
        unit, f = spec.shown_unit, spec.report_scale
        means, lo, hi = [], [], []
        for p in s.policies:
            e = s.est[(scenario, p, metric)]
            means.append(np.nan if e is None else e.mean * f)
            lo.append(0.0 if e is None else (e.mean - e.lo) * f)
            hi.append(0.0 if e is None else (e.hi - e.mean) * f)
        ax.bar(x, np.nan_to_num(means), color=colors, yerr=[lo, hi], capsize=3, ecolor="black")
        note = ""
        if all(np.isnan(means)):
            note = "no value for any policy"
        elif np.nanmax(np.abs(means)) == 0 and max(hi) == 0:
            note = "0 for every policy"
        if note:
            ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=9)
            ax.set_yticks([])
        else:
            for i, m in enumerate(means):
                if np.isnan(m):
                    ax.text(i, 0, "no value", ha="center", va="bottom", fontsize=7, rotation=90)
        ax.set_title(metric, fontsize=9)
        ax.set_ylabel(unit, fontsize=8)
        ax.set_xticks(x, s.policies, fontsize=8, rotation=20 if len(s.policies) > 3 else 0)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_ylim(bottom=0)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    _save(fig, path)


def _save(fig: Figure, path: Path) -> None:
    """Write a PNG atomically (a half-written picture never replaces a good one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp)
    tmp.replace(path)
