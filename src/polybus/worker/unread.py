"""Answers a client has not read yet: a replica never waits for a client to read.

Every thread of a replica that writes to clients (the poller answering a Ping or an
unknown interface, a pool thread answering a call, the thread serving a lone client
inline) is shared by all of them. A blocking write to a client that had stopped reading
stopped that thread, and with it every client's calls: one authenticated peer that sent
calls and never read the answers stalled the whole replica for as long as it stayed
connected. So a replica writes with `LATER`: what the connection cannot take now stays
in the channel's ``unsent`` (every later write on it takes those bytes first, so frames
stay whole and in order), and a thread of that connection's own writes them on as the
client makes room (`catch_up`). Meanwhile the replica reads nothing more from that
client (intake.py, ``_stick``): a client that does not read its answers gets no new
calls run, so what waits for it is bounded by what it had sent before, and when its
answers are written the replica reads it again (the channel's ``on_caught_up``).
"""

from __future__ import annotations

import select
import threading
import time
import weakref

from polybus.errors import PolybusError
from polybus.transport.channel import LATER, Channel
from polybus.wire.messages import Message

__all__ = ["catch_up", "send"]

_LOOK_S = 0.1  # a socket: the longest wait for room before looking at the channel again
_RING_S = (0.0005, 0.02)  # a ring (no event says it has room): first and longest look

_lock = threading.Lock()
_writing: weakref.WeakSet[Channel] = weakref.WeakSet()  # channels a writer serves


def send(ch: Channel, msg: Message) -> None:
    """Send ``msg`` without waiting for the client to read (the rest is written on)."""
    ch.send(msg, LATER)
    if ch.unsent:
        catch_up(ch)


def catch_up(ch: Channel) -> None:
    """Write ``ch``'s unsent bytes on as its client reads, on a thread of its own (one
    per connection at most); the channel's ``on_caught_up`` is called when none are left."""
    with _lock:
        if ch in _writing:
            return
        _writing.add(ch)
    t = threading.Thread(target=_write_on, args=(ch,), daemon=True,
                         name=f"polybus-unread-{ch.peer}")
    try:
        t.start()
    except RuntimeError:  # no thread to be had: write on here (the old way: waiting)
        with _lock:
            _writing.discard(ch)
        _write_on_here(ch)


def _write_on(ch: Channel) -> None:
    pause = _RING_S[0]
    ring = getattr(ch, "_tx", None) is not None  # (shm: a full ring, no event for room)
    try:
        while True:
            with _lock:
                if ch.closed or not ch.unsent:
                    _writing.discard(ch)
                    break
            if ring:
                time.sleep(pause)
                pause = min(2 * pause, _RING_S[1])
            else:
                try:
                    select.select([], [ch.sock], [], _LOOK_S)
                except (OSError, ValueError):  # closed meanwhile
                    pass
            try:
                if ch.send_unsent(LATER):
                    pause = _RING_S[0]
            except PolybusError:
                with _lock:
                    _writing.discard(ch)
                return  # the client is gone: the poller drops its connection
    except BaseException:
        with _lock:
            _writing.discard(ch)
        raise
    done = ch.on_caught_up
    if done is not None and not ch.closed:
        done(ch)


def _write_on_here(ch: Channel) -> None:
    try:
        ch.send_unsent(None)
    except PolybusError:
        return
    done = ch.on_caught_up
    if done is not None and not ch.closed:
        done(ch)
