"""A forwarded value over the frame limit the two replicas agreed fails its consumer
alone, as ``MessageTooLarge``, and the connection between the replicas serves on. It was
taken for a peer out of reach: the client was told the producer "could not send the
value", and the producer dropped its connection to the consumer's replica."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polybus.testing.reading import MessageReader
from polybus.token import make_token
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import Call, Fail, Forward, Message, Result, Undelivered
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = make_token()
LIMIT = 1 << 20
_next = MessageReader(within=10.0).next


@pytest.fixture
def stages() -> Iterator[tuple[WorkerRuntime, str, Channel, Channel]]:
    """A producer replica (``make(n)``: n bytes) and a consumer replica (``size``), both
    with a frame limit of `LIMIT`: the producer, the consumer's address, and the
    client's channel to each."""
    options = ServeOptions(pool=1, max_frame=LIMIT)
    producer = WorkerRuntime("a", {"make": lambda n: b"y" * n, "fails": _fails}, TOKEN,
                             options=options).start()
    consumer = WorkerRuntime("b", {"size": len}, TOKEN, options=options).start()
    chans: list[Channel] = []
    try:
        chans.append(connect(producer.address, TOKEN, Codec()))
        chans.append(connect(consumer.address, TOKEN, Codec()))
        yield producer, str(consumer.address), chans[0], chans[1]
    finally:
        for ch in chans:
            ch.close()
        producer.stop()
        consumer.stop()


def _fails(n: int) -> None:
    raise ValueError("x" * n)


def _forwarded(msg: Message | None, cid: int, keys: list[str]) -> None:
    assert isinstance(msg, Result) and msg.id == cid, msg
    assert type(msg.value) is Ref and msg.value.kind == "fwd" and msg.value.key == keys, msg


def _stage(a: Channel, b: Channel, cid: int, n: int, to: str) -> Message | None:
    """``size(make(n))`` forwarded, ids ``cid`` and ``cid + 1``: the producer's first
    message to the client (then the consumer's answer is read only if it was sent)."""
    key = f"c.{cid + 1}.0"
    a.send(Forward(cid, f"c.{cid}", key, to))
    a.send(Call(cid, "make", [n]))
    first = _next(a)
    if isinstance(first, Result):
        _forwarded(first, cid, [key])
        b.send(Call(cid + 1, "size", [Ref("fwd", key)]))
        assert _next(b) == Result(cid + 1, n)
    return first


def test_a_forwarded_value_over_the_limit_fails_its_consumer_and_the_link_stays(
        stages: tuple[WorkerRuntime, str, Channel, Channel]) -> None:
    producer, to, a, b = stages
    assert isinstance(_stage(a, b, 1, 1000, to), Result)  # (the connection is made)
    peer = producer.forwarding._peers[to]
    told = _stage(a, b, 3, 2 * LIMIT, to)
    assert isinstance(told, Undelivered) and told.key == "c.4.0" and told.to == to, told
    assert told.type == "MessageTooLarge"
    assert told.message.startswith(f"the forwarded value cannot be sent on to {to}: message "
                                   f"of "), told.message
    assert f"over the frame limit of {LIMIT} bytes" in told.message
    _forwarded(_next(a), 3, [])  # (the answer: a Ref naming no key delivered)
    assert producer.forwarding._peers[to] is peer and not peer.closed  # not dropped
    assert isinstance(_stage(a, b, 5, 2000, to), Result)  # and the next forward goes on it
    assert producer.forwarding._peers[to] is peer


def test_a_forwarded_failure_over_the_limit_is_cut_to_fit_and_the_link_stays(
        stages: tuple[WorkerRuntime, str, Channel, Channel]) -> None:
    """A producer raising an exception whose message is over the frame limit: its
    ``Deliver`` goes cut to fit (it was refused, said to no one, and left the client to
    send on its "the value it returned cannot be sent"), so the consumer fails with the
    ValueError with nothing sent by the client; its answer to the client is cut too."""
    producer, to, a, b = stages
    assert isinstance(_stage(a, b, 1, 1000, to), Result)  # (the connection is made)
    peer = producer.forwarding._peers[to]
    a.send(Forward(3, "c.3", "c.4.0", to))
    a.send(Call(3, "fails", [2 * LIMIT]))
    told = _next(a)
    assert isinstance(told, Fail) and told.id == 3 and told.type == "ValueError", told
    assert told.message.endswith("more characters cut: the failure did not fit max_frame)")
    b.send(Call(4, "size", [Ref("fwd", "c.4.0")]))  # (answered by the producer's Deliver)
    got = _next(b)
    assert isinstance(got, Fail) and got.id == 4 and got.type == "ValueError", got
    assert got.message.startswith("an upstream call failed: xxxx")
    assert got.message.endswith("more characters cut: the failure did not fit max_frame)")
    assert "more characters cut" in got.traceback  # (its last line, the message again)
    assert producer.forwarding._peers[to] is peer and not peer.closed  # not dropped
    assert isinstance(_stage(a, b, 5, 2000, to), Result)  # and the next forward goes on it
