"""Strangers and bad peers at a live registry (in-process, over loopback TCP).

A bad peer is dropped with a reason (a Goodbye to it, a line in the log), a peer that
says nothing holds no one else up, and the registry answers a good client throughout.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from polybus.registry.service import RegistryService
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.wire.messages import Goodbye, Message, Register, Registered, Replica, Replicas, Resolve

TOKEN = b"registry-token-for-tests-0123456789"


@pytest.fixture
def registry() -> Iterator[RegistryService]:
    with RegistryService(TOKEN, "tcp://127.0.0.1:0") as reg:
        yield reg


def _raw(reg: RegistryService) -> socket.socket:
    return socket.create_connection((reg.address.host, reg.address.port), timeout=3)


def _next(ch: Channel, limit: float = 3.0) -> Message | str | None:
    """The next message within ``limit`` seconds; "closed" if the registry closed the
    connection first; None if nothing came."""
    return next_message(ch, limit, closed="closed")


def _resolves(reg: RegistryService, req: int) -> None:
    """A good client's look-up, answered (its handshake within the client's timeout)."""
    ch = connect(str(reg.address), TOKEN, Codec())
    try:
        ch.send(Resolve(module="m", req=req))
        assert _next(ch) == Replicas([], req)
    finally:
        ch.close()


def test_peers_that_say_nothing_hold_no_one_up(registry: RegistryService) -> None:
    """The registry ran each handshake in its accepting thread: a peer that connected
    and said nothing held every later connection up for the handshake's 5 s timeout,
    and with three such peers a good client's own handshake timed out."""
    silent = [_raw(registry) for _ in range(3)]
    try:
        # Each is greeted while the others have said nothing (one at a time, the second
        # waited out the first's timeout, and its read here the socket's 3 s).
        for s in silent:
            assert len(s.recv(handshake.HELLO_SIZE)) == handshake.HELLO_SIZE
        _resolves(registry, 1)
    finally:
        for s in silent:
            s.close()


def _frame(header: bytes) -> bytes:
    return struct.pack("<IHHI", 8 + len(header), 0, 0, len(header)) + header


@pytest.mark.parametrize(("header", "answer", "logged"), [
    (_frame(b"\x91\x1a"), "closed", None),  # Goodbye(): the peer leaves, unanswered
    (_frame(b"\x94\x01\x01\xa4echo\x90"), "does not take Call", "does not take Call"),
    # A Call, a Put and a CallBatch whose value has a map as a dict key (undecodable
    # here: wire/undecodable.py) are named as sent, not as "Refusal" or "RefusedRows",
    # this side's own classes for them.
    (_frame(b"\x95\x01\x01\xa4echo\x91\x81\x81\x01\x02\x03\xc0"), "does not take Call messages",
     "does not take Call messages"),
    (_frame(b"\x94\x0c\xa1k\x81\x81\x01\x02\x03\x90"), "does not take Put messages",
     "does not take Put messages"),
    (_frame(b"\x94\x11\x02\xa4echo\x91\x91\x81\x81\x01\x02\x03"),
     "does not take CallBatch messages", "does not take CallBatch messages"),
    (_frame(b"\x94\x01\x01\xa4echo\x91" + b"\x91" * 200_000 + b"\xc0"), "nested too deeply", "nested too deeply"),
], ids=["goodbye", "not-taken", "undecodable-call", "undecodable-put",
        "undecodable-callbatch", "nested"])
def test_a_peer_is_answered_and_dropped_for_what_the_registry_does_not_take(
        registry: RegistryService, caplog: pytest.LogCaptureFixture,
        header: bytes, answer: str, logged: str | None) -> None:
    """A Goodbye closes the connection quietly (the registry answered it with a Goodbye
    of its own, "does not take Goodbye messages", and kept it open); a message it does
    not take is logged, answered with Goodbye and the connection closed (it stayed
    open, unlogged); input nested too deeply is a protocol error (its thread died with
    a bare RecursionError)."""
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    ch = connect(str(registry.address), TOKEN, Codec())
    try:
        with ch.send_lock:
            ch._send_pieces([header], None)
        got = _next(ch)
        if answer == "closed":
            assert got == "closed"
        else:
            assert isinstance(got, Goodbye) and answer in got.reason
            assert _next(ch) == "closed"
    finally:
        ch.close()
    _resolves(registry, 2)
    if logged is not None:
        assert logged in caplog.text
    assert "Traceback" not in caplog.text


def test_a_peer_gone_in_the_middle_of_a_frame_is_logged(
        registry: RegistryService, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    s = _raw(registry)
    hs = handshake.ClientHandshake(TOKEN)
    s.sendall(hs.proof(s.recv(handshake.HELLO_SIZE)))
    hs.verify(s.recv(handshake.ANSWER_SIZE))
    s.sendall(struct.pack("<IHHI", 1000, 0, 0, 992) + b"\x91" * 10)
    s.close()  # (what was sent before is read before the end: no wait needed)
    deadline = time.monotonic() + 3
    while "middle of a frame" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "went in the middle of a frame (22 of its 1004 bytes received; dropped)" in caplog.text
    _resolves(registry, 3)


def test_close_ends_the_handshakes_under_way(caplog: pytest.LogCaptureFixture) -> None:
    """A connection in its handshake when the registry closes is closed with it: its
    thread held the socket open (and the peer waiting) until the handshake's 5 s
    timeout, then logged it as refused."""
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    reg = RegistryService(TOKEN, "tcp://127.0.0.1:0")
    s = _raw(reg)
    try:
        assert len(s.recv(handshake.HELLO_SIZE)) == handshake.HELLO_SIZE  # in its handshake
        reg.close()
        assert s.recv(1) == b""  # closed by the registry (the socket's timeout is 3 s)
    finally:
        s.close()
        reg.close()
    assert "refused" not in caplog.text


@pytest.mark.parametrize("speed", [float("inf"), float("nan"), 0.0, -1.0, 2.0])
def test_a_replica_whose_speed_is_out_of_range_is_refused(
        registry: RegistryService, speed: float) -> None:
    """A replica's speed is in (0, 1], as a configuration's `speed=` is. The registry
    took any float and handed it to every client: a replica registered with speed inf
    made a client balancing by `steal` fail in its migration step (`ValueError: cannot
    convert float NaN to integer`, blamed on the program's own line). Now such a
    Register is answered Registered(false) saying why, and no client is told of it."""
    ch = connect(str(registry.address), TOKEN, Codec())
    try:
        ch.send(Register(Replica("odd", "m", "tcp://127.0.0.1:9", ["f"], speed)))
        got = _next(ch)
        assert isinstance(got, Registered) and not got.ok, got
        assert "speed" in got.reason and "0 < speed <= 1" in got.reason, got.reason
        ch.send(Register(Replica("fine", "m", "tcp://127.0.0.1:9", ["f"], 0.5)))
        assert _next(ch) == Registered(True)
        ch.send(Resolve(module="m", req=4))
        found = _next(ch)
        assert isinstance(found, Replicas) and [r.name for r in found.replicas] == ["fine"]
    finally:
        ch.close()
