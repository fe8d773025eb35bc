"""A send on an shm channel that is closed, or closed by another thread while the send
takes its segments, fails as any send on a closed connection does (ConnectionLostError)
and leaves no segment behind: not a memfd of its own, not a hold on the process's
shared segment for an operand, nor a mapping."""

from __future__ import annotations

import gc
import socket
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from polybus.errors import ConnectionLostError
from polybus.testing.conformance import memfd_mappings
from polybus.transport import shmseg
from polybus.transport.shm import ShmChannel
from polybus.transport.shmshare import Shelf, shelf
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Message, Put

BIG = np.arange(1 << 19, dtype=np.float64)  # 4 MB: by segment


@pytest.fixture
def pair() -> Iterator[tuple[ShmChannel, ShmChannel]]:
    a, b = socket.socketpair(socket.AF_UNIX)
    tx, rx = ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")
    try:
        yield tx, rx
    finally:
        tx.close()
        rx.close()


def _nothing_left() -> None:
    gc.collect()
    assert memfd_mappings() == 0
    assert shelf().held() == 0


SENDS: dict[str, Callable[[ShmChannel], Any]] = {
    "call": lambda ch: ch.send(Call(1, "f", [BIG])),
    "put": lambda ch: ch.send(Put("k-closed-send", BIG)),
    "many": lambda ch: ch.send_many([Call(1, "f", [BIG]), Put("k-closed-many", BIG)]),
}


@pytest.mark.parametrize("send", SENDS.values(), ids=list(SENDS))
def test_a_send_on_a_closed_channel_takes_no_segment(
        pair: tuple[ShmChannel, ShmChannel], send: Callable[[ShmChannel], Any]) -> None:
    """Before, the message's segments were taken (a new memfd, or a hold on the operand's
    shared one) before the send found the channel closed, and never given back."""
    tx, rx = pair
    tx.close()
    with pytest.raises(ConnectionLostError):
        send(tx)
    rx.close()
    _nothing_left()


def test_a_close_while_a_send_copies_into_its_segment(
        pair: tuple[ShmChannel, ShmChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread closes the channel while the send copies an array into its
    segment (numpy lets the GIL go for the copy): the close completes, the send fails
    as on a closed channel, and the segment goes once the copy lets it go. Before, the
    close raised BufferError (the segment was still viewed by the copy) half way,
    leaving the rest of the channel open."""
    tx, rx = pair
    real = shmseg.copy_into

    def copy_while_closed(view: memoryview, data: Any) -> int:
        dest = view[:data.nbytes]  # (the copy's own view of the segment)
        tx.close()  # what the other thread does meanwhile
        return real(dest, data)

    monkeypatch.setattr(shmseg, "copy_into", copy_while_closed)
    with pytest.raises(ConnectionLostError):
        tx.send(Call(1, "f", [BIG]))
    rx.close()
    _nothing_left()


def test_a_close_while_a_send_lends_an_operands_segment(
        pair: tuple[ShmChannel, ShmChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread closes the channel just as the send has the shelf's segment for
    its operand: the hold is given back, and the segment is closed with the last
    channel. Before, the hold was noted after the close had given back the channel's
    holds, so the segment stayed held (and open) for the life of the process."""
    tx, rx = pair
    real = Shelf.lend

    def lend_while_closed(self: Shelf, *args: Any) -> Any:
        s = real(self, *args)
        tx.close()  # what the other thread does meanwhile
        return s

    monkeypatch.setattr(Shelf, "lend", lend_while_closed)
    with pytest.raises(ConnectionLostError):
        tx.send(Put("k-close-lend", BIG))
    rx.close()
    _nothing_left()


def test_the_channel_still_sends_large_buffers_before_it_closes(
        pair: tuple[ShmChannel, ShmChannel]) -> None:
    """(The same sends on an open channel go by segment and arrive.)"""
    tx, rx = pair
    msgs: list[Message] = []
    SENDS["many"](tx)
    while len(msgs) < 2:
        msgs.extend(rx.receive())
    call, put = msgs
    assert isinstance(call, Call) and isinstance(put, Put)
    assert np.array_equal(call.args[0], BIG) and np.array_equal(put.value, BIG)
    assert tx.shm_bytes_sent == 2 * BIG.nbytes


def test_a_close_while_a_release_comes_back(
        pair: tuple[ShmChannel, ShmChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    """The peer's release of an operand's segment is being given back to the shelf as
    another thread closes the last channel that lent it: the segment is closed. Before,
    it was kept among the free ones with no channel left to close them."""
    tx, rx = pair
    tx.send(Put("k-close-release", BIG))
    got: list[Message] = []
    while not got:
        got.extend(rx.receive())
    del got
    gc.collect()  # the receiver lets the value go: its release rides on its next frame
    assert rx._released
    rx.send(Call(1, "f", [1]))
    real = Shelf.give_back

    def give_back_while_closed(self: Shelf, *args: Any, **kw: Any) -> None:
        tx.close()  # what the other thread does meanwhile
        real(self, *args, **kw)

    monkeypatch.setattr(Shelf, "give_back", give_back_while_closed)
    with pytest.raises(ConnectionLostError):  # (closed under the reader, as it reads on)
        while not tx.receive():
            pass
    assert tx.closed
    rx.close()
    _nothing_left()
