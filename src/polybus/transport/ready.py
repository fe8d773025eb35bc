"""Whether a socket has room to write, or something to read, by a ``poll`` (channel.py)."""

from __future__ import annotations

import select
import socket

__all__ = ["readable", "writable"]


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
