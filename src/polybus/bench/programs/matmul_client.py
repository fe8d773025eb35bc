"""Clients of the matmul and ep benchmarks: time the distributed part only."""

import time
from typing import Any

import numpy as np

from polybus import use, wait

multiply_row = use("multiply_row")
multiply_block = use("multiply_block")


def rows(n: int, seed: int = 1, cost: float = 0.0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    b = rng.random((n, n))
    t0 = time.perf_counter()
    out = [multiply_row(a[i], b, cost) for i in range(n)]
    c = np.vstack([np.asarray(r) for r in out])
    seconds = time.perf_counter() - t0
    ok = True if cost > 0 else bool(np.allclose(c, a @ b))
    return {"seconds": seconds, "correct": ok}


def blocks(n: int, block: int, seed: int = 1) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    b = rng.random((n, n))
    t0 = time.perf_counter()
    tasks: dict[tuple[int, int], Any] = {}
    for i in range(0, n, block):
        for j in range(0, n, block):
            tasks[i, j] = multiply_block(a[i:i + block], b[:, j:j + block])
    c = np.empty((n, n))
    for (i, j), p in tasks.items():
        c[i:i + block, j:j + block] = wait(p)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "correct": bool(np.allclose(c, a @ b))}
