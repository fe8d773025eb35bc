"""The most ``k`` servers could gain here: the same tasks over ``k`` processes that
send nothing.

A speedup over one process is bounded by the machine as much as by the system under
test: on a VM whose second CPU is shared with other guests, two processes that never
talk gain anywhere from 1.3x to 2x from one run to the next (measured while writing
this). So beside each system's time, the matmul benchmark times this ceiling in the
same run: ``k`` processes, forked and holding their matrices before the clock starts,
each computing the row blocks round robin would give it, timed from the start signal
to the last one done.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from polybus.bench.stats import Stat, summarize

__all__ = ["ceiling_seconds"]

Matrices = Callable[[int, int], tuple[Any, Any]]


def _worker(conn: Connection, n: int, k: int, i: int, step: int, matrices: Matrices) -> None:
    import numpy as np

    while True:
        rep = conn.recv()
        if rep is None:
            return
        a, b = matrices(n, rep)
        c = np.empty((n, n))
        conn.send("ready")
        conn.recv()  # go
        for j, lo in enumerate(range(0, n, step)):
            if j % k == i:
                c[lo:lo + step] = a[lo:lo + step] @ b
        conn.send("done")


def ceiling_seconds(n: int, k: int, reps: int, step: int, matrices: Matrices,
                    order: list[int]) -> Stat:
    """Seconds per repetition of the tasks (``step`` rows of A at a time) over ``k``
    processes with nothing sent; repetitions in ``order`` (those ``>= reps`` untimed)."""
    ctx = mp.get_context("fork")  # (the children inherit numpy and the BLAS pinning)
    pipes: list[Connection] = []
    procs: list[Any] = []
    times: list[float] = []
    try:
        for i in range(k):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(child, n, k, i, step, matrices), daemon=True)
            p.start()
            child.close()  # (here, and so in the children forked after: a dead one is EOF)
            pipes.append(parent)
            procs.append(p)
        for rep in order:
            for parent in pipes:
                parent.send(rep)
            for parent, p in zip(pipes, procs, strict=True):
                _expect(parent, p, "ready")
            t0 = time.perf_counter()
            for parent in pipes:
                parent.send("go")
            for parent, p in zip(pipes, procs, strict=True):
                _expect(parent, p, "done")
            if rep < reps:
                times.append(time.perf_counter() - t0)
    finally:
        for parent in pipes:
            try:
                parent.send(None)
            except OSError:
                pass
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    return summarize(times)


def _expect(conn: Connection, proc: Any, what: str) -> None:
    """Wait for ``what`` from ``proc``; RuntimeError if it died first."""
    while not wait([conn, proc.sentinel]) or not conn.poll():
        if not proc.is_alive():
            raise RuntimeError(f"a parallel-ceiling process ended (exit code {proc.exitcode}) "
                               f"before it said {what!r}")
    try:
        got = conn.recv()
    except EOFError:
        raise RuntimeError(f"a parallel-ceiling process ended before it said {what!r}") from None
    if got != what:
        raise RuntimeError(f"a parallel-ceiling process said {got!r}, not {what!r}")
