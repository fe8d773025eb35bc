"""Repetition and summary: every figure of record is a median of several repetitions.

Machines here are shared and noisy, so a single timing says little. A measurement is a
function returning one figure; :func:`repeat` runs it ``n`` times (after ``warmup``
untimed runs) and keeps the median with the min and max beside it.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Stat", "repeat", "summarize", "time_repeat"]


@dataclass(frozen=True, slots=True)
class Stat:
    """The median of ``n`` repetitions, with the smallest and largest kept."""

    median: float
    min: float
    max: float
    n: int

    def map(self, f: Callable[[float], float]) -> Stat:
        """Apply a monotonic ``f`` (e.g. seconds -> calls/s); min and max stay ordered."""
        a, b = f(self.min), f(self.max)
        return Stat(f(self.median), min(a, b), max(a, b), self.n)

    def is_finite_positive(self) -> bool:
        return all(math.isfinite(v) and v > 0 for v in (self.median, self.min, self.max))


def summarize(values: Sequence[float]) -> Stat:
    """Median, min and max of measured values (at least one)."""
    if not values:
        raise ValueError("summarize() needs at least one value")
    return Stat(float(statistics.median(values)), float(min(values)), float(max(values)),
                len(values))


def repeat(fn: Callable[[], float], n: int, warmup: int = 0) -> Stat:
    """Call ``fn`` ``warmup`` times untimed, then ``n`` times; summarize what it returned."""
    if n < 1:
        raise ValueError(f"repeat() needs n >= 1, got {n}")
    for _ in range(warmup):
        fn()
    return summarize([fn() for _ in range(n)])


def time_repeat(fn: Callable[[], object], n: int, warmup: int = 0) -> Stat:
    """Wall-clock seconds of ``fn()``, ``n`` repetitions after ``warmup`` untimed calls."""
    return summarize(seconds_each(fn, n, warmup))


def seconds_each(fn: Callable[[], object], n: int, warmup: int = 1) -> list[float]:
    """Wall-clock seconds of each of ``n`` calls of ``fn()`` after ``warmup`` untimed ones,
    unsummarized (for a peer driver that reports its repetitions to the bench)."""
    if n < 1:
        raise ValueError(f"seconds_each() needs n >= 1, got {n}")
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out
