"""`polybus sweep`: run a program under every combination of configuration values.

CORD's loop (seeds/001 §4) as one command: vary keys, repeat each combination, keep the
median elapsed time with min and max, and compare each combination against a baseline
(speedup; efficiency when a replication count is varied). Every combination's
configuration is checked before the first run (`check_combinations`), so a bad value
costs no runs; a combination that fails at run time (or runs past ``--timeout``:
deadline.py) is recorded with its error and the sweep goes on. The command line's
values are parsed in sweepargs.py, and speedup and efficiency computed in
sweepcompare.py. The core here takes the runner as a parameter, so the combination,
baseline and failure logic is tested without processes.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import statistics
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from polybus.deadline import RunTimeout
from polybus.errors import ConfigError, UsageError
from polybus.sweepargs import check_nesting, check_repeat, overridden, parse_baseline, typed
from polybus.sweepcompare import Expand, compare, efficiency_reference, replicas
from polybus.wherestopped import error_text

__all__ = ["Cell", "Measured", "Runner", "Sweep", "check_combinations", "combinations",
           "efficiency_reference", "overridden", "replicas", "run_sweep"]


@dataclass(frozen=True)
class Measured:
    """What one run measured: its elapsed time, the bytes the client sent and received
    (None when the runner does not count them), and the digest of its result
    (resultdigest.py; None when not kept, with ``no_digest`` saying why if it could not
    be made)."""

    elapsed_s: float
    bytes_sent: int | None = None
    bytes_received: int | None = None
    digest: str | None = None
    no_digest: str | None = None
    replicas: dict[str, int] | None = None  # module -> the replicas that served it


Runner = Callable[[str, Sequence[str]], "float | Measured"]
"""(config path, ["key=value", ...]) -> one run's elapsed seconds, or what it measured."""


class Progress(Protocol):
    def start(self, description: str) -> None: ...  # a run begins
    def advance(self, description: str) -> None: ...  # a run ended (done, or failed)
    def skip(self, runs: int) -> None: ...  # runs that will not happen (their cell failed)


def _groups(varies: Sequence[tuple[str, list[str]]],
            tied: Collection[str]) -> list[list[tuple[str, list[str]]]]:
    """The varied keys, those that move together (--tie) in one group each."""
    groups: list[list[tuple[str, list[str]]]] = []
    for key, values in varies:
        if key in tied and groups:
            groups[-1].append((key, values))
        else:
            groups.append([(key, values)])
    return groups


def tied_with(varies: Sequence[tuple[str, list[str]]], tied: Collection[str],
              key: str) -> set[str]:
    """``key`` and the keys that move with it (--tie)."""
    return next(({k for k, _ in g} for g in _groups(varies, tied) if key in dict(g)), {key})


def moving_with(varies: Sequence[tuple[str, list[str]]], tied: Collection[str] = ()) -> Expand:
    """A function giving, for values of some keys, the values their tied keys take with
    them (--tie): the baseline's cell is then one that ran, as is a speedup's reference."""
    groups = _groups(varies, tied)
    where = {k: g for g in groups for k, _ in g}

    def expand(picked: Mapping[str, str]) -> dict[str, str]:
        out = dict(picked)
        for key, value in picked.items():
            group = where.get(key, [])
            values = dict(group).get(key, [])
            if len(group) > 1 and value in values:
                i = values.index(value)
                out.update((k, vs[i]) for k, vs in group if k not in picked)
        return out
    return expand


def combinations(varies: Sequence[tuple[str, list[str]]],
                 tied: Collection[str] = ()) -> list[dict[str, str]]:
    """Every combination, the first --vary changing slowest; a ``tied`` key (--tie) moves
    with the key before it, value for value, rather than adding combinations."""
    keys = [k for k, _ in varies]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise UsageError(f"--vary {', '.join(twice)}: given twice (give its values in one "
                         f"--vary KEY=v1,v2,...)")
    check_nesting(keys, tied)
    dims = _groups(varies, tied)  # each: keys that move together
    out = []
    for picks in itertools.product(*(range(len(d[0][1])) for d in dims)):
        combo: dict[str, str] = {}
        for d, i in zip(dims, picks, strict=True):
            combo.update((k, vs[i]) for k, vs in d)
        out.append({k: combo[k] for k in keys})
    return out


