"""A replica's busy seconds: the time its calls ran, a call under way counted up to now.

A replica's figures are read while calls run: at the start and end of a run on a
replica other clients use too, a call its client gave up on (its `timeout`) and left
running, `Session.stats` from a program. The sum of the calls that had ended left out
the one running, and a replica ten seconds into a call read as idle. Each path a call
runs by (`WorkerRuntime._run`, batching.py, direct.py, socketserve.py) notes when its
call began (`began`: an entry of its thread's), and once it ends adds its time and
drops that entry together (`ended`, under a lock: a read between the two would count
the call twice, or not at all). The lock also keeps two threads' additions from losing
one (test_worker_busy_threads). `now` is what `Stats` says.

A run's figure is its end's less its start's (client/stats.py), so a call under way at
either counts for its part within the run.
"""

from __future__ import annotations

import time
from threading import get_ident
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["began", "ended", "now"]


def began(rt: WorkerRuntime, t0: float) -> int:
    """The calling thread's call began at ``t0`` (``time.perf_counter``); its key."""
    me = get_ident()
    rt._since[me] = t0  # (one store: no lock needed to add it)
    return me


def ended(rt: WorkerRuntime, me: int, spent: float) -> None:
    """The call of thread ``me`` ended, ``spent`` seconds after it began (0 when
    polybus's own steps failed it: `WorkerRuntime.fault`, the call not counted)."""
    with rt._busy_lock:
        rt.busy_s += spent
        rt._since.pop(me, None)


def now(rt: WorkerRuntime) -> float:
    """The busy seconds so far: the calls ended, and those under way up to now."""
    with rt._busy_lock:
        at = time.perf_counter()
        under_way = list(rt._since.values())  # (entries are added without the lock)
        done = rt.busy_s
    return done + sum(max(0.0, at - t0) for t0 in under_way)
