"""CPU-bound pure-Python work; the answer carries the process that ran it."""

import os


def work(n: int) -> list[int]:
    x = 0
    for i in range(n):
        x += i * i
    return [x, os.getpid()]
