"""Benchmark figures: a `BenchResult` drawn with matplotlib (`figure`, written to a PNG by
`plot`), a panel per metric (and per placement, or per value of a config key), a line or
bar per system/config, each series one colour in every panel (`series_colours`).

matplotlib is an extra (``pip install 'polybus[plot]'``): it is imported inside the
functions that draw, so importing this module does not need it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from polybus.bench.report import METRIC_UNITS, BenchResult, Row, _unique, label_of

__all__ = ["figure", "plot", "series_colours"]

_LOG_METRICS = {"rtt_us", "gbps", "seconds", "bytes_sent", "sequential_s"}
"""Metrics drawn on a log y axis (and log x, against size), when every median is positive."""


def series_colours(labels: Iterable[str]) -> dict[str, str]:
    """A colour per series label (first seen, first colour), to be used in every panel,
    so that a series keeps its colour where panels show different subsets of series
    (sort: seconds has one_process and mpi4py, speedup only polybus). tab10, or tab20
    past ten series (then repeating past twenty)."""
    import matplotlib
    from matplotlib.colors import to_hex

    names = _unique(labels)
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {lab: to_hex(cmap(i % cmap.N)) for i, lab in enumerate(names)}


# Benchmarks whose figure has a panel per value of a config key (a row per metric):
# matmul's sizes, as seeds/002 Fig. 6-7 draw speedup and efficiency against servers per
# size (in one panel, 5 sizes times 15 systems made 75 unreadable lines).
PANEL_BY = {"matmul": "n"}
_LEGEND_INSIDE = 6  # series a panel's legend may hold over the lines; more go below it


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
    Otherwise one row: a panel per metric, and per placement where a metric was measured
    at several (``_placements``)."""
    metrics = _unique(r.metric for r in result.rows)
    by = result.params.get("panel_by", PANEL_BY.get(result.bench))
    if isinstance(by, str):
        values = _unique(str(r.config[by]) for r in result.rows if by in r.config)
        return [[(m, by, v) for v in values] for m in metrics], by
    row = [(m, "cpus", c) for m in metrics for c in _placements(result.rows, m)]
    return [row], "cpus" if any(c is not None for _, _, c in row) else ""


def figure(result: BenchResult) -> Any:
    """A matplotlib Figure of ``result``: a panel per metric (and per placement, or per
    value of ``params["panel_by"]``: the series are then named without it), a line per
    system/config, each series one colour in every panel (``series_colours``); with
    ``panel_by``, one legend below them all.

    Latency and bandwidth against size are drawn log-log (with a linear stretch near
    zero when a 0-byte payload is among the sizes). Error bars span min to max.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid, leave = _grid(result)
    name = {id(r): label_of(r.system, r.config, leave) for r in result.rows}
    colour = series_colours(name[id(r)] for r in result.rows)
    ncols = max(1, max(len(g) for g in grid))
    fig, axes = plt.subplots(len(grid), ncols, figsize=(6.5 * ncols, 4.5 * len(grid)),
                             squeeze=False)
    shared = leave not in ("", "cpus")
    handles: dict[str, Any] = {}
    for axrow, panels in zip(axes, grid, strict=True):
        for ax, (metric, key, val) in zip(axrow, panels, strict=False):
            rows = [r for r in result.rows if r.metric == metric
                    and (val is None or str(r.config.get(key, val)) == val)]
            _panel(ax, result, metric, rows, name, colour, legend=not shared)
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                handles.setdefault(lab, h)
            ax.set_title(f"{result.bench}: {metric}" + ("" if val is None else f", {key}={val}")
                         + (" (--quick)" if result.params.get("quick") else ""))
        for ax in axrow[len(panels):]:
            ax.set_visible(False)
    fig.tight_layout()
    if shared and handles:
        fig.legend(list(handles.values()), list(handles), loc="upper center", fontsize=9,
                   bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(handles)))
    return fig


def _panel(ax: Any, result: BenchResult, metric: str, rows: list[Row], name: dict[int, str],
           colour: dict[str, str], legend: bool = True) -> None:
    """One panel of `figure`: ``rows`` (one metric) as bars (one x) or lines."""
    xs = sorted({r.x for r in rows})
    labels = _unique(name[id(r)] for r in rows)
    if len(xs) == 1:
        meds = [next(r.median for r in rows if name[id(r)] == lab) for lab in labels]
        lo = [m - next(r.min for r in rows if name[id(r)] == lab) for m, lab in zip(meds, labels, strict=True)]
        hi = [next(r.max for r in rows if name[id(r)] == lab) - m for m, lab in zip(meds, labels, strict=True)]
        ax.bar(range(len(labels)), meds, yerr=[lo, hi], capsize=4,
               color=[colour[lab] for lab in labels])
        ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    else:
        for lab in labels:
            pts = sorted((r for r in rows if name[id(r)] == lab), key=lambda r: r.x)
            x = [r.x for r in pts]
            med = [r.median for r in pts]
            err = [[r.median - r.min for r in pts], [r.max - r.median for r in pts]]
            ax.errorbar(x, med, yerr=err, marker="o", capsize=3, label=lab,
                        color=colour[lab])
        if metric in _LOG_METRICS and all(r.median > 0 for r in rows):
            ax.set_yscale("log")
            positive = [x for x in xs if x > 0]
            if positive and len(positive) < len(xs):
                ax.set_xscale("symlog", linthresh=min(positive))
                ax.set_xlim(left=0)  # (sizes are never negative: no ticks left of 0)
            elif positive:
                ax.set_xscale("log")
        ax.set_xlabel(result.x_label_of(metric))
        if not legend:
            pass
        elif len(labels) > _LEGEND_INSIDE:  # beside the lines it would cover
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        else:
            ax.legend(fontsize=8)
    ax.set_ylabel(METRIC_UNITS.get(metric, metric))
    ax.grid(True, which="both", alpha=0.3)


def plot(result: BenchResult, path: str | os.PathLike[str]) -> Path:
    """Write ``figure(result)`` to ``path`` (PNG)."""
    fig = figure(result)  # (selects the Agg backend before pyplot is imported here)
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110, bbox_inches="tight")  # (legends below their panel included)
    plt.close(fig)
    return out
