"""polybus sweep app.toml --vary KEY=v1,v2 ...: every combination, medians, speedup.

Each run is ``polybus.run(path, overrides)``; its ``elapsed_s`` (the entrypoint alone,
start-up of processes apart) is the figure. Every combination's configuration is checked
first: a mistake is reported as any configuration error is (exit status 2) and nothing
runs. A combination that fails at run time shows its error in its row and the sweep
goes on; the exit status is then 1, so a script sees that not every cell has a figure.
An output (--json, --csv, --plot) that cannot be written at the end is said in a line,
the others are written, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from polybus.cli.output import result_console
from polybus.cli.values import check_plot, check_writable, save, seconds
from polybus.deadline import check_timeout
from polybus.errors import UsageError
from polybus.sweep import (
    Cell,
    Measured,
    Runner,
    Sweep,
    check_combinations,
    combinations,
    overridden,
    replicas,
    run_sweep,
    tied_with,
)
from polybus.sweepargs import TIED, check_repeat, parse_baseline, parse_varies

DASH = "\u2013"


class _Tie(argparse.Action):
    """--tie goes in --vary's list, marked, so the order of the two is kept."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), TIED + values])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's TOML configuration")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=v1,v2,...",
                   help="a key and the values to try (repeatable; every combination runs)")
    p.add_argument("--tie", action=_Tie, dest="vary", metavar="KEY=v1,v2,...",
                   help="a key whose values move with the --vary before it, one for each "
                        "(e.g. the client's parts with the replication): no more "
                        "combinations")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed override for every run")
    p.add_argument("--repeat", type=int, default=3, help="runs per combination (default 3)")
    p.add_argument("--baseline", metavar="KEY=VALUE",
                   help="what speedup is measured against, e.g. replication=1 "
                        "(default: the first value of the first --vary)")
    p.add_argument("--json", metavar="FILE", help="write every cell as JSON")
    p.add_argument("--csv", metavar="FILE", help="write every cell as CSV")
    p.add_argument("--plot", metavar="FILE.png",
                   help="time, speedup and efficiency curves (needs the plot extra: "
                        "pip install 'polybus[plot]')")
    p.add_argument("--no-worker-output", action="store_true",
                   help="do not forward what the workers print to stderr")
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr, bar or lines (the table and the outputs "
                        "are written as ever)")
    p.add_argument("--timeout", type=seconds, metavar="DURATION",
                   help="each run's limit: a run still going after this long (its "
                        "workers' start-up not counted) is stopped and fails its "
                        "combination's cell, saying where it was; the sweep goes on")


def _runner(path: str, sets: Sequence[str], worker_output: bool = True,
            timeout: float | None = None) -> Measured:
    from polybus.config.origin import SET
    from polybus.runner import run

    r = run(path, tuple(sets), origin=SET, worker_output=worker_output, timeout=timeout)
    return Measured(r.elapsed_s, r.bytes_sent, r.bytes_received)


BRIEF = 72  # a failed cell's text in the table, at most (characters)


def brief(error: str | None) -> str:
    """A failed cell's first line: a remote traceback wrapped in a narrow column buried
    the table; the whole text stays in --json and --csv."""
    if not error:
        return "no runs"
    first, _, rest = error.strip().partition("\n")
    if len(first) > BRIEF:  # (one long line widened the table past any terminal)
        first, rest = first[:BRIEF - 3].rstrip() + "...", first
    return f"{first} (full text in --json/--csv)" if rest.strip() else first


def _base(sweep: Sweep) -> str:
    return ", ".join(f"{k}={v}" for k, v in sweep.baseline.items())


def title(sweep: Sweep) -> str:
    """The line above the table. Printed on its own, not as the table's title, which rich
    wraps to the table's width: a long path cut the line mid-word even when piped."""
    base = _base(sweep)
    along = sweep.efficiency_vs
    per = (f"; efficiency per replica vs {along[0]}={along[1]}"
           if along is not None and along[0] not in sweep.baseline else "")
    ran = (f"{len(sweep.cells)} of {sweep.planned} combinations ran"
           if len(sweep.cells) < sweep.planned else "every combination ran, not every round")
    stopped = f" (interrupted: {ran})" if sweep.interrupted is not None else ""
    sizes = ("; sent, received: the client's bytes a run, lower median"
             if any(c.bytes_sent or c.bytes_received for c in sweep.cells) else "")
    return (f"sweep {sweep.path}: elapsed s, median [min{DASH}max] of {runs_said(sweep)}; "
            f"speedup vs {base}{per}{sizes}{stopped}")


