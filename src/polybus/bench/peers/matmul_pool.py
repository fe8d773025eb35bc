"""The matmul benchmark's ProcessPoolExecutor peer: the same blocks of rows, the same
fresh matrices per repetition, over a pool of ``workers`` processes (bench/b_matmul.py
says what every system computes).

Stateless, each task carries its block of A and all of B. Stateful, a pool cannot
address one worker, so each repetition's B goes to each worker as one task apiece, held
at a barrier of all the workers until every one has taken its own (`_take_b`), inside
the timed part as polybus and mpi4py send it; with ``b_untimed``, one B for every
repetition is given to each worker by the pool's initializer before the timing instead
(the usual way to give a pool's workers state, and in its favour).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from polybus.bench.stats import Stat, summarize

__all__ = ["BARRIER_S", "pool_seconds"]

_B: Any = None
_BARRIER: Any = None
BARRIER_S = 60.0  # a worker that never comes fails the row rather than hang it


def _rows_with_b(rows: Any, b: Any) -> Any:
    return rows @ b


def _set_b(b: Any) -> None:
    global _B
    _B = b


def _rows_cached(rows: Any) -> Any:
    return rows @ _B


def _keep_barrier(barrier: Any) -> None:
    global _BARRIER
    _BARRIER = barrier


def _take_b(b: Any) -> int:
    """Each worker's copy of this repetition's B: a pool cannot address one worker, so
    one such task goes to each, held at a barrier of all the workers until every one has
    taken its own (no worker takes two)."""
    global _B
    _B = b
    _BARRIER.wait(BARRIER_S)
    return os.getpid()


def pool_seconds(n: int, workers: int, stateful: bool, reps: int, warmup: int | None = None,
                 b_untimed: bool = False) -> Stat:
    """The seconds of ``reps`` products over a pool of ``workers`` (after ``warmup``
    untimed ones; b_matmul's WARMUP if None), stateless or stateful as the module says;
    raises RuntimeError on a wrong product or a B that missed a worker."""
    import multiprocessing as mp

    from polybus.bench.b_matmul import WARMUP, _matrices, _order, chunk_of

    warmup = WARMUP if warmup is None else warmup
    step = chunk_of(n)
    times = []
    a, b = _matrices(n, 0)
    kw: dict[str, Any] = {}
    if stateful and b_untimed:
        kw = {"initializer": _set_b, "initargs": (b,)}
    elif stateful:
        kw = {"initializer": _keep_barrier, "initargs": (mp.get_context().Barrier(workers),)}
    with ProcessPoolExecutor(workers, **kw) as pool:
        list(pool.map(abs, range(workers)))  # started before timing
        for rep in _order(reps, warmup):
            if stateful and b_untimed:
                a = _matrices(n, rep)[0]
            else:
                a, b = _matrices(n, rep)
            t0 = time.perf_counter()
            if stateful and not b_untimed:
                took = list(pool.map(_take_b, [b] * workers))
                if len(set(took)) != workers:
                    raise RuntimeError(f"B reached {len(set(took))} of {workers} workers")
            if stateful:
                futs = [pool.submit(_rows_cached, a[lo:lo + step]) for lo in range(0, n, step)]
            else:
                futs = [pool.submit(_rows_with_b, a[lo:lo + step], b) for lo in range(0, n, step)]
            c = np.empty((n, n))
            for lo, f in zip(range(0, n, step), futs, strict=True):
                c[lo:lo + step] = f.result()
            if rep < reps:
                times.append(time.perf_counter() - t0)
            if not np.allclose(c, a @ b):
                raise RuntimeError(f"process_pool n={n}: wrong product")
    return summarize(times)
