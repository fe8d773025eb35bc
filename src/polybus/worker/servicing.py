"""The replica's queue of waiting calls: priority order, bound, steal and cancel. Pure.

Highest ``prio`` first, first come first served among equals. The queue never decides
what to do when it is full; it says so, and the runtime applies the interface's
overflow policy (block the sender, or reject with a typed busy error).

The bound is on the calls that *wait*: a call that a free handler is about to take
is not one of them. The poller reads a whole burst before it lets its role go, and only
then do the handlers take calls from the queue; so `full` is asked with the number of
handlers free (``free``), and the queue holds up to ``bound + free`` jobs for that
moment, ``bound`` of them left waiting once the handlers have taken theirs.

When some interfaces have a ``pool`` of their own, a replica's queue is a
`LimitedQueue` (lanes.py), which keeps their calls past it waiting.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass
from itertools import chain
from typing import Any


@dataclass(slots=True)
class Job:
    call: Any                 # wire.messages.Call
    channel: Any              # the connection the answer goes back on
    enqueued: float = 0.0     # perf_counter() when queued
    dead: bool = False


class CallQueue:
    """A bounded priority queue of `Job`s with removal by connection and id.

    Calls of priority 0 (every call, unless the configuration gives the interface a
    priority) wait in a FIFO, the others in a heap: a burst of 1,000 queued calls spent
    ~5% of the replica's time in heappop, for an order a FIFO gives. Both hold the
    same (-prio, arrival, job) entries, so sorting them all gives the run order."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._heap: list[tuple[float, int, Job]] = []  # prio != 0; tuples compare in C
        self._fifo: deque[tuple[float, int, Job]] = deque()  # prio 0, in arrival order
        self._seq = itertools.count()
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def full(self, free: int = 0, call: Any = None) -> bool:
        """No room for another job (``call``'s: worker/lanes.py asks which): ``bound``
        would still wait after ``free`` handlers (those idle, or polling, now) have each
        taken one."""
        return self._live >= self.bound + max(0, free)

    def runnable(self) -> bool:
        """A job waits that a free handler may take now (worker/lanes.py: not all may)."""
        return self._live > 0

    def done(self, job: Job) -> None:
        """``job``, popped, has run (worker/lanes.py: the next of its interface may)."""

    def push(self, call: Any, channel: Any, now: float) -> Job:
        job = Job(call, channel, now)
        prio = call.prio
        if prio:
            heapq.heappush(self._heap, (-prio, next(self._seq), job))
        else:
            self._fifo.append((0.0, next(self._seq), job))
        self._live += 1
        return job

    def pop(self) -> Job | None:
        heap, fifo = self._heap, self._fifo
        while True:
            # Higher priorities first, then priority 0 in arrival order, then lower.
            if heap and (heap[0][0] < 0.0 or not fifo):
                job = heapq.heappop(heap)[2]
            elif fifo:
                job = fifo.popleft()[2]
            else:
                return None
            if not job.dead:
                self._live -= 1
                return job

    def _entries(self) -> chain[tuple[float, int, Job]]:
        return chain(self._heap, self._fifo)

    def _kill(self, jobs: list[Job]) -> list[Job]:
        for j in jobs:
            j.dead = True
        self._live -= len(jobs)
        held = len(self._heap) + len(self._fifo)
        if held > 64 and self._live < held // 2:
            self._heap = [e for e in self._heap if not e[2].dead]
            heapq.heapify(self._heap)
            self._fifo = deque(e for e in self._fifo if not e[2].dead)
        return jobs

    def remove_ids(self, channel: Any, ids: set[int]) -> list[Job]:
        return self._kill([j for _, _, j in self._entries()
                           if not j.dead and j.channel is channel and j.call.id in ids])

    def remove_channel(self, channel: Any) -> list[Job]:
        return self._kill([j for _, _, j in self._entries()
                           if not j.dead and j.channel is channel])

    def steal(self, channel: Any, n: int) -> list[Job]:
        """Up to ``n`` of ``channel``'s waiting jobs, taken from the back (last to run)."""
        mine = sorted((e for e in self._entries() if not e[2].dead and e[2].channel is channel),
                      reverse=True)
        return self._kill([e[2] for e in mine[:max(0, n)]])

    def waiting(self, channel: Any | None = None) -> int:
        if channel is None:
            return self._live
        return sum(1 for _, _, j in self._entries() if not j.dead and j.channel is channel)
