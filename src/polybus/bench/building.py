"""The result a benchmark is building, kept for a Ctrl-C: `polybus bench` lost every row
of the benchmark it interrupted (sweep saves its partial results, ``"complete": false``).

A benchmark's ``run`` makes its `BenchResult` first and adds rows to it as cells finish;
each `BenchResult` made inside :func:`watch` is recorded (report.py's ``__post_init__``
calls :func:`made`), so the caller can write what the benchmark had when it was stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.bench.report import BenchResult

__all__ = ["made", "watch"]

_MADE: ContextVar[list[BenchResult] | None] = ContextVar("polybus_bench_made", default=None)


def made(result: BenchResult) -> None:
    """Record ``result`` in the innermost :func:`watch` (none: nothing)."""
    found = _MADE.get()
    if found is not None:
        found.append(result)


@contextmanager
def watch() -> Iterator[list[BenchResult]]:
    """The results made inside, in order (a benchmark's own is the first of its name)."""
    found: list[BenchResult] = []
    token = _MADE.set(found)
    try:
        yield found
    finally:
        _MADE.reset(token)
