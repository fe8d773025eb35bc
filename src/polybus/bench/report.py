"""Benchmark results: rows of medians, ratios, and their JSON and table (their plot is
bench/plots.py).

The JSON is the schema of BENCHMARKS.md (``bench``, ``polybus_version``, ``machine``,
``params``, ``rows``, ``ratios``). Things that have no key of their own there (peers
skipped and why, notes such as "work modelled as sleep") go under ``params``.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

import polybus
from polybus.bench import building
from polybus.bench.columns import constant_keys, label, split
from polybus.bench.source import source_commit
from polybus.bench.stats import Stat

__all__ = ["METRIC_UNITS", "BenchResult", "Ratio", "Row", "machine_info", "print_table"]

ConfigValue = str | int | float | bool
Config = dict[str, ConfigValue]

# BENCHMARKS.md's names, so that results compare across runs: a row's system and metric
# are one of these, what sets two rows of one system apart goes in its config (the raw
# socket's wait=block or wait=poll; a throughput row's in_flight=1 round trip).
SYSTEMS = ("polybus", "raw_socket", "c_socket", "memcpy", "mpi4py", "pyzmq", "ray", "dask",
           "process_pool", "multiprocessing", "grpc", "one_process")
METRICS = ("rtt_us", "gbps", "calls_per_s", "seconds", "speedup", "efficiency",
           "bytes_sent", "makespan_ratio")
# Where none of those fits, one name more each (the results page says what each is):
# matmul's parallel ceiling (k forked processes that hold A and B and send nothing), rudy's
# asyncio HTTP server peer and its time for N requests one after another, mandelbrot's
# moves between replicas per 100 rows (a row moved twice counts twice: not a share).
MORE_SYSTEMS = ("parallel_ceiling", "asyncio_http")
MORE_METRICS = ("sequential_s", "moved_pct")

METRIC_UNITS: dict[str, str] = {
    "rtt_us": "round trip, µs",
    "gbps": "GB/s (1e9 bytes/s)",
    "calls_per_s": "calls/s",
    "seconds": "s",
    "speedup": "speedup",
    "efficiency": "efficiency",
    "bytes_sent": "bytes sent",
    "makespan_ratio": "makespan / lower bound",
    "sequential_s": "s, sequential requests",
    "moved_pct": "moves between replicas per 100 rows",
}
DASH = "\u2013"  # en dash, as in the source tables


def label_of(system: str, config: Mapping[str, ConfigValue], leave: str = "") -> str:
    """A series name: the system, with its configuration (less the key ``leave``)."""
    items = [f"{k}={v}" for k, v in config.items() if k != leave]
    return f"{system} " + ",".join(items) if items else system


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: ``system`` under ``config`` at ``x``, the median of ``n`` repetitions."""

    system: str
    config: Config
    x: float
    metric: str
    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, system: str, config: Mapping[str, ConfigValue], x: float, metric: str,
           stat: Stat) -> Row:
        return cls(system, dict(config), x, metric, stat.median, stat.min, stat.max, stat.n)

    @property
    def label(self) -> str:
        """Column name: the system, with its configuration when it has one."""
        return label_of(self.system, self.config)

    def to_dict(self) -> dict[str, Any]:
        return {"system": self.system, "config": dict(self.config), "x": self.x,
                "metric": self.metric, "median": self.median, "min": self.min,
                "max": self.max, "n": self.n}


@dataclass(frozen=True, slots=True)
class Ratio:
    """A comparison of two figures measured side by side in the same run."""

    name: str
    value: float


def machine_info() -> dict[str, Any]:
    """CPUs, Python, platform; and ``commit`` (bench/source.py) when polybus runs from a
    git checkout: ``{"hash": short hash, "dirty": tracked files changed}``."""
    info: dict[str, Any] = {"cpus": os.cpu_count() or 1, "python": platform.python_version(),
                            "platform": platform.platform()}
    commit = source_commit()
    if commit is not None:
        info["commit"] = commit
    return info


