"""Two replication values of one replica count (`"a:speed=0.5,b"` and `2`) were drawn
at one x in the efficiency panel, whose x is the replica count, and joined by the line
of their other keys' values: a vertical segment between two configurations, read as a
change along the count. They are now told apart on a categorical axis, each tick the
value and its count."""

from __future__ import annotations

from polybus.cli.sweep_plot import Panel, panels
from polybus.sweep import run_sweep

REPL = "modules.server.replication"


def _efficiency(values: list[str]) -> Panel:
    sweep = run_sweep("a.toml", [(REPL, values), ("modules.client.use.f.callstyle",
                                                   ["sync", "async"])], 1, lambda p, s: 1.0)
    return next(p for p in panels(sweep) if p.name == "efficiency")


def test_replication_values_of_one_count_are_not_drawn_at_one_x() -> None:
    panel = _efficiency(['"a:speed=0.5,b"', '"c"', "2"])
    for points in panel.lines.values():
        xs = [x for x, _ in points]
        assert len(xs) == len(set(xs)), panel.lines
    assert panel.ticks == ["a:speed=0.5,b (2)", "c (1)", "2 (2)"]


def test_counts_all_different_keep_the_numeric_axis() -> None:
    panel = _efficiency(["1", "2", "4"])
    assert panel.ticks is None
    assert sorted(x for x, _ in panel.lines["callstyle=sync"]) == [1.0, 2.0, 4.0]
