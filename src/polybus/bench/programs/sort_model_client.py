"""Client of the modelled sort: the same split and merge as examples/sort/client.py."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from polybus import use

sort_modelled = use("sort_modelled")


def main(n: int, costs: list[float], seed: int = 0) -> dict[str, Any]:
    data = np.random.default_rng(seed).integers(0, 1_000_000, size=n)
    parts = [sort_modelled(chunk, cost)
             for chunk, cost in zip(np.array_split(data, len(costs)), costs, strict=True)]
    merged = np.asarray(list(heapq.merge(*(np.asarray(p).tolist() for p in parts))))
    return {"n": n, "parts": len(costs), "correct": bool(np.array_equal(merged, np.sort(data)))}
