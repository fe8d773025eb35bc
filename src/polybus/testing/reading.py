"""Reading a peer's messages one at a time in a test, from a real `Channel`.

A `Channel.receive` may bring several messages at once; `MessageReader` keeps those
not asked for yet, per channel, and gives them out in order, waiting a bounded time
for the next (None when none comes: the test then fails on its own assertion, never
hangs).
"""

from __future__ import annotations

import time

from polybus.transport.channel import Channel
from polybus.wire.messages import Message, Ping, Pong

__all__ = ["MessageReader"]


class MessageReader:
    """The next message of each channel, read ahead as `Channel.receive` brings them."""

    def __init__(self, within: float = 5.0) -> None:
        self.within = within
        self._read: dict[Channel, list[Message]] = {}

    def next(self, ch: Channel) -> Message | None:
        """``ch``'s next message, or None if none came within ``within`` seconds."""
        waiting = self._read.setdefault(ch, [])
        deadline = time.monotonic() + self.within
        while not waiting and time.monotonic() < deadline:
            waiting.extend(ch.receive())
        return waiting.pop(0) if waiting else None

    def synced(self, ch: Channel, req: int) -> None:
        """Return once the replica has handled everything ``ch`` sent before: a
        connection's messages are handled in order, and a Ping is answered as it is
        read, so its Pong comes after them (AssertionError if it does not come)."""
        ch.send(Ping(req))
        got = self.next(ch)
        assert isinstance(got, Pong) and got.req == req, got
