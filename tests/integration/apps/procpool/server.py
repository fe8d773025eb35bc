"""CPU-bound pure-Python work; the answer says which process ran it, and its parent."""

import multiprocessing
import os


def work(n: int) -> list[int]:
    x = 0
    for i in range(n):
        x += i * i
    return [x, os.getpid(), os.getppid()]


def children() -> int:
    """How many child processes this replica has (run in the replica: a thread pool)."""
    return len(multiprocessing.active_children())
