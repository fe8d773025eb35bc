"""Benchmark figures: a `BenchResult` drawn with matplotlib (`figure`, written to a PNG by
`plot`), a panel per metric (and per placement, or per value of a config key), a line or
bar per system/config, each series one colour and marker in every panel
(`series_colours`), named once, in one legend below the panels.

matplotlib is an extra (``pip install 'polybus[plot]'``): it is imported inside the
functions that draw, so importing this module does not need it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from polybus.bench.report import METRIC_UNITS, BenchResult, Row, _unique, label_of

__all__ = ["axis_scale", "figure", "plot", "series_colours"]

COLUMNS = 3  # panels a figure row holds at most
_PANEL_IN = (4.4, 3.6)  # inches a panel takes, labels included: its axes about 4:3
_TICK_EACH = 12  # x values up to which a linear axis has a tick at each
_WIDE = 10.0  # a log axis needs the positive values to span at least this ratio...
_CROWDED = 0.05  # ...and two of them closer than this share of the span on a linear one
_LOG_Y = 50.0  # a y axis is log when its (positive) values span at least this ratio
_MARKERS = "os^vDP<>Xph*"
_DODGE = 0.2  # share of the gap between x values the series at one x spread over


def series_colours(labels: Iterable[str]) -> dict[str, str]:
    """A colour per series label (first seen, first colour), to be used in every panel,
    so that a series keeps its colour where panels show different subsets of series
    (sort: seconds has one_process and mpi4py, speedup only polybus). tab10, or tab20
    past ten series (then repeating past twenty: the marker, `_MARKERS` in turn, tells
    those apart)."""
    import matplotlib
    from matplotlib.colors import to_hex

    names = _unique(labels)
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {lab: to_hex(cmap(i % cmap.N)) for i, lab in enumerate(names)}


def axis_scale(values: Iterable[float]) -> str:
    """The scale of an x axis showing ``values``: ``"linear"`` for a few small counts
    (workers, servers, pool sizes: a tick at each); ``"log"`` only where the values span
    a wide range (array sizes), that is, the positive ones a ratio of at least `_WIDE`
    and two of them so close that a linear axis would crowd them (`_CROWDED`);
    ``"symlog"`` for such values with a 0 among them (payload sizes 0..10 MB: log, with
    a linear stretch from 0 to the smallest positive one)."""
    vs = sorted(set(values))
    pos = [v for v in vs if v > 0]
    if len(pos) < 2 or vs[0] < 0 or pos[-1] / pos[0] < _WIDE:
        return "linear"
    if min(b - a for a, b in pairwise(vs)) >= _CROWDED * (vs[-1] - vs[0]):
        return "linear"
    return "log" if len(pos) == len(vs) else "symlog"


# Benchmarks whose figure has a panel per value of a config key (a row per metric):
# matmul's sizes, as seeds/002 Fig. 6-7 draw speedup and efficiency against servers per
# size (in one panel, 5 sizes times 15 systems made 75 unreadable lines).
PANEL_BY = {"matmul": "n"}


def _placements(rows: Iterable[Row], metric: str) -> list[str | None]:
    """The placements (``config["cpus"]``, bench/placement.py) ``metric`` was measured at,
    a panel each when there are several; ``[None]``, one panel, otherwise. A row with no
    placement is drawn in each of its metric's panels."""
    found = _unique(str(r.config["cpus"]) for r in rows if r.metric == metric and "cpus" in r.config)
    return list(found) if len(found) > 1 else [None]


def _grid(result: BenchResult) -> tuple[list[list[tuple[str, str, str | None]]], str]:
    """The panels, row by row, as (metric, config key, value or None for every row),
    and the config key the series are named without. With ``params["panel_by"]`` (a
    config key, e.g. matmul's ``n``): a row per metric, a panel per value of that key.
    Otherwise a panel per metric, and per placement where a metric was measured at
    several (``_placements``). A row longer than `COLUMNS` goes on over the next rows."""
    metrics = _unique(r.metric for r in result.rows)
    rows: list[list[tuple[str, str, str | None]]]
    by = result.params.get("panel_by", PANEL_BY.get(result.bench))
    if isinstance(by, str):
        values = _unique(str(r.config[by]) for r in result.rows if by in r.config)
        rows, leave = [[(m, by, v) for v in values] for m in metrics], by
    else:
        row = [(m, "cpus", c) for m in metrics for c in _placements(result.rows, m)]
        rows, leave = [row], "cpus" if any(c is not None for _, _, c in row) else ""
    return [r[i:i + COLUMNS] for r in rows for i in range(0, len(r), COLUMNS)], leave


