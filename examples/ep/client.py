"""Embarrassingly parallel C = A B (Qureshi and Rashid): one task per (row block of A,
column block of B), handed out on demand by the configuration's call style."""

import numpy as np

from polybus import use, wait

multiply_block = use("multiply_block")


def main(n: int = 1024, block: int = 128, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    b = rng.random((n, n))
    a.flags.writeable = b.flags.writeable = False  # never changed: cached blocks hash once
    tasks = {(i, j): multiply_block(a[i:i + block], b[:, j:j + block])
             for i in range(0, n, block) for j in range(0, n, block)}
    c = np.empty((n, n))
    for (i, j), p in tasks.items():
        c[i:i + block, j:j + block] = wait(p)
    return {"n": n, "tasks": len(tasks), "correct": bool(np.allclose(c, a @ b)),
            "checksum": round(float(c.sum()), 6)}
