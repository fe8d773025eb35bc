"""The replica's queue when some interfaces have a ``pool`` of their own. Pure.

A call whose interface already runs as many calls as its own pool allows (its lane is
full) stays in the queue: it counts as waiting, under the queue's bound, and keeps its
place by priority and arrival; a handler takes the next call that may run instead. It
may run once a call of its interface has ended (`done`).

`LimitedQueue.pop` sets aside (parks) the calls at the head of the queue whose lane is
full, each in its lane, in the same (-prio, arrival) order; the next call to run is
the first, in that order, of the queue's head and the parked calls of the lanes with
room. A replica with no such interface has a plain `CallQueue`, and pays nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import chain
from typing import Any

from polybus.worker.servicing import CallQueue, Job

__all__ = ["Lane", "LimitedQueue"]

Entry = tuple[float, int, Job]  # (-prio, arrival, job), as in CallQueue


class Lane:
    """The calls of the interfaces that share one limit: ``running`` of them run, at most
    ``limit``; ``waiting`` wait (in the queue or ``parked``)."""

    __slots__ = ("limit", "parked", "running", "waiting")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self.waiting = 0
        self.parked: list[Entry] = []  # a heap

    def room(self) -> int:
        return self.limit - self.running

    def first(self) -> Entry | None:
        """The first live parked call (dead ones on top dropped)."""
        parked = self.parked
        while parked and parked[0][2].dead:
            heapq.heappop(parked)
        return parked[0] if parked else None


class LimitedQueue(CallQueue):
    """A `CallQueue` in which each call of a limited interface runs only while its
    lane has room. ``limits``: the interfaces that share each limit, and the limit."""

    def __init__(self, bound: int, limits: Iterable[tuple[Iterable[str], int]]) -> None:
        super().__init__(bound)
        self._lane: dict[str, Lane] = {}
        self._lanes: list[Lane] = []
        for names, n in limits:
            lane = Lane(max(1, n))
            self._lanes.append(lane)
            for name in names:
                self._lane[name] = lane

    def push(self, call: Any, channel: Any, now: float) -> Job:
        job = super().push(call, channel, now)
        lane = self._lane.get(call.iface)
        if lane is not None:
            lane.waiting += 1
        return job

    def pop(self) -> Job | None:
        best = self._head()
        take_from: Lane | None = None
        for lane in self._lanes:
            if lane.running < lane.limit and lane.parked:
                first = lane.first()
                if first is not None and (best is None or first < best):
                    best, take_from = first, lane
        if best is None:
            return None
        if take_from is not None:
            heapq.heappop(take_from.parked)
        elif self._heap and self._heap[0] is best:
            heapq.heappop(self._heap)
        else:
            self._fifo.popleft()
        job = best[2]
        if (its := self._lane.get(job.call.iface)) is not None:
            its.running += 1
            its.waiting -= 1
        self._live -= 1
        return job

    def _head(self) -> Entry | None:
        """The first live call of the queue (as `CallQueue.pop` orders it) whose lane has
        room, left in place; those before it whose lane is full are parked."""
        heap, fifo = self._heap, self._fifo
        while True:
            if heap and (heap[0][0] < 0.0 or not fifo):
                entry = heap[0]
                on_heap = True
            elif fifo:
                entry = fifo[0]
                on_heap = False
            else:
                return None
            job = entry[2]
            lane = None if job.dead else self._lane.get(job.call.iface)
            if not job.dead and (lane is None or lane.running < lane.limit):
                return entry
            if on_heap:
                heapq.heappop(heap)
            else:
                fifo.popleft()
            if lane is not None:
                heapq.heappush(lane.parked, entry)

    def done(self, job: Job) -> None:
        """``job`` (popped) has run: its lane has room for the next of its calls."""
        lane = self._lane.get(job.call.iface)
        if lane is not None:
            lane.running -= 1

    def runnable(self) -> bool:
        """A call waits that a free handler may take now."""
        return self._head() is not None or any(
            lane.running < lane.limit and lane.first() is not None for lane in self._lanes)

    def full(self, free: int = 0, call: Any = None) -> bool:
        """No room for ``call`` (None: for a call of no limited interface): ``bound``
        would still wait after the ``free`` handlers have taken what may run of it and
        of what waits. A call whose lane is full counts as waiting, whatever is free."""
        blocked = 0
        for lane in self._lanes:
            room = lane.room()
            if lane.waiting > room:
                blocked += lane.waiting - room
        takeable = self._live - blocked
        its = self._lane.get(getattr(call, "iface", ""))  # (a Batch has none: as None)
        if its is None or its.waiting < its.room():
            takeable += 1  # (the call itself)
        return self._live - min(max(0, free), takeable) >= self.bound

    def _entries(self) -> chain[Entry]:
        return chain(self._heap, self._fifo, *(lane.parked for lane in self._lanes))

    def _kill(self, jobs: list[Job]) -> list[Job]:
        for j in jobs:
            lane = self._lane.get(j.call.iface)
            if lane is not None:
                lane.waiting -= 1
        super()._kill(jobs)
        for lane in self._lanes:
            if any(e[2].dead for e in lane.parked):
                lane.parked = [e for e in lane.parked if not e[2].dead]
                heapq.heapify(lane.parked)
        return jobs
