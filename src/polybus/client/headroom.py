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

The limit is the interpreter's, not a thread's: the ways in open, in every thread, are
counted (a list's append and pop, atomic under the GIL; a lock cost 250 ns a call
here), the first raises the limit and the last puts it back, so a thread waiting inside
polybus keeps its room while another's call ends. A thread that comes in just as the
last one leaves raises it again. A limit the program changed meanwhile is left as the
program set it. (Python sets the limit in every thread's state: its cost grows with
the threads alive, 68 ns for a raise and a lower with one, 340 ns with 100.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["HEADROOM", "LIMITS", "OPEN", "enter", "leave", "roomy"]

P = ParamSpec("P")
R = TypeVar("R")

# Frames polybus may need under a call the program made: the sync path from the stub to
# filing an answer (and its completion, refills, placement of held calls) is about 40;
# decoding an answer's nested containers in Python (a pickled value) takes more.
HEADROOM = 250

OPEN: list[None] = []  # one per way in now open, in any thread (append, pop: atomic)
LIMITS = [sys.getrecursionlimit(), sys.getrecursionlimit() + HEADROOM]  # program's, raised


def enter() -> None:
    """A way in opens: the limit is raised, unless it is already. (Counted last: calls
    of C functions count toward the depth too, and a RecursionError at the first leaves
    nothing done.)"""
    now = sys.getrecursionlimit()
    if now != LIMITS[1]:
        LIMITS[0], LIMITS[1] = now, now + HEADROOM
        sys.setrecursionlimit(now + HEADROOM)
    OPEN.append(None)


def leave() -> None:
    """A way in closes: the last one open puts the program's limit back (unless the
    program set one of its own meanwhile). Python refuses a limit at or under the
    current depth: one that closes within a frame or two of the limit leaves it raised,
    for the next last one to put back from higher up the stack."""
    OPEN.pop()
    if OPEN or sys.getrecursionlimit() != LIMITS[1]:
        return
    try:
        sys.setrecursionlimit(LIMITS[0])
    except RecursionError:
        return
    if OPEN:  # (another thread came in as it was put back: its room again)
        sys.setrecursionlimit(LIMITS[1])


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
