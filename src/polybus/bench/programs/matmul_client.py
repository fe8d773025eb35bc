"""Clients of the matmul and ep benchmarks: time the distributed part only.

Each run times ``reps`` repetitions against the same replicas (as the one-process and
peer baselines repeat inside one process), each with fresh matrices, so a stateful
server is sent every repetition's B and no repetition reuses another's answer; `rows`
can run untimed warm-up repetitions first, as the baselines do.
"""

import time
from typing import Any

import numpy as np

from polybus import use, wait

multiply_rows = use("multiply_rows")
multiply_block = use("multiply_block")


def _pair(n: int, seed: int) -> tuple[Any, Any]:
    """A and B of one repetition (bench/b_matmul.py and the peers make the same)."""
    rng = np.random.default_rng(seed)
    return rng.random((n, n)), rng.random((n, n))


def row_blocks(n: int, chunk: int) -> list[tuple[int, int]]:
    """The decomposition: ``chunk`` rows of A per call (the last block may be shorter)."""
    return [(i, min(i + chunk, n)) for i in range(0, n, chunk)]


def rows(n: int, seed: int = 1, cost: float = 0.0, chunk: int = 1,
         reps: int = 1, warmup: int = 0) -> dict[str, Any]:
    """C = A B, ``chunk`` rows of A per call, every call sent at once (seeds/002's
    deferred-synchronous client); each answer is written into C as it is waited for.
    ``warmup`` untimed repetitions come first, with matrices of their own (seeds after
    the timed ones': a cached B is never one a timed repetition will send)."""
    seconds: list[float] = []
    ok = True
    for rep in [reps + w for w in range(warmup)] + list(range(reps)):
        a, b = _pair(n, seed + rep)
        # Never changed: a cached B is hashed once, not per call, and a call held in a
        # batch or a backlog keeps its blocks as they are, uncopied (a held call copies
        # what the program could still change: client/snapshot.py).
        a.flags.writeable = b.flags.writeable = False
        t0 = time.perf_counter()
        parts = [(lo, hi, multiply_rows(a[lo:hi], b, cost)) for lo, hi in row_blocks(n, chunk)]
        c = np.empty((n, n))
        for lo, hi, p in parts:
            c[lo:hi] = wait(p)
        if rep < reps:
            seconds.append(time.perf_counter() - t0)
        del parts
        ok = ok and (cost > 0 or bool(np.allclose(c, a @ b)))
    return {"seconds": seconds, "correct": ok}


def blocks(n: int, block: int, seed: int = 1, reps: int = 1,
           warmup: int = 0) -> dict[str, Any]:
    """seeds/004: one call per (row block of A, column block of B), waited in order;
    ``warmup`` untimed repetitions first, as in `rows`."""
    seconds: list[float] = []
    ok = True
    for rep in [reps + w for w in range(warmup)] + list(range(reps)):
        a, b = _pair(n, seed + rep)
        a.flags.writeable = b.flags.writeable = False  # never changed (see rows)
        t0 = time.perf_counter()
        tasks: dict[tuple[int, int], Any] = {}
        for i in range(0, n, block):
            for j in range(0, n, block):
                tasks[i, j] = multiply_block(a[i:i + block], b[:, j:j + block])
        c = np.empty((n, n))
        for (i, j), p in tasks.items():
            c[i:i + block, j:j + block] = wait(p)
        if rep < reps:
            seconds.append(time.perf_counter() - t0)
        del tasks
        ok = ok and bool(np.allclose(c, a @ b))
    return {"seconds": seconds, "correct": ok}
