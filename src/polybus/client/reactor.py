"""Client I/O, driven by whichever thread needs an answer ("latest receive").

There is no I/O thread: a thread waiting for an answer reads the sockets itself, so a
synchronous call costs one send and one blocking receive, with no thread handoff.
Answers that arrive for other calls are filed as they come; a send that would block
reads meanwhile, so client and replica never both wait on full buffers.
"""

from __future__ import annotations

import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from polybus.client import answers, control, ended, rings
from polybus.client.alone import LoneCalls
from polybus.client.calls import CallRecord, ReplicaLink, give_up, late, waiting_for
from polybus.client.cancel import Asked
from polybus.client.headroom import roomy
from polybus.client.later import Later, get_ident
from polybus.client.liveness import Liveness
from polybus.client.pump import Gate, gated
from polybus.client.sending import Sending
from polybus.client.unwritten import unwritten
from polybus.client.upstreamdue import give_up_due
from polybus.errors import PolybusError
from polybus.transport.channel import LATER
from polybus.transport.keepalive import keep_alive
from polybus.transport.shm import ShmChannel
from polybus.transport.wake import Wake
from polybus.wire.messages import Message, Result, Undelivered

UNSENT_S = 0.008  # the longest a read sleeps while writes the pump began wait for room


class Reactor(LoneCalls, Sending):
    """Reads answers for every replica link of a session and hands them out (the lone
    call's own path: client/alone.py; its sends: client/sending.py)."""

    def __init__(self, heartbeat: float | None = None) -> None:
        self.links: list[ReplicaLink] = []
        self._rings: rings.Rings = []  # the shm links and their channels (client/rings.py)
        # Silent replicas holding calls are pinged, then declared dead (liveness.py).
        self.liveness: Liveness[ReplicaLink] | None = Liveness(heartbeat) if heartbeat else None
        self._fast = True  # the one-blocking-read path wakes up after a silent heartbeat
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()       # held by the thread reading sockets
        # That thread, while a send of its own may wait for room (its reads inside the
        # send are its own: Sending._drain); None while no thread reads.
        self._reader: int | None = None
        # Rung by a thread that finds the reading role taken, so a reader asleep on one
        # replica's socket (the fast paths) comes back and reads every replica.
        self._wake = Wake()
        self._cv = threading.Condition()    # waiters on another thread's reading
        self._waiters = 0
        self._in_send = 0
        self.later = Later()  # sends decided by a read inside a send (client/later.py)
        self.replies: dict[int, Message] = {}  # answers to control requests, by req
        self.revoking: dict[int, Asked] = {}  # p.cancel()'s Revokes, by req (client/cancel.py)
        self.on_lost: Callable[[ReplicaLink, PolybusError], None] = lambda link, err: None
        self.on_released: Callable[[ReplicaLink, list[int], int], None] = (
            lambda link, ids, req: None)
        self.on_undelivered: Callable[[ReplicaLink, Undelivered], None] = (
            lambda link, msg: None)
        self.after_step: Callable[[], None] = lambda: None
        # False once the session knows after_step has nothing to do (no demand-driven
        # backlog, batcher or migrator): the sync lane then skips it (client/lane.py).
        self.refills = True
        # A read inside a send (Sending._drain_held) left the after-step work for later:
        # done at the next step outside a send (`_stepped`), which no lone read precedes.
        self.step_owed = False
        # Aggregating bindings' open batches, written before any read (client/batching.py).
        self.flushers: list[Callable[[], None]] = []
        # Program threads inside polybus, counted where a pump moves held work while the
        # program computes (client/pump.py); None where nothing is ever held.
        self.gate: Gate | None = None
        # What a send does while the connection is full: reads meanwhile (`_drain`), or,
        # in the pump's turn, leaves the rest in the channel (LATER: `take_in`).
        self._when_full: Callable[[], None] = self._drain
        # A write the pump's turn or the linger timer began may be left in a channel
        # (``Channel.unsent``): every read writes on with it, never waiting, and sleeps
        # at most UNSENT_S.
        self.unfinished = False
        self.closed = False  # its session closed: its run ended (client/ended.py)
        # The calls upstream of a call whose deadlines a wait for it looks at, where the
        # session has such (client/upstreamdue.py)
        self.upstream: Callable[[CallRecord], list[Any]] | None = None

    def add(self, link: ReplicaLink) -> None:
        self.links.append(link)
        if type(link.channel) is ShmChannel:
            self._rings.append((link, link.channel))
        self._sel.register(link.channel.sock, selectors.EVENT_READ, link)
        link.channel.wake = self._wake
        if self.liveness is not None:
            # (a replica cut off while no call is held: its link ends, found at its next
            # use, as the replica's end does for this client: transport/keepalive.py)
            keep_alive(link.channel.sock, self.liveness.heartbeat)
            link.channel.sleep_s = self.liveness.heartbeat
            if link.channel.tls:  # its blocking read would not time out: use select
                self._fast = False
            else:  # set once per link, so a silent replica ends a blocking read
                sec = self.liveness.heartbeat
                link.channel.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                                             struct.pack("ll", int(sec), int(sec % 1 * 1e6)))

    # -- receiving -----------------------------------------------------------------
    def _wait(self, rec: CallRecord, timeout: float | None = None) -> Any:
        """Block until ``rec`` has its outcome; return the value or raise its error. A
        Ctrl-C or SIGTERM meanwhile says what the wait was for (a note: cli/main.py)."""
        try:
            if rec.link is None and not rec.done and not self._in_send:
                # (a call waiting at the client whose values came while nobody read, or
                # whose producer was given up on: placed, or failed, before any read waits)
                self.after_step()
            if self.flushers:  # (an open batch may hold what ``rec`` waits for: `_step`
                self.flush_all()  # does this at each read, the one-read path does not)
            # (calls whose values it needs, with deadlines of their own: upstreamdue.py)
            ups = self.upstream(rec) if self.upstream is not None else None
            if (timeout is None and not ups and self._fast and rec.link is not None
                    and self._alone(rec.link)):
                self._wait_alone(rec, rec.link)
            # Counted from when the call was written to a replica (its deadline: `overdue`).
            # Past it, what has arrived is taken first (an answer here may well have come in
            # time: when, no one can tell; a call waiting at the client is written, and its
            # count begins), then the call fails and its answer, if it comes, is dropped.
            # (A record with no deadline of its own, waited for with a timeout, counts from
            # this wait.)
            own = 0.0 if timeout is None else time.monotonic() + timeout
            while not rec.done:
                if self.closed:  # (its run ended as this thread waited: ended.py)
                    raise ended.ended_meanwhile(rec)
                remaining = None
                if timeout is not None:
                    remaining = self._left(rec, own, timeout)
                    if remaining <= 0:
                        self._poll()
                        if not rec.done and self._left(rec, own, timeout) <= 0:
                            give_up(rec, timeout)
                            break
                        continue
                if ups:
                    remaining = give_up_due(ups, self._poll, remaining)
                self._step(rec.link, remaining)
            return rec.outcome()
        except KeyboardInterrupt as exc:  # (in the same frame: no call added to a wait)
            exc.add_note(waiting_for(rec))
            raise

    wait = roomy(_wait)  # (gated where the session has a gate: open_gate)

    @staticmethod
    def _left(rec: CallRecord, own: float, timeout: float) -> float:
        """Seconds to ``rec``'s deadline (``own`` if it has none), at most ``timeout``;
        ``timeout`` while it waits at the client (its count not begun: `overdue`)."""
        link = rec.link
        if link is None or link.dead:
            return timeout
        return min(timeout, (rec.deadline or own) - time.monotonic())  # (inf: held)

    def _stepped(self) -> None:
        """After a read, with the lock let go: wake threads waiting for their answers
        (only programs that wait from several threads pay for this), then the session's
        after-step work (refills), unless inside a send."""
        if self._waiters:
            with self._cv:
                self._cv.notify_all()
        if not self._in_send:
            self.step_owed = False  # (cleared first: a send of its own may owe it again)
            if self.later.queue:  # (left by a read inside a send not the reactor's: a lane's)
                self.later.write(self)
            self.after_step()

    def _step(self, prefer: ReplicaLink | None = None, timeout: float | None = None) -> None:
        """Read once from whatever has something (blocking up to ``timeout``)."""
        self.flush_all()
        if self.unfinished and (timeout is None or timeout > UNSENT_S):
            timeout = UNSENT_S  # (back soon to write on: room frees with no bell)
        if not self._lock.acquire(blocking=False):
            with self._cv:  # another thread is reading; it will wake us
                self._waiters += 1
                self._wake.ring()  # (it may be asleep on another replica's socket)
                self._cv.wait(0.05 if timeout is None else min(timeout, 0.05))
                self._waiters -= 1
            return
        self._reader = get_ident()
        try:
            busy = [lk for lk in self.links
                    if (lk.outstanding or lk.abandoned or lk.watch) and not lk.dead]
            owed = self.step_owed and not self._in_send  # (then a look, not a wait)
            if (timeout is None and len(busy) == 1 and (prefer is None or prefer is busy[0])
                    and self._fast and not owed):
                before = busy[0].channel.bytes_received
                self._receive(busy[0], wait=True)  # the fast path: one blocking read
                if busy[0].channel.bytes_received == before and self.liveness is not None:
                    self._check_liveness()  # a heartbeat passed in silence
            else:
                wait_s = 0.5 if timeout is None else timeout
                if self.unfinished:  # (the linger timer's, left since the look above)
                    wait_s = min(wait_s, UNSENT_S)
                if self.liveness is not None:
                    wait_s = min(wait_s, self.liveness.heartbeat / 2)
                if owed:  # (the after-step work a send's reads left: `_stepped` next)
                    wait_s = 0.0
                # Messages already read, whole in a decoder (a reader that took only its
                # own answer left them), are taken first, without sleeping: no socket will
                # say they are here. (A frame only partly read is left to the select.)
                if any([self._take_whole(lk) for lk in busy if lk.channel.buffered()]):
                    wait_s = 0.0
                ready = rings.spin_busy(busy, wait_s) if busy and wait_s > 0 else []
                if not ready:  # (also with no wait: what came with the flag up rang no bell)
                    ready = rings.down(self._rings)
                for link in ready or [key.data for key, _ in self._sel.select(wait_s)]:
                    if not link.dead:
                        self._receive(link, wait=False)
                if self.liveness is not None and self.liveness.due(time.monotonic()):
                    self._check_liveness()
        except (ValueError, OSError):  # (its selector or a ring closed under it)
            if not self.closed:
                raise
            return  # (the run ended as this thread read: its wait says so, `_wait`)
        finally:
            if self._rings:  # (tcp and ipc links have none: no call on the hot path)
                rings.up(self._rings)
            self._reader = None
            self._lock.release()
        self._stepped()

    step = roomy(_step)  # (gated where the session has a gate: open_gate)

    def _take_whole(self, link: ReplicaLink) -> bool:
        """File the messages already whole in ``link``'s channel (no system call); False
        if there were none."""
        try:
            msgs = link.channel.pending()
        except PolybusError as exc:
            self._lost(link, exc)
            return True
        for msg in msgs:
            self._handle(link, msg)
        return bool(msgs)

    def _poll(self, batches: bool = True) -> None:
        """Take in whatever has already arrived, without waiting. Calls held to be written
        with the next are written first, and with ``batches`` the open aggregated batches
        too (False: `Promise.done`, whose look should not close them)."""
        self.flush_all(batches)
        if self._lock.acquire(blocking=False):
            self._reader = get_ident()
            try:
                self._read_ready()
            except (ValueError, OSError):  # (as in `_step`: the run ended meanwhile)
                if not self.closed:
                    raise
                return
            finally:
                self._reader = None
                self._lock.release()
            if not self._in_send:
                self.step_owed = False
                self.after_step()

    def _read_ready(self) -> bool:
        """(The lock held) file what has arrived, never waiting; False if nothing had."""
        for link in self.links:  # (read before, left whole: see step)
            if not link.dead and link.channel.buffered():
                self._take_whole(link)
        ready: list[ReplicaLink] = [key.data for key, _ in self._sel.select(0)]
        ready += rings.waiting(self._rings, ready)  # (they rang no doorbell)
        for link in ready:
            if not link.dead:
                self._receive(link, wait=False)
        return bool(ready)

    def take_arrived(self, rounds: int = 64) -> None:
        """File the answers already here, and nothing else: no wait, no write, no call
        placed (the program raised, and its run ends: client/drain.py `arrived`). Read
        again while more was there, ``rounds`` times at most."""
        if not self._lock.acquire(blocking=False):
            return  # (another thread reads: what it takes is filed all the same)
        self._reader = get_ident()
        try:
            for _ in range(rounds):
                if not self._read_ready():
                    break
        finally:
            self._reader = None
            self._lock.release()

    poll = roomy(_poll)  # (gated where the session has a gate: open_gate)

    def open_gate(self, gate: Gate) -> None:
        """From now on a program thread's read is inside ``gate`` (client/pump.py)."""
        self.gate = gate
        for name in ("wait", "step", "poll", "request"):
            setattr(self, name, roomy(gated(gate, getattr(self, "_" + name))))

    def work_left(self) -> None:
        """Something now waits at the client for a replica: the pump moves it if the
        program leaves it there (client/pump.py)."""
        if self.gate is not None:
            self.gate.dirty = True

    def take_in(self) -> None:
        """The pump's turn (client/pump.py), under the gate's lock: `poll` without
        entering the gate, open aggregated batches left to their linger, and every
        write without waiting: what a connection cannot take now stays in it (LATER),
        for the next turn or a program thread's next read or send."""
        before, self._when_full = self._when_full, LATER
        try:
            self._poll(batches=False)
        finally:
            self._when_full = before
            self.unfinished = False  # (then looked at again: see _write_unsent)
            if self.unsent_left():
                self.unfinished = True

    def never_wait(self) -> None:
        """From now on no send waits for room: what a connection cannot take stays in it
        (LATER), and each step writes on with it. For an event loop that drives this
        reactor (http/calls.py): a replica that stops reading (its queue full under
        ``overflow = "block"``) held the loop inside a send, and everything it serves."""
        self._when_full = LATER

    def unsent_left(self) -> bool:
        """A live connection holds bytes a write left (``Channel.unsent``)."""
        return any(lk.channel.unsent and not lk.dead for lk in self.links)

    def _receive(self, link: ReplicaLink, wait: bool) -> None:
        try:
            msgs = link.channel.receive(wait=wait)
        except PolybusError as exc:
            self._lost(link, exc)
            return
        for msg in msgs:
            self._handle(link, msg)

    def _handle(self, link: ReplicaLink, msg: Message) -> None:
        if type(msg) is Result:  # the common case, filed here; the rest in answers.py
            rec = link.outstanding.pop(msg.id, None)
            if rec is not None:
                if not isinstance(rec, CallRecord):  # (an aggregated batch's id)
                    link.outstanding[msg.id] = rec  # (it goes on with the replica's loss)
                    answers.misfiled(self, link, f"a Result for aggregated batch {msg.id}")
                    return
                link.calls += 1
                if rec.set_value(msg.value):
                    rec.dispatcher.completed(rec, link)
                else:  # given up on by another thread as this one took it out: the
                    rec.dispatcher.freed(link)  # give-up no longer finds it to free
            elif link.abandoned:
                late(link, msg.id)  # a late answer: the replica is free of it
            return
        answers.handle(self, link, msg)  # (the rarer kinds: client/answers.py)

    def _check_liveness(self) -> None:
        """Ping replicas that hold calls and went silent; give up on those silent too long."""
        control.check_liveness(self)

    def _lost(self, link: ReplicaLink, error: PolybusError) -> None:
        if link.dead:
            return
        link.dead = True
        link.abandoned.clear()
        if self.closed:  # (the run ended and closed it, as another thread read it: not a
            return  # replica lost, nor its calls to run again; their waits say it ended)
        link.unwritten = unwritten(link)  # (placed again, idempotent or not: unwritten.py)
        try:
            self._sel.unregister(link.channel.sock)
        except (KeyError, ValueError):
            pass
        link.channel.close()
        self.on_lost(link, error)

    def _request(self, link: ReplicaLink, msg: Message, req: int, timeout: float = 5.0) -> Message | None:
        """Send a control request and wait for the answer with the same ``req``."""
        return control.request(self, link, msg, req, timeout)

    request = roomy(_request)  # (gated where the session has a gate: open_gate)

    def close(self) -> None:
        ended.close(self)  # (its promises' reads say their run ended: client/ended.py)
        for link in self.links:
            link.channel.close()
        self._sel.close()
        self._wake.close()
