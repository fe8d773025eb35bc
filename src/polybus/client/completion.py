"""`as_completed`: a program's promises in the order their answers come.

A master that hands out tasks and takes each result as it comes (``ray.wait``,
``concurrent.futures.as_completed``, Dask's ``as_completed``) would otherwise wait for
them in the order it made them, held up by the slowest first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from polybus.client.promise import Promise, wait

__all__ = ["as_completed"]

_STEP_S = 0.05  # the longest one read waits before the promises are looked at again


def as_completed(xs: Iterable[Any], timeout: float | None = None) -> Iterator[Any]:
    """Yield each of ``xs`` once its answer is here, the first answered first: the
    promise itself (use it, or ``wait(p)``, which raises the call's error if it
    failed); a value that is not a promise comes at once. ``timeout`` (seconds, for
    them all): TimeoutError once it passes with promises still unanswered."""
    pending = list(xs)
    deadline = None if timeout is None else time.monotonic() + timeout
    while pending:
        still = []
        for x in pending:
            if not isinstance(x, Promise) or x.done:  # (neither waits)
                yield x
            else:
                still.append(x)
        pending = still
        if not pending:
            return
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError(f"{len(pending)} of the promises were not answered "
                               f"within {timeout:g} s")
        _read(pending[0], _STEP_S if left is None else min(_STEP_S, left))


def _read(p: Promise, seconds: float) -> None:
    """Let answers in for up to ``seconds``: one read by ``p``'s session, whose answers
    (to any of its calls) are filed as it goes."""
    reactor = getattr(p, "_reactor", None)
    rec = getattr(p, "_rec", None)
    batcher = getattr(rec, "batcher", None)
    if batcher is not None:  # an aggregated call: its batch may not be written yet
        batcher.flush()
        reactor = batcher.reactor
    if reactor is None:  # a kind of promise with no session to read: wait for it
        wait(p)
        return
    reactor.step(None, seconds)
