"""One turn of a replica's poller, and what the poller releases on its way.

A mixin of `WorkerRuntime` (runtime.py), which owns the state (declared in intake.py
and here) and hands the poller role from thread to thread: `_poll_once` spins on the
rings of clients that just sent, sleeps in the selector for at most the time left
before anything held falls due, reads what came, and then writes the corked answers and
rings the held bells that are due (`_release_held`).
"""

from __future__ import annotations

import logging
import time

from polybus.transport.channel import Channel
from polybus.transport.endpoints import Address
from polybus.transport.ring import fence
from polybus.transport.shm import ShmChannel, spin
from polybus.transport.wake import Wake
from polybus.wire.messages import Pong
from polybus.worker import unread
from polybus.worker.bells import OwedBells
from polybus.worker.intake import Intake
from polybus.worker.poller import Hangup
from polybus.worker.replies import Corked

log = logging.getLogger("polybus.worker")
WAKE = object()  # listeners are keyed by their Address, channels by themselves


class Polling(Intake):
    """The poller's steps; the state is the runtime's."""

    idle_s: float
    calls: int
    _bell: Wake
    _bells: OwedBells
    _corked: Corked
    _selected: float
    _calls_seen: int
    _next_assure = 0.0  # when `_assure_paused` next says it is alive

    def _assure_paused(self) -> None:
        """From the poller (whose sleep it bounds) and the standby thread, each half
        heartbeat: to each client not read while
        the queue is full (``overflow = "block"``), a Pong of its own (req 0, no one
        waits for it by name), as its Ping waits unread behind the call held back: a
        client hears from a replica holding its calls at least once a heartbeat, or
        takes it for dead after three (client/liveness.py)."""
        if not self._paused:
            self._next_assure = 0.0  # (a client held back next hears half a heartbeat on)
            return
        now = time.monotonic()
        if not self._next_assure or now < self._next_assure:
            if not self._next_assure:  # (its Ping comes a heartbeat after its last word)
                self._next_assure = now + self.options.heartbeat / 2
            return
        self._next_assure = now + self.options.heartbeat / 2
        try:
            paused = list(self._paused)
        except RuntimeError:  # (changed as it was copied: said next time)
            return
        for ch in paused:
            if not ch.closed:
                self._send_quietly(ch, Pong(0, len(self._queue), self._running))

    def _holding(self) -> bool:
        """Answers corked or bells held back (replies.py, bells.py)."""
        return bool(self._corked.held or self._bells)

    def _release_held(self, *, every: bool) -> None:
        """Write the corked answers and ring the held bells that are due (``every``: all
        of them, the queue being empty)."""
        if self._bells:
            self._bells.ring(every=every)
        if self._corked.held:
            try:
                self._corked.flush(every=every)
            except BaseException:  # (a fault here must not end the thread)
                log.exception("worker %s: writing held answers failed", self.name)

    def _poll_once(self) -> None:
        if self._paused:
            self._resume_paused()
        if self._stuck:  # clients whose answers have all been written since, or gone
            for ch in [c for c in self._stuck if c.closed or not unread.behind(c)]:
                self._unstick(ch)
        # With calls waiting and a thread free to run them (those a resumed client's
        # stash just queued), look without sleeping: the poller takes one on its way
        # out, and no one else would (the standby steps in only while a call runs), so
        # a sleep here stalled them for the whole timeout (~1 s stalls under
        # backpressure, found by a stress run).
        timeout = (0.0 if len(self._queue) and self._running < self.options.pool
                   and (not self._limited or self._runnable()) else self.idle_s)
        if self._holding():  # (what is held is written in time)
            timeout = min(timeout, self._bells.until_due(), self._corked.until_due())
        if self._paused:  # (clients not read hear from it each half heartbeat)
            self._assure_paused()
            timeout = min(timeout, max(0.0, self._next_assure - time.monotonic()))
        rings_spun = bool(self._hot)
        if rings_spun:
            hot, self._hot = self._hot, set()
            ready = spin([ch for ch in hot if ch in self._channels and ch not in self._paused],
                         self.options.spin_s)
            for ch in ready:
                self._read(ch)
            if ready:
                now = time.perf_counter()
                if now - self._selected < 0.001:
                    return  # others' sockets are looked at within a millisecond
                timeout = 0.0
        if self._unwarm and timeout and not self._running and not len(self._queue):
            # Idle: fault in the memory a cached operand's successor will arrive in
            # (~1.5 ms per MB here), rather than while the next one is on its way.
            warm, self._unwarm = self._unwarm, set()
            for c in warm:
                if not c.closed:
                    c.decoder.prepare_spare()
        # Having just answered, and with nothing else running, look again for a while
        # before sleeping: a busy client's next call then costs no wake-up (spinning.py).
        look_s = 0.0
        if self.calls != self._calls_seen and not self._running and not rings_spun:
            look_s = self.options.spin_s
        self._calls_seen = self.calls
        if timeout and self._awake and self._rings_down():
            return  # frames came with no doorbell: read, not slept on
        if self._paused and self._paused_fit():
            # A client this poll paused (its call found the queue full) while the pool
            # drained the queue: the pool looked for paused clients before this one was,
            # so no wake comes; resume it now, not after a sleep (found by a stress run
            # with a 60 s poll timeout: such a client waited the whole timeout).
            timeout = look_s = 0.0
        self._selected = time.perf_counter()
        try:
            for data in self._sel.poll(timeout, look_s):
                if type(data) is Channel or type(data) is ShmChannel:
                    self._read(data)
                elif isinstance(data, Address):
                    self._accept(data)
                elif data is WAKE:
                    self._bell.clear()
                    self._adopt_new()
                elif type(data) is Hangup:  # (a client held back went: intake.py)
                    self._ended(data.data)
                else:
                    self._read(data)  # a transport's own channel type
        finally:  # (what fell due while it slept: a long call holds no one else to it)
            self._release_held(every=False)

    def _rings_down(self) -> bool:
        """Before the poller may sleep: the awake flags it raised go down (clients ring
        from now on), a fence, and a last look at those rings (ring.py); True if it
        read any. Between, a client's calls went with no doorbell: in an async burst
        that was a send (and a wake-up here) per call at the client."""
        up, self._awake = self._awake, set()
        for ch in up:
            ch.stay_awake(False)
        fence()
        waiting = [ch for ch in up if ch in self._channels and ch not in self._paused
                   and not ch.closed and ch.ring_ready()]
        for ch in waiting:
            self._read(ch)
        return bool(waiting)

    def _adopt_new(self) -> None:
        with self._lock:
            new, self._new = self._new, []
        for ch in new:
            self._channels.add(ch)
            ch.on_caught_up = self._caught_up  # (unread.py)
            self._sel.register(ch.sock, ch)

    def _runnable(self) -> bool:
        """A call waits that a free handler may take (not all may: lanes.py)."""
        with self._lock:
            return self._queue.runnable()

    def _paused_fit(self) -> bool:
        """The call held from some paused client would be taken now (as `_take` asks)."""
        if not self._limited:
            return not self._full()
        return any(not self._full(self._stash.get(ch)) for ch in self._paused)

    def _resume_paused(self) -> None:
        """Read again the clients held back whose call now fits, in the order they were
        held back: one held back again (its next call did not fit) goes to the end, so
        each takes its turn at the room that comes. (In a set's order, the first in it
        took every room, and another's one call waited behind a whole burst.)"""
        if not self._paused or not self._paused_fit():
            return
        for ch in list(self._paused):
            if self._full(self._stash.get(ch)):
                if self._limited:
                    continue  # (another's may fit: a call of an interface at its limit not)
                break
            del self._paused[ch]
            if not ch.closed:
                self._sel.register(ch.sock, ch)
                self._take(ch)  # what it sent before the pause
                if (type(ch) is ShmChannel and not ch.closed and ch not in self._paused
                        and ch.ring_ready()):
                    self._read(ch)  # written before its flag went down: no doorbell came
