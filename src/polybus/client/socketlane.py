"""The plain sync call over one ``tcp`` or ``ipc`` link, in one Python frame.

The socket twin of client/lane.py (which does this for ``shm``): where a sync call's
answer comes within the spin window, the general path's steps (a call record, the
reactor's loop and bookkeeping, the channel's fill and the spinner's frames) are half
of the client's Python per call. This lane encodes and writes the call, spins on the
socket for the answer (an ``epoll`` look, each turn yielding the CPU), reads what came
into a bytes object and, when that is one plain frame (no buffers), decodes it where
it lies. Anything else read goes to the channel's frame decoder, and the reads after
it straight into the decoder's memory, as the channel's own reads do.

It takes a call only when nothing else can be going on (one replica link in the
session, no call outstanding or held on it, no other thread reading, nothing left in
the decoder, no TLS); anything else, found before the call is sent, is left to the
general path (`Dispatcher.call_sync`). Found after (the spin window passed, a frame with
buffers, an answer that is not a plain Result of this call, the connection broken), the
call becomes an ordinary outstanding call and the general wait takes it from there,
with the message the lane decoded, if any, filed by the reactor first.
"""

from __future__ import annotations

import os
import select
import socket
import time
from typing import TYPE_CHECKING, Any

from polybus.client.calls import ReplicaLink
from polybus.client.counts import unpassed
from polybus.client.lane import _AS_IS, MISS, SyncLane, hand_over
from polybus.client.unsendable import named, too_large
from polybus.errors import ConnectionLostError, MessageTooLarge, PolybusError
from polybus.transport.channel import Channel
from polybus.transport.shm import ShmChannel
from polybus.transport.unwhole import size
from polybus.wire.codec import OOB_BYTES, Ref
from polybus.wire.messages import Call, Message, Result

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

__all__ = ["SocketLane", "lane_for"]

_yield = getattr(os, "sched_yield", lambda: None)
_clock = time.perf_counter
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
READ_MAX = 64 * 1024  # one read's most; a lone answer's frame is far smaller


