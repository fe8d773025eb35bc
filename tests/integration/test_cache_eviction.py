"""Operand caching while a replica's cache evicts: a call's or batch's own Puts spare
the operands it names (Put.keep)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .comm_harness import call, cluster
from .test_comm_cache import toml


def test_a_calls_put_spares_its_other_operand(tmp_path: Path) -> None:
    # Two 80 KB operands a call, a cache of 200000 bytes (two of them). add(x2, x0)
    # after add(x0, x1): x0 is held, x2 is put, and the replica then held x1 as its
    # most recently used (looked up after x0), so the Put of x2 evicted x0, which the
    # call names: it missed and went again. Its Put now keeps x0: x1 goes.
    text = toml(cache='["x", "y"]', cache_bytes=200_000).replace("mul", "add")
    xs = [np.full(10000, float(i)) for i in range(3)]
    with cluster(tmp_path, text) as c:
        s = c.session()
        assert float(call(s, "add", xs[0], xs[1])[0]) == 1.0
        assert float(call(s, "add", xs[2], xs[0])[0]) == 2.0
        cache = c.runtimes[0].cache
        assert cache.misses == 0 and cache.evictions == 1 and len(cache) == 2
