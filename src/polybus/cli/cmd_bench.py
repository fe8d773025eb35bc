"""polybus bench NAME|all: the benchmarks of record (BENCHMARKS.md), peers side by side.

``--json F`` / ``--plot F.png`` write one benchmark's figures and picture (``--json -``:
to standard output, the tables then on stderr); ``--out DIR``
writes ``DIR/NAME.json`` and ``DIR/NAME.png`` for each benchmark run and then
regenerates the results page (``--page``; by default docs/results.md beside a DIR named
results, or DIR/results.md: `page_for`) from every JSON in DIR. ``--page-only`` regenerates the
page without running anything, and ``--compare OLD NEW`` compares two runs' JSON
(cli/bench_compare.py). A ``--quick`` run does not replace a full run's JSON (figures of
record) unless ``--replace`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import sys
import traceback
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from polybus.cli.output import result_console, rule
from polybus.cli.values import (
    PLOT_EXTRA,
    STDOUT,
    check_distinct,
    check_out_dir,
    check_plot,
    check_writable,
    plot_extra_missing,
    save,
    write_text,
)
from polybus.errors import UsageError
from polybus.plural import plural

if TYPE_CHECKING:
    from polybus.bench.report import BenchResult


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="a benchmark (see --list), or 'all'")
    p.add_argument("--quick", action="store_true",
                   help="a small version (proves it works; not figures of record)")
    p.add_argument("--json", metavar="FILE",
                   help="write the figures (with --compare, the comparison) as JSON (- "
                        "for standard output: the tables then go to stderr)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="write a picture of the figures, in the format FILE's extension "
                        "names (.png, .pdf, .svg, ...)")
    p.add_argument("--out", metavar="DIR",
                   help="write DIR/NAME.json and DIR/NAME.png per benchmark, then the page")
    p.add_argument("--page", metavar="FILE",
                   help="the results page --out regenerates (default: docs/results.md "
                        "beside DIR if DIR is a folder named 'results' whose parent has a "
                        "docs folder, else DIR/results.md)")
    p.add_argument("--page-only", action="store_true",
                   help="regenerate --page from the JSON files in --out; run nothing")
    p.add_argument("--replace", action="store_true",
                   help="let a --quick run replace a full run's figures (NAME.json in "
                        "--out DIR, or --json FILE); without it that is refused")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--compare", nargs="+", metavar=("OLD", "NEW"),
                   help="run nothing: compare the ratios of two runs, each a benchmark's "
                        "JSON file or a folder of them (NEW left out: results/); --json "
                        "FILE writes the comparison")


# The folder of the figures of record (``--out results/``): its page is docs/results.md.
RECORD_DIR = "results"


def page_for(args: argparse.Namespace) -> Path:
    """The results page ``--out DIR`` regenerates: ``--page``, else docs/results.md beside
    DIR when DIR is a folder named ``results`` whose parent has a docs folder (``--out
    results/`` in this repository), else DIR/results.md; never a page of the directory
    the command was run from. (Any DIR beside docs/ made docs/results.md: ``--out
    quickout`` in a clone replaced the page of record with one quick section.)
    UsageError if it is a file the results page was not written to (a README, another
    page)."""
    option, given = ("--page", args.page) if args.page else ("--out", args.out)
    try:  # (a name too long, a loop of links: the looks themselves raise)
        return _page_for(args)
    except (OSError, RuntimeError) as exc:  # (Path.resolve's "Symlink loop" before 3.13)
        raise UsageError(f"{option} {given}: cannot be written: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None


def _page_for(args: argparse.Namespace) -> Path:
    from polybus.bench.results import TITLE, TITLES

    if args.page:
        page = Path(args.page)
    else:
        out = Path(args.out).resolve()
        docs = out.parent / "docs"  # (this repository's layout: results/ beside docs/)
        page = (docs / "results.md" if out.name == RECORD_DIR and docs.is_dir()
                else Path(args.out) / "results.md")
    check_writable(str(page) if page.parent.is_dir() else None, "--page")
    if page.is_file():
        with page.open(encoding="utf-8", errors="replace") as f:
            first = f.readline().rstrip("\n")
        if first not in TITLES:
            raise UsageError(f"--page {page}: this file is not a results page (its first "
                             f"line is not {TITLE!r}), and would be overwritten; name "
                             "another with --page")
    return page


def _warn(message: str) -> None:
    print(f"polybus bench: warning: {message}", file=sys.stderr, flush=True)


def _write_page(args: argparse.Namespace, page: Path, console: Console,
                page_only: bool = False) -> bool:
    """The results page from the JSON files in ``--out``, said when written; False (and
    said in a line, cli/values.py `save`) if it could not be. A file there that is not
    JSON is a UsageError naming it; other JSON is left out, with a warning. With
    ``page_only``, a UsageError, and nothing made, if DIR has no benchmark's JSON: it
    wrote an empty page (making DIR)."""
    from polybus.bench import registry
    from polybus.bench.results import load_results, write_page

    out = Path(args.out)
    if page_only and not out.is_dir():
        raise UsageError(f"--out {args.out}: {'not a' if out.exists() else 'no such'} "
                         "directory; --page-only makes the page from the JSON files in it")
    items = load_results(out, registry.names(), warn=_warn) if out.is_dir() else []
    if page_only and not items:
        raise UsageError(f"--out {args.out}: no benchmark's JSON in it (NAME.json, as "
                         f"`polybus bench NAME --out {args.out}` writes); no page made")
    if not save("bench", "--page", str(page),
                lambda p: write_page(args.out, p, results=items)):
        return False
    console.print(f"wrote {page}")
    return True


def main(args: argparse.Namespace) -> int:
    from polybus.bench import registry

    # Piped or redirected: tables whole, not cut at 80 columns. With --json -, standard
    # output is the JSON's alone (as `polybus run --json -`): the tables go to stderr.
    console = result_console(sys.stderr if args.json == STDOUT else None)
    if args.compare is not None:
        from polybus.cli import bench_compare

        return bench_compare.run(args, console)
    if args.list:
        # (the name first on each line, then what it reproduces and measures: one line
        # each however long, for a script to read)
        width = max(map(len, registry.names()), default=0)
        for name in registry.names():
            console.print(f"{name:<{width}}  {registry.described(name)}".rstrip(),
                          markup=False, highlight=False, soft_wrap=True)
        for name in registry.PLANNED:
            if name not in registry.MODULES:
                console.print(f"{name} [dim](not written yet)[/]")
        return 0
    if args.page_only:
        if args.name:  # (it made the whole page and said nothing of NAME)
            raise UsageError(f"--page-only runs nothing and makes the page from every "
                             f"benchmark's JSON in --out; leave out {args.name!r}")
        if not args.out:
            raise UsageError("--page-only needs --out DIR (where the JSON files are)")
        return 0 if _write_page(args, page_for(args), console, page_only=True) else 2
    if not args.name:
        raise UsageError("name a benchmark or 'all' (polybus bench --list shows them)")
    names = registry.names() if args.name == "all" else [args.name]
    if len(names) > 1 and (args.json or args.plot):
        raise UsageError("--json/--plot name one benchmark's files; with 'all' use --out DIR")
    for name in names:
        registry.get(name)  # unknown names fail here, before anything runs
    # Before the runs, not after them: a mistyped directory was made, and a name matplotlib
    # cannot write ended the run in a traceback (--out DIR is made, as the docs say).
    page = page_for(args) if args.out else None
    outs = [(str(Path(args.out) / f"{name}.{ext}")) for name in names
            for ext in ("json", "png")] if args.out else []
    outputs = [(option, path) for option, path in (
        ("--json", args.json), ("--plot", args.plot),
        ("--page", None if page is None else str(page)),
        *(("--out", out) for out in outs)) if path is not None]
    check_distinct(outputs)
    if args.out and Path(args.out).is_dir():  # (the page's files: one not JSON fails now)
        from polybus.bench.results import read_result

        for found in sorted(Path(args.out).glob("*.json")):
            if str(found) not in outs:
                read_result(found)
    check_writable(None if args.json == STDOUT else args.json, "--json")
    if args.quick and not args.replace:
        _keep_full_runs(args, [(option, path) for option, path in outputs
                               if option in ("--json", "--out") and path.endswith(".json")])
    if args.plot:
        check_plot(args.plot)
    if args.out:  # (last: it makes DIR, which nothing refused after it then leaves behind)
        check_out_dir(args.out, "--out", outs)
        no_plot = plot_extra_missing()
        if no_plot is not None:  # (said before the runs: the figures are still written)
            _warn(f"--out {args.out}: no NAME.png will be written, as matplotlib did not "
                  f"import ({no_plot}); the JSON and the page are. {PLOT_EXTRA} for the "
                  f"pictures")
        if page is not None:  # (DIR/results.md, checked now that DIR is there)
            check_writable(str(page), "--page")
    failed: list[str] = []
    unwritten: list[str] = []  # (files said as they failed; the exit status is then 2)
    try:
        for name in names:
            if not _run_one(name, args, console, unwritten):
                failed.append(name)
    except KeyboardInterrupt:  # (_run_one wrote what it had: the page says it too)
        if page is not None:
            try:
                _write_page(args, page, console)
            except UsageError as exc:  # (a file not JSON put there meanwhile)
                _warn(f"the page was not made again: {exc}")
        raise
    if page is not None and not _write_page(args, page, console):
        unwritten.append(str(page))
    if failed:
        console.print(f"[red]failed:[/] {', '.join(failed)}")
    return 2 if unwritten else 1 if failed else 0


def _figures(path: str) -> dict[str, Any] | None:
    """The benchmark's figures ``path`` holds; None for a file that is not a benchmark's
    JSON, or cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and "bench" in doc and "rows" in doc else None


