"""A replica's standby thread: the one that looks in while calls run.

Every few milliseconds while calls run (`WorkerRuntime.standby_look_s`), it takes the
poller role when a call has been running since its last look, so control messages are
answered during long calls and the network never waits on compute; it lets go what is
held back and falls due (a corked answer, a bell held at a client's ``coalesce``:
replies.py, bells.py), with no one else to do it while a long call runs on the pool's
one thread; and it makes the connections' periodic looks (accepting.py). On an idle
replica it looks twice as far apart each time, up to every 100 ms
(`standby_idle_s`), and so burns no CPU.

What is held falls due sooner than that: whoever holds something that may fall due
before anything held already (the first answer corked, due in 2 ms, though a bell may
be owed for later; a connection's first bell owed) asks the standby
(`Standby.due_in`) to look by then, which ends its sleep only if it would have slept
past it. (Before, what was held behind a long call waited for the
standby's next look: a bell held for 1 ms rang 78-84 ms late on a replica that had
been idle.)
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.worker.runtime import WorkerRuntime

__all__ = ["Standby", "run"]


class Standby:
    """When the standby next looks, and the way to have it look sooner.

    No nudge is lost: the holder records what it holds, then reads when the standby
    next looks (`due_in`); the standby records when it next looks (`planned`), then
    reads what is held (and sleeps no longer than the first of it falls due). Whichever
    comes second sees the other's record."""

    def __init__(self) -> None:
        self._nudge = threading.Event()
        self._next = 0.0  # (monotonic) when its sleep ends

    def planned(self, seconds: float) -> None:
        self._next = time.monotonic() + seconds

    def sleep(self, seconds: float) -> None:
        self._nudge.wait(seconds)
        self._nudge.clear()

    def due_in(self, seconds: float) -> None:
        """Something held falls due in ``seconds``: wake the standby if it sleeps past."""
        if time.monotonic() + seconds < self._next:
            self._nudge.set()

    def wake(self) -> None:
        self._nudge.set()


def run(rt: WorkerRuntime) -> None:
    """The standby thread's loop, until ``rt`` stops."""
    standby = rt._standby
    delay, seen = rt.standby_look_s, -1
    while True:
        standby.planned(delay)
        nap = delay
        if rt._holding():  # (after `planned`: see Standby)
            nap = min(delay, rt._bells.until_due(), rt._corked.until_due())
        # (``delay`` goes on doubling on an idle replica, not the nap: one cut to 0 by
        # what was due, doubled, left the standby looking without a pause for ever)
        standby.sleep(nap)
        if rt._stop_event.is_set():
            return
        with rt._lock:
            stuck = (rt._running > 0 and rt._started == seen and not rt._polling
                     and not rt._heeding)  # (heed: waits for the role, runtime.py)
            if stuck:
                rt._polling = True
            active = rt._started != seen
            seen = rt._started
        rt._release_held(every=False)  # (what fell due behind a long call)
        rt._look_at_connections()  # (accepting.py)
        rt._assure_paused()  # (polling.py)
        if stuck:
            rt._poll_and_release(takes_job=False)
            delay = rt.standby_look_s
        else:
            delay = (rt.standby_look_s if active or rt._running
                     else min(delay * 2, rt.standby_idle_s))
