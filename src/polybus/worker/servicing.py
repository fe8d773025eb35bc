"""The replica's queue of waiting calls: priority order, bound, steal and cancel. Pure.

Highest ``prio`` first, first come first served among equals. The queue never decides
what to do when it is full; it says so, and the runtime applies the interface's
overflow policy (block the sender, or reject with a typed busy error).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Job:
    call: Any                 # wire.messages.Call
    channel: Any              # the connection the answer goes back on
    enqueued: float = 0.0     # perf_counter() when queued
    dead: bool = False


class CallQueue:
    """A bounded priority queue of `Job`s with removal by connection and id."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self._heap: list[tuple[float, int, Job]] = []  # tuples compare in C
        self._seq = itertools.count()
        self._live = 0

    def __len__(self) -> int:
        return self._live

    def full(self) -> bool:
        return self._live >= self.bound

    def push(self, call: Any, channel: Any, now: float) -> Job:
        job = Job(call, channel, now)
        heapq.heappush(self._heap, (-call.prio, next(self._seq), job))
        self._live += 1
        return job

    def pop(self) -> Job | None:
        while self._heap:
            job = heapq.heappop(self._heap)[2]
            if not job.dead:
                self._live -= 1
                return job
        return None

    def _kill(self, jobs: list[Job]) -> list[Job]:
        for j in jobs:
            j.dead = True
        self._live -= len(jobs)
        if len(self._heap) > 64 and self._live < len(self._heap) // 2:
            self._heap = [e for e in self._heap if not e[2].dead]
            heapq.heapify(self._heap)
        return jobs

    def remove_ids(self, channel: Any, ids: set[int]) -> list[Job]:
        return self._kill([j for _, _, j in self._heap
                           if not j.dead and j.channel is channel and j.call.id in ids])

    def remove_channel(self, channel: Any) -> list[Job]:
        return self._kill([j for _, _, j in self._heap if not j.dead and j.channel is channel])

    def steal(self, channel: Any, n: int) -> list[Job]:
        """Up to ``n`` of ``channel``'s waiting jobs, taken from the back (last to run)."""
        mine = sorted((e for e in self._heap if not e[2].dead and e[2].channel is channel),
                      reverse=True)
        return self._kill([e[2] for e in mine[:max(0, n)]])

    def waiting(self, channel: Any | None = None) -> int:
        if channel is None:
            return self._live
        return sum(1 for _, _, j in self._heap if not j.dead and j.channel is channel)
