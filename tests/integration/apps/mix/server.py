"""The served functions of the strategy-mix program (tests/integration/stratmix.py).

Plain functions, deterministic: each answer depends on its arguments alone, so every
configuration of the program gives the same answers. Two modules of the configuration
serve this one file: ``s1`` (the first stage, the small calls) and ``s2`` (the rest).
"""

import itertools
import os
import threading
import time

import numpy as np

_MARKS = os.environ.get("MIX_MARKS", "")  # tests/integration/chaosmix.py: each call is noted
_PAUSE = float(os.environ.get("MIX_PAUSE", "0") or 0)  # and takes this long (seconds)
_HOLD_NAMES, _, _HOLD_AT = os.environ.get("MIX_HOLD", "").partition(":")  # "f,g:N"
_HOLD = set(_HOLD_NAMES.split(",")) if _HOLD_AT else set()
_AGAIN = os.environ.get("MIX_HOLD_AGAIN", "") == "1"  # hold the held call's next run too
_calls = itertools.count()
if os.environ.get("MIX_PROBE"):  # tests/integration/chaosreg.py: what a replica holds
    import mixprobe

    mixprobe.start(os.environ["MIX_PROBE"])


def _mark(name, i):
    """Note the call (``pid ppid name token i``: the replica's pid, or its process
    pool's; ``i`` the call's index argument) in the file ``$MIX_MARKS`` names, and take
    ``$MIX_PAUSE`` seconds; the call that is the N-th noted of those ``$MIX_HOLD``
    (``f,g:N``) names waits there up to 10 s, for its replica to be killed, and with
    ``$MIX_HOLD_AGAIN=1`` so does the next call noted with its name and ``i`` (its run
    again, elsewhere). The answer is unchanged."""
    if not _MARKS:
        return
    token = f"{os.getpid()}.{threading.get_ident()}.{next(_calls)}"
    fd = os.open(_MARKS, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{os.getpid()} {os.getppid()} {name} {token} {i}\n".encode())
    finally:
        os.close(fd)
    if name in _HOLD:
        with open(_MARKS) as f:
            rows = [w for w in (ln.split() for ln in f) if len(w) == 5 and w[2] in _HOLD]
        at = int(_HOLD_AT)
        held = [w[3] for w in rows[at - 1:at]]
        if _AGAIN and held:
            held += [w[3] for w in rows[at:] if (w[2], w[4]) == (rows[at - 1][2], rows[at - 1][4])][:1]
        if token in held:
            end = time.monotonic() + 10
            while time.monotonic() < end:
                time.sleep(0.01)
    if _PAUSE:
        time.sleep(_PAUSE)


WIDTH = 12_000  # a stage-one answer of 96,000 bytes: past the 64 KiB that forwarding keeps


def produce(i):
    """Stage one: a large array (its answer is forwarded to stage two)."""
    _mark("produce", i)
    if i % 5 == 3:
        raise ValueError(f"boom produce {i}")
    return np.arange(WIDTH, dtype=np.float64) * (i + 1)


def consume(a, i):
    """Stage two: takes stage one's array."""
    _mark("consume", i)
    return float(a[::97].sum()) + i


def small(i):
    """A short call, many of them (aggregation)."""
    _mark("small", i)
    if i % 23 == 7:
        raise ValueError(f"boom small {i}")
    return i * i + 1


def matvec(b, i):
    """A frozen operand shared by many calls (the cache)."""
    _mark("matvec", i)
    return b[:, i % b.shape[1]] * (i + 1)


def scaled(h, i):
    """A broadcast value, read by many calls."""
    _mark("scaled", i)
    return int(h[i % len(h)]) * 3 + i


def ranked(i, w):
    """A call with a priority (its weight w)."""
    _mark("ranked", i)
    if w == 4:
        raise KeyError(f"boom ranked {i}")
    return [i, w, i * w]
