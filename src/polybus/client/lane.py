"""The plain sync call over one ``shm`` link, in one Python frame (the latency hot path).

A sync call's round trip over shared memory is a few microseconds of Python on each
side; what the general path adds (a call record, the reactor's loop and its bookkeeping,
the channel's and the ring's methods: some forty Python calls) was as much again.
Measured on 0-byte sync calls, client and replica on different CPUs, alternating runs:
12.4-14.3 us a round trip through the general path, 9.5-9.6 us through this lane
(1000-byte calls: 13.6-16.1 -> 10.5-10.6 us).

The lane takes a call only when nothing else can be going on: one replica link in the
session, no call outstanding or held on it, no other thread reading, nothing left in
the channel, no descriptors or segment notes to send. Anything else, found before the
call is sent, is left to the general path (`Dispatcher.call_sync`); found after (the
spin window passed, an answer that is not a plain Result of this call, the connection
broken), the call becomes an ordinary outstanding call and the general wait takes it
from there, with any message the lane decoded put back for it (``RingChannel._ready``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from polybus.client.calls import CallRecord, ReplicaLink
from polybus.client.counts import unpassed
from polybus.client.later import get_ident
from polybus.client.unsendable import named, too_large
from polybus.errors import MessageTooLarge, PolybusError
from polybus.transport import ring as _ring
from polybus.transport.shm import ShmChannel
from polybus.wire.arrays import INLINE_DIMS, INLINE_MAX
from polybus.wire.codec import OOB_BYTES, Ref
from polybus.wire.framing import _BIG, PREFIX
from polybus.wire.messages import Call, Message, Result

if TYPE_CHECKING:
    from polybus.client.dispatch import Dispatcher

__all__ = ["MISS", "SyncLane", "hand_over"]

MISS: Any = object()  # the lane did not take the call (nothing was sent)

# Argument types sent as they are (what `wireargs.wire` would leave unchanged).
_AS_IS = frozenset({int, float, str, bool, type(None)})
_yield = getattr(os, "sched_yield", lambda: None)
_clock = time.perf_counter
_U64 = _ring._U64
_WRITTEN, _READ, _AWAKE = _ring._WRITTEN, _ring._READ, _ring._AWAKE


class _Back(Exception):
    """The answer is left to the general path."""


class SyncLane:
    """``dispatcher``'s plain sync calls on ``link`` (its only replica, over shm)."""

    def __init__(self, dispatcher: Dispatcher, link: ReplicaLink) -> None:
        ch = link.channel
        assert type(ch) is ShmChannel
        self.dispatcher = dispatcher
        self.link = link
        self.channel = ch
        self.reactor = dispatcher.reactor
        self._encode = ch.codec._enc.encode
        self._decode = ch.codec._dec.decode

    def call(self, args: tuple[Any, ...], rid: int, wire: Any) -> Any:
        """The call's value (or its error raised), or MISS if the lane did not take it
        (then nothing was sent). ``rid``: the call's id; ``wire``: `wireargs.wire`."""
        d = self.dispatcher
        link = self.link
        ch = self.channel
        r = self.reactor
        tx = ch._tx
        rx = ch._rx
        if (tx is None or rx is None or link.dead or link.outstanding or link.held
                or r._waiters or not r._fast or len(r.links) != 1 or d._isolated
                or ch._ready is not None or not ch.decoder.empty or ch.closed):
            return MISS
        inline = True
        wargs = []
        for a in args:
            t = type(a)
            if t in _AS_IS or (t is bytes and len(a) < OOB_BYTES) or (
                    t is np.ndarray and a.nbytes <= INLINE_MAX and a.ndim <= INLINE_DIMS):
                wargs.append(a)  # (in the header: no buffers, see wire/codec.py)
            else:
                wargs.append(wire(a, d.pickle))  # (may wait for a promise: before the lock is taken)
                inline = False
        if not r._lock.acquire(blocking=False):
            unpassed(args)  # (the general path wires them again: client/counts.py)
            return MISS
        d.calls += 1
        try:
            broke = self._send(Call(rid, d.interface, wargs), inline)
        except (TypeError, OverflowError, UnicodeEncodeError) as exc:  # not encodable: which
            # argument (unsendable.py); a str UTF-8 cannot carry is a UnicodeEncodeError here
            r._lock.release()
            raise named(d.interface, wargs, None, exc, ch.codec.allow_pickle,
                        self.link.module) from None
        except MessageTooLarge as exc:
            r._lock.release()  # never sent: nothing outstanding
            raise too_large(d.interface, exc) from None
        except BaseException:
            r._lock.release()  # never sent (not encodable): nothing outstanding
            raise
        if broke is not None:
            return self._general(rid, wargs, error=broke)
        # The answer: spin on the ring (its flag up, so the replica rings no bell), then
        # decode it where it lies if it is a whole plain frame (small buffers copied
        # out), as RingChannel does.
        rmap = rx.map
        unpack = _U64.unpack_from
        back: PolybusError | None = None
        try:
            rx.view[_AWAKE] = 1  # up: the reactor lowers it before it sleeps
            read = rx.read
            if unpack(rmap, _WRITTEN)[0] - read < 12:
                deadline = _clock() + ch.spin_s
                while unpack(rmap, _WRITTEN)[0] - read < 12:
                    if _clock() >= deadline:
                        raise _Back  # the general wait blocks
                    _yield()
            pos = read & rx._mask
            if pos > rx.capacity - 12:
                raise _Back  # (the prefix wraps round the ring's end)
            length, nbufs, flags, header_len = PREFIX.unpack_from(rx.data, pos)
            if (flags or length > ch.codec.max_frame or unpack(rmap, _WRITTEN)[0] - read < 4 + length
                    or pos + 4 + length > rx.capacity
                    or (length != 8 + header_len if not nbufs else length >= _BIG or length < 8)):
                raise _Back  # (the channel's own way reads it)
            body = rx.data[pos + (4 if nbufs else 12):pos + 4 + length]  # (a header, if no buffers)
            try:
                msg: Message = ch._decode_body(body, nbufs) if nbufs else self._decode(body)
            except Exception:  # malformed: the channel's own way reports it
                raise _Back from None
            finally:
                del body
            rx.read = read = read + 4 + length
            _U64.pack_into(rmap, _READ, read)  # the writer may reuse the room only now
            ch.bytes_received += 4 + length
        except _Back:
            return self._general(rid, wargs)
        except (OSError, ValueError) as exc:  # (ValueError: unmapped by close() elsewhere)
            back = ch._broken(exc)
        except BaseException:  # (Ctrl-C while it spins: a late answer is dropped when read)
            r._lock.release()
            raise
        if back is not None:
            return self._general(rid, wargs, error=back)
        if type(msg) is not Result or msg.id != rid or type(msg.value) is Ref:
            return self._general(rid, wargs, msg)
        link.calls += 1
        r._lock.release()
        if r._waiters or r.refills:
            r._stepped()
        return msg.value

    def _send(self, msg: Call, inline: bool) -> PolybusError | None:
        """Write ``msg`` (the reactor lock held); the error if the connection broke.
        Encoding errors (too large, not encodable) are raised: nothing was sent."""
        ch = self.channel
        try:
            if inline and not (ch._fds_out or ch._released or ch._forget_out):
                ch.send_header(self._encode(msg), self.reactor._drain_held)
            else:
                ch.send(msg, self.reactor._drain_held)
        except PolybusError as exc:
            if isinstance(exc, MessageTooLarge):
                raise
            return exc
        return None

    def _general(self, rid: int, wargs: list[Any], msg: Message | None = None,
                 error: PolybusError | None = None) -> Any:
        """`hand_over`, a message decoded but not the answer put back for the general
        reader (``RingChannel._ready``)."""
        return hand_over(self.dispatcher, self.link, rid, wargs, msg, error, self._put_back)

    def _put_back(self, msg: Message) -> None:
        self.channel._ready = msg


def hand_over(d: Dispatcher, link: ReplicaLink, rid: int, wargs: list[Any],
              msg: Message | None, error: PolybusError | None,
              keep: Callable[[Message], None]) -> Any:
    """A lane's call, sent, becomes an ordinary outstanding call, as `Reactor.call_alone`
    would have made it (the reactor lock held on entry), and the general wait takes it:
    ``msg``, decoded but not its plain answer, goes to ``keep``; ``error``: the link is
    lost."""
    r = d.reactor
    rec = CallRecord(rid, d, wargs, None, 0.0)
    rec.link = link
    rec.attempts = 1
    link.outstanding[rid] = rec
    d.inflight[0] += 1
    r._reader = get_ident()  # (a re-run's send reads in this turn: Sending._drain)
    try:
        if error is not None:
            r._lost(link, error)  # (re-run elsewhere, or failed, by the dispatcher)
        elif msg is not None:
            keep(msg)
    finally:
        r._reader = None
        r._lock.release()
    r._stepped()
    return r.wait(rec)
