"""The client of the strategy-mix program: every kind of call, each answer and error
digested in call order (tests/integration/stratmix.py)."""

import hashlib
import re

import numpy as np

import polybus
from polybus import RemoteException, use

produce = use("produce")
consume = use("consume")
small = use("small")
matvec = use("matvec")
scaled = use("scaled")
ranked = use("ranked")


class Raised:
    """The error a sync call raised at the call (tested by ``type(v) is Raised``: a
    promise given to ``isinstance`` would be waited for, as it is used as its value)."""

    def __init__(self, exc):
        self.exc = exc


def _call(f, *args):
    """The call's promise or value, or the error a sync call raised at the call."""
    try:
        return f(*args)
    except RemoteException as exc:
        return Raised(exc)


def _canon(v):
    """An answer in a form that does not depend on how it travelled: an array by its
    dtype, shape and bytes, a numpy scalar as the Python number, a tuple as a list
    (what the codec makes of each), an error by its type and the text it raised with."""
    if isinstance(v, RemoteException):
        return ("error", v.remote_type, re.findall(r"boom \w+ \d+", v.remote_message)[:1])
    if isinstance(v, np.ndarray):
        return ("array", str(v.dtype), v.shape, hashlib.sha256(v.tobytes()).hexdigest()[:16])
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    return v


def _settle(v):
    if type(v) is Raised:
        return _canon(v.exc)
    try:
        return _canon(polybus.wait(v))
    except RemoteException as exc:
        return _canon(exc)


def main(n_pipe=10, n_small=80, n_mat=12, n_bcast=10, n_prio=12, rounds=1):
    """The digest of every call's answer or error, in call order; ``rounds`` makes
    every call that many times (a race that shows once in many runs shows sooner)."""
    out = [_round(n_pipe, n_small, n_mat, n_bcast, n_prio) for _ in range(rounds)]
    return out[0] if rounds == 1 else out


def _round(n_pipe, n_small, n_mat, n_bcast, n_prio):
    calls = []  # (label, promise, value or error), in call order
    for i in range(n_pipe):  # a two-stage pipeline: each consumer right after its producer
        p = _call(produce, i)
        q = p if type(p) is Raised else _call(consume, p, i)
        # the program reads the even producers' arrays itself, drops the odd ones
        calls.append((f"produce({i})", p if i % 2 == 0 else None))
        calls.append((f"consume({i})", q))
    for i in range(n_small):
        calls.append((f"small({i})", _call(small, i)))
    b = np.arange(300 * 40, dtype=np.float64).reshape(300, 40)
    b.flags.writeable = False
    for i in range(n_mat):
        calls.append((f"matvec({i})", _call(matvec, b, i)))
    h = polybus.broadcast(np.arange(5000, dtype=np.int64) * 7)
    for i in range(n_bcast):
        calls.append((f"scaled({i})", _call(scaled, h, i)))
    for i in range(n_prio):
        calls.append((f"ranked({i})", _call(ranked, i, (i * 5) % 7)))
    entries = [(label, _settle(v)) for label, v in calls]
    each = [hashlib.sha256(repr(e).encode()).hexdigest()[:10] for e in entries]
    return {"digest": hashlib.sha256(" ".join(each).encode()).hexdigest()[:16],
            "entries": [f"{label}={h}" for (label, _), h in zip(entries, each, strict=True)]}
