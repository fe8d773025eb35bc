"""Each end of a connection says its frame limit in the handshake, and neither frames a
message over the lower of the two. A replica started with a lower ``max_frame`` than its
client's used to take a large call for a malformed frame and close the connection; the
call then ran again on the next replica, cut that one off too, and every later call
found no replica. Now the call fails alone, at the client, and the connection serves on.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from polybus.errors import AuthenticationError, MessageTooLarge
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Fail, Message, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"frame-limits-token-0123456789abc"
MIB = 1 << 20


@pytest.mark.parametrize("limit", [1, 2047, 2048, 4097, 64 * 1024, MIB, 1_500_000,
                                   (1 << 30) - 1, 1 << 30, (1 << 32) - 1])
def test_a_limit_goes_in_16_bits_rounded_down_within_a_thousandth(limit: int) -> None:
    said = handshake.limit_of(handshake.limit_code(limit))
    assert said is not None and said <= limit and said >= limit * (1 - 1 / 1024)
    assert 0 <= handshake.limit_code(limit) < 1 << 16


def test_a_limit_of_a_power_of_two_is_exact_and_zero_is_not_said() -> None:
    assert handshake.limit_of(handshake.limit_code(1 << 30)) == 1 << 30
    assert handshake.limit_of(0) is None


def test_each_side_learns_the_others_limit() -> None:
    server = handshake.ServerHandshake(TOKEN, MIB)
    client = handshake.ClientHandshake(TOKEN, 1 << 30)
    answer, err = server.check(client.proof(server.hello()))
    assert err is None
    client.verify(answer)
    assert server.peer_limit == 1 << 30 and client.peer_limit == MIB


def test_a_limit_changed_on_the_way_fails_the_handshake() -> None:
    """The limits are inside both MACs: a third party that lowers (or raises) one is
    caught as it would be for a wrong token."""
    server = handshake.ServerHandshake(TOKEN, MIB)
    client = handshake.ClientHandshake(TOKEN, MIB)
    hello = bytearray(server.hello())
    hello[6:8] = handshake.limit_code(1 << 30).to_bytes(2, "little")
    answer, err = server.check(client.proof(bytes(hello)))
    assert isinstance(err, AuthenticationError)
    with pytest.raises(AuthenticationError):
        client.verify(answer)
    assert client.peer_limit is None


def _answer(ch: Channel, msg: Message) -> Message | None:
    ch.send(msg)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = ch.receive()
        if got:
            return got[0]
    return None


def _replica(max_frame: int) -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w", {"echo": lambda x: x, "size": len, "make": lambda n: b"y" * n},
                       TOKEN, options=ServeOptions(pool=1, max_frame=max_frame)).start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def small_replica() -> Iterator[WorkerRuntime]:
    yield from _replica(MIB)


@pytest.fixture
def replica() -> Iterator[WorkerRuntime]:
    yield from _replica(1 << 30)


def test_a_call_over_the_replicas_lower_limit_fails_alone_at_the_client(
        small_replica: WorkerRuntime) -> None:
    codec = Codec()  # (this side's limit: 1 GiB)
    ch = connect(small_replica.address, TOKEN, codec)
    try:
        assert codec.max_frame == MIB
        with pytest.raises(MessageTooLarge, match="over the frame limit of 1048576 bytes"):
            ch.send(Call(1, "size", [b"x" * 2_000_000]))
        assert _answer(ch, Call(2, "echo", [5])) == Result(2, 5)  # served on
        assert _answer(ch, Call(3, "size", [b"x" * 1000])) == Result(3, 1000)
    finally:
        ch.close()


def test_an_answer_over_the_clients_lower_limit_fails_alone_at_the_replica(
        replica: WorkerRuntime) -> None:
    ch = connect(replica.address, TOKEN, Codec(max_frame=MIB))
    try:
        failed = _answer(ch, Call(1, "make", [2_000_000]))
        assert isinstance(failed, Fail) and failed.id == 1, failed
        assert "over the frame limit of 1048576 bytes" in failed.message
        assert _answer(ch, Call(2, "echo", [6])) == Result(2, 6)  # the connection stays
    finally:
        ch.close()
