"""`polybus sweep`'s table: the line above it (`title`: what each column is compared
against), a row per combination (`table`), a failed cell's first line (`brief`)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from polybus.plural import plural
from polybus.sweep import Cell, Sweep, moving_with, replicas
from polybus.sweepargs import shown_values
from polybus.sweepcompare import short

__all__ = ["BRIEF", "DASH", "brief", "compared", "elapsed", "failed", "runs_said",
           "short_names", "short_said", "size", "table", "title"]

DASH = "\u2013"


BRIEF = 80  # a failed cell's text in the table, at most (characters; a timeout's where)
# an absolute path; group 1 its last part
_PATH = re.compile(r"(?<![\w.~])/(?:[^\s/,:;'\"()]+/)+([^\s/,:;'\"()]+)")


def brief(error: str | None, saved: Sequence[str] = ()) -> str:
    """A failed cell's first line: a remote traceback wrapped in a narrow column buried
    the table; the whole text is in the outputs ``saved`` (``--json``, ``--csv``) that
    were given, and said to be, or, with neither, they are suggested (it said "full text
    in --json/--csv" when there was none)."""
    if not error:
        return "no runs"
    first, _, rest = error.strip().partition("\n")
    if len(first) > BRIEF:  # (one long line widened the table past any terminal)
        # A file by its name alone: a timeout's "while the program was at /home/.../c.py,
        # line 7, in main" was cut inside the directories, the file and line lost.
        first, rest = _PATH.sub(r"\1", first), first
        if len(first) > BRIEF:
            first = first[:BRIEF - 3].rstrip() + "..."
    if not rest.strip():
        return first
    where = f"in {'/'.join(saved)}" if saved else "with --json FILE or --csv FILE"
    return f"{first} (full text {where})"


def _shown(sweep: Sweep, key: str, value: str) -> str:
    return shown_values(dict(sweep.varies).get(key, [value])).get(value, value)


def _base(sweep: Sweep) -> str:
    return ", ".join(f"{k}={_shown(sweep, k, v)}" for k, v in sweep.baseline.items())


def _same(sweep: Sweep, ref: dict[str, str]) -> str:
    """`` at the same callstyle``: the varied keys a cell's reference ``ref`` leaves as
    the cell has them (its keys, and those tied to them, are not), by their columns'
    names; "" when there are none."""
    keys = [k for k, _ in sweep.varies]
    moved = moving_with(sweep.varies, sweep.tied)(ref)
    short = short_names(keys)
    others = [short[k] if k.startswith("modules.") else k for k in keys if k not in moved]
    if not others:
        return ""
    return " at the same " + (others[0] if len(others) == 1 else
                              ", ".join(others[:-1]) + " and " + others[-1])


def compared(sweep: Sweep) -> str:
    """What speedup and efficiency are measured against, exactly: ``speedup vs
    callstyle=sync at the same replication; efficiency: speedup vs replication=1 at the
    same callstyle, per replica``. Efficiency is along the replica count with every
    other key the same (sweepcompare.py `compare`), which the baseline need not be: said apart,
    unless it is the baseline's own speedup. With no replication count varied there is
    no efficiency, and no column of it: said here once (``no efficiency column (no
    replication count is varied)``)."""
    speedup = f"speedup vs {_base(sweep)}{_same(sweep, sweep.baseline)}"
    along = sweep.efficiency_vs
    if along is None:  # (said once here, not a column of dashes)
        return f"{speedup}; no efficiency column (no replication count is varied)"
    key, value = along
    p0 = replicas(key, value)
    # (against 0 replicas, the client alone: per replica, and none in the cells of 0)
    per = ("per replica" if p0 == 1 else f"per replica (none at {key.rpartition('.')[2]}=0)"
           if p0 == 0 else f"divided by replicas/{p0:g}")
    expand = moving_with(sweep.varies, sweep.tied)
    if expand({key: value}) == expand(sweep.baseline):
        return f"{speedup}; efficiency: that speedup {per}"
    ref = {key: value}
    return (f"{speedup}; efficiency: speedup vs {key}={_shown(sweep, key, value)}"
            f"{_same(sweep, ref)}, {per}")


def title(sweep: Sweep) -> str:
    """The line above the table. Printed on its own, not as the table's title, which rich
    wraps to the table's width: a long path cut the line mid-word even when piped."""
    ran = (f"{len(sweep.cells)} of {sweep.planned} combinations ran"
           if len(sweep.cells) < sweep.planned else "every combination ran, not every round")
    stopped = f" (interrupted: {ran})" if sweep.interrupted is not None else ""
    sizes = ("; sent, received: the client's bytes a run, lower median"
             if any(c.ok and (c.bytes_sent or c.bytes_received) for c in sweep.cells) else "")
    fixed = f" (with --set {', '.join(sweep.fixed)})" if sweep.fixed else ""
    # (one run a cell: its time alone, no median or range of one sample)
    figure = f"elapsed s, median [min{DASH}max] of" if sweep.runs[1] > 1 else "elapsed s of"
    return (f"sweep {sweep.path}{fixed}: {figure} "
            f"{runs_said(sweep)}; {compared(sweep)}{sizes}{stopped}")


def runs_said(sweep: Sweep) -> str:
    """How many runs each figure is of: ``--repeat`` once every round ran; after Ctrl-C
    the runs the cells have (an interrupted round leaves some a run short), where the
    title said --repeat all the same ("of 3" over cells of two runs). ``1 run`` for
    ``--repeat 1``, whose cells have no median or range (`elapsed`)."""
    lo, hi = sweep.runs
    if lo == hi == sweep.repeat:
        return str(lo) if lo > 1 else "1 run"
    if lo == hi:
        return f"{plural(lo, 'run')} ({sweep.repeat} asked)"
    return f"{lo}{DASH}{hi} runs ({sweep.repeat} asked; each cell's in the runs column)"


def table(sweep: Sweep, saved: Sequence[str] = ()) -> Table:
    """A row per combination; ``saved``: the outputs given that keep a failed cell's
    whole error (`brief`)."""
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
    counted = any(c.ok and (c.bytes_sent or c.bytes_received) for c in sweep.cells)
    # Efficiency is speedup per replica: with no replica count varied it has no value
    # (the line above says so once; it was a column of dashes).
    eff = sweep.efficiency_vs is not None
    for col in ("elapsed s", *(("runs",) if runs else ()), "speedup",
                *(("efficiency",) if eff else ()), *(("sent", "received") if counted else ())):
        t.add_column(col, justify="right")
    for c in sweep.cells:
        vals = [escape(sweep.shown(c)[k]) for k in keys]
        if not c.ok:  # (no figure of the runs that succeeded first: not the combination's)
            t.add_row(*vals, f"[red]{failed(c, sweep.repeat)}[/]: {escape(brief(c.error, saved))}",
                      *((DASH,) if runs else ()), DASH, *((DASH,) if eff else ()),
                      *((DASH, DASH) if counted else ()))
            continue
        sizes = (size(c.sent), size(c.received)) if counted else ()
        t.add_row(*vals, elapsed(c.elapsed_s), *((str(len(c.elapsed_s)),) if runs else ()),
                  DASH if c.speedup is None else f"{c.speedup:.3g}",
                  *((DASH if c.efficiency is None else f"{c.efficiency:.3g}",) if eff else ()),
                  *sizes)
    return t


def elapsed(times: Sequence[float]) -> str:
    """A cell's time: ``median [min\u2013max]``, or the one run's time alone (``--repeat
    1``: a range of one sample, ``0.012 [0.012\u20130.012]``, said nothing)."""
    if len(times) == 1:
        return f"{times[0]:.4g}"
    return f"{statistics.median(times):.4g} [{min(times):.4g}{DASH}{max(times):.4g}]"


def failed(cell: Cell, repeat: int) -> str:
    """How a failed cell's runs went: ``failed in run 2 of 3 (1 succeeded, 1 not run)``;
    ``failed`` when it was asked one run. A run that failed in a later round showed the
    bytes of the runs before it, as if they were the combination's."""
    if repeat == 1 or not cell.made:
        return "failed"
    ok, left = len(cell.elapsed_s), repeat - cell.made
    parts = [*((f"{ok} succeeded",) if ok else ()), *((f"{left} not run",) if left else ())]
    return f"failed in run {cell.made} of {repeat}" + (f" ({', '.join(parts)})" if parts else "")


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


def short_said(sweep: Sweep) -> list[str]:
    """A line for each cell whose runs found fewer replicas registered than its
    replication asks for (a sweep at a registry): the table's efficiency there is per
    replica that served (sweepcompare.py `served`), which its replication value alone
    would not tell."""
    along = sweep.efficiency_vs
    if along is None:
        return []
    key = along[0]
    name = short_names([k for k, _ in sweep.varies])[key]
    return [f"{name}={sweep.shown(c)[key]}: its runs found {plural(n, 'replica')} of the "
            f"{asked} asked for registered, and ran with those; its efficiency is per "
            f"replica that served" for c, n, asked in short(sweep.cells, key)]
