"""testing/peers.py's `next_message`, which the tests that talk to a replica or the
registry directly wait with: a message that comes in many reads, a close, nothing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec
from polybus.wire.messages import Ping, Result


@pytest.fixture
def pair() -> Iterator[tuple[Channel, Channel]]:
    a, b = socket.socketpair()
    here, there = Channel(a, Codec(), "there"), Channel(b, Codec(), "here")
    try:
        yield here, there
    finally:
        here.close()
        there.close()


def test_a_message_larger_than_the_sockets_hold_comes_whole(
        pair: tuple[Channel, Channel]) -> None:
    here, there = pair
    big = bytes(range(256)) * (16 << 10)  # 4 MB: many reads, each waited for
    sender = threading.Thread(target=there.send, args=(Result(1, big),), daemon=True)
    sender.start()
    msg = next_message(here, limit=60)
    sender.join(60)
    assert isinstance(msg, Result) and msg.id == 1 and bytes(msg.value) == big


def test_a_message_that_came_with_the_close_is_given_else_closed(
        pair: tuple[Channel, Channel]) -> None:
    here, there = pair
    there.send(Ping(7))
    there.close()
    assert next_message(here, closed="gone") == Ping(7)
    assert next_message(here, closed="gone") == "gone"


def test_nothing_within_the_limit_is_none(pair: tuple[Channel, Channel]) -> None:
    here, _ = pair
    assert next_message(here, limit=0.05, closed="gone") is None
