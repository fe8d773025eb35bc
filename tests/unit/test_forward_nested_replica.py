"""A replica holds a call for the forwarded values named inside its list and map
arguments (``Ref("fwd", key)`` among the items of an argument ``Call.inside`` marks),
as for those it names as arguments of their own, and puts each value in its place.

What a client (this one or a foreign one) may send: protocol.md, "Operands inside
arguments" and "Forwarding".
"""

from __future__ import annotations

import numpy as np

from polybus.testing.reading import MessageReader
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Deliver, Fail, Put, Result
from polybus.worker.cache import FORWARDED, OperandCache, resolve
from polybus.worker.runtime import WorkerRuntime

_next = MessageReader(within=5.0).next


def _held_soon(rt: WorkerRuntime, n: int) -> None:
    """Until ``rt`` holds ``n`` calls for forwarded values (5 s at most)."""
    import time

    deadline = time.monotonic() + 5.0
    while rt.forwarding.held_calls() != n:
        assert time.monotonic() < deadline, rt.forwarding.held_calls()
        time.sleep(0.005)


def test_a_forwarded_value_inside_a_marked_argument_makes_the_call_wait() -> None:
    cache = OperandCache()
    cache.put("op1", np.arange(3.0))
    call = Call(1, "f", [[Ref("op", "op1"), {"a": [Ref("fwd", "k1")]}], 5], inside=[0])
    got = resolve(cache, call)
    assert got is not None and got is not FORWARDED and got.kind == "forwarded"
    assert got.nested == [((0, 1, "a", 0), "k1")]  # (its place, and its key)
    assert type(call.args[0][0]) is np.ndarray  # the operand beside it resolved
    # Unmarked, nothing inside is looked at (as for operands)
    assert resolve(cache, Call(2, "f", [[Ref("fwd", "k1")]])) is None


def test_a_call_is_held_until_every_value_inside_and_outside_has_come(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    x = np.arange(6.0)
    echo_peer.send(Deliver("n.1.0", True, x))  # (a value before its call: the usual order)
    echo_peer.send(Call(1, "echo", [
        [1, Ref("fwd", "n.1.0"), {"a": Ref("fwd", "n.1.1"), "b": [[Ref("fwd", "n.1.0")]]}],
        Ref("fwd", "n.1.2"), "plain", {"z": [Ref("fwd", "n.1.1")]}], inside=[0, 3]))
    _held_soon(echo_worker, 1)
    echo_peer.send(Deliver("n.1.1", True, "two"))
    echo_peer.send(Call(2, "echo", [0]))  # (read after the Deliver: the call still waits)
    assert _next(echo_peer) == Result(2, [0])
    assert echo_worker.forwarding.held_calls() == 1
    echo_peer.send(Deliver("n.1.2", True, 3))
    got = _next(echo_peer)
    assert isinstance(got, Result) and got.id == 1, got
    outer, three, plain, last = got.value
    assert outer[0] == 1 and np.array_equal(outer[1], x)
    assert outer[2]["a"] == "two" and np.array_equal(outer[2]["b"][0][0], x)
    assert (three, plain, last) == (3, "plain", {"z": ["two"]})
    assert echo_worker.forwarding.held_calls() == 0


def test_a_forwarded_value_inside_a_keyword_argument_is_found() -> None:
    cache = OperandCache()
    call = Call(3, "f", [1], {"kw": {"z": [Ref("fwd", "k")]}}, inside=["kw"])
    got = resolve(cache, call)
    assert got is not None and got.nested == [(("kw", "z", 0), "k")]  # type: ignore[union-attr]


def test_a_failed_value_inside_fails_the_call_with_its_type(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    echo_peer.send(Call(1, "echo", [[Ref("fwd", "a"), Ref("fwd", "b")]], inside=[0]))
    echo_peer.send(Deliver("a", False, ["ValueError", "bad a", "tb"]))
    got = _next(echo_peer)
    assert isinstance(got, Fail) and got.id == 1 and got.type == "ValueError", got
    assert got.message.startswith("an upstream call failed: ")
    assert echo_worker.forwarding.held_calls() == 0


def test_an_operand_and_a_forwarded_value_in_one_list(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    b = np.arange(4.0)
    echo_peer.send(Put("opb", b))
    echo_peer.send(Call(1, "echo", [[Ref("op", "opb"), Ref("fwd", "v")]], inside=[0]))
    echo_peer.send(Deliver("v", True, 7))
    got = _next(echo_peer)
    assert isinstance(got, Result) and got.id == 1, got
    assert np.array_equal(got.value[0][0], b) and got.value[0][1] == 7


def test_a_forwarded_value_deeper_than_the_bound_is_not_looked_for() -> None:
    from polybus.wire.values import INSIDE_DEPTH

    deep: list[object] = [Ref("fwd", "k")]
    for _ in range(INSIDE_DEPTH):
        deep = [deep]
    assert resolve(OperandCache(), Call(1, "f", [deep], inside=[0])) is None
