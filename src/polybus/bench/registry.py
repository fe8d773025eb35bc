"""The benchmarks of record by name (BENCHMARKS.md), each imported only when run.

``REGISTRY`` maps a name to ``run(quick, progress) -> BenchResult``; the module behind a
name is imported on first lookup, so ``polybus bench latency`` never imports what the
other benchmarks need. A benchmark module defines ``run(quick: bool, progress:
Progress) -> BenchResult``.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import cast

from polybus.bench.progress import NullProgress, Progress
from polybus.bench.report import BenchResult
from polybus.errors import UsageError

__all__ = ["MODULES", "PLANNED", "REGISTRY", "RunFn", "described", "get", "names", "register",
           "run"]

RunFn = Callable[[bool, Progress], BenchResult]

#: benchmark name -> module defining ``run``; written so far
MODULES: dict[str, str] = {
    "latency": "polybus.bench.b_latency",
    "bandwidth": "polybus.bench.b_bandwidth",
    "throughput": "polybus.bench.b_throughput",
    "matmul": "polybus.bench.b_matmul",
    "ep": "polybus.bench.b_ep",
    "mandelbrot": "polybus.bench.b_mandelbrot",
    "dna": "polybus.bench.b_dna",
    "sort": "polybus.bench.b_sort",
    "rudy": "polybus.bench.b_rudy",
}
#: in BENCHMARKS.md, not yet written (register() them as they land)
PLANNED: tuple[str, ...] = ()


def register(name: str, module: str) -> None:
    """Add (or replace) a benchmark: ``module`` must define ``run(quick, progress)``."""
    MODULES[name] = module


def names() -> list[str]:
    return list(MODULES)


#: The source papers by the labels the benchmarks' texts cite them with: `described`
#: names each by its authors (README, "Sources"), as the user's documents do; the
#: labels are the project's own file names, which a user does not have.
PAPERS = {
    "seeds/000": "Eggen et al.",
    "seeds/001": "CORD (Kim & Purtilo)",
    "seeds/002": "Schnaidt, Duman & Lewis",
    "seeds/003": "Rudy (Sigurdsson)",
    "seeds/004": "Qureshi & Rashid",
}


def described(name: str) -> str:
    """What benchmark ``name`` reproduces and measures: the first line of its module's
    docstring, read from the source (the module is not imported), less the name it starts
    with (``latency (seeds/004): round trip ...`` -> ``seeds/004: round trip ...``), each
    paper's label said as its authors (`PAPERS`); "" when there is none."""
    try:
        spec = importlib.util.find_spec(MODULES[name])
        if spec is None or spec.origin is None:
            return ""
        doc = ast.get_docstring(ast.parse(Path(spec.origin).read_bytes()))
    except (ImportError, OSError, SyntaxError, ValueError):
        return ""
    first = (doc or "").strip().partition("\n")[0].strip()
    named = re.match(rf"{re.escape(name)}(?: \(([^)]*)\))?: ", first)
    if named is not None:
        first = (f"{named.group(1)}: " if named.group(1) else "") + first[named.end():]
    return re.sub(r"seeds/\d{3}", lambda m: PAPERS.get(m[0], m[0]), first)


def get(name: str) -> RunFn:
    """The ``run`` function of benchmark ``name``, importing its module now."""
    if name not in MODULES:
        near = difflib.get_close_matches(name, [*MODULES, *PLANNED], n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        if name in PLANNED:
            raise UsageError(f"benchmark {name!r} is not written yet")
        raise UsageError(f"no benchmark {name!r} (known: {', '.join(MODULES)}){hint}")
    module = importlib.import_module(MODULES[name])
    return cast(RunFn, module.run)


def run(name: str, quick: bool = False, progress: Progress | None = None) -> BenchResult:
    return get(name)(quick, progress or NullProgress())


class _Registry(Mapping[str, RunFn]):
    def __getitem__(self, name: str) -> RunFn:
        if name not in MODULES:
            raise KeyError(name)
        return get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(MODULES))

    def __len__(self) -> int:
        return len(MODULES)


REGISTRY: Mapping[str, RunFn] = _Registry()
