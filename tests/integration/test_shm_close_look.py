"""The looks a reader takes at an shm channel's ring (``buffered``, ``ring_ready``,
``spin``, ``take_soon``) on a channel closed meanwhile (by another thread: a client's
reader dropping a replica it found lost, a replica stopping) say there is nothing in
the ring, or ConnectionLostError, as the channel's other reads do; never the
ValueError of the ring's memory unmapped under them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from polybus.errors import ConnectionLostError
from polybus.transport import ring as ring_mod
from polybus.transport import shm
from polybus.transport.shm import ShmChannel, spin
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Put

pytestmark = pytest.mark.skipif(not ring_mod.supported(), reason="the ring needs x86-64")


@pytest.fixture
def pair() -> Iterator[tuple[ShmChannel, ShmChannel]]:
    """A pair whose reader has its peer's ring (a first frame taken)."""
    a, b = socket.socketpair(socket.AF_UNIX)
    tx, rx = ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")
    try:
        tx.send(Call(0, "f", [1]))
        got: list[Message] = []
        while not got:
            got.extend(rx.receive())
        yield tx, rx
    finally:
        tx.close()
        rx.close()


def test_a_closed_channel_has_nothing_in_its_ring(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    tx.send(Call(1, "f", [2]))  # (waiting in the ring as it closes)
    rx.close()
    assert not rx.buffered() and not rx.ring_ready()


def test_a_spin_over_a_channel_closed_meanwhile(
        pair: tuple[ShmChannel, ShmChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    tx, rx = pair
    real = shm.spin_until

    def spin_while_closed(look: Any, seconds: float) -> Any:
        rx.close()  # what the other thread does meanwhile
        return real(look, seconds)

    monkeypatch.setattr(shm, "spin_until", spin_while_closed)
    tx.send(Call(1, "f", [2]))
    assert spin([rx], 0.001) == []


def test_a_take_soon_on_a_channel_closed_meanwhile(
        pair: tuple[ShmChannel, ShmChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    tx, rx = pair
    real = rx._take_plain

    def take_while_closed(r: Any) -> Message | None:
        msg = real(r)  # (None: a frame with a segment's table is the decoder's to read)
        rx.close()  # what the other thread does meanwhile
        return msg

    monkeypatch.setattr(rx, "_take_plain", take_while_closed)
    tx.send(Put("k-take-soon", np.arange(1 << 16, dtype=np.float64)))  # by segment
    with pytest.raises(ConnectionLostError):
        rx.take_soon(1.0)
