"""Which promises a thread waited for, while it watches (client/fwdprio.py).

A priority that reads a list of unanswered promises may wait for a value among them
(``len(xs[0])``) or not (``len(xs)``); fwdprio says so only if it did. Looking at the
promises' state before the priority and after cannot tell: another thread (the pump,
another program thread) may take an answer in meanwhile. So a promise's use of a value
that is not at the client (a wait, or a fetch of a forwarded one) notes the promise
here, on its own thread, when that thread watches: the fast path, a value already
here, notes nothing and costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["waited", "waits_watched"]

class _Here(threading.local):
    """Per thread: the watched promises' ids it waited for, None while it watches none
    (a class default: a thread that never watched reads it at an attribute's cost,
    61 ns, where ``getattr`` with a default on a plain ``threading.local`` took 330)."""

    ids: set[int] | None = None


_here = _Here()


@contextmanager
def waits_watched() -> Iterator[set[int]]:
    """The ids of the promises whose value this thread waits for (or fetches) within
    the block; a block inside another adds its own to the outer's."""
    outer = _here.ids
    ids: set[int] = set()
    _here.ids = ids
    try:
        yield ids
    finally:
        _here.ids = outer
        if outer is not None:
            outer |= ids


def waited(promise: object) -> None:
    """``promise``'s value, not at the client, is waited for (or fetched) on this
    thread: noted if the thread watches."""
    ids = _here.ids
    if ids is not None:
        ids.add(id(promise))
