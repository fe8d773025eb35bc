"""A replica lets go of held calls, and says when it cannot forward, at once.

Consumer side: a call held for several forwarded values and failed by one of them (an
upstream failure, or a value dropped unclaimed) is answered then; it stayed held for
its other values, with its arguments, until they came (for ever, if they never did).
Producer side: a value it cannot send to the consumer's replica is said to the client
(``Undelivered``), which fails the consumer; it was only logged, and the consumer waited.
"""

from __future__ import annotations

import socket

from polybus.testing.reading import MessageReader
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import (
    Call,
    Cancel,
    Deliver,
    Fail,
    Forward,
    Result,
    Undelivered,
)
from polybus.worker.runtime import WorkerRuntime

_next = MessageReader(within=5.0).next  # (the next message a channel received)


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def test_a_call_failed_by_one_value_lets_go_of_the_others(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    echo_peer.send(Call(1, "echo", [Ref("fwd", "a"), Ref("fwd", "b"), Ref("fwd", "c")]))
    echo_peer.send(Deliver("a", True, 1))
    echo_peer.send(Deliver("b", False, ["ValueError", "bad b", "tb"]))
    got = _next(echo_peer)
    assert isinstance(got, Fail) and got.id == 1 and got.type == "ValueError", got
    assert fwd.held_calls() == 0 and not fwd._held  # not held for c any more
    echo_peer.send(Deliver("c", True, 3))  # c, when it comes, is let go: not kept
    echo_peer.send(Call(2, "echo", [5]))
    assert _next(echo_peer) == Result(2, [5])
    assert not fwd._arrived and fwd.held_calls() == 0


def test_a_call_naming_a_dropped_value_is_held_for_none_of_the_others(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    fwd.arrived_max = 1
    echo_peer.send(Deliver("gone", True, 1))
    echo_peer.send(Deliver("other", True, 2))  # "gone" is dropped unclaimed
    echo_peer.send(Call(1, "echo", [Ref("fwd", "gone"), Ref("fwd", "later")]))
    got = _next(echo_peer)
    assert isinstance(got, Fail) and got.kind == "forward-dropped", got
    assert fwd.held_calls() == 0 and not fwd._held
    echo_peer.send(Deliver("later", True, 3))
    echo_peer.send(Call(2, "echo", [Ref("fwd", "other")]))
    assert _next(echo_peer) == Result(2, [2])
    assert not fwd._arrived


def test_a_value_the_producer_cannot_send_on_is_said_to_the_client(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    to = _closed_port()  # nothing listens there: the connection is refused
    # The Forward first, so it waits for the call's answer (the usual order at a replica
    # is the call first; either way its value is forwarded from there).
    echo_peer.send(Forward(1, "p.1", "k.1.0", to))
    echo_peer.send(Call(1, "echo", [7]))
    got = _next(echo_peer)
    assert isinstance(got, Undelivered) and got.key == "k.1.0" and got.to == to, got
    assert got.message.startswith(f"w could not send the value to {to}: "), got.message
    assert got.type, got
    got = _next(echo_peer)  # answered: the value was delivered nowhere, and is kept here
    assert isinstance(got, Result) and got.id == 1, got
    assert type(got.value) is Ref and got.value.kind == "fwd" and got.value.key == [], got
    # Asked again (the client repairs a Forward that came after the answer), from the store.
    echo_peer.send(Forward(1, "p.1", "k.1.1", to))
    got = _next(echo_peer)
    assert isinstance(got, Undelivered) and got.key == "k.1.1" and got.to == to, got


def test_a_forward_read_after_its_call_was_answered_is_forgotten_on_cancel(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # The client's Forward crossed the answer: the replica answered by value, then read
    # the Forward, and kept it (waiting for an answer already sent) until the client went.
    fwd = echo_worker.forwarding
    echo_peer.send(Call(1, "echo", [7]))
    assert _next(echo_peer) == Result(1, [7])
    echo_peer.send(Forward(1, "p.1", "p.2.0", _closed_port()))
    echo_peer.send(Call(2, "echo", [8]))  # read after the Forward
    assert _next(echo_peer) == Result(2, [8])
    assert len(fwd.targets) == 1  # kept: the call may still have been running
    echo_peer.send(Cancel([1]))  # the client got the value, and sends it on itself
    echo_peer.send(Call(3, "echo", [9]))
    assert _next(echo_peer) == Result(3, [9])
    assert not fwd.targets
