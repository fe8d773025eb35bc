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

The writer waits with ``poll``, never ``select`` (which refuses a descriptor past 1023):
for room on a socket, or, on an shm ring (which no event says has room), a backing-off
look that also watches its socket for the client's going. A client that goes while
stuck is found so by its writer (a failed write, or its socket hung up), which wakes
the poller: no poll of it would, as a stuck client's socket is not polled, and the
replica drops it (intake.py, ``_unstick``). A stuck client, or one with a call held for
room in the queue, is never served inline (direct.py): the intake takes it up again.
"""

from __future__ import annotations

import select
import threading
import weakref

from polybus.errors import PolybusError
from polybus.transport.channel import LATER, Channel
from polybus.wire.messages import Message

__all__ = ["behind", "catch_up", "send"]

_LOOK_MS = 100  # a socket: the longest wait for room before looking at the channel again
_RING_MS = (0.5, 20.0)  # a ring (no event says it has room): first and longest look
# The peer went (a ring's writer sees no error: only its socket says so)
_GONE = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)

_lock = threading.Lock()
_writing: weakref.WeakSet[Channel] = weakref.WeakSet()  # channels a writer serves


def send(ch: Channel, msg: Message) -> None:
    """Send ``msg`` without waiting for the client to read (the rest is written on)."""
    ch.send(msg, LATER)
    if ch.unsent:
        catch_up(ch)


def behind(ch: Channel) -> bool:
    """Whether ``ch`` has bytes its client has not taken yet. Under the send lock: a
    write under way takes ``unsent`` on, and may give some of it back."""
    with ch.send_lock:
        return bool(ch.unsent)


def catch_up(ch: Channel) -> None:
    """Write ``ch``'s unsent bytes on as its client reads, on a thread of its own (one
    per connection at most); the channel's ``on_caught_up`` is called when none are left,
    or when the client is found gone (the poller then drops it)."""
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
    while True:
        try:
            _write_until_done(ch)
        finally:
            with _lock:
                _writing.discard(ch)
        # A send after its last look and before the discard found this writer still
        # here and started none: what it left unsent is written on here.
        if ch.closed or not behind(ch):
            break
        with _lock:
            if ch in _writing:  # (another writer has started since: it writes them)
                return
            _writing.add(ch)
    _tell(ch)


def _tell(ch: Channel) -> None:
    """The last of ``ch``'s unsent is written, or its client is gone: its owner is told
    (gone too: the poller's next turn drops it, as no poll of it would)."""
    done = ch.on_caught_up
    if done is not None:
        done(ch)


def _write_until_done(ch: Channel) -> None:
    ring = getattr(ch, "_tx", None) is not None  # (shm: a full ring, no event for room)
    look = select.poll()  # (not select(): a descriptor past 1023 made it spin)
    try:
        look.register(ch.sock.fileno(), (_GONE if ring else select.POLLOUT | _GONE))
    except (OSError, ValueError):
        return  # closed meanwhile
    pause = _RING_MS[0]
    while True:
        with ch.send_lock:
            if ch.closed or not ch.unsent:
                return
        try:
            events = look.poll(pause if ring else _LOOK_MS)
        except OSError:
            events = []
        if ring and any(e & _GONE for _, e in events):
            ch.closed = True  # (as a failed write marks it: its peer is gone)
            return
        try:
            if ch.send_unsent(LATER):
                pause = _RING_MS[0]
            elif ring:
                pause = min(2 * pause, _RING_MS[1])
        except PolybusError:
            return  # the client is gone (the send marked it closed)


def _write_on_here(ch: Channel) -> None:
    try:
        ch.send_unsent(None)
    except PolybusError:
        pass
    _tell(ch)
