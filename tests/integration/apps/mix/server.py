"""The served functions of the strategy-mix program (tests/integration/stratmix.py).

Plain functions, deterministic: each answer depends on its arguments alone, so every
configuration of the program gives the same answers. Two modules of the configuration
serve this one file: ``s1`` (the first stage, the small calls) and ``s2`` (the rest).
"""

import os
import time

import numpy as np

_MARKS = os.environ.get("MIX_MARKS", "")  # tests/integration/chaosmix.py: each call is noted
_PAUSE = float(os.environ.get("MIX_PAUSE", "0") or 0)  # and takes this long (seconds)


def _mark(name):
    """Note the call (``pid ppid name``: the replica's pid, or its process pool's) in the
    file ``$MIX_MARKS`` names, and take ``$MIX_PAUSE`` seconds: the answer is unchanged."""
    if _MARKS:
        fd = os.open(_MARKS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{os.getpid()} {os.getppid()} {name}\n".encode())
        finally:
            os.close(fd)
    if _PAUSE:
        time.sleep(_PAUSE)


WIDTH = 12_000  # a stage-one answer of 96,000 bytes: past the 64 KiB that forwarding keeps


def produce(i):
    """Stage one: a large array (its answer is forwarded to stage two)."""
    _mark("produce")
    if i % 5 == 3:
        raise ValueError(f"boom produce {i}")
    return np.arange(WIDTH, dtype=np.float64) * (i + 1)


def consume(a, i):
    """Stage two: takes stage one's array."""
    _mark("consume")
    return float(a[::97].sum()) + i


def small(i):
    """A short call, many of them (aggregation)."""
    _mark("small")
    if i % 23 == 7:
        raise ValueError(f"boom small {i}")
    return i * i + 1


def matvec(b, i):
    """A frozen operand shared by many calls (the cache)."""
    _mark("matvec")
    return b[:, i % b.shape[1]] * (i + 1)


def scaled(h, i):
    """A broadcast value, read by many calls."""
    _mark("scaled")
    return int(h[i % len(h)]) * 3 + i


def ranked(i, w):
    """A call with a priority (its weight w)."""
    _mark("ranked")
    if w == 4:
        raise KeyError(f"boom ranked {i}")
    return [i, w, i * w]
