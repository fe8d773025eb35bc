"""The sending half of the client's reactor (client/reactor.py), which `Reactor`
inherits.

A send whose connection is full reads meanwhile (`_drain`), so client and replica never
both wait on full buffers; what such a read decides to send waits for the end of that
send (client/later.py). A call for a replica that is busy anyway is held and written
with the next ones as one Batch frame (`hold`, `flush`); everything held, the open
aggregated batches first, is written before any read (`flush_all`), and so are the
writes the pump's turn or the linger timer left unfinished in a connection
(`_write_unsent`), never waiting for room. The reactor's state and steps these use are
named below for the checker.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from polybus.client.calls import ReplicaLink
from polybus.client.counts import batches_in
from polybus.client.fwdbatch import trailing
from polybus.client.headroom import enter, leave
from polybus.client.later import Later, get_ident
from polybus.client.policies.aggregate import pack
from polybus.client.unsendable import send_accepted
from polybus.errors import MessageTooLarge, PolybusError
from polybus.transport.channel import LATER
from polybus.transport.wake import Wake
from polybus.wire.messages import Call, Message

__all__ = ["Sending"]

# The longest a send waiting for room waits for another thread's read before it looks
# at its connection again (that read's end wakes it first).
DRAIN_WAIT_S = 0.005


class Sending:
    """`Reactor`'s sends (a mixin: the reactor's state and steps below are its)."""

    links: list[ReplicaLink]
    later: Later  # sends decided by a read inside a send (client/later.py)
    _in_send: int  # sends under way (a read inside one leaves after_step for later)
    refills: bool  # (the session has after-step work: a backlog, a batcher, a migrator)
    # A read inside a send left the after-step work owed: done at the next step outside
    # a send, and no read waits on one replica alone before it (client/alone.py `_alone`)
    step_owed: bool
    # What a send does while the connection is full (`_drain`, or LATER in the pump's turn)
    _when_full: Callable[[], None]
    flushers: list[Callable[[], None]]  # (open aggregated batches: Batcher.flush)
    # Some binding aggregates on the general path (policies/aggregate.py): a flush's
    # Batches are counted for the run's report (client/counts.py `batches_in`)
    aggregating = False
    unfinished: bool  # a write the pump's turn or the linger timer began is left
    _lock: threading.Lock  # the read turn: held by the thread reading sockets
    _reader: int | None  # that thread, where it may send while it reads (see _drain)
    _cv: threading.Condition  # threads waiting for another's read
    _waiters: int
    _wake: Wake  # rung so a reader asleep on one replica's socket comes back

    if TYPE_CHECKING:
        def work_left(self) -> None: ...
        def _receive(self, link: ReplicaLink, wait: bool) -> None: ...
        def _lost(self, link: ReplicaLink, error: PolybusError) -> None: ...

    def send(self, link: ReplicaLink, msg: Message) -> None:
        """Send on ``link``; while the socket is full, take in what replicas sent."""
        later = self.later
        if later.reader is not None and later.defer(link, [msg]):
            return
        self._in_send += 1
        try:
            link.channel.send(msg, self._when_full)
            if link.channel.unsent:  # (LATER left some: written on by the next step)
                self.unfinished = True
        except MessageTooLarge:
            raise  # nothing was written: the caller's call fails, the link is as it was
        except PolybusError as exc:
            self._lost(link, exc)
        finally:
            self._in_send -= 1
            if later.queue:
                later.write(self)

    def send_unwaited(self, link: ReplicaLink, msg: Message) -> None:
        """Send on ``link`` without waiting for room: what the connection cannot take
        now stays in it (`LATER`) and goes with the next write (``unfinished``), as the
        pump's turns do. For a message whose sender must not wait on a replica that is
        not reading (a timed-out call's Revoke: the timeout is the caller's bound)."""
        later = self.later
        if later.reader is not None and later.defer(link, [msg]):
            return
        try:
            link.channel.send(msg, LATER)
        except MessageTooLarge:
            raise
        except PolybusError as exc:
            self._lost(link, exc)
            return
        if link.channel.unsent:
            self.unfinished = True

    def hold(self, link: ReplicaLink, msg: Call) -> None:
        """Queue ``msg`` for a replica that is busy anyway; written with the next ones."""
        link.held.append(msg)
        self.work_left()
        if len(link.held) >= 16:
            self.flush(link)

    def flush(self, link: ReplicaLink) -> None:
        if link.held:
            with link.lock:  # (with what is asked of them, as one: fwdbatch.py's `ask`)
                msgs, link.held = link.held, []
                trail, link.trail = link.trail, []
            now = None
            for m in msgs:  # (a held call's timeout counts from now: CallRecord)
                rec = link.outstanding.get(m.id)
                if rec is not None and rec.deadline == math.inf:
                    now = now or time.monotonic()
                    rec.deadline = now + (rec.dispatcher.timeout or 0.0)
            # as one Batch frame; a call that cannot be encoded fails alone (unsendable.py)
            try:
                packed = pack(msgs)
                if self.aggregating and len(packed) < len(msgs):  # (a Batch: counts.py)
                    batches_in(link, packed)
                if trail:  # (what is asked of them, right after: fwdbatch.py's `ask`)
                    packed += trailing(link, trail)
                send_accepted(self, link, packed)
            except BaseException:  # (RecursionError, MemoryError, Ctrl-C: none written)
                with link.lock:
                    link.held[:0] = msgs  # still held, written by the next flush
                    link.trail[:0] = trail
                raise

    def flush_all(self, batches: bool = True) -> None:
        """Write what is held for each replica, and with ``batches`` the open aggregated
        batches first; and on with what the pump's turns left unsent."""
        for f in self.flushers if batches else ():
            f()
        for link in self.links:
            if link.held:
                self.flush(link)
        if self.unfinished:
            self._write_unsent()

    def _write_unsent(self) -> None:
        """On with the writes the pump's turns and the linger timer left unfinished, as
        far as each connection takes them now: never waiting, so no program thread waits
        behind a replica that does not read (client/pump.py)."""
        # Cleared first, set again if anything is left: the linger timer may leave bytes
        # meanwhile, and sets the flag after its write (client/linger.py), not before.
        self.unfinished = False
        left = False
        for link in self.links:
            ch = link.channel
            if ch.unsent and not link.dead:
                try:
                    ch.send_unsent(LATER)
                except PolybusError as exc:
                    self._lost(link, exc)
                    continue
                left = left or bool(ch.unsent)
        if left:
            self.unfinished = True

    def send_many(self, link: ReplicaLink, msgs: list[Message]) -> None:
        later = self.later
        if later.reader is not None and later.defer(link, msgs):
            return
        self._in_send += 1
        try:
            link.channel.send_many(msgs, self._when_full)
            if link.channel.unsent:  # (LATER left some: written on by the next step)
                self.unfinished = True
        except MessageTooLarge:
            raise
        except PolybusError as exc:
            self._lost(link, exc)
        finally:
            self._in_send -= 1
            if later.queue:
                later.write(self)

    def _drain(self) -> None:
        """A send's connection is full: read meanwhile, in the read turn (what a read
        decides to send waits for the end of that send: client/later.py). While another
        thread has the turn, that thread reads (rung awake if it sleeps on another
        replica's socket) and this send waits a moment for its read, then looks at its
        room again: two threads decoding one connection at once filed some answers twice
        and lost others, and their callers waited for ever."""
        me = get_ident()
        if self._reader == me:  # (a send made inside this thread's own read)
            self._drain_held()
        elif self._lock.acquire(blocking=False):
            self._reader = me
            try:
                self._drain_held()
            finally:
                self._reader = None
                self._lock.release()
            if self._waiters:  # (what it read may be what they wait for)
                with self._cv:
                    self._cv.notify_all()
        else:
            with self._cv:
                self._waiters += 1
                self._wake.ring()
                self._cv.wait(DRAIN_WAIT_S)
                self._waiters -= 1

    def _drain_held(self) -> None:
        """`_drain` by the thread that has the read turn (a lone call's own send)."""
        enter()  # (room under it, however deep the send: client/headroom.py; first, so
        later = self.later  # a RecursionError at its call leaves nothing set)
        outer = later.reader
        try:
            later.reader = get_ident()
            if self.refills:  # (what it reads may make room for a call at the client)
                self.step_owed = True
            for link in self.links:
                if not link.dead:
                    self._receive(link, wait=False)
        finally:
            later.reader = outer
            leave()
