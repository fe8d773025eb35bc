"""The benchmark figures a reader can read (bench/plots.py): each axis's scale from its
values, one legend for the figure below the panels, at most three panels a row, no
error bar on a cell of one repetition."""

from __future__ import annotations

import pytest

from polybus.bench.report import BenchResult, Row
from polybus.bench.stats import Stat


def test_a_figures_x_axis_follows_its_values_and_its_legend_lies_outside_the_panels() -> None:
    """Workers 1-2 were drawn on a log axis ("10^0", "2x10^0"), and ep's legends lay in
    its panels, over the lines: counts are linear, a tick each, sizes spanning a wide
    range log; the one legend is the figure's, below the panels."""
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure

    res = BenchResult("ep", x_label="workers", x_labels={"rtt_us": "payload bytes"})
    for k in (1, 2):
        for mode in ("stateless", "stateful"):
            res.add(Row.of("polybus", {"mode": mode}, k, "seconds", Stat(1.0 / k, 0.1, 10.0, 3)))
    for size in (0, 1000, 10**7):
        res.add(Row.of("polybus", {"mode": "stateless"}, size, "rtt_us",
                       Stat(20.0 + size / 1e3, 19.0, 1e5, 3)))
    fig = figure(res)
    try:
        seconds, rtt = fig.axes
        assert seconds.get_xscale() == "linear"
        assert list(seconds.get_xticks()) == [1, 2]
        assert [t.get_text() for t in seconds.get_xticklabels()] == ["1", "2"]
        assert rtt.get_xscale() == "symlog" and rtt.get_xlim()[0] == 0
        assert all(ax.get_legend() is None for ax in fig.axes)
        (legend,) = fig.legends
        assert {t.get_text() for t in legend.get_texts()} == {
            "polybus mode=stateless", "polybus mode=stateful"}
        fig.canvas.draw()  # the legend lies below every panel, not over one
        top = legend.get_window_extent().y1
        assert all(top <= ax.get_window_extent().y0 for ax in fig.axes)
    finally:
        plt.close(fig)


def test_at_most_three_panels_a_row_and_no_error_bar_on_one_repetition() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install polybus[plot])")
    import matplotlib.pyplot as plt

    from polybus.bench.plots import figure

    res = BenchResult("dna", x_label="workers")
    for metric in ("seconds", "speedup", "efficiency", "bytes_sent"):
        for k in (1, 2, 4):
            res.add(Row.of("polybus", {}, k, metric, Stat(1.0, 0.5, 2.0, 3 if k == 2 else 1)))
    fig = figure(res)
    try:
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == 4
        assert len({ax.get_position().x0 for ax in shown}) == 3  # a grid of 3 columns
        for ax in shown:
            (bars,) = ax.containers
            (ranges,) = bars.lines[2]
            assert len(ranges.get_segments()) == 1  # at x=2 (n=3) alone
    finally:
        plt.close(fig)
