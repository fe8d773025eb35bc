"""A combination with no figure breaks its line in `polybus sweep --plot` (the line was
drawn from the point before it to the point after, as if nothing were between), and one
that failed is marked with an x at the foot of the axes."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from polybus.sweep import Sweep, run_sweep

CALLSTYLE = ("modules.client.use.f.callstyle", ["sync", "async", "future"])
REPLICATION = ("modules.server.replication", ["1", "2", "4"])


def _failing(*failed: str) -> Any:
    def runner(path: str, sets: Sequence[str]) -> float:
        if any(all(part in sets for part in f.split(" ")) for f in failed):
            raise RuntimeError("no")
        return 1.0
    return runner


def _category_fails() -> Sweep:
    return run_sweep("a.toml", [CALLSTYLE], 1,
                     _failing("modules.client.use.f.callstyle=async"))


def test_a_failed_category_is_a_gap_in_its_line() -> None:
    from polybus.cli.sweep_plot import panels, series

    time, speedup = panels(_category_fails())
    for panel in (time, speedup):
        assert panel.lines == {"": [(0.0, 1.0), (2.0, 1.0)]}
        assert panel.gaps == {"": [1.0]} and panel.failed == {"": [1.0]}
        xs, ys = series(panel, "")
        assert xs == [0.0, 1.0, 2.0] and ys[0] == ys[2] == 1.0 and math.isnan(ys[1])


def test_a_cell_with_no_speedup_breaks_its_line_unmarked() -> None:
    # sync, 2 failed: async, 2 ran, but has no speedup (its reference is sync, 2)
    from polybus.cli.sweep_plot import panels

    sweep = run_sweep("a.toml", [REPLICATION, CALLSTYLE], 1, _failing(
        "modules.server.replication=2 modules.client.use.f.callstyle=sync"),
        baseline={CALLSTYLE[0]: "sync"})
    speedup = next(p for p in panels(sweep) if p.name == "speedup")
    assert speedup.lines["callstyle=async"] == [(1.0, 1.0), (4.0, 1.0)]
    assert speedup.gaps == {"callstyle=sync": [2.0], "callstyle=async": [2.0],
                            "callstyle=future": [2.0]}
    assert speedup.failed == {"callstyle=sync": [2.0]}


def test_the_drawn_line_breaks_at_the_failure_and_an_x_marks_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from polybus.cli.sweep_plot import plot

    figures: list[Any] = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", figures.append)  # (kept open to be looked at)
    plot(_category_fails(), str(tmp_path / "s.png"))
    fig = figures[0]
    try:
        for ax in fig.axes:
            curve, *marks = ax.get_lines()
            ys = [float(y) for y in curve.get_ydata()]
            assert [float(x) for x in curve.get_xdata()] == [0.0, 1.0, 2.0]
            assert math.isnan(ys[1]), ys  # (was [1.0, 1.0] at 0 and 2: joined)
            xs = [float(x) for m in marks if m.get_marker() == "x" for x in m.get_xdata()]
            assert xs == [1.0]
            assert "failed: no point" in [t.get_text() for t in ax.get_legend().get_texts()]
    finally:
        real_close(fig)
