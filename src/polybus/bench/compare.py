"""``polybus bench --compare OLD NEW``: what moved between two runs of the benchmarks.

Each side is a benchmark's JSON file or a folder of them (``--out DIR``'s, read as the
results page reads it: bench/results.py). A benchmark on both sides (by its ``bench``;
one with two files on a side, ``sort.json`` and ``sort-quick.json``, is paired by file
name) has its ratios compared by name: OLD's value, NEW's and NEW/OLD, the largest
change first, by factor (2x and 0.5x alike: whether higher is better is not known in
general, so nothing is judged), then by name; then the ratios one side alone has. A
name that is twice in one file is paired by its order (the second is ``NAME (#2)``).
Nothing here runs a benchmark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from polybus.bench.report import DASH, _unique
from polybus.bench.results import Loaded, load_results, read_result, record, record_lines
from polybus.errors import UsageError

__all__ = ["Benchmark", "Change", "Comparison", "compare", "load_side", "print_comparison"]

SIDES = ("old", "new")


@dataclass(frozen=True, slots=True)
class Change:
    """A ratio of one benchmark on both sides (or on one: the other None)."""

    name: str
    old: float | None
    new: float | None

    @property
    def factor(self) -> float | None:
        """NEW / OLD; None where it cannot be taken (a side without it, OLD zero, a
        value not finite)."""
        if self.old is None or self.new is None or self.old == 0:
            return None
        if not (math.isfinite(self.old) and math.isfinite(self.new)):
            return None
        return self.new / self.old

    @property
    def size(self) -> float:
        """How far NEW moved from OLD, by factor: |log(NEW/OLD)|, so 2x and 0.5x are
        alike; the most (inf) where NEW/OLD cannot be taken or changed sign, 0 where
        the two are equal (zero and zero)."""
        if self.old == self.new:
            return 0.0
        factor = self.factor
        return abs(math.log(factor)) if factor is not None and factor > 0 else math.inf


@dataclass
class Benchmark:
    """One benchmark on both sides: its files, ratios in both, and in one alone."""

    label: str
    old: Loaded
    new: Loaded
    changes: list[Change] = field(default_factory=list)
    only_old: list[Change] = field(default_factory=list)
    only_new: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Comparison:
    old: str
    new: str
    benchmarks: list[Benchmark]
    only_old: list[str]
    only_new: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new,
                "benchmarks": [_bench_dict(b) for b in self.benchmarks],
                "only_old": list(self.only_old), "only_new": list(self.only_new)}


def _side_dict(item: Loaded) -> dict[str, Any]:
    result, raw, path = item
    return {"file": str(path), "machine": raw.get("machine", {}),
            "date": result.params.get("date"), "quick": bool(result.params.get("quick")),
            "complete": result.complete}


def _bench_dict(b: Benchmark) -> dict[str, Any]:
    return {"bench": b.label, "old": _side_dict(b.old), "new": _side_dict(b.new),
            "ratios": [{"name": c.name, "old": c.old, "new": c.new,
                        "new_over_old": c.factor} for c in b.changes],
            "only_old": [{"name": c.name, "value": c.old} for c in b.only_old],
            "only_new": [{"name": c.name, "value": c.new} for c in b.only_new],
            "notes": list(b.notes)}


def load_side(given: str, side: str, order: Sequence[str] = (),
              warn: Callable[[str], object] | None = None) -> list[Loaded]:
    """The benchmarks' files of one side (``side``: ``OLD`` or ``NEW``, as the error
    says it): ``given`` a benchmark's JSON file, or a folder of them. UsageError saying
    what and where for anything else (read_result's, naming the file and field, for a
    file that is not as polybus writes one)."""
    path = Path(given)
    where = f"--compare {side} {given}"
    if path.is_dir():
        if not any(path.glob("*.json")):
            raise UsageError(f"{where}: no JSON file in this folder (NAME.json, as "
                             f"`polybus bench NAME --out {given}` writes)")
        items = load_results(path, order, warn, "the comparison")
        if not items:
            raise UsageError(f"{where}: no benchmark's JSON in this folder (only JSON of "
                             "another kind)")
        return items
    if not path.exists():
        raise UsageError(f"{where}: no such file or folder")
    got = read_result(path)
    if got is None:  # (JSON, read once already: which of the two it lacks)
        raw = json.loads(path.read_text(encoding="utf-8"))
        lacks = ([f'"{k}"' for k in ("bench", "rows") if k not in raw]
                 if isinstance(raw, dict) else [])
        kind = ("a list" if isinstance(raw, list) else "a string" if isinstance(raw, str)
                else "null" if raw is None else "true or false" if isinstance(raw, bool)
                else "a number")
        said = (f"it has no {' and '.join(lacks)}" if lacks else
                f"it is {kind}, not an object")
        raise UsageError(f"{where}: not a benchmark's JSON ({said})")
    return [got]


def _keyed(item: Loaded) -> dict[str, float]:
    """A file's ratios by name, a name seen again numbered (``NAME (#2)``)."""
    out: dict[str, float] = {}
    seen: dict[str, int] = {}
    for ratio in item[0].ratios:
        seen[ratio.name] = seen.get(ratio.name, 0) + 1
        key = ratio.name if seen[ratio.name] == 1 else f"{ratio.name} (#{seen[ratio.name]})"
        out[key] = float(ratio.value)
    return out


