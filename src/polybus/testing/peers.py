"""Waiting for a peer's next message in tests that talk to a worker or registry directly.

``next_message(ch)`` reads ``ch`` until a message comes, the peer closes the connection,
or ``limit`` seconds pass, without a sleep: a test waits for what it needs, not for time.
"""

from __future__ import annotations

import time
from typing import TypeVar

from polybus.errors import ConnectionLostError
from polybus.transport.channel import Channel
from polybus.wire.messages import Message

__all__ = ["next_message"]

T = TypeVar("T")


def next_message(ch: Channel, limit: float = 3.0, closed: T | None = None) -> Message | T | None:
    """The next message on ``ch`` within ``limit`` seconds; if the peer closes the
    connection first, the message that came with the close, else ``closed``; None if
    nothing came."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            ch.fill_soon(0.05)
        except ConnectionLostError:
            msg = ch.next_message()
            return msg if msg is not None else closed
        msg = ch.next_message()
        if msg is not None:
            return msg
    return None
