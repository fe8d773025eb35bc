"""Sorting client (Eggen et al.): split the array into one part per replica, have the
servers sort the parts at the same time, merge the sorted parts, check against numpy."""

import heapq
import time

import numpy as np

from polybus import use, wait

insertion_sort = use("insertion_sort")
quicksort = use("quicksort")


def merge(parts):
    """k-way merge of sorted arrays, O(n log k)."""
    merged = list(heapq.merge(*(np.asarray(p).tolist() for p in parts)))
    return np.asarray(merged, dtype=np.asarray(parts[0]).dtype if parts else float)


def main(n=20000, parts=2, algorithm="quicksort", seed=0, timing=False):
    """With ``timing=True`` the result also gives the seconds from the split to the
    last sorted part (``sort_s``) and of the merge (``merge_s``): the paper times it
    both ways, with and without the merge."""
    if algorithm not in ("quicksort", "insertion"):
        raise ValueError(f"algorithm is 'quicksort' or 'insertion', not {algorithm!r}")
    sort = quicksort if algorithm == "quicksort" else insertion_sort
    data = np.random.default_rng(seed).integers(0, 1_000_000, size=n)
    start = time.perf_counter()
    # Every part is sent before any answer is waited for (async call styles overlap).
    sorted_parts = [sort(chunk) for chunk in np.array_split(data, max(1, parts))]
    if timing:
        sorted_parts = wait(sorted_parts)
    sorted_at = time.perf_counter()
    out = merge(sorted_parts)
    merged_at = time.perf_counter()
    correct = bool(np.array_equal(out, np.sort(data)))
    result = {"n": n, "parts": parts, "algorithm": algorithm, "correct": correct,
              "first": int(out[0]) if n else None, "last": int(out[-1]) if n else None}
    if timing:
        result.update(sort_s=sorted_at - start, merge_s=merged_at - sorted_at)
    return result