def _sets(fixed: Sequence[str], combo: Mapping[str, str]) -> list[str]:
    return [*fixed, *(f"{k}={v}" for k, v in combo.items())]


def _varied(key: str | None, keys: Sequence[str]) -> bool:
    return key is not None and any(key == k or key.startswith(k + ".") or k.startswith(key + ".")
                                   for k in keys)


def check_combinations(path: str, varies: Sequence[tuple[str, list[str]]],
                       fixed: Sequence[str] = (), tied: Collection[str] = ()
                       ) -> dict[str, str]:
    """Validate every combination's configuration before anything runs; ConfigErrors
    (each distinct mistake once) if any is wrong. A mistake in a varied key is blamed on
    ``--vary``, which is where the value came from. Returns the module sources the
    combinations read (path: module key), which no output may replace."""
    from polybus.config import ConfigErrors, validate
    from polybus.config.origin import SET, VARY
    from polybus.config.problems import rekey

    keys = [k for k, _ in varies]
    found: dict[str, ConfigError] = {}
    sources: dict[str, str] = {}
    ties = [k for k in keys if k in tied]
    for combo in combinations(varies, tied):
        config, errors = validate(path, _sets(fixed, combo))
        if config is not None:
            sources.update((str(m.source), m.key) for m in config.modules.values())
        for e in errors:
            if e.file == SET.label and _varied(e.key, keys):
                e = rekey(e, file="--tie" if _varied(e.key, ties) else VARY.label, key=e.key)
            found.setdefault(str(e), e)
    if found:
        raise ConfigErrors(list(found.values()), file=path)
    return sources