@dataclass
class BenchResult:
    bench: str
    params: dict[str, Any] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Peers that could not run, with the reason (e.g. ``"c_socket": "no cc on PATH"``)."""
    notes: list[str] = field(default_factory=list)
    x_label: str = "x"
    x_labels: dict[str, str] = field(default_factory=dict)
    """What x is for a metric whose x is not ``x_label`` (e.g. rudy: N for sequential_s)."""
    complete: bool = True
    """False: interrupted, the rows measured before it (JSON ``"complete": false``)."""
    baselines: dict[str, str] = field(default_factory=dict)
    """What a metric is relative to (``"speedup": "one_process (...)"``), said with its
    table (JSON ``params.baselines``)."""

    def __post_init__(self) -> None:
        building.made(self)  # (kept for a Ctrl-C: bench/building.py)

    def x_label_of(self, metric: str) -> str:
        return self.x_labels.get(metric, self.x_label)

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def find(self, system: str, x: float, metric: str,
             config: Mapping[str, ConfigValue] | None = None) -> Row | None:
        """The first row of ``system`` at ``x`` whose config contains ``config``."""
        for r in self.rows:
            if (r.system == system and r.x == x and r.metric == metric
                    and all(r.config.get(k) == v for k, v in (config or {}).items())):
                return r
        return None

    def add_ratio(self, name: str, num: Row | None, den: Row | None) -> Ratio | None:
        """Append ``num.median / den.median`` as ``name``; nothing if either is missing."""
        if num is None or den is None or den.median == 0:
            return None
        ratio = Ratio(name, num.median / den.median)
        self.ratios.append(ratio)
        return ratio

    def to_dict(self) -> dict[str, Any]:
        params = dict(self.params)
        params.setdefault("x_label", self.x_label)
        if self.x_labels:
            params["x_labels"] = dict(self.x_labels)
        if self.skipped:
            params["skipped"] = dict(self.skipped)
        if self.notes:
            params["notes"] = list(self.notes)
        if self.baselines:
            params["baselines"] = dict(self.baselines)
        return {
            "bench": self.bench,
            "polybus_version": polybus.__version__,
            "machine": machine_info(),
            "params": params,
            "rows": [r.to_dict() for r in self.rows],
            "ratios": [{"name": r.name, "value": r.value} for r in self.ratios],
            **({} if self.complete else {"complete": False}),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.to_json() + "\n", encoding="utf-8")
        return p

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchResult:
        params = dict(d.get("params", {}))
        skipped = dict(params.pop("skipped", {}))
        notes = list(params.pop("notes", []))
        x_label = str(params.pop("x_label", "x"))
        x_labels = {str(k): str(v) for k, v in params.pop("x_labels", {}).items()}
        baselines = {str(k): str(v) for k, v in params.pop("baselines", {}).items()}
        rows = [Row(r["system"], dict(r["config"]), r["x"], r["metric"], r["median"],
                    r["min"], r["max"], r["n"]) for r in d.get("rows", [])]
        ratios = [Ratio(r["name"], r["value"]) for r in d.get("ratios", [])]
        return cls(str(d["bench"]), params, rows, ratios, skipped, notes, x_label, x_labels,
                   complete=d.get("complete") is not False, baselines=baselines)

    @classmethod
    def from_json(cls, text: str) -> BenchResult:
        return cls.from_dict(json.loads(text))


def _cell(r: Row) -> str:
    """A cell's figure: ``median [min-max]``, or the one measurement alone (a range of
    one sample, ``9680 [9680-9680]``, says nothing)."""
    if r.n == 1:
        return _fmt(r.median)
    return f"{_fmt(r.median)} [{_fmt(r.min)}{DASH}{_fmt(r.max)}]"


def _per_cell(ns: Sequence[int]) -> str:
    """The caption's count: ``n = 7 repetitions per cell``; ``1 or 7 repetitions per
    cell`` (``n = 1, 7`` read as a size n); ``one measurement per cell`` when every cell
    has one."""
    if list(ns) == [1]:
        return "one measurement per cell"
    if len(ns) == 1:
        return f"n = {ns[0]} repetitions per cell"
    return f"{', '.join(map(str, ns[:-1]))} or {ns[-1]} repetitions per cell"


def _fmt(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e5:
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}" if a < 10 else f"{v:.1f}"
    return f"{v:.3g}"


def _fmt_x(x: float, label: str) -> str:
    if "byte" in label and x >= 1_000_000 and x % 1_000_000 == 0:
        return f"{int(x) // 1_000_000} MB"
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


TABLE_COLUMNS = 6  # systems per printed table (docs/results.md keeps its own tables)


def print_table(result: BenchResult, console: Console | None = None) -> None:
    """One table per metric: a row per x, a column per system/config, median [min-max] (en dash).

    Without ``console``, standard output, unbounded in width when it is not a terminal.
    """
    if console is None:
        from polybus.cli.output import result_console

        console = result_console()
    for metric in _unique(r.metric for r in result.rows):
        rows = [r for r in result.rows if r.metric == metric]
        unit = METRIC_UNITS.get(metric, metric)
        over = f" over {result.baselines[metric]}" if metric in result.baselines else ""
        ns = sorted({r.n for r in rows})
        said = f", median [min{DASH}max]" if ns != [1] else ""
        # Split by a configuration key as the results page is (matmul: by n, then mode),
        # at most TABLE_COLUMNS systems a table, the x column repeated; a key every column
        # of a table shares is said once in its title, not in each header: matmul's
        # headers were whole configurations, its lines a thousand characters long.
        parts = []
        for heading, group in split(rows, (), most=TABLE_COLUMNS):
            keys = tuple(h.split("=", 1)[0] for h in heading)
            labels = _unique(label(r, keys) for r in group)
            for i in range(0, len(labels), TABLE_COLUMNS):
                cols = labels[i:i + TABLE_COLUMNS]
                mine = [r for r in group if label(r, keys) in cols]
                same = constant_keys(mine, keys) if len(cols) > 1 else []
                parts.append(([*heading, *same], mine, (*keys, *(s.split("=", 1)[0] for s in same))))
        for k, (shared, part, keys) in enumerate(parts, 1):
            of = f" ({k}/{len(parts)})" if len(parts) > 1 else ""
            what = f"; {', '.join(shared)}" if shared else ""
            # (its own line, not the table's title: rich wraps a title to the table's width)
            console.print(Text(f"{result.bench}: {unit}{over}{said}{of}{what}",
                               style="table.title"))
            table = Table()
            table.add_column(escape(result.x_label_of(metric)), justify="right", style="bold")
            cols = _unique(label(r, keys) for r in part)
            cells = {(label(r, keys), r.x): r for r in part}
            for lab in cols:
                table.add_column(escape(lab), justify="right")
            for x in sorted({r.x for r in part}):
                line = [_fmt_x(x, result.x_label_of(metric))]
                for lab in cols:
                    r = cells.get((lab, x))
                    line.append(DASH if r is None else escape(_cell(r)))
                table.add_row(*line)
            table.caption = _per_cell(ns)
            console.print(table)
    if result.ratios:
        rt = Table(title=f"{result.bench}: ratios", title_justify="left")
        rt.add_column("ratio")
        rt.add_column("value", justify="right")
        for ratio in result.ratios:
            rt.add_row(escape(ratio.name), f"{ratio.value:.3g}")
        console.print(rt)
    for system, reason in result.skipped.items():
        console.print(f"[yellow]skipped[/] {escape(system)}: {escape(reason)}")
    for note in result.notes:
        console.print(f"[dim]note:[/] {escape(note)}")
