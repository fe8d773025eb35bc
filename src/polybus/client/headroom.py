"""Room on the stack for polybus's own work, however deep the program called from.

A program may call an interface, or wait for a promise, a few frames short of Python's
recursion limit. Its call is then made, and its answer taken in, there: a
RecursionError raised halfway through filing an answer (the record taken from its
replica's outstanding calls, its value not yet set) would leave the call under way for
good, and the run's end would wait for it until killed. So every way polybus reads
under a call of the program (a sync call, which reads its own answer:
`Dispatcher.call_sync`; the reactor's ``wait``, ``step``, ``poll`` and ``request``; a
send's reads while its connection is full: `Sending._drain`) raises the recursion limit
by ``HEADROOM`` while it runs, and puts it back as it leaves: the program itself still
meets its own limit where it did (its RecursionError raised at its own call, before
anything is sent or read), while polybus's work under that call always has
``HEADROOM`` frames to finish in. An async call that only writes pays nothing (a send
cut short is undone where it is made: client/unsendable.py).

The limit is the interpreter's, not a thread's. The outermost way in raises it (one
that finds it raised already is inside another, or in another thread's) and puts it
back, to absolute values: threads that interleave can leave one of them briefly without
its room, never the limit drifting. No lock and no count: a lock cost 250 ns a call
here, ten times the rest, on the path every sync call takes. A limit the program
changed meanwhile is left as the program set it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["HEADROOM", "LIMITS", "enter", "leave", "roomy"]

P = ParamSpec("P")
R = TypeVar("R")

# Frames polybus may need under a call the program made: the sync path from the stub to
# filing an answer (and its completion, refills, placement of held calls) is about 40;
# decoding an answer's nested containers in Python (a pickled value) takes more.
HEADROOM = 250

# [the program's limit, the limit raised from it, 1 while a leave too deep left it raised]
LIMITS = [sys.getrecursionlimit(), sys.getrecursionlimit() + HEADROOM, 0]


def enter() -> bool:
    """A way in opens: True if it raised the limit (the outermost), and its `leave`
    puts it back."""
    now = sys.getrecursionlimit()
    if now != LIMITS[1]:
        LIMITS[0], LIMITS[1] = now, now + HEADROOM
        sys.setrecursionlimit(now + HEADROOM)
        return True
    if LIMITS[2]:  # (left raised by a leave too deep: this one puts it back)
        LIMITS[2] = 0
        return True
    return False


def leave(raised: bool) -> None:
    """A way in closes: the one that raised the limit puts the program's back (unless
    the program set one of its own meanwhile). Python refuses a limit at or under the
    current depth: a way in that opened within a frame or two of the limit leaves it
    raised, for the next one to put back from higher up the stack."""
    if raised and sys.getrecursionlimit() == LIMITS[1]:
        try:
            sys.setrecursionlimit(LIMITS[0])
        except RecursionError:
            LIMITS[2] = 1


def roomy(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with HEADROOM under it while it runs."""

    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        raised = enter()
        try:
            return fn(*args, **kwargs)
        finally:
            if raised:
                leave(True)

    inner.__name__ = getattr(fn, "__name__", "inner")
    inner.__doc__ = fn.__doc__
    return inner
