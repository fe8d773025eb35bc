"""Waiting for a peer's next message in tests that talk to a worker or registry directly,
and a peer written by hand for tests that talk to a client directly.

``next_message(ch)`` waits for ``ch`` to have something to read (asleep in the kernel,
`Channel.wait_readable`), until a message comes, the peer closes the connection, or
``limit`` seconds pass: a test waits for what it needs, not for time, and spends no CPU
on the wait (the worker it waits for needs it on a loaded machine).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from polybus.errors import ConnectionLostError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import authenticate
from polybus.wire.codec import Codec
from polybus.wire.messages import Message

__all__ = ["next_message", "serve_one"]

T = TypeVar("T")


def next_message(ch: Channel, limit: float = 3.0, closed: T | None = None) -> Message | T | None:
    """The next message on ``ch`` within ``limit`` seconds; if the peer closes the
    connection first, the message that came with the close, else ``closed``; None if
    nothing came."""
    deadline = time.monotonic() + limit
    while (msg := ch.next_message()) is None:  # (one already read: taken at once)
        left = deadline - time.monotonic()
        if left <= 0 or not ch.wait_readable(left):
            return None
        try:
            ch.fill(wait=False)
        except ConnectionLostError:
            msg = ch.next_message()
            return msg if msg is not None else closed
    return msg


def serve_one(listener: socket.socket, token: bytes, held: list[Channel],
              serve: Callable[[Channel], None], limit: float = 15.0) -> threading.Thread:
    """A replica by hand: a thread that accepts one connection on ``listener``, takes its
    handshake with ``token`` (within ``limit`` seconds), adds its channel to ``held``
    (for the test to close) and runs ``serve`` on it."""
    def run() -> None:
        sock, peer = listener.accept()
        ch = authenticate(sock, peer, token, Codec(), limit)
        held.append(ch)
        serve(ch)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t