class SocketLane:
    """``dispatcher``'s plain sync calls on ``link`` (its only replica, over a socket)."""

    @staticmethod
    def usable(ch: object) -> bool:
        """Whether a lane can serve ``ch``: a plain (not TLS) socket channel, on a system
        with ``epoll`` and non-blocking reads by flag."""
        return (type(ch) is Channel and not ch.tls and hasattr(select, "epoll")
                and _DONTWAIT != 0)

    def __init__(self, dispatcher: Dispatcher, link: ReplicaLink) -> None:
        ch = link.channel
        assert type(ch) is Channel and self.usable(ch)
        self.dispatcher = dispatcher
        self.link = link
        self.channel = ch
        self.reactor = dispatcher.reactor
        self._poll = ch.look().poll

    def call(self, args: tuple[Any, ...], rid: int, wire: Any) -> Any:
        """The call's value (or its error raised), or MISS if the lane did not take it
        (then nothing was sent). ``rid``: the call's id; ``wire``: `wireargs.wire`."""
        d = self.dispatcher
        link = self.link
        ch = self.channel
        r = self.reactor
        if (link.dead or link.outstanding or link.held or r._waiters or not r._fast
                or len(r.links) != 1 or d._isolated or not ch.decoder.empty or ch.closed):
            return MISS
        wargs = list(args)
        for i, a in enumerate(args):
            t = type(a)
            if t not in _AS_IS and (t is not bytes or len(a) >= OOB_BYTES):
                wargs[i] = wire(a, d.pickle)  # (promises answered, large bytes out of band; may wait)
        if not r._lock.acquire(blocking=False):
            unpassed(args)  # (the general path wires them again: client/counts.py)
            return MISS
        d.calls += 1
        try:  # Channel.send's steps, a one-piece frame written here
            lock = ch.send_lock  # (held while encoding too: the codec is the connection's)
            if not lock.acquire(False):
                ch.wait_send_lock(r._drain_held)  # (another thread writes: read meanwhile)
            try:
                pieces = ch.codec.encode(call := Call(rid, d.interface, wargs))
                if ch.closed:
                    raise ConnectionLostError(f"connection to {ch.peer} is closed")
                # (every earlier byte written: the frame's end counted only if it is not
                # written whole, transport/unwhole.py)
                fast = not ch.unsent and ch._ends is None
                base = ch.queued
                try:
                    if fast and len(pieces) == 1 and type(p := pieces[0]) is bytes:
                        try:
                            sent = ch.sock.send(p, _DONTWAIT)
                        except BlockingIOError:
                            sent = 0
                        except OSError as exc:
                            ch.closed = True
                            raise ConnectionLostError(
                                f"connection to {ch.peer} broke while sending: {exc}") from None
                        ch.bytes_sent += sent
                        if sent != len(p):  # (the rest as the channel writes, reading meanwhile)
                            ch._send_pieces([memoryview(p)[sent:]], r._drain_held)
                    else:
                        ch._send_pieces(pieces, r._drain_held)
                except BaseException:
                    ch.queued = base + size(pieces)
                    ch._cut([(ch.queued, call)])
                    raise
                if fast and not ch.unsent:
                    ch.queued = ch.bytes_sent
                else:
                    ch.queued = base + size(pieces)
                    ch._wrote([(ch.queued, call)])
            finally:
                lock.release()
        except (TypeError, OverflowError, UnicodeEncodeError) as exc:  # not encodable: which
            # argument (unsendable.py; the codec says a lone surrogate as a TypeError)
            r._lock.release()
            raise named(d.interface, wargs, None, exc, ch.codec.allow_pickle,
                        self.link.module) from None
        except PolybusError as exc:
            if isinstance(exc, MessageTooLarge):
                r._lock.release()
                raise too_large(d.interface, exc) from None  # never sent: nothing outstanding
            return self._general(rid, wargs, error=exc)
        except BaseException:
            r._lock.release()  # never sent (not encodable): nothing outstanding
            raise
        # The answer: a look and a read, until it is whole or the window ends. A read
        # that is one plain frame is decoded where it lies; anything else goes to the
        # frame decoder, and later reads go straight into its memory.
        msg: Message | None = None
        try:
            deadline = 0.0
            whole: bool = ch.decoder.empty  # (not empty: a send that blocked read meanwhile)
            if not whole:
                msg = ch.next_message()
            while msg is None:
                if not whole:
                    if ch._read_nowait():
                        msg = ch.next_message()  # (a plain header, decoded where it lies; any frame)
                        continue
                elif self._poll(0):
                    try:
                        data = ch.sock.recv(READ_MAX, _DONTWAIT)
                    except BlockingIOError:
                        continue
                    except (OSError, ValueError) as exc:  # (ValueError: closed meanwhile)
                        ch.closed = True
                        raise ConnectionLostError(f"connection to {ch.peer} broke: {exc}") from None
                    n = len(data)
                    if not n:
                        ch.closed = True
                        raise ConnectionLostError(f"{ch.peer} closed the connection")
                    ch.bytes_received += n
                    msg = ch.codec.decode_lone(data)
                    if msg is not None:
                        continue
                    ch.decoder.feed(data)  # (and the decoder says what is wrong with it)
                    msg = ch.next_message()
                    whole = ch.decoder.empty
                    continue
                now = _clock()
                if not deadline:
                    deadline = now + ch.spin_s
                if now >= deadline:
                    break  # the general wait blocks
                _yield()
        except PolybusError as exc:  # broken, or bad bytes: as the general path has it
            return self._general(rid, wargs, error=exc)
        except BaseException:  # (Ctrl-C while it spins: a late answer is dropped when read)
            r._lock.release()
            raise
        if msg is None or type(msg) is not Result or msg.id != rid or type(msg.value) is Ref:
            return self._general(rid, wargs, msg)
        link.calls += 1
        r._lock.release()
        if r._waiters or r.refills:
            r._stepped()
        return msg.value

    def _general(self, rid: int, wargs: list[Any], msg: Message | None = None,
                 error: PolybusError | None = None) -> Any:
        """`lane.hand_over`, a message decoded but not the answer filed as the reactor
        files any message."""
        return hand_over(self.dispatcher, self.link, rid, wargs, msg, error, self._file)

    def _file(self, msg: Message) -> None:
        self.reactor._handle(self.link, msg)


def lane_for(d: Dispatcher) -> SyncLane | SocketLane | None:
    """The sync lane for ``d``'s lone link's channel, if its kind has one (a ring's:
    client/lane.py; a socket's: `SocketLane`)."""
    ch = d.links[0].channel
    if type(ch) is ShmChannel:
        return SyncLane(d, d.links[0])
    if SocketLane.usable(ch):
        return SocketLane(d, d.links[0])
    return None