def figure(result: BenchResult) -> Any:
    """A matplotlib Figure of ``result``: a panel per metric (and per placement, or per
    value of ``params["panel_by"]``: the series are then named without it), at most
    `COLUMNS` a row, a line per system/config (bars where a metric has one x), each
    series one colour and marker in every panel, and one legend, the figure's, below
    the panels (never over their data).

    The x axis is linear, or log for values spanning a wide range (`axis_scale`); the y
    axis log where its values span a ratio of `_LOG_Y` or more. Error bars span min to
    max, drawn where a cell had more than one repetition.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid, leave = _grid(result)
    name = {id(r): label_of(r.system, r.config, leave) for r in result.rows}
    order = _unique(name[id(r)] for r in result.rows)
    colour = series_colours(order)
    style = {lab: (colour[lab], _MARKERS[i % len(_MARKERS)]) for i, lab in enumerate(order)}
    ncols = max(len(g) for g in grid)
    fig, axes = plt.subplots(len(grid), ncols, squeeze=False,
                             figsize=(_PANEL_IN[0] * ncols, _PANEL_IN[1] * len(grid)))
    handles: dict[str, Any] = {}
    for axrow, panels in zip(axes, grid, strict=True):
        for ax, (metric, key, val) in zip(axrow, panels, strict=False):
            rows = [r for r in result.rows if r.metric == metric
                    and (val is None or str(r.config.get(key, val)) == val)]
            _panel(ax, result, metric, rows, name, style)
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(lab, h)
            ax.set_title(f"{result.bench}: {metric}" + ("" if val is None else f", {key}={val}")
                         + (" (--quick)" if result.params.get("quick") else ""), fontsize=10)
        for ax in axrow[len(panels):]:
            ax.set_visible(False)
    fig.tight_layout()
    if handles:
        labels = sorted(handles, key=order.index)
        fig.legend([handles[lab] for lab in labels], labels, loc="upper center",
                   bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False,
                   ncol=_legend_columns(labels, fig.get_figwidth()))
    return fig


def _legend_columns(labels: Sequence[str], width_in: float) -> int:
    """As many legend columns as the longest label lets fit across the figure."""
    per = (max(len(lab) for lab in labels) * 8 * 0.6 + 36) / 72  # inches an entry takes
    return max(1, min(len(labels), int(width_in / per)))


def _num(v: float, _pos: object = None) -> str:
    """A tick label as a reader writes the number: 0.02, 500, 10k, 1M, 1e-5."""
    if v == 0:
        return "0"
    for at, unit, suffix in ((1e9, 1e9, "G"), (1e6, 1e6, "M"), (1e4, 1e3, "k")):  # (1000, not 1k)
        if abs(v) >= at:
            return f"{v / unit:g}{suffix}"
    text = f"{v:g}"
    return text.replace("e-0", "e-").replace("e+0", "e")


def _log_ticks(axis: Any, linthresh: float = 0.0) -> None:
    """Decade ticks labelled as plain numbers (`_num`), not 10^k; the 2s and 5s between
    them too where the axis shows fewer than two decade ticks. On
    a symlog axis, none between 0 and ``linthresh`` (a label there runs into the 0)."""
    from matplotlib.ticker import FuncFormatter

    def major(v: float, _pos: object) -> str:
        return "" if 0 < v < linthresh else _num(v)

    def minor(v: float, _pos: object) -> str:
        lo, hi = axis.get_view_interval()
        if v <= 0 or lo <= 0 or math.floor(math.log10(hi)) - math.ceil(math.log10(lo)) >= 1:
            return ""  # (two decade ticks or more: those say the scale)
        mantissa = v / 10 ** math.floor(math.log10(v) + 1e-9)
        return _num(v) if any(abs(mantissa - m) < 1e-6 for m in (2, 5)) else ""

    axis.set_major_formatter(FuncFormatter(major))
    axis.set_minor_formatter(FuncFormatter(minor))


def _spread(rows: Iterable[Row]) -> list[float]:
    """What a panel's y axis shows: each median, and the min and max a range is drawn to."""
    return [v for r in rows for v in ((r.median, r.min, r.max) if r.n > 1 else (r.median,))]


