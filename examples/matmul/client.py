"""Matrix-multiply client: sends rows of A (and B) out, assembles C, checks it."""

import numpy as np

from polybus import use

multiply_row = use("multiply_row")


def main(n: int = 200, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    a = rng.random((n, n))
    b = rng.random((n, n))
    b.flags.writeable = False  # never changed: where B is cached, it is hashed once
    # Every call is sent at once (deferred-synchronous, as in Schnaidt, Duman and Lewis);
    # with an async call style the rows come back as promises and are waited for here.
    rows = [multiply_row(a[i], b) for i in range(n)]
    c = np.vstack([np.asarray(r) for r in rows])
    ok = bool(np.allclose(c, a @ b))
    return {"n": n, "correct": ok, "checksum": round(float(c.sum()), 6)}
