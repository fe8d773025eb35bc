"""Over shm, a large argument that cannot change (a frozen array, bytes) is read by the
receiver straight from the sender's memory once the receiver has proved it may
(transport/cma.py); anything else, or a peer that may not read, goes by segment.
Both ends live in this process here: a process may always read itself."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.transport import cma
from polybus.transport.shm import THRESHOLD, ShmChannel
from polybus.wire.codec import Codec, OutOfBand
from polybus.wire.messages import Call, Result

pytestmark = pytest.mark.skipif(not cma.supported(), reason="no process_vm_readv here")

BIG = THRESHOLD // 8 * 2  # float64 elements: twice the segment threshold


def _frozen(n: int = BIG, start: float = 0.0) -> Any:
    a = np.arange(start, start + n, dtype=np.float64)
    a.flags.writeable = False
    return a


@pytest.fixture
def pair() -> Iterator[tuple[ShmChannel, ShmChannel]]:
    a, b = socket.socketpair(socket.AF_UNIX)
    tx, rx = ShmChannel(a, Codec(), "replica"), ShmChannel(b, Codec(), "client")
    try:
        yield tx, rx
    finally:
        tx.close()
        rx.close()


def _one(ch: ShmChannel) -> Any:
    got: list[Any] = []
    while not got:
        got.extend(ch.receive())
    assert len(got) == 1
    return got[0]


def _round(tx: ShmChannel, rx: ShmChannel, args: list[Any], rid: int = 1) -> Any:
    """Send a call tx -> rx and its answer back; the call as rx got it."""
    tx.send(Call(rid, "f", args))
    call = _one(rx)
    rx.send(Result(rid, 0))
    assert _one(tx) == Result(rid, 0)
    return call


def test_frozen_arrays_and_bytes_are_lent_once_proved(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    first = _round(tx, rx, [_frozen()])  # carries the advert: by segment still
    assert np.array_equal(first.args[0], _frozen()) and tx._lender.lent == 0
    assert tx._lender.lending  # the answer brought the acknowledgement
    raw = bytes(range(256)) * (THRESHOLD // 128)
    for i in range(3):
        call = _round(tx, rx, [_frozen(start=i), OutOfBand(raw)], rid=2 + i)  # (as a client
        # sends large bytes)
        assert np.array_equal(call.args[0], _frozen(start=i)) and call.args[1] == raw
    assert tx._lender.lent == 6 and rx._lender.taken == 6
    assert tx._lender.held() == 0  # each released with the next frame back
    assert rx.shm_bytes_received >= 6 * BIG * 8  # counted as bytes passed by shm


def test_what_could_change_goes_by_segment(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    _round(tx, rx, [_frozen()])
    writable = np.arange(BIG, dtype=np.float64)
    m = np.arange(4 * BIG, dtype=np.float64).reshape(BIG, 4)
    m.flags.writeable = False
    view_of_writable = writable[:]
    view_of_writable.flags.writeable = False  # read-only, but its base is not
    call = _round(tx, rx, [writable, m[:, :2], view_of_writable], rid=2)
    assert np.array_equal(call.args[0], writable) and np.array_equal(call.args[1], m[:, :2])
    assert np.array_equal(call.args[2], writable)
    assert tx._lender.lent == 0


def test_small_arrays_are_never_lent(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    _round(tx, rx, [_frozen()])
    call = _round(tx, rx, [_frozen(1000)], rid=2)
    assert np.array_equal(call.args[0], _frozen(1000)) and tx._lender.lent == 0


def test_a_peer_that_may_not_read_gets_segments(pair: tuple[ShmChannel, ShmChannel],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(pid: int, addr: int, out: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(cma, "_read", refused)  # as Yama's ptrace_scope 1 would
    tx, rx = pair
    for i in range(3):
        call = _round(tx, rx, [_frozen(start=i)], rid=1 + i)
        assert np.array_equal(call.args[0], _frozen(start=i))
    assert not tx._lender.lending and tx._lender.lent == 0


def test_a_reference_never_agreed_is_refused(pair: tuple[ShmChannel, ShmChannel],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(pid: int, addr: int, out: Any) -> None:
        raise PermissionError(1, "Operation not permitted")

    tx, rx = pair
    monkeypatch.setattr(cma, "_read", refused)
    _round(tx, rx, [_frozen()])
    tx._lender.lending = True  # a peer that lends without the acknowledgement
    tx.send(Call(2, "f", [_frozen()]))
    with pytest.raises(ProtocolError, match="not set up"):
        _one(rx)


def test_an_address_the_sender_does_not_have_is_a_protocol_error(
        pair: tuple[ShmChannel, ShmChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    tx, rx = pair
    _round(tx, rx, [_frozen()])
    monkeypatch.setattr(tx._lender, "lend", lambda buf: 4096)  # unmapped in any process
    tx.send(Call(2, "f", [_frozen()]))
    with pytest.raises(ProtocolError, match="cannot read"):
        _one(rx)


def test_a_sender_that_went_is_not_read_from(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    _round(tx, rx, [_frozen()])
    tx.send(Call(2, "f", [_frozen()]))
    tx.close()  # its hold on what it lent goes with it
    with pytest.raises(ConnectionLostError):
        _one(rx)


def test_malformed_advert_is_refused(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    tx._lender.notes[:] = [b"short", b""]
    tx.send(Call(1, "f", [1]))
    with pytest.raises(ProtocolError, match="advert"):
        _one(rx)


def test_an_acknowledgement_of_nothing_is_refused(pair: tuple[ShmChannel, ShmChannel],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    tx, rx = pair
    rx._lender._probe = None  # as if rx had never advertised
    tx._lender.notes[:] = [b"", b"\1"]
    tx.send(Call(1, "f", [1]))
    with pytest.raises(ProtocolError, match="acknowledgement"):
        _one(rx)


def test_what_is_held_unreleased_is_bounded(pair: tuple[ShmChannel, ShmChannel]) -> None:
    tx, rx = pair
    _round(tx, rx, [_frozen()])
    tx._lender.max_bytes = 3 * BIG * 8  # three lent buffers, released by no answer yet
    for i in range(5):
        tx.send(Call(2 + i, "f", [_frozen(start=i)]))
    calls: list[Any] = []
    while len(calls) < 5:
        calls.extend(rx.receive())
    for i, call in enumerate(calls):
        assert np.array_equal(call.args[0], _frozen(start=i))
    del calls, call
    assert tx._lender.lent == 3 and tx._lender.held() == 3  # the other two by segment
    rx.send(Result(9, 0))
    assert _one(tx) == Result(9, 0)
    assert tx._lender.held() == 0
