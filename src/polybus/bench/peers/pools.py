"""Process-pool peers: no-op task throughput, and memcpy bandwidth as the limit.

Throughput is no-op calls per second with two worker processes, the pool started and
warmed up before the clock starts (start-up cost is a separate matter). Workers are
started with 'spawn' so a progress-bar thread in this process is never forked.
``memcpy`` is ``numpy.copyto`` between two preallocated arrays: no transport moves
bytes faster than one core copying them.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from polybus.bench.stats import Stat, repeat

__all__ = ["START_METHOD", "memcpy_gbps", "mp_pool_calls_per_s", "noop",
           "process_pool_calls_per_s"]

START_METHOD = "spawn"


def noop(x: int) -> int:
    """The task: nothing, so only the pool's own overhead is measured."""
    return x


def _rate(run: Callable[[list[int]], object], calls: int, reps: int) -> Stat:
    items = list(range(calls))

    def once() -> float:
        t0 = time.perf_counter()
        run(items)
        return calls / (time.perf_counter() - t0)

    return repeat(once, reps, warmup=1)


def process_pool_calls_per_s(chunksize: int, calls: int = 2000, reps: int = 5,
                             workers: int = 2) -> Stat:
    """``ProcessPoolExecutor(workers).map(noop, range(calls), chunksize=...)``, calls/s."""
    ctx = multiprocessing.get_context(START_METHOD)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
        return _rate(lambda xs: list(ex.map(noop, xs, chunksize=chunksize)), calls, reps)


def mp_pool_calls_per_s(chunksize: int = 1, calls: int = 2000, reps: int = 5,
                        workers: int = 2) -> Stat:
    """``multiprocessing.Pool(workers).map(noop, range(calls), chunksize)``, calls/s."""
    ctx = multiprocessing.get_context(START_METHOD)
    pool = ctx.Pool(workers)
    try:
        return _rate(lambda xs: pool.map(noop, xs, chunksize), calls, reps)
    finally:
        pool.close()
        pool.join()


def memcpy_gbps(size: int, reps: int = 5) -> Stat:
    """``numpy.copyto`` of ``size`` bytes between preallocated arrays, GB/s (1e9 B/s)."""
    src = np.full(size, 7, dtype=np.uint8)
    dst = np.zeros(size, dtype=np.uint8)
    dst[:] = 1  # touch every page before timing

    def once() -> float:
        t0 = time.perf_counter()
        np.copyto(dst, src)
        return size / (time.perf_counter() - t0) / 1e9

    return repeat(once, reps, warmup=1)