def runs_said(sweep: Sweep) -> str:
    """How many runs each figure is of: ``--repeat`` once every round ran; after Ctrl-C
    the runs the cells have (an interrupted round leaves some a run short), where the
    title said --repeat all the same ("of 3" over cells of two runs)."""
    lo, hi = sweep.runs
    if lo == hi == sweep.repeat:
        return str(lo)
    if lo == hi:
        return f"{lo} runs ({sweep.repeat} asked)"
    return f"{lo}{DASH}{hi} runs ({sweep.repeat} asked; each cell's in the runs column)"


def table(sweep: Sweep) -> Table:
    keys = [k for k, _ in sweep.varies]
    base = _base(sweep)
    t = Table()
    if sweep.baseline_failed and sweep.cells:
        t.caption = escape(f"no speedup: the baseline {base} has no figure (it failed or "
                           f"did not run)")
    short = short_names(keys)
    for k in keys:
        t.add_column(escape(short[k] if k.startswith("modules.") else k))
    lo, hi = sweep.runs
    runs = lo != hi  # (cells of unequal counts: each says its own)
    counted = any(c.bytes_sent or c.bytes_received for c in sweep.cells)
    for col in ("elapsed s", *(("runs",) if runs else ()), "speedup", "efficiency",
                *(("sent", "received") if counted else ())):
        t.add_column(col, justify="right")
    for c in sweep.cells:
        vals = [escape(c.config[k]) for k in keys]
        sizes = (size(c.sent), size(c.received)) if counted else ()
        if not c.ok:
            t.add_row(*vals, f"[red]failed[/]: {escape(brief(c.error))}",
                      *((DASH,) if runs else ()), DASH, DASH, *sizes)
            continue
        t.add_row(*vals, f"{c.median:.4g} [{min(c.elapsed_s):.4g}{DASH}{max(c.elapsed_s):.4g}]",
                  *((str(len(c.elapsed_s)),) if runs else ()),
                  DASH if c.speedup is None else f"{c.speedup:.3g}",
                  DASH if c.efficiency is None else f"{c.efficiency:.3g}", *sizes)
    return t


def size(n: int | None) -> str:
    """Bytes in decimal units, three figures: ``6_712_345`` -> ``"6.71 MB"``."""
    if n is None:
        return DASH
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """Each varied key by its last part, or by as many last parts as tell it from the
    others (``use.s2.forward`` and ``use.s3.forward`` are ``s2.forward`` and
    ``s3.forward``, not ``forward`` twice)."""
    out: dict[str, str] = {}
    for k in keys:
        parts = k.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[-n:])
            if not any(o != k and (o == name or o.endswith("." + name)) for o in keys):
                break
        out[k] = name
    return out


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


def _panel(sweep: Sweep, name: str, get: Callable[[Cell], float | None], xkey: str,
           x_of: Callable[[str], float | None], xlabel: str,
           ticks: list[str] | None = None) -> Panel:
    keys = [k for k, _ in sweep.varies]
    moving = tied_with(sweep.varies, sweep.tied, xkey)  # (they move along x: no lines of theirs)
    others = [k for k in keys if k not in moving]
    lines: dict[str, list[tuple[float, float]]] = {}
    for c in sweep.cells:
        x, y = x_of(c.config[xkey]), get(c) if c.ok else None
        if x is not None and y is not None:
            label = ", ".join(f"{_short(k, keys)}={c.config[k]}" for k in others)
            lines.setdefault(label, []).append((x, y))
    return Panel(name, xlabel, {k: sorted(v) for k, v in lines.items()}, ticks)


def panels(sweep: Sweep) -> list[Panel]:
    """Time and speedup against the first varied key whose values are all numbers (else
    the first key, its values as categories); efficiency against the replica count it
    is measured along (``Sweep.efficiency_vs``), and no efficiency panel when there is
    none (no replication count is varied, or no cell has a figure); the client's bytes
    sent, and received, as time is, each when it differs between cells."""
    keys = [k for k, _ in sweep.varies]
    xkey = next((k for k, vs in sweep.varies if all(_number(v) is not None for v in vs)),
                keys[0])
    values = dict(sweep.varies)[xkey]
    numeric = all(_number(v) is not None for v in values)
    x_of = _number if numeric else lambda v: float(values.index(v))
    ticks = None if numeric else values
    out = [_panel(sweep, "elapsed s", lambda c: c.median, xkey, x_of, _short(xkey, keys), ticks),
           _panel(sweep, "speedup", lambda c: c.speedup, xkey, x_of, _short(xkey, keys), ticks)]
    along = sweep.efficiency_vs
    if along is not None and any(c.efficiency is not None for c in sweep.cells):
        key = along[0]
        out.append(_panel(sweep, "efficiency", lambda c: c.efficiency, key,
                          lambda v: replicas(key, v), f"{_short(key, keys)} (replicas)"))
    # Bytes where a change moved them (cache on or off, forwarding, aggregation): a
    # panel of one flat line would only take room.
    if len({c.sent for c in sweep.cells if c.ok and c.sent is not None}) > 1:
        out.append(_panel(sweep, "bytes sent", lambda c: c.sent, xkey, x_of, _short(xkey, keys),
                          ticks))
    if len({c.received for c in sweep.cells if c.ok and c.received is not None}) > 1:
        out.append(_panel(sweep, "bytes received", lambda c: c.received, xkey, x_of,
                          _short(xkey, keys), ticks))
    return out


