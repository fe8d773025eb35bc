"""Whether a socket has room to write, or something to read, by a ``poll`` (channel.py).

A poll, never ``select()``: that cannot watch a descriptor past 1,023 (FD_SETSIZE), and
a process whose module holds many files has its sockets there (it raised ValueError)."""

from __future__ import annotations

import select
import socket

__all__ = ["readable", "ready", "writable"]


def writable(sock: socket.socket) -> bool:
    """Whether ``sock`` has room for a write now (a poll, no wait)."""
    return _poll(sock, select.POLLOUT, 0.0)


def readable(sock: socket.socket, seconds: float) -> bool:
    """Whether ``sock`` has something to read (or has ended) within ``seconds``, asleep
    in the kernel meanwhile: no CPU is spent on the wait."""
    return _poll(sock, select.POLLIN, seconds)


def _poll(sock: socket.socket, event: int, seconds: float) -> bool:
    p = select.poll()
    try:
        p.register(sock, event)
        return bool(p.poll(max(0, round(seconds * 1000))))
    except (OSError, ValueError):  # (closed under us: the read or write says how)
        return True


def ready(read: list[int], write: list[int], seconds: float | None) -> tuple[set[int], set[int]]:
    """``select()`` by a poll, for descriptors of any number: of ``read``, those with
    something to read (or ended), and of ``write``, those with room, within ``seconds``
    (None: no bound), asleep meanwhile. A descriptor closed meanwhile is taken as ready
    (its read or write says how); raises ValueError for one that is no descriptor (-1)."""
    p = select.poll()
    events: dict[int, int] = {}
    for fd in read:
        events[fd] = events.get(fd, 0) | select.POLLIN
    for fd in write:
        events[fd] = events.get(fd, 0) | select.POLLOUT
    for fd, ev in events.items():
        p.register(fd, ev)
    ms = -1 if seconds is None else max(0, round(seconds * 1000))
    can_read: set[int] = set()
    can_write: set[int] = set()
    done = select.POLLERR | select.POLLHUP | select.POLLNVAL
    for fd, ev in p.poll(ms):
        if ev & (select.POLLIN | done) and events[fd] & select.POLLIN:
            can_read.add(fd)
        if ev & (select.POLLOUT | done) and events[fd] & select.POLLOUT:
            can_write.add(fd)
    return can_read, can_write
