"""Sorting servers (Eggen et al.): plain functions, no polybus import.

Both take a numpy array or a list and return a sorted numpy array. insertion_sort is
the O(n^2) algorithm of the paper, in pure Python on purpose, so that distributing it
pays; quicksort is the O(n log n) one, also in pure Python.
"""

import numpy as np


def insertion_sort(xs):
    a = list(np.asarray(xs).tolist())
    for i in range(1, len(a)):
        key = a[i]
        j = i - 1
        while j >= 0 and a[j] > key:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = key
    return np.asarray(a, dtype=np.asarray(xs).dtype)


def quicksort(xs):
    a = list(np.asarray(xs).tolist())
    # Iterative, three-way partition: no recursion limit, fast on repeated keys.
    stack = [(0, len(a) - 1)]
    while stack:
        lo, hi = stack.pop()
        if lo >= hi:
            continue
        pivot = a[(lo + hi) // 2]
        lt, i, gt = lo, lo, hi
        while i <= gt:
            if a[i] < pivot:
                a[lt], a[i] = a[i], a[lt]
                lt += 1
                i += 1
            elif a[i] > pivot:
                a[gt], a[i] = a[i], a[gt]
                gt -= 1
            else:
                i += 1
        stack.append((lo, lt - 1))
        stack.append((gt + 1, hi))
    return np.asarray(a, dtype=np.asarray(xs).dtype)