def _full_run(path: str) -> bool:
    """Whether ``path`` holds a benchmark's figures from a full run (not ``--quick``)."""
    doc = _figures(path)
    return doc is not None and not (isinstance(doc.get("params"), dict)
                                    and doc["params"].get("quick"))


def _keep_full_runs(args: argparse.Namespace, outputs: list[tuple[str, str]]) -> None:
    """UsageError if this --quick run would replace a full run's figures (``outputs``:
    (option, JSON file) it writes): `bench latency --quick --out results/` replaced the
    figures of record the README cites, silently."""
    full = [(option, path) for option, path in outputs if path != STDOUT and _full_run(path)]
    if not full:
        return
    option = full[0][0]
    said = f"--out {args.out}" if option == "--out" else f"--json {args.json}"
    where = "give another --out DIR" if option == "--out" else "name another --json file"
    files = [path for o, path in full if o == option]
    raise UsageError(f"{said}: {', '.join(files)} {'holds' if len(files) == 1 else 'hold'} "
                     "the figures of a full run (not --quick), which a --quick run would "
                     f"replace; {where}, or add --replace to replace them")


def _complete_run(path: str) -> bool:
    """Whether ``path`` holds a benchmark's figures from a run that was not interrupted."""
    doc = _figures(path)
    return doc is not None and doc.get("complete") is not False


