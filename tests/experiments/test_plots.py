"""Plots: motions close in time get their own rows; comparison panels show the paired difference
of summary.md and say which way is better."""

import numpy as np
from matplotlib.colors import to_hex

from pvegym.experiments import plots
from pvegym.experiments.report import Summary
from pvegym.experiments.stats import paired_difference
from pvegym.sim.metrics import metric_spec


def test_three_moves_a_minute_apart_on_8_hours_get_three_rows() -> None:
    # idle-night under upstream: moves at 30 s, 80 s and 130 s of an 8 h episode
    starts = np.array([30.0, 80.0, 130.0])
    ends = starts + 12.0
    assert plots.motion_lanes(starts, ends, 8 * 3600.0) == [0, 1, 2]
    # far apart on the same axis: one row
    spread = np.array([600.0, 9000.0, 20000.0])
    assert plots.motion_lanes(spread, spread + 12.0, 8 * 3600.0) == [0, 0, 0]
    # lanes wrap instead of growing without bound
    many = np.arange(40.0)
    assert max(plots.motion_lanes(many, many + 1.0, 8 * 3600.0)) == plots.MAX_LANES - 1


def _summary() -> Summary:
    s = Summary(
        scenarios=["sc"],
        policies=["noop", "upstream", "patched"],
        seeds={"sc": list(range(10))},
        about={"sc": ""},
        duration={"sc": 60.0},
        metrics=("moves", "stall_cpu_s"),
    )
    rng = np.random.default_rng(0)
    base = rng.uniform(10.0, 20.0, 10)
    col = {"noop": base, "upstream": base * 0.5, "patched": base * 1.5}
    for m in s.metrics:
        for p, r in (("upstream", "noop"), ("patched", "noop"), ("patched", "upstream")):
            s.diff[("sc", p, r, m)] = paired_difference(col[p], col[r], 199, 0, f"{p}{r}{m}")
            s.change[("sc", p, r, m)] = None  # shown as absolute differences
    return s


def test_comparison_panels_show_paired_differences_and_which_way_is_better() -> None:
    fig = plots.comparison_figure(_summary(), "sc")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title().splitlines()[0] for ax in axes] == ["moves", "stall_cpu_s"]
    for ax in axes:
        metric = ax.get_title().splitlines()[0]
        assert ax.get_title().splitlines()[1] == plots.BETTER_TEXT[metric_spec(metric).better]
        assert [t.get_text() for t in ax.get_xticklabels()] == [
            "upstream\nvs noop",
            "patched\nvs noop",
            "patched\nvs upstream",
        ]
        assert ax.get_xlim() == (-0.6, 2.6)  # every pair in view
        bars = ax.patches
        heights = [b.get_height() for b in bars]
        assert heights[0] < 0 < heights[1] and heights[2] > 0  # upstream halves, patched +50 %
        # all ten seeds one way: Wilcoxon p = 0.002, so lower (upstream) is green, higher red
        colors = [to_hex(b.get_facecolor()) for b in bars]
        assert colors == [plots.VERDICT_COLORS["better"]] + [plots.VERDICT_COLORS["worse"]] * 2
