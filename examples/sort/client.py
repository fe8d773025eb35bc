"""Sorting client (Eggen et al.): split the array into one part per replica, have the
servers sort the parts at the same time, merge the sorted parts, check against numpy."""

import heapq

import numpy as np

from polybus import use

insertion_sort = use("insertion_sort")
quicksort = use("quicksort")


def merge(parts):
    """k-way merge of sorted arrays, O(n log k)."""
    merged = list(heapq.merge(*(np.asarray(p).tolist() for p in parts)))
    return np.asarray(merged, dtype=np.asarray(parts[0]).dtype if parts else float)


def main(n=20000, parts=2, algorithm="quicksort", seed=0):
    if algorithm not in ("quicksort", "insertion"):
        raise ValueError(f"algorithm is 'quicksort' or 'insertion', not {algorithm!r}")
    sort = quicksort if algorithm == "quicksort" else insertion_sort
    data = np.random.default_rng(seed).integers(0, 1_000_000, size=n)
    # Every part is sent before any answer is waited for (async call styles overlap).
    sorted_parts = [sort(chunk) for chunk in np.array_split(data, max(1, parts))]
    out = merge(sorted_parts)
    correct = bool(np.array_equal(out, np.sort(data)))
    return {"n": n, "parts": parts, "algorithm": algorithm, "correct": correct,
            "first": int(out[0]) if n else None, "last": int(out[-1]) if n else None}
