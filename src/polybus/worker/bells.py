"""Bells held back: answers that wake a sleeping client once, not one by one.

A client calling a module that sets ``coalesce`` (over shm) asks its replicas, in
its ring's header (transport/ring.py), not to wake it for each answer while they have
more calls queued (its own or other clients': either way the replica is busy). On a host where client and replicas share the CPUs, every wake-up
of a client waiting for a burst of answers takes a CPU from a replica in the middle
of its next call; held back, the client wakes when the replica's queue is empty (its
CPU then free), or at the latest ``coalesce`` after the first answer held, whichever
comes first. The answer itself is written at once: a client that looks at its ring
meanwhile (it is awake anyway) takes it without a bell.

`OwedBells` keeps the connections owed a bell with the time each is due. The thread
that answered rings the due ones after each call, and all of them when the queue is
empty; while a long call runs, whoever polls (another thread of the pool, or the
runtime's standby) sleeps no longer than the next is due and rings it then, woken to
look again when a bell is newly owed. With no one polling (one handler, running the
next call), the standby rings it: it too is told, and looks by the time it is due
(worker/standby.py), however long it slept on an idle replica before.
"""

from __future__ import annotations

import threading
import time

from polybus.transport.ringchannel import RingChannel
from polybus.wire.messages import Message
from polybus.worker.replies import write

__all__ = ["OwedBells", "coalescing"]


def coalescing(ch: object) -> float:
    """How long ``ch``'s reader lets a bell wait (0: not a ring channel, or not asked)."""
    return ch.coalesce_s() if isinstance(ch, RingChannel) else 0.0


class OwedBells:
    """Connections whose reader is owed a bell, each with when it is due."""

    def __init__(self) -> None:
        self._due: dict[RingChannel, float] = {}
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._due)

    def answer(self, ch: RingChannel, replies: list[Message], within: float) -> bool:
        """Write ``replies`` on ``ch`` with their bell held back for at most ``within`` s;
        whether ``ch`` is owed a bell it was not before (due in ``within``: whoever may
        have to ring it is told, runtime.py)."""
        with ch.quiet():
            write(ch, replies)
        if not ch.owed:
            return False
        due = time.monotonic() + within
        with self._lock:
            new = ch not in self._due
            if new:  # (the first answer held sets the time)
                self._due[ch] = due
        return new

    def until_due(self) -> float:
        """Seconds until the next bell is due (0 if one is; a day if none is owed): a
        poller sleeps no longer than this, so it rings the bell in time."""
        with self._lock:
            first = min(self._due.values(), default=None)
        return 86400.0 if first is None else max(0.0, first - time.monotonic())

    def ring(self, *, every: bool = False) -> None:
        """Ring the bells that are due (``every``: all of them)."""
        if not self._due:
            return
        now = time.monotonic()
        with self._lock:
            if every:
                due, self._due = list(self._due), {}
            else:
                due = [ch for ch, t in self._due.items() if t <= now]
                for ch in due:
                    del self._due[ch]
        for ch in due:
            ch.ring_owed()
