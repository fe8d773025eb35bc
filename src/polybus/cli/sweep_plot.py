"""`polybus sweep --plot`: time, speedup and efficiency curves (`panels`, drawn by
`plot`), and the bytes the client sent and received where they differ between
combinations by more than noise (`differs`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from polybus.cli.sweep_table import short_names
from polybus.sweep import Cell, Sweep, replicas, tied_with
from polybus.sweepargs import shown_values

__all__ = ["BYTES_NOISE", "Panel", "differs", "not_drawn", "panels", "plot", "series"]

NAMED = 3  # failed combinations named in the plot's note; more are counted
BYTES_NOISE = 0.05  # bytes that differ by at most this part of the largest: no panel


def _short(key: str, keys: Sequence[str] = ()) -> str:
    return short_names([key, *[k for k in keys if k != key]])[key]


def _number(v: str) -> float | None:
    try:
        f = float(v)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


@dataclass
class Panel:
    """One panel of the plot: ``name`` (the y label) against ``xlabel``, a line per
    combination of the other varied keys (label "" when there are none)."""

    name: str
    xlabel: str
    lines: dict[str, list[tuple[float, float]]]
    ticks: list[str] | None = None
    """Labels of x = 0, 1, ... when x is not a number."""
    gaps: dict[str, list[float]] = field(default_factory=dict)
    """Each line's x where its combination has no figure: the line breaks there (it was
    drawn from the point before to the point after, as if nothing were between)."""
    failed: dict[str, list[float]] = field(default_factory=dict)
    """Those of ``gaps`` whose combination failed: marked on the x axis."""


def _panel(sweep: Sweep, name: str, get: Callable[[Cell], float | None], xkey: str,
           x_of: Callable[[str], float | None], xlabel: str,
           ticks: list[str] | None = None) -> Panel:
    keys = [k for k, _ in sweep.varies]
    moving = tied_with(sweep.varies, sweep.tied, xkey)  # (they move along x: no lines of theirs)
    others = [k for k in keys if k not in moving]
    lines: dict[str, list[tuple[float, float]]] = {}
    gaps: dict[str, list[float]] = {}
    failed: dict[str, list[float]] = {}
    for c in sweep.cells:
        x, y = x_of(c.config[xkey]), get(c) if c.ok else None
        if x is None:
            continue
        label = ", ".join(f"{_short(k, keys)}={sweep.shown(c)[k]}" for k in others)
        if y is not None:
            lines.setdefault(label, []).append((x, y))
            continue
        gaps.setdefault(label, []).append(x)
        if not c.ok:
            failed.setdefault(label, []).append(x)
    return Panel(name, xlabel, {k: sorted(v) for k, v in lines.items()}, ticks,
                 {k: sorted(v) for k, v in gaps.items()},
                 {k: sorted(v) for k, v in failed.items()})


def series(panel: Panel, label: str) -> tuple[list[float], list[float]]:
    """A line's x and y as drawn: its points, and NaN at its gaps, which matplotlib
    leaves unjoined."""
    pts = sorted([*panel.lines.get(label, []), *((x, math.nan) for x in panel.gaps.get(label, []))])
    return [x for x, _ in pts], [y for _, y in pts]


def panels(sweep: Sweep) -> list[Panel]:
    """Time and speedup against the first varied key whose values are all numbers (else
    the first key, its values as categories); efficiency against the replica count it
    is measured along (``Sweep.efficiency_vs``), and no efficiency panel when there is
    none (no replication count is varied, or no cell has a figure); the client's bytes
    sent, and received, as time is, each when it differs between cells by more than
    noise (`differs`: more than 5% of the largest)."""
    keys = [k for k, _ in sweep.varies]
    xkey = next((k for k, vs in sweep.varies if all(_number(v) is not None for v in vs)),
                keys[0])
    values = dict(sweep.varies)[xkey]
    numeric = all(_number(v) is not None for v in values)
    x_of = _number if numeric else lambda v: float(values.index(v))
    ticks = None if numeric else [shown_values(values)[v] for v in values]
    out = [_panel(sweep, "elapsed s", lambda c: c.median, xkey, x_of, _short(xkey, keys), ticks),
           _panel(sweep, "speedup", lambda c: c.speedup, xkey, x_of, _short(xkey, keys), ticks)]
    along = sweep.efficiency_vs
    if along is not None and any(c.efficiency is not None for c in sweep.cells):
        key = along[0]
        vals = dict(sweep.varies)[key]
        counts = [replicas(key, v) for v in vals]
        count_of: Callable[[str], float | None] = lambda v: replicas(key, v)  # noqa: E731
        by_count = None
        if len(set(counts)) < len(counts):  # (two values of one count: one x, joined)
            count_of = lambda v: float(vals.index(v))  # noqa: E731
            by_count = [f"{shown_values(vals)[v]} ({n:g})" for v, n in zip(vals, counts,
                                                                           strict=True)]
        out.append(_panel(sweep, "efficiency", lambda c: c.efficiency, key, count_of,
                          f"{_short(key, keys)} (replicas)", by_count))
    # Bytes where a change moved them (cache on or off, forwarding, aggregation): a
    # panel of one flat line, or of a few percent's noise, would only take room.
    if differs([c.sent for c in sweep.cells if c.ok]):
        out.append(_panel(sweep, "bytes sent", lambda c: c.sent, xkey, x_of, _short(xkey, keys),
                          ticks))
    if differs([c.received for c in sweep.cells if c.ok]):
        out.append(_panel(sweep, "bytes received", lambda c: c.received, xkey, x_of,
                          _short(xkey, keys), ticks))
    return out


def differs(counts: Sequence[int | None]) -> bool:
    """Whether the bytes of the combinations (None: not counted) differ by more than
    ``BYTES_NOISE`` of the largest. A new user's sweep of callstyle drew a panel of
    13.9 kB against 13.7 kB received (call ids a digit longer, a reply's timing): a
    change of 1.4% that the table shows, and a panel of its own only took room."""
    got = [n for n in counts if n is not None]
    return bool(got) and max(got) - min(got) > BYTES_NOISE * max(got)


def not_drawn(sweep: Sweep) -> str | None:
    """``no point for 1 failed combination (replication=1)``, the note under the plot and
    beside its name: failed combinations had no point and no word of why. (It read "not
    drawn: ...", which beside the file's name, ``--plot s.png: not drawn: ...``, said the
    picture had not been written when it had.)"""
    keys = [k for k, _ in sweep.varies]
    failed = [", ".join(f"{_short(k, keys)}={sweep.shown(c)[k]}" for k in keys)
              for c in sweep.cells if not c.ok]
    if not failed:
        return None
    named = "; ".join(failed[:NAMED]) + (f"; and {len(failed) - NAMED} more"
                                         if len(failed) > NAMED else "")
    return (f"no point for {len(failed)} failed combination{'s' * (len(failed) > 1)} "
            f"({named})")


def plot(sweep: Sweep, path: str) -> list[Panel]:
    """Write ``panels(sweep)`` side by side to ``path`` (PNG), with `not_drawn`'s note
    under them; return them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    drawn = panels(sweep)
    fig, axes = plt.subplots(1, len(drawn), figsize=(5.4 * len(drawn), 4.5), squeeze=False)
    for ax, panel in zip(axes[0], drawn, strict=True):
        colors = {}
        for label in panel.lines:
            (line,) = ax.plot(*series(panel, label), marker="o", label=label)
            colors[label] = line.get_color()
        _mark_failed(ax, panel, colors)
        if not panel.lines:  # e.g. speedup when every baseline cell failed
            ax.text(0.5, 0.5, f"no {panel.name} figures", ha="center", transform=ax.transAxes)
        if panel.ticks is not None:
            ax.set_xticks(range(len(panel.ticks)), panel.ticks)
        elif all(float(x).is_integer() for pts in panel.lines.values() for x, _ in pts):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # (replicas: 1, 2, not 1.25)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(panel.name)
        if panel.name.startswith("bytes"):  # (kB, MB: not 1e7 over the axis)
            ax.yaxis.set_major_formatter(EngFormatter(unit="B"))
        # From 0, bytes and the ratios: 1.72 kB to 1.76 kB (call ids a digit longer) drew
        # as a steep rise, and an efficiency of 1 then 0.997 as a fall from the top of
        # its axis to the foot. With room above the highest point: set_ylim(bottom=0)
        # alone kept the top matplotlib had chosen for the points' own range, a little
        # above the highest, whose marker was then cut in half by the frame. (Times keep
        # the axis fitted to them.)
        top = max((y for pts in panel.lines.values() for _, y in pts), default=0.0)
        if panel.name != "elapsed s" and top > 0:
            ax.set_ylim(0, top * 1.08)
        ax.grid(True, alpha=0.3)
        if any(panel.lines) or panel.failed:  # (labelled artists only: matplotlib warns)
            ax.legend(fontsize=8)
    note = not_drawn(sweep)
    if note is not None:
        fig.text(0.01, 0.01, note, fontsize=8, color="tab:red", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.05 if note else 0, 1, 1))
    fig.savefig(path, dpi=110)  # (its directory and format were checked before the runs)
    plt.close(fig)
    return drawn


def _mark_failed(ax: Any, panel: Panel, colors: dict[str, str]) -> None:
    """An x at the foot of the axes, in its line's colour (red for a line with no point
    at all), where a combination failed: its gap in the line is then seen for what it
    is, even at the line's end, where there is no gap to see."""
    from matplotlib.transforms import blended_transform_factory

    foot = blended_transform_factory(ax.transData, ax.transAxes)  # x as data, y of the axes
    mark = {"linestyle": "none", "marker": "x", "markersize": 9, "markeredgewidth": 2}
    for label, xs in panel.failed.items():
        ax.plot(xs, [0.03] * len(xs), color=colors.get(label, "tab:red"), transform=foot,
                clip_on=False, label="_", **mark)
    if panel.failed:  # (the legend's x in grey: the first line's colour spoke for all)
        ax.plot([], [], color="0.35", label="failed: no point", **mark)