def _panel(ax: Any, result: BenchResult, metric: str, rows: list[Row], name: dict[int, str],
           style: dict[str, tuple[str, str]]) -> None:
    """One panel of `figure`: ``rows`` (one metric) as bars (one x) or lines."""
    xs = sorted({r.x for r in rows})
    labels = _unique(name[id(r)] for r in rows)
    if len(xs) == 1:  # a bar a series, named in the figure's legend (no crowded labels)
        for i, lab in enumerate(labels):
            r = next(r for r in rows if name[id(r)] == lab)
            err = [[r.median - r.min], [r.max - r.median]] if r.n > 1 else None
            ax.bar(i, r.median, yerr=err, capsize=4, color=style[lab][0], label=lab)
        ax.set_xticks([])
        ax.set_xlabel(f"{result.x_label_of(metric)} = {_num(xs[0])}")
    else:
        shift = _dodge(rows, name, xs)
        for lab in labels:
            pts = sorted((r for r in rows if name[id(r)] == lab), key=lambda r: r.x)
            err = [[r.median - r.min for r in pts], [r.max - r.median for r in pts]]
            ax.errorbar([r.x + shift.get((lab, r.x), 0.0) for r in pts],
                        [r.median for r in pts], yerr=err,
                        errorevery=[r.n > 1 for r in pts], capsize=3, label=lab,
                        color=style[lab][0], marker=style[lab][1], markersize=5)
        _x_axis(ax, xs)
        ax.set_xlabel(result.x_label_of(metric))
    ys = _spread(rows)
    if ys and min(ys) > 0 and max(ys) / min(ys) >= _LOG_Y:
        ax.set_yscale("log")
        _log_ticks(ax.yaxis)
    else:  # (140M, not 1.4 under a "1e8" in the corner)
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(_num))
    ax.set_ylabel(METRIC_UNITS.get(metric, metric))
    ax.grid(True, which="major", alpha=0.3)


def _dodge(rows: Sequence[Row], name: dict[int, str], xs: Sequence[float]
           ) -> dict[tuple[str, float], float]:
    """Where a linear axis has a tick at each x (`_x_axis`), the series measured at an x
    are spread side by side over `_DODGE` of the gap to the next x, in legend order, so
    that their markers and ranges do not hide each other (mandelbrot's strategies all at
    4 servers); ``{(series, x): offset}``, empty for any other axis."""
    if axis_scale(xs) != "linear" or len(xs) > _TICK_EACH:
        return {}
    width = _DODGE * min(b - a for a, b in pairwise(xs))
    shift: dict[tuple[str, float], float] = {}
    for x in xs:
        here = _unique(name[id(r)] for r in rows if r.x == x)
        for i, lab in enumerate(here):
            shift[(lab, x)] = (i - (len(here) - 1) / 2) * width / max(1, len(here) - 1)
    return shift


def _x_axis(ax: Any, xs: Sequence[float]) -> None:
    """The x axis `axis_scale` chooses: linear with a tick at each of a few values;
    log (or symlog from 0) with plain-number ticks."""
    scale = axis_scale(xs)
    if scale == "linear":
        if len(xs) <= _TICK_EACH:
            ax.set_xticks(list(xs), [_num(x) for x in xs])
        return
    linthresh = min(x for x in xs if x > 0) if scale == "symlog" else 0.0
    if linthresh:
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.set_xlim(left=0)  # (sizes are never negative: no ticks left of 0)
    else:
        ax.set_xscale("log")
    _log_ticks(ax.xaxis, linthresh)


def plot(result: BenchResult, path: str | os.PathLike[str]) -> Path:
    """Write ``figure(result)`` to ``path`` (PNG)."""
    fig = figure(result)  # (selects the Agg backend before pyplot is imported here)
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")  # (the legend below the panels included)
    plt.close(fig)
    return out