@dataclass
class Cell:
    """One combination: its elapsed times (and the bytes of each run, when counted), or
    the error that stopped it. A failed cell keeps the figures of the runs that succeeded
    before the one that failed (``elapsed_s``, the bytes), but has no median, speedup or
    efficiency: a figure of some runs is not the combination's."""

    config: dict[str, str]
    elapsed_s: list[float] = field(default_factory=list)
    bytes_sent: list[int] = field(default_factory=list)
    bytes_received: list[int] = field(default_factory=list)
    error: str | None = None
    speedup: float | None = None
    efficiency: float | None = None
    # each run's result digest, as elapsed_s (None: none kept), and why one could not be
    digests: list[str | None] = field(default_factory=list)
    no_digest: str | None = None
    # module -> the replicas that served it in each run (when the runner counts them)
    replicas: dict[str, list[int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.elapsed_s)

    @property
    def made(self) -> int:
        """Runs made: those that succeeded, and the one that failed, if one did (a failure
        ends its cell: the runs after it are not made)."""
        return len(self.elapsed_s) + (self.error is not None)

    @property
    def median(self) -> float:
        return float(statistics.median(self.elapsed_s))

    @property
    def sent(self) -> int | None:
        """The lower median of the bytes the client sent a run (a count one run had, not
        necessarily the run of the median time); None when not counted."""
        return statistics.median_low(self.bytes_sent) if self.bytes_sent else None

    @property
    def received(self) -> int | None:
        """The lower median of the bytes the client received a run, as ``sent``."""
        return statistics.median_low(self.bytes_received) if self.bytes_received else None

    def add(self, got: float | Measured) -> None:
        """One run's figures."""
        if not isinstance(got, Measured):
            got = Measured(float(got))
        self.elapsed_s.append(float(got.elapsed_s))
        if got.bytes_sent is not None:
            self.bytes_sent.append(int(got.bytes_sent))
        if got.bytes_received is not None:
            self.bytes_received.append(int(got.bytes_received))
        self.digests.append(got.digest)
        self.no_digest = self.no_digest or got.no_digest
        for module, n in (got.replicas or {}).items():
            self.replicas.setdefault(module, []).append(n)

    def to_dict(self) -> dict[str, Any]:
        """Its JSON. ``runs``: the runs made, ``runs_ok`` (and ``n``, as ever) those that
        succeeded, whose figures ``elapsed_s`` and the bytes lists are; the medians, min
        and max are null for a failed cell, whatever runs succeeded before it failed."""
        ok = self.ok
        return {"config": {k: typed(v) for k, v in self.config.items()},
                "elapsed_s": list(self.elapsed_s),
                "n": len(self.elapsed_s), "runs": self.made, "runs_ok": len(self.elapsed_s),
                "error": self.error, "speedup": self.speedup, "efficiency": self.efficiency,
                "median": self.median if ok else None,
                "min": min(self.elapsed_s) if ok else None,
                "max": max(self.elapsed_s) if ok else None,
                "bytes_sent": list(self.bytes_sent), "bytes_received": list(self.bytes_received),
                "bytes_sent_median": self.sent if ok else None,
                "bytes_received_median": self.received if ok else None,
                "digests": list(self.digests), "no_digest": self.no_digest,
                "replicas": {m: list(ns) for m, ns in self.replicas.items()}}


@dataclass
class Sweep:
    path: str
    varies: list[tuple[str, list[str]]]
    repeat: int
    baseline: dict[str, str]
    cells: list[Cell]
    fixed: list[str] = field(default_factory=list)
    # Stopped by Ctrl-C (or SIGTERM) before every combination ran: ``cells`` are those
    # that did (the one under way with the runs it finished), and this is what stopped it.
    interrupted: BaseException | None = None
    planned: int = 0  # combinations asked for
    tied: list[str] = field(default_factory=list)  # keys that move with the one before

    def shown(self, cell: Cell) -> dict[str, str]:
        """A cell's values as the table, CSV and plot show them (`shown_values`)."""
        from polybus.sweepargs import shown_values

        return {k: shown_values(dict(self.varies).get(k, [v])).get(v, v)
                for k, v in cell.config.items()}

    @property
    def baseline_failed(self) -> bool:
        """Every cell of the baseline's values failed (or never ran): no speedup."""
        return not any(c.ok and all(c.config.get(k) == v for k, v in self.baseline.items())
                       for c in self.cells)

    @property
    def runs(self) -> tuple[int, int]:
        """The fewest and the most runs a cell with a figure has: ``repeat``, unless the
        sweep was interrupted (each cell then has the rounds it finished, which may differ
        by one); ``(repeat, repeat)`` when no cell has a figure."""
        ns = [len(c.elapsed_s) for c in self.cells if c.ok]
        return (min(ns), max(ns)) if ns else (self.repeat, self.repeat)

    @property
    def efficiency_vs(self) -> tuple[str, str] | None:
        """(replication key, value) efficiency is measured against; None: no efficiency."""
        return efficiency_reference(combinations(self.varies, self.tied),
                                    moving_with(self.varies, self.tied)(self.baseline))

    def to_dict(self) -> dict[str, Any]:
        from polybus import __version__
        from polybus.bench.report import machine_info
        from polybus.sweepsame import compare_results, computing

        along = self.efficiency_vs
        found = compare_results(self.cells, [k for k, _ in self.varies])
        return {"sweep": self.path, "polybus_version": __version__, "machine": machine_info(),
                "vary": {k: [typed(v) for v in vs] for k, vs in self.varies},
                "tie": list(self.tied), "set": list(self.fixed), "repeat": self.repeat,
                "baseline": {k: typed(v) for k, v in self.baseline.items()},
                # what efficiency is against; null (every cell's efficiency null too, and
                # the CSV's column empty) when no replication count is varied
                "efficiency_vs": (None if along is None else {along[0]: typed(along[1])}),
                "complete": self.interrupted is None,
                "cells": [c.to_dict() for c in self.cells],
                # a strategy changed the result (sweepsame.py): cells of the same args
                # and sources, each deterministic, whose digests differ; for each such
                # group, the values of what the program is given ("at") and the varied
                # keys whose values alone separate its results, each value grouped with
                # those that gave the same ("keys": {} when no single key does)
                "results_differ": found.changed,
                "results_differ_by": [
                    {"at": {k: typed(g[0].config[k]) for k, _ in self.varies if computing(k)},
                     "keys": {k: [[typed(v) for v in vs] for vs in classes]
                              for k, classes in split.items()}}
                    for g, split in zip(found.differing, found.split_by, strict=True)]}

    def to_csv(self) -> str:
        """A row per cell. The column ``complete`` is the JSON's ``complete`` on every
        row: False when the sweep was interrupted (the cells it never reached have no
        row). A column, not a ``# complete: false`` comment line, so that any CSV reader
        (pandas without comment='#', a spreadsheet) reads the file as it is. The last,
        ``digests`` (after ``complete``, so every earlier column keeps its place), is
        each run's result digest, separated by spaces (``-`` for a run whose result
        had none; empty when the runner keeps none, as a test's)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        keys = [k for k, _ in self.varies]
        # n: the runs that succeeded; runs: those made (n, and the one that failed)
        w.writerow([*keys, "median_s", "min_s", "max_s", "n", "runs", "speedup",
                    "efficiency", "bytes_sent", "bytes_received", "error", "complete", "digests"])
        for c in self.cells:
            stats = ([c.median, min(c.elapsed_s), max(c.elapsed_s)] if c.ok else ["", "", ""])
            sizes = (c.sent, c.received) if c.ok else (None, None)
            w.writerow([*(self.shown(c)[k] for k in keys), *stats, len(c.elapsed_s), c.made,
                        *("" if x is None else x
                          for x in (c.speedup, c.efficiency, *sizes)),
                        c.error or "", self.interrupted is None,
                        " ".join(d or "-" for d in c.digests)
                        if any(c.digests) or c.no_digest else ""])
        return buf.getvalue()

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def write_json(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")


def _rounds(path: str, cells: list[Cell], repeat: int, runner: Runner,
            fixed: Sequence[str], progress: Progress | None,
            shown: Callable[[Cell], dict[str, str]]) -> BaseException | None:
    """The runs, in rounds; the interrupt that stopped them, if one did."""
    for i in range(repeat):
        for cell in cells:
            if cell.error is not None:
                continue  # (failed: its later rounds left the total when it failed)
            label = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in shown(cell).items())
            what = f"{label} (round {i + 1}/{repeat})"
            if progress is not None:
                progress.start(what)
            ended = "done"
            try:
                cell.add(runner(path, _sets(fixed, cell.config)))
            except RunTimeout as exc:  # (--timeout: this run hung, or ran long; go on)
                from polybus.wherestopped import where_stopped

                cell.error = f"{exc}{where_stopped(exc)}"
            except KeyboardInterrupt as exc:  # (SIGTERM too): what ran is kept and shown
                return exc
            except SystemExit as exc:  # the program's sys.exit fails its cell alone;
                from polybus.wherestopped import client_traceback  # polybus's own ends the process

                if client_traceback(exc) is None:  # (an mpi rank that served its replica)
                    raise
                cell.error = error_text(exc)
            except Exception as exc:
                cell.error = error_text(exc)
            if cell.error is not None:
                left = repeat - i - 1  # (these will not run: the estimate leaves them)
                ended = f"failed; its {left} later run(s) left the total" if left else "failed"
                if progress is not None:
                    progress.skip(left)
            if progress is not None:
                progress.advance(f"{what} {ended}")
    return None


def run_sweep(path: str, varies: Sequence[tuple[str, list[str]]], repeat: int,
              runner: Runner, baseline: Mapping[str, str] | None = None,
              fixed: Sequence[str] = (), progress: Progress | None = None,
              tied: Collection[str] = ()) -> Sweep:
    """Run every combination ``repeat`` times with ``runner``, in rounds; a failure ends
    only its cell."""
    check_repeat(repeat)
    combos = combinations(varies, tied)
    # In rounds, each combination once a round: a machine that drifts (another job, a
    # VM's neighbours) moves every cell alike, not the ones that ran during it.
    cells = [Cell(combo) for combo in combos]
    shows = Sweep(path, [(k, list(v)) for k, v in varies], repeat, {}, []).shown
    stopped: BaseException | None = None
    try:
        stopped = _rounds(path, cells, repeat, runner, fixed, progress, shows)
    except KeyboardInterrupt as exc:  # between two runs (printing the last one's line)
        stopped = exc
    cells = [c for c in cells if c.elapsed_s or c.error is not None]
    base = dict(baseline) if baseline is not None else parse_baseline(None, varies)
    compare(cells, base, moving_with(varies, tied), combos)
    return Sweep(path, [(k, list(v)) for k, v in varies], repeat, base, cells, list(fixed),
                 interrupted=stopped, planned=len(combos),
                 tied=[k for k, _ in varies if k in tied])
