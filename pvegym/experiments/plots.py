"""The pictures of a run (PNG, matplotlib's Agg renderer, no display needed).

* ``plots/timelines/<scenario>/<policy>-seed<n>.png`` — one episode round by round: node CPU and
  memory load (percent of the node), node PSI some avg10 (percent), the normalized imbalance of the
  true node loads, and every balancer motion as a vertical line coloured by its outcome (succeeded,
  failed, aborted by the non-convergence abort, still running at the end) with a shaded band while
  it ran; a bottom panel draws each motion as its own bar, motions close in time on separate rows
  (on an 8 h axis, moves a minute apart would otherwise be one line). This is where a reader sees
  *why* a policy's numbers are what they are.
* ``plots/compare-<scenario>.png`` — per reported metric, the paired difference of each policy to
  each reference (``summary.md``'s *vs* columns) with its 95 % CI, coloured by the Wilcoxon
  verdict; each panel says which way is better (the metric registry's ``better``).
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
from pvegym.experiments.report import Summary, comparison_pairs
from pvegym.experiments.stats import verdict
from pvegym.sim.metrics import metric_spec

OUTCOME_COLORS = {
    "succeeded": "#2ca02c",
    "failed": "#d62728",
    "aborted": "#ff7f0e",
    "running": "#7f7f7f",
}
NODE_COLORS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
POLICY_COLORS = ("#7f7f7f", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")
PRESSURE_LINE_PCT = 10.0  # docs/metrics.md's churn threshold, and the patched gate's default
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
    fig = Figure(figsize=(11, 11), dpi=DPI, layout="constrained")
    axes = fig.subplots(5, 1, sharex=True, height_ratios=(1, 1, 1, 1, 0.8))
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
    axes[4].set_xlabel(xlabel)
    axes[4].set_xlim(0, t[-1])

    _mark_motions(axes[:4], trace, div, float(trace["t"][-1]))
    _motion_lanes(axes[4], trace, div, float(trace["t"][-1]))
    _save(fig, path)


MIN_GAP = 0.012  # motions closer than this fraction of the time axis go to separate lanes
MAX_LANES = 12


def motion_lanes(starts: np.ndarray, ends: np.ndarray, span: float) -> list[int]:
    """A lane (row) per motion such that two motions in one lane are at least ``MIN_GAP × span``
    apart (from the end of one to the start of the next): on a long time axis motions a few
    seconds apart would otherwise be drawn as one line. Greedy, in start order; lanes wrap at
    :data:`MAX_LANES`."""
    gap = MIN_GAP * span
    last_end: list[float] = []
    lanes = []
    for t0, t1 in zip(starts, ends, strict=True):
        free = next((k for k, e in enumerate(last_end) if e + gap <= t0), None)
        if free is None:
            free = len(last_end) % MAX_LANES
            if len(last_end) < MAX_LANES:
                last_end.append(0.0)
        last_end[free] = max(float(t0), float(t1))
        lanes.append(free)
    return lanes


def _motion_lanes(ax: Any, trace: dict[str, np.ndarray], div: float, t_last: float) -> None:
    """Each motion as a bar from its start to its end in its own lane (colour = outcome), a
    marker at its start: the motions one by one, however close together."""
    starts, ends, outcomes = trace["move_t"], trace["move_t_end"], trace["move_outcome"]
    ends = np.where(np.isnan(ends), t_last, ends) if len(ends) else ends
    lanes = motion_lanes(starts, ends, t_last)
    labels = len(starts) <= MOTION_LIST  # few motions: each one named beside its bar
    for t0, t1, outcome, lane, label in zip(
        starts, ends, outcomes, lanes, trace["move_label"], strict=True
    ):
        color = OUTCOME_COLORS.get(str(outcome), "#7f7f7f")
        t1 = max(float(t1), float(t0) + 0.004 * t_last)  # visible however short
        ax.plot([t0 / div, t1 / div], [lane, lane], color=color, lw=5, solid_capstyle="butt")
        ax.plot([t0 / div], [lane], marker="|", color="black", ms=10)
        if labels:
            ax.text(
                t1 / div + 0.005 * t_last / div,
                lane,
                f"{_clock(float(t0))} {label}",
                va="center",
                fontsize=7,
            )
    n_lanes = max(lanes, default=0) + 1
    ax.set_ylim(n_lanes - 0.5, -0.5)
    ax.set_yticks([])
    ax.set_ylabel("motions")
    ax.set_title(
        f"balancer motions, one bar each from start (|) to end ({len(starts)} in all; "
        "close ones on separate rows)",
        loc="left",
        fontsize=10,
    )
    if not len(starts):
        ax.text(0.5, 0.5, "no motion", transform=ax.transAxes, ha="center", va="center")


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


BETTER_TEXT = {"lower": "↓ lower is better", "higher": "↑ higher is better", None: "no direction"}
VERDICT_COLORS = {"better": "#2ca02c", "worse": "#d62728"}  # else grey: not significant


def comparison(s: Summary, scenario: str, path: Path) -> None:
    _save(comparison_figure(s, scenario), path)


def comparison_figure(s: Summary, scenario: str) -> Figure:
    """Small multiples, one panel per compared metric: each *policy vs reference* pair of
    ``summary.md`` as a bar — the paired difference (relative change of the mean in percent, or
    the absolute difference where a reference's mean is 0) with its 95 % CI — coloured green or
    red where the Wilcoxon test finds the policy significantly better or worse (grey: not
    significant, or identical), and a title that says which way is better."""
    metrics = [m for m in s.metrics if metric_spec(m).compared]
    pairs = comparison_pairs(s.policies)
    many = len(pairs) > 4  # e.g. heuristics vs learned agents: wider panels, upright labels
    panel_w = max(3.4, 0.55 * len(pairs) + 1.2)
    ncols = min(4, max(len(metrics), 1), max(1, int(14.0 // panel_w)))
    nrows = max(1, -(-len(metrics) // ncols))
    panel_h = 3.6 if many else 2.8
    fig = Figure(figsize=(panel_w * ncols, panel_h * nrows + 1.0), dpi=DPI, layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    n = len(s.seeds[scenario])
    fig.suptitle(
        f"{scenario}: paired difference to a reference over {n} seeds (as in summary.md)\n"
        "error bars = 95 % bootstrap CI; green/red = significantly better/worse "
        "(Wilcoxon, p < 0.05)",
        fontsize=11,
    )
    x = np.arange(len(pairs))
    for ax, metric in zip(axes, metrics, strict=False):
        spec = metric_spec(metric)
        ax.set_title(f"{metric}\n{BETTER_TEXT[spec.better]}", fontsize=9)
        if many:
            ax.set_xticks(x, [f"{p} vs {r}" for p, r in pairs], fontsize=7, rotation=90)
        else:
            ax.set_xticks(x, [f"{p}\nvs {r}" for p, r in pairs], fontsize=7)
        ax.tick_params(axis="y", labelsize=8)
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_xlim(-0.6, len(pairs) - 0.4)  # every pair in view, "=" and "no value" ones too
        diffs = [s.diff[(scenario, p, r, metric)] for p, r in pairs]
        changes = [s.change[(scenario, p, r, metric)] for p, r in pairs]
        relative = all(c is not None for c, d in zip(changes, diffs, strict=True) if d is not None)
        ests = changes if relative else diffs
        scale = 100.0 if relative else spec.report_scale
        ax.set_ylabel("change of the mean (%)" if relative else f"difference ({spec.shown_unit})")
        if all(d is None or d.p is None for d in diffs):
            ax.text(
                0.5,
                0.6,
                "identical on every seed" if any(diffs) else "no value",
                transform=ax.transAxes,
                ha="center",
                va="center",
                fontsize=9,
            )
            continue
        for i, (d, e) in enumerate(zip(diffs, ests, strict=True)):
            if d is None or e is None:
                ax.text(i, 0, "no value", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            if d.p is None:
                ax.text(i, 0, "=", ha="center", va="bottom", fontsize=10)
                continue
            color = VERDICT_COLORS.get(verdict(d, spec.better), "#9a9a9a")
            m, lo, hi = e.mean * scale, e.lo * scale, e.hi * scale
            ax.bar(i, m, color=color, width=0.6)
            # the CI as drawn bounds (a BCa interval need not contain the mean itself)
            ax.vlines(i, lo, hi, color="black", lw=1)
            ax.hlines((lo, hi), i - 0.08, i + 0.08, color="black", lw=1)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    return fig


def _save(fig: Figure, path: Path) -> None:
    """Write a PNG atomically (a half-written picture never replaces a good one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp)
    tmp.replace(path)
