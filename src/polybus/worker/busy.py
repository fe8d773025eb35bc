"""A replica's busy seconds: the time its calls ran, a call under way counted up to now.

A replica's figures are read while calls run: at the start and end of a run on a
replica other clients use too, a call its client gave up on (its `timeout`) and left
running, `Session.stats` from a program. The sum of the calls that had ended left out
the one running, and a replica ten seconds into a call read as idle.

Each thread that runs calls keeps one entry, ``(seconds of its calls ended, when its
call under way began or 0.0)``, replaced whole in one store when a call begins
(`began`) and ends (`ended`); `now` sums the entries as they are, each consistent, so a
read between a call's end and its entry's change cannot count it twice or not at all,
and no lock is taken on a call's path (a lock there cost ~230 ns a call inline, 3% of an
`shm` round trip; the store, ~70). A thread gone leaves its entry, its seconds still
counted; one whose ident is reused adds to it. Each path a call runs by
(`WorkerRuntime._run`, batching.py, direct.py, socketserve.py inlined) keeps it.
``WorkerRuntime.busy_s`` stays the plain sum of the calls ended, for the corking rule
(runtime.py), which needs no call under way.

A run's figure is its end's less its start's (client/stats.py), so a call under way at
either counts for its part within the run, and a read is never less than one before it
but by one step: a read between a call's last clock read and its entry's store counts
it up to the read, the store a little less (the steps between: ~100 ns; a thread switch
there, up to the switch interval, 5 ms). A call polybus's own steps fail keeps its
seconds (`faulted`).
"""

from __future__ import annotations

import time
from threading import get_ident
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["IDLE", "began", "ended", "faulted", "now"]

IDLE = (0.0, 0.0)  # a thread's entry before its first call: nothing ended, none under way


def began(rt: WorkerRuntime, t0: float) -> int:
    """The calling thread's call began at ``t0`` (``time.perf_counter``); its key."""
    me = get_ident()
    threads = rt._threads_busy
    threads[me] = (threads.get(me, IDLE)[0], t0)
    return me


def ended(rt: WorkerRuntime, me: int, spent: float) -> None:
    """The call of thread ``me`` ended, ``spent`` seconds after it began."""
    threads = rt._threads_busy
    threads[me] = (threads.get(me, IDLE)[0] + spent, 0.0)
    rt.busy_s += spent


def faulted(rt: WorkerRuntime) -> None:
    """The calling thread's call was failed by polybus's own steps (`WorkerRuntime.fault`),
    maybe before `ended`: its seconds up to now are counted, as a read meanwhile counted
    them (dropped, the next read would be less). Nothing if it had ended."""
    me = get_ident()
    t0 = rt._threads_busy.get(me, IDLE)[1]
    ended(rt, me, time.perf_counter() - t0 if t0 else 0.0)


def now(rt: WorkerRuntime) -> float:
    """The busy seconds so far: the calls ended, and those under way up to now."""
    entries = list(rt._threads_busy.values())  # (one C step under the GIL: no lock)
    # (the clock read after: every start listed was read before it, none counts below 0)
    at = time.perf_counter()
    return sum(done + (at - t0 if t0 else 0.0) for done, t0 in entries)