def _notes(b: Benchmark) -> list[str]:
    notes = []
    quick = [bool(item[0].params.get("quick")) for item in (b.old, b.new)]
    if quick[0] != quick[1]:
        fast, full = ("old", "new") if quick[0] else ("new", "old")
        notes.append(f"{fast} is a --quick run (not figures of record), {full} a full one: "
                     "their sizes and repetitions differ, and so may their ratios")
    for side, item in zip(SIDES, (b.old, b.new), strict=True):
        if not item[0].complete:
            notes.append(f"{side} was interrupted (Ctrl-C): only the ratios of the rows "
                         "measured before it")
        if "error" in item[0].params:
            notes.append(f"{side} failed: {item[0].params['error']}")
    if not (b.changes or b.only_old or b.only_new):
        notes.append("no ratio on either side")
    return notes


def _compared(label: str, old: Loaded, new: Loaded) -> Benchmark:
    b = Benchmark(label, old, new)
    was, now = _keyed(old), _keyed(new)
    b.changes = sorted((Change(n, was[n], now[n]) for n in was if n in now),
                       key=lambda c: (-c.size, c.name))
    b.only_old = [Change(n, v, None) for n, v in was.items() if n not in now]
    b.only_new = [Change(n, None, v) for n, v in now.items() if n not in was]
    b.notes = _notes(b)
    return b


def _by_bench(items: Sequence[Loaded]) -> dict[str, list[Loaded]]:
    out: dict[str, list[Loaded]] = {}
    for item in items:
        out.setdefault(item[0].bench, []).append(item)
    return out


def compare(old_given: str, old: Sequence[Loaded], new_given: str,
            new: Sequence[Loaded]) -> Comparison:
    """The comparison of the two sides' files (`load_side`, each in the registry's
    order). UsageError if they have no benchmark in common."""
    olds, news = _by_bench(old), _by_bench(new)
    done: list[Benchmark] = []
    only: dict[str, list[str]] = {"old": [], "new": []}
    for bench in _unique([*olds, *news]):
        mine, theirs = olds.get(bench, []), news.get(bench, [])
        if len(mine) == 1 and len(theirs) == 1:
            done.append(_compared(bench, mine[0], theirs[0]))
            continue
        names = {item[2].name: item for item in theirs}
        for item in mine:
            if item[2].name in names:
                done.append(_compared(f"{bench} ({item[2].name})", item, names[item[2].name]))
        paired = {item[2].name for item in mine} & set(names)
        for side, items in (("old", mine), ("new", theirs)):
            only[side] += [bench if len(items) == 1 else f"{bench} ({item[2].name})"
                           for item in items if item[2].name not in paired]
    if not done:
        raise UsageError(f"--compare: OLD {old_given} ({', '.join(olds)}) and NEW "
                         f"{new_given} ({', '.join(news)}) have no benchmark in common; "
                         "nothing to compare")
    return Comparison(old_given, new_given, done, only["old"], only["new"])


def _value(v: float | None) -> str:
    return DASH if v is None else f"{v:.3g}"


def _side_line(side: str, item: Loaded) -> Text:
    """``old results/sort.json: commit: a6ad20c3; date: ...; machine: 2 CPUs, ...;
    Python 3.11.7``, the words of the results page's lines."""
    said = "; ".join(record_lines(record([item]), ("commit", "date", "machine", "python")))
    return Text(f"{side} {item[2]}: {said}")


def print_comparison(comparison: Comparison, console: Console) -> None:
    """A table per benchmark on both sides, each side's commit, date and machine above
    it; then the benchmarks one side alone has."""
    from polybus.cli.output import rule

    for b in comparison.benchmarks:
        rule(console, Text(b.label))  # (a name with [...] in it is no markup)
        console.print(_side_line("old", b.old))
        console.print(_side_line("new", b.new))
        for note in b.notes:
            console.print(Text.assemble(("note:", "dim"), f" {note}"))
        if not (b.changes or b.only_old or b.only_new):
            continue
        console.print(Text(f"{b.label}: ratios, old and new (largest change first)",
                           style="table.title"))
        table = Table()
        for name in ("ratio", "old", "new", "new/old"):
            table.add_column(name, justify="left" if name == "ratio" else "right")
        for c in b.changes:
            factor = c.factor
            table.add_row(Text(c.name), _value(c.old), _value(c.new),
                          DASH if factor is None else f"{factor:#.3g}")
        if b.changes and (b.only_old or b.only_new):
            table.add_section()
        for c in (*b.only_old, *b.only_new):
            table.add_row(Text(c.name), _value(c.old), _value(c.new),
                          "only in old" if c.new is None else "only in new")
        console.print(table)
    for side, only in (("old", comparison.only_old), ("new", comparison.only_new)):
        if only:
            given = comparison.old if side == "old" else comparison.new
            console.print(Text(f"only in {side} ({given}), not compared: {', '.join(only)}"))