def _run_one(name: str, args: argparse.Namespace, console: Console,
             unwritten: list[str] | None = None) -> bool:
    """Run, print, write; a benchmark that raises is reported and the others go on, as
    they do past a file that could not be written (said, and added to ``unwritten``).
    Interrupted (Ctrl-C), the rows it had are printed and written, ``"complete":
    false``, unless a complete run's file is there (kept, and said), and the
    KeyboardInterrupt goes on: every row of the benchmark was lost."""
    from polybus.bench import building, registry
    from polybus.bench.plots import plot
    from polybus.bench.progress import RichProgress
    from polybus.bench.report import BenchResult, print_table
    from polybus.bench.results import versions

    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    unwritten = [] if unwritten is None else unwritten
    ok = True
    made: list[BenchResult] = []
    interrupted: KeyboardInterrupt | None = None
    try:
        with building.watch() as made, RichProgress() as progress, \
                contextlib.redirect_stdout(sys.stderr) if args.json == STDOUT \
                else contextlib.nullcontext():
            result = registry.run(name, quick=args.quick, progress=progress)
    except KeyboardInterrupt as exc:
        interrupted = exc
        result = next((r for r in made if r.bench == name), None) or BenchResult(name)
        result.complete = False
    except Exception as exc:
        if len(registry.names()) == 1 or args.name != "all":
            raise
        traceback.print_exc(file=sys.stderr)
        result = BenchResult(name, {"error": f"{type(exc).__name__}: {exc}"})
        ok = False
    result.params["date"] = date
    result.params["versions"] = versions()
    if args.quick:
        result.params["quick"] = True
    rule(console, f"polybus bench {name}{' --quick' if args.quick else ''}"
                  f"{'' if result.complete else ' (interrupted)'}")
    print_table(result, console)
    console.file.flush()  # (the table before any line saying a file was not written)
    if interrupted is not None and not _save_partial(result, args):
        raise interrupted
    # (option, file): the option a file that cannot be written is said under
    targets = [(("--json", args.json), ("--plot", args.plot))]
    if args.out:
        out = Path(args.out)
        targets.append((("--out", str(out / f"{name}.json")), ("--out", str(out / f"{name}.png"))))
    wrote: list[str] = []  # (the JSON files written: an interrupt says where its rows are)
    for (json_option, json_path), (png_option, png_path) in targets:
        # (write_json makes --out's directory; - is standard output)
        write = (partial(write_text, lambda: result.to_json() + "\n")
                 if json_path == STDOUT else result.write_json)
        if json_path and not save("bench", json_option, json_path, write):
            unwritten.append(json_path)
        elif json_path and json_path != STDOUT:
            wrote.append(json_path)
        if png_path and result.rows:
            try:
                if not save("bench", png_option, png_path, partial(plot, result)):
                    unwritten.append(png_path)
            except ImportError as exc:  # matplotlib is an extra (--out: said before the runs)
                _warn(f"{png_path} not written: matplotlib did not import ({exc}); "
                      f"{PLOT_EXTRA} for it")
    if interrupted is not None:  # (it said only "interrupted": not what was kept, nor where;
        # of the interrupt's own type: a SIGTERM's said "interrupted" and exited 130)
        raise type(interrupted)(f"{name}: the {plural(len(result.rows), 'row')} measured "
                                f"before it written to {', '.join(wrote)}, "
                                f'"complete": false') if wrote else interrupted
    return ok


def _save_partial(result: BenchResult, args: argparse.Namespace) -> bool:
    """Whether an interrupted benchmark's rows are written: not if it has none, nor over
    a complete run's JSON (``--json`` or ``--out``'s), which is kept; each said."""
    if not result.rows:
        _warn(f"{result.bench} interrupted before any row was measured; nothing written")
        return False
    files = [f for f in (args.json, args.out and str(Path(args.out) / f"{result.bench}.json"))
             if f and f != STDOUT]
    kept = [f for f in files if _complete_run(f)]
    if kept:
        _warn(f"{result.bench} interrupted: {', '.join(kept)} "
              f"{'holds' if len(kept) == 1 else 'hold'} a complete run, kept; the "
              f"{len(result.rows)} rows measured before the interrupt are not written")
        return False
    return True