def plot(sweep: Sweep, path: str) -> list[Panel]:
    """Write ``panels(sweep)`` side by side to ``path`` (PNG); return them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter, MaxNLocator

    drawn = panels(sweep)
    fig, axes = plt.subplots(1, len(drawn), figsize=(5.4 * len(drawn), 4.5), squeeze=False)
    for ax, panel in zip(axes[0], drawn, strict=True):
        for label, pts in panel.lines.items():
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label)
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
            # From 0: 1.72 kB to 1.76 kB (call ids a digit longer) drew as a steep rise.
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        if any(panel.lines):  # a legend only of labelled lines (matplotlib warns otherwise)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)  # (its directory and format were checked before the runs)
    plt.close(fig)
    return drawn


def main(args: argparse.Namespace) -> int:
    if not args.vary:
        raise UsageError("give at least one --vary KEY=v1,v2,...")
    check_repeat(args.repeat)  # (now, not from run_sweep under the bar: a blank line)
    varies, tied = parse_varies(args.vary)
    baseline = parse_baseline(args.baseline, varies)
    combos = combinations(varies, tied)
    check_timeout(args.timeout, "--timeout")
    check_combinations(args.config, varies, args.set, tied)  # a bad value: now, not in its cell
    check_writable(args.json, "--json")
    check_writable(args.csv, "--csv")
    if args.plot:
        check_plot(args.plot)  # (drawn after every run: a bad name cost them all)
    for fixed in overridden(args.set, varies):
        print(f"polybus sweep: warning: --set {fixed}: --vary gives that key in every run",
              file=sys.stderr)
    console = result_console()  # piped or redirected: the table whole, not cut at 80
    err = Console(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                   console=err, transient=True, disable=args.quiet)
    with bar:
        task = bar.add_task("sweep", total=len(combos) * args.repeat)
        runner: Runner = _runner  # (the plain function when nothing is set: tests swap it)
        if args.no_worker_output or args.timeout is not None:
            runner = partial(_runner, worker_output=not args.no_worker_output,
                             timeout=args.timeout)
        sweep = run_sweep(args.config, varies, args.repeat, runner, baseline, fixed=args.set,
                          progress=_Bar(bar, task, lines=not (err.is_terminal or args.quiet)),
                          tied=tied)
    console.print(title(sweep), markup=False, highlight=False)
    console.print(table(sweep))
    console.file.flush()  # (the table before any line saying an output was not written)
    unwritten = write_outputs(sweep, args)
    if sweep.interrupted is not None:  # (what ran is shown and saved; then as any Ctrl-C)
        raise sweep.interrupted
    if unwritten:
        return 2
    return 0 if all(c.ok for c in sweep.cells) else 1


def write_outputs(sweep: Sweep, args: argparse.Namespace) -> int:
    """Write --json, --csv and --plot; each that cannot be written is said in a line and
    the others are written all the same. How many could not be."""
    def csv(path: str) -> None:
        Path(path).write_text(sweep.to_csv(), encoding="utf-8")

    outputs = [(option, path, write) for option, path, write in (
        ("--json", args.json, sweep.write_json), ("--csv", args.csv, csv),
        ("--plot", args.plot if sweep.cells else None, partial(plot, sweep))) if path]
    written = [f"{option} {path}" for option, path, write in outputs
               if save("sweep", option, path, write)]
    if len(written) < len(outputs):
        print(f"  the figures are in the table above{', and in ' if written else ''}"
              f"{', '.join(written)}", file=sys.stderr, flush=True)
    return len(outputs) - len(written)


class _Bar:
    """The sweep's progress: the bar names the run under way; a failed cell's runs that
    will not happen leave the total (the time left counted them); without a terminal
    (a log file) a line per run instead."""

    def __init__(self, bar: Progress, task: TaskID, lines: bool) -> None:
        self.bar, self.task, self.lines = bar, task, lines

    def start(self, description: str) -> None:
        self.bar.update(self.task, description=description)

    def advance(self, description: str) -> None:
        self.bar.update(self.task, advance=1)
        if self.lines:
            t = self.bar.tasks[self.task]
            print(f"sweep: {int(t.completed)}/{int(t.total or 0)} {description}",
                  file=sys.stderr, flush=True)

    def skip(self, runs: int) -> None:
        if runs:
            t = self.bar.tasks[self.task]
            self.bar.update(self.task, total=(t.total or 0) - runs)
