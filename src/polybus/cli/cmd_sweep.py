"""polybus sweep app.toml --vary KEY=v1,v2 ...: every combination, medians, speedup.

Each run is ``polybus.run(path, overrides)``; its ``elapsed_s`` (the entrypoint alone,
start-up of processes apart) is the figure. Every combination's configuration is checked
first: a mistake is reported as any configuration error is (exit status 2) and nothing
runs. A combination that fails at run time shows its error in its row and the sweep
goes on; the exit status is then 1, so a script sees that not every cell has a figure.
After the table, whether every strategy gave the same result (each run's result digest:
sweep_results.py); when one changed it, a warning naming the combinations and the varied
key that made the difference (if a single one did) and, if no cell failed, exit status 3.
An output (--json, --csv, --plot) that is the configuration, a module's source or
another output's file is refused before the runs (exit status 2); ``-`` for --json or
--csv is standard output, the table then on stderr. One that cannot be written at the
end is said in a line, the others are written, and the exit status is 2.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
)

from polybus.bench.progress import Times
from polybus.cli.output import result_console
from polybus.cli.sweep_plot import not_drawn, plot
from polybus.cli.sweep_results import results, results_said
from polybus.cli.sweep_table import short_said, table, title
from polybus.cli.values import (
    STDOUT,
    check_distinct,
    check_plot,
    check_writable,
    read_files,
    save,
    seconds,
    write_text,
)
from polybus.deadline import check_timeout
from polybus.errors import UsageError
from polybus.saidonce import said_once
from polybus.sweep import (
    Measured,
    Runner,
    Sweep,
    check_combinations,
    combinations,
    overridden,
    run_sweep,
)
from polybus.sweepargs import (
    TIED,
    check_repeat,
    parse_baseline,
    parse_varies,
    varies_nothing,
)

RESULTS_DIFFER = 3  # exit status: a strategy changed the result (a warning, not a failure)


class _Tie(argparse.Action):
    """--tie goes in --vary's list, marked, so the order of the two is kept."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), TIED + values])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="the application's configuration (TOML, or MIL .cfg/.mil)")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=v1,v2,...",
                   help="a key and the values to try (repeatable; every combination runs)")
    p.add_argument("--tie", action=_Tie, dest="vary", metavar="KEY=v1,v2,...",
                   help="a key whose values move with the --vary before it, one for each "
                        "(e.g. the client's parts with the replication): no more "
                        "combinations")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a fixed override for every run")
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per combination (default 3): the table gives their median "
                        "[min-max]; with --repeat 1 each run's time alone, no range "
                        "(3 or more for a median and range that show how runs vary)")
    p.add_argument("--baseline", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="what speedup is measured against, e.g. replication=1 "
                        "(default: the first value of the first --vary); with several "
                        "--vary keys each cell is compared with the baseline's cell of "
                        "the same other values. Efficiency is along the replica count, "
                        "other values the same (the line above the table says both)")
    p.add_argument("--json", metavar="FILE",
                   help="write every cell as JSON (- for standard output: the table then "
                        "goes to stderr)")
    p.add_argument("--csv", metavar="FILE",
                   help="write every cell as CSV (- for standard output, as --json); its "
                        "column complete is False on every row if the sweep was "
                        "interrupted; the last, digests, has each run's result digest")
    p.add_argument("--plot", metavar="FILE.png",
                   help="time, speedup and efficiency curves, in the format FILE's "
                        "extension names (.png, .pdf, .svg, ...; needs the plot extra: "
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


# No --set given: every override a run has is a --vary's, and what a run says of one
# names --vary, the option the user typed (it said --set of a varied key); with --set
# too, one origin cannot tell them apart, and --set is kept. (A context variable, not
# an argument: tests swap _runner for functions of (path, sets).)
_VARIED_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("varied_only",
                                                                   default=False)


def _runner(path: str, sets: Sequence[str], worker_output: bool = True,
            timeout: float | None = None) -> Measured:
    from polybus.config.origin import SET, VARY
    from polybus.resultdigest import result_digest
    from polybus.runner import run

    r = run(path, tuple(sets), origin=VARY if _VARIED_ONLY.get() else SET,
            worker_output=worker_output, timeout=timeout)
    digest, why = result_digest(r.result)  # (the result itself is not kept)
    served: dict[str, set[str]] = {}  # (a process taken back has a row of its own)
    for rs in r.replicas:
        served.setdefault(rs.module, set()).add(rs.name)
    return Measured(r.elapsed_s, r.bytes_sent, r.bytes_received, digest, why,
                    {m: len(names) for m, names in served.items()})


def main(args: argparse.Namespace) -> int:
    if not args.vary:
        raise UsageError("give at least one --vary KEY=v1,v2,...")
    check_repeat(args.repeat)  # (now, not from run_sweep under the bar: a blank line)
    varies, tied = parse_varies(args.vary)
    for warning in varies_nothing(varies, tied):
        print(f"polybus sweep: warning: {warning}", file=sys.stderr)
    baseline = parse_baseline(args.baseline, varies)
    combos = combinations(varies, tied)
    check_timeout(args.timeout, "--timeout")
    # a bad value: now, not in its cell
    sources = check_combinations(args.config, varies, args.set, tied)
    check_distinct([("--json", args.json), ("--csv", args.csv), ("--plot", args.plot)],
                   read_files("the configuration being swept", args.config, sources))
    for option, path in (("--json", args.json), ("--csv", args.csv)):
        check_writable(None if path == STDOUT else path, option)
    if args.plot:
        check_plot(args.plot)  # (drawn after every run: a bad name cost them all)
    for warning in overridden(args.set, varies):
        print(f"polybus sweep: warning: {warning}", file=sys.stderr)
    # With --json - (or --csv -) standard output is that file's alone: the table goes to
    # stderr, and so does what the program prints during the runs (as `run --json -`).
    to_stdout = STDOUT in (args.json, args.csv)
    # piped or redirected: the table whole, not cut at 80
    console = result_console(sys.stderr if to_stdout else None)
    err = Console(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   Times(), console=err, transient=True, disable=args.quiet)
    # Each distinct warning of the runs said once, the first time (saidonce.py); how
    # many later runs said it again, at the end.
    with bar, contextlib.redirect_stdout(sys.stderr) if to_stdout else \
            contextlib.nullcontext(), said_once() as said:
        task = bar.add_task("sweep", total=len(combos) * args.repeat)
        runner: Runner = _runner  # (the plain function when nothing is set: tests swap it)
        if args.no_worker_output or args.timeout is not None:
            runner = partial(_runner, worker_output=not args.no_worker_output,
                             timeout=args.timeout)
        varied_only = _VARIED_ONLY.set(not args.set)
        try:
            sweep = run_sweep(args.config, varies, args.repeat, said.counting(runner),
                              baseline, fixed=args.set,
                              progress=_Bar(bar, task,
                                            lines=not (err.is_terminal or args.quiet)),
                              tied=tied)
        finally:
            _VARIED_ONLY.reset(varied_only)
    for line in said.repeats("polybus sweep"):
        print(line, file=sys.stderr, flush=True)
    console.print(title(sweep), markup=False, highlight=False)
    console.print(table(sweep, [o for o, f in (("--json", args.json), ("--csv", args.csv))
                                if f]))
    found = results(sweep)
    for line in [*short_said(sweep), *results_said(sweep, found)]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.file.flush()  # (the table before any line saying an output was not written)
    written: list[str] = []
    unwritten = write_outputs(sweep, args, written)
    if sweep.interrupted is not None:  # (what ran is shown and saved; then as any Ctrl-C)
        raise _said(sweep, written)
    if unwritten:
        return 2
    if not all(c.ok for c in sweep.cells):
        return 1
    return RESULTS_DIFFER if found.changed else 0


def _said(sweep: Sweep, written: Sequence[str]) -> BaseException:
    """The interrupt that stopped ``sweep``, with how far it went and where what ran is:
    main() said only ``polybus sweep: interrupted``, under a table that may have scrolled
    away, and nothing of the files written. A SIGTERM's as well, of its own type
    (`Terminated`: ``terminated (after ...)``, status 143): it said ``terminated`` alone."""
    stop = sweep.interrupted
    assert stop is not None
    if not isinstance(stop, KeyboardInterrupt) or str(stop):  # (one with words: its own)
        return stop
    made = sum(c.made for c in sweep.cells)
    where = f" and in {', '.join(written)}" if written else ""
    return type(stop)(f"after {made} of {sweep.planned * sweep.repeat} runs; what ran is "
                      f"in the table above{where}")


def write_outputs(sweep: Sweep, args: argparse.Namespace,
                  saved: list[str] | None = None) -> int:
    """Write --json, --csv and --plot; each that cannot be written is said in a line and
    the others are written all the same. How many could not be; those written are
    added to ``saved``."""
    outputs = [(option, path, write) for option, path, write in (
        ("--json", args.json, partial(write_text, sweep.to_json)),
        ("--csv", args.csv, partial(write_text, sweep.to_csv)),
        ("--plot", args.plot if sweep.cells else None, partial(plot, sweep))) if path]
    written = [f"{option} {path}" for option, path, write in outputs
               if save("sweep", option, path, write)]
    if saved is not None:
        saved.extend(written)
    note = not_drawn(sweep)
    if f"--plot {args.plot}" in written and note is not None:  # (said in the picture too)
        print(f"polybus sweep: --plot {args.plot}: {note}", file=sys.stderr, flush=True)
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
