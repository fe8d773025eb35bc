"""worker/unread.py's writer: bytes left unsent as it ends are written on, not left.

A writer ends when it finds nothing unsent; until it has said so (`_writing`), a send
that leaves bytes unsent finds a writer there and starts none. Such bytes stayed with
no one to write them: the client never got that answer whole, and the replica, which
reads no more of a client with answers unsent (intake.py's `_stick`), never its calls.
The window is a few bytecodes wide; the test sends in it from the writer's own thread.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Result
from polybus.worker import unread

BIG = bytes(8 << 20)  # more than both sockets' buffers hold


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair()
    replica, client = Channel(a, Codec(), "client"), Channel(b, Codec(), "replica")
    try:
        yield replica, client
    finally:
        replica.close()
        client.close()


def test_bytes_left_unsent_as_the_writer_ends_are_written_on(
        pair: tuple[Channel, Channel], monkeypatch: pytest.MonkeyPatch) -> None:
    replica, client = pair
    sent_late = threading.Event()
    real = unread._write_until_done

    def write_then_send(ch: Channel) -> None:
        real(ch)  # (all written: it ends)
        if not sent_late.is_set():  # another answer, before this writer has said it ended
            sent_late.set()
            unread.send(ch, Result(2, BIG))

    monkeypatch.setattr(unread, "_write_until_done", write_then_send)
    told = threading.Event()
    replica.on_caught_up = lambda ch: told.set()
    unread.send(replica, Result(1, BIG))
    assert replica.unsent  # (the client reads nothing yet: a writer writes on)
    first = next_message(client, limit=10)
    assert isinstance(first, Result) and first.id == 1 and first.value == BIG
    assert sent_late.wait(10)
    second = next_message(client, limit=10)
    assert isinstance(second, Result) and second.id == 2 and second.value == BIG
    assert told.wait(10) and not unread.behind(replica)
