"""Room on the stack for polybus's own work, however deep the program called from.

A program may call an interface, or wait for a promise, a few frames short of Python's
recursion limit. Its call is then made, and its answer taken in, there: a
RecursionError raised halfway through filing an answer (the record taken from its
replica's outstanding calls, its value not yet set) would leave the call under way for
good, and the run's end would wait for it until killed. So every way into the client's
reading and writing from the program (`Stub.__call__`, the reactor's ``wait``, ``step``,
``poll`` and ``request``) raises the recursion limit by ``HEADROOM`` while it runs, and
puts it back as it leaves: the program itself still meets its own limit where it did
(its RecursionError raised at its own call, before anything is sent or read), while
polybus's work under that call always has ``HEADROOM`` frames to finish in.

The limit is the interpreter's, not a thread's: entries are counted under a lock, the
limit is raised by the first and put back by the last, and a limit the program changed
meanwhile is left as the program set it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["HEADROOM", "enter", "leave", "roomy"]

P = ParamSpec("P")
R = TypeVar("R")

# Frames polybus may need under a call the program made: the sync path from the stub to
# filing an answer (and its completion, refills, placement of held calls) is about 40;
# decoding an answer's nested containers in Python (a pickled value) takes more.
HEADROOM = 250

_lock = threading.Lock()
# [ways in now open, the program's limit before the first, 1 while it is raised]
_state = [0, 0, 0]


def enter() -> None:
    """One way in opens: the first raises the limit by HEADROOM."""
    with _lock:
        if not _state[0] and not _state[2]:
            base = sys.getrecursionlimit()
            sys.setrecursionlimit(base + HEADROOM)
            _state[1] = base
            _state[2] = 1
        _state[0] += 1


def leave() -> None:
    """One way in closes: the last puts the program's limit back (unless the program
    set one of its own meanwhile). Python refuses a limit at or under the current depth:
    a way in that opened within a frame or two of the limit leaves it raised, for the
    next one to put back from higher up the stack."""
    with _lock:
        _state[0] -= 1
        if not _state[0] and _state[2]:
            if sys.getrecursionlimit() != _state[1] + HEADROOM:
                _state[2] = 0  # (the program set its own: left as it is)
                return
            try:
                sys.setrecursionlimit(_state[1])
            except RecursionError:
                return
            _state[2] = 0


def roomy(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with HEADROOM under it while it runs."""

    def inner(*args: P.args, **kwargs: P.kwargs) -> R:
        enter()
        try:
            return fn(*args, **kwargs)
        finally:
            leave()

    inner.__name__ = getattr(fn, "__name__", "inner")
    inner.__doc__ = fn.__doc__
    return inner
