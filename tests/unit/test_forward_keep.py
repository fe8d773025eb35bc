"""A producer's replica keeps a value for a consumer still at the client (``Keep``).

The client sends ``Keep(id, pkey, key)`` when a call naming the unanswered promise of
call ``id`` waits at the client to be placed (an ``async-demand`` backlog). The replica
answers ``Result(id, Ref("fwd", []))`` and pins the value (worker/fwdstore.py) until the
``Forward`` of ``key`` comes; with no room to pin it, it answers by value as if nothing
had been asked. A ``Forward`` of a value that was kept and is gone fails its consumer
at once: it registered a request for an answer given long ago, and the consumer waited
for ever.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from polybus.testing.reading import MessageReader
from polybus.transport.channel import Channel
from polybus.wire.codec import Ref
from polybus.wire.messages import Batch, Call, Fail, Fetch, Fetched, Forward, Keep, Message, Result
from polybus.worker.fwdstore import ForwardStore
from polybus.worker.runtime import WorkerRuntime

_next = MessageReader(within=5.0).next  # (the next message a channel received)


def _results(ch: Channel, n: int) -> dict[int, Result]:
    """The next ``n`` answers on ``ch`` by id, those written together in a Batch too (a
    quick call's answer corked with more calls waiting goes with the next one written:
    worker/replies.py)."""
    got: dict[int, Result] = {}
    while len(got) < n:
        msg = _next(ch)
        for m in (msg.items if isinstance(msg, Batch) else [msg]):
            assert isinstance(m, Result), m
            got[m.id] = m
    return got


def _forwarded(msg: Message | None, cid: int, keys: list[str]) -> None:
    assert isinstance(msg, Result) and msg.id == cid, msg
    assert type(msg.value) is Ref and msg.value.kind == "fwd" and msg.value.key == keys, msg


def _fetch(ch: Channel, pkey: str, req: int) -> Any:
    ch.send(Fetch(pkey, req))
    got = _next(ch)
    assert isinstance(got, Fetched) and got.req == req, got
    return got.value if got.ok else KeyError(pkey)


# -- the store ------------------------------------------------------------------------
def test_a_pinned_value_is_out_of_the_lrus_reach_until_its_forwards_take_it() -> None:
    store = ForwardStore(capacity=1000)
    user = object()
    a = np.zeros(50)  # 400 bytes
    assert store.pin("p", a, user, {"k1", "k2"}) and store.pinned == 1
    assert not a.flags.writeable  # (held as any kept value: read-only)
    for i in range(5):  # LRU puts that would have evicted it
        store.put(f"q{i}", np.zeros(50), user)
    assert store.get("p") is a and "q4" in store and "q0" not in store
    assert store.take("p", "k1") is a and store.pinned == 1  # k2 still to come
    assert store.take("p", "k2") is a and store.pinned == 0 and "p" in store  # now LRU
    store.put("r", np.zeros(100), user)  # 800 bytes: p is the oldest, and goes
    assert "p" not in store and store.had("p") and store.had("r") and not store.had("x")


def test_pins_count_against_the_store_and_one_without_room_is_not_kept() -> None:
    store = ForwardStore(capacity=1000)
    user = object()
    store.put("old", np.zeros(50), user)  # 400 bytes in the LRU
    store.put("new", np.zeros(50), user)  # 400 more
    assert store.pin("p1", np.zeros(50), user, {"k"})  # 400: the LRU's share falls to 600
    assert "old" not in store and "new" in store  # (evicted for it)
    assert not store.pin("p2", np.zeros(100), user, {"k"})  # 400 + 800 > 1000
    assert "p2" not in store and not store.had("p2")
    assert store.pin("p3", np.zeros(75), user, {"k"}) and store.pinned_bytes == 1000
    assert "new" in store  # (as the operand cache does, the LRU keeps one value alone)


def test_a_keep_after_the_answer_pins_the_kept_value() -> None:
    store = ForwardStore(capacity=1000)
    user = object()
    v = np.zeros(10)
    store.put("p", v, user)
    assert store.keep("p", "k") and store.pinned == 1
    assert not store.keep("gone", "k")
    store.release(user)  # the client went: its pins go with it
    assert store.pinned == 0 and store.pinned_bytes == 0 and "p" not in store


# -- the replica ------------------------------------------------------------------------
def test_a_kept_answer_is_a_ref_then_fetched_and_forwarded(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)  # the next stage is this replica: no socket
    x = np.arange(10.0)
    echo_peer.send(Keep(1, "c.1", "c.2.0"))
    echo_peer.send(Call(1, "echo", [x]))
    _forwarded(_next(echo_peer), 1, [])
    assert fwd.kept.pinned == 1 and not fwd.targets
    assert np.array_equal(_fetch(echo_peer, "c.1", 7)[0], x)  # the program asks for it
    echo_peer.send(Forward(1, "c.1", "c.2.0", me))  # the consumer is placed
    echo_peer.send(Call(2, "echo", [Ref("fwd", "c.2.0")]))
    got = _next(echo_peer)
    assert isinstance(got, Result) and np.array_equal(got.value[0][0], x), got
    assert fwd.kept.pinned == 0 and "c.1" in fwd.kept  # unpinned, kept as any forwarded answer


def test_a_consumer_placed_before_the_answer_gets_it_sent_not_pinned(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)
    echo_peer.send(Keep(1, "c.1", "c.2.0"))
    echo_peer.send(Forward(1, "c.1", "c.2.0", me))
    echo_peer.send(Call(1, "echo", [5]))
    _forwarded(_next(echo_peer), 1, ["c.2.0"])
    assert fwd.kept.pinned == 0 and "c.1" in fwd.kept


def test_no_room_to_keep_it_answers_by_value(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    fwd.kept = ForwardStore(capacity=1000)
    x = np.arange(1000.0)  # 8 kB
    echo_peer.send(Keep(1, "c.1", "c.2.0"))
    echo_peer.send(Call(1, "echo", [x]))
    got = _next(echo_peer)
    assert isinstance(got, Result) and np.array_equal(got.value[0], x), got
    assert "c.1" not in fwd.kept and not fwd.targets


def test_a_failing_producer_keeps_nothing(echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    fwd = echo_worker.forwarding
    echo_peer.send(Keep(1, "c.1", "c.2.0"))
    echo_peer.send(Call(1, "nowhere", [5]))  # answered Fail: no such interface
    got = _next(echo_peer)
    assert isinstance(got, Fail) and got.id == 1, got
    echo_peer.send(Keep(2, "c.3", "c.4.0"))
    echo_peer.send(Call(2, "echo", [2]))
    _forwarded(_next(echo_peer), 2, [])
    assert fwd.kept.pinned == 1 and "c.1" not in fwd.kept


def test_a_forward_of_a_value_gone_from_the_store_fails_its_consumer(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    # It was taken for a call not answered yet: the consumer was held for ever.
    fwd = echo_worker.forwarding
    me = str(echo_worker.address)
    echo_peer.send(Forward(1, "c.1", "c.2.0", me))
    echo_peer.send(Call(1, "echo", [5]))
    _forwarded(_next(echo_peer), 1, ["c.2.0"])
    fwd.kept.clear()  # (evicted)
    echo_peer.send(Forward(1, "c.1", "c.3.0", me))  # another consumer, placed later
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))
    got = _next(echo_peer)
    assert isinstance(got, Fail) and got.id == 3 and got.type == "LookupError", got
    assert "evicted" in got.message and not fwd.targets


def test_a_released_keep_unpins_the_value_or_forgets_the_request(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    """A consumer that ends at the client unplaced (given up, its replicas gone) has its
    producer's replica let go of what it kept for it: pinned for no one, it was out of
    the LRU's reach until the client went, and shrank the store for every other value."""
    fwd = echo_worker.forwarding
    echo_peer.send(Keep(1, "c.1", "c.2.0"))
    echo_peer.send(Call(1, "echo", [np.arange(10.0)]))
    _forwarded(_next(echo_peer), 1, [])
    assert fwd.kept.pinned == 1
    echo_peer.send(Keep(1, "c.1", "c.2.0", release=True))
    echo_peer.send(Keep(2, "c.3", "c.4.0"))  # before its call: a request, released
    echo_peer.send(Keep(2, "c.3", "c.4.0", release=True))
    echo_peer.send(Call(2, "echo", [7]))
    got = _next(echo_peer)
    assert isinstance(got, Result) and got.id == 2 and got.value == [7], got  # by value
    assert fwd.kept.pinned == 0 and fwd.kept.pinned_bytes == 0
    assert "c.1" in fwd.kept and not fwd.targets  # (kept as any forwarded answer, in the LRU)


def test_no_room_to_keep_it_for_one_consumer_answers_by_value_though_another_is_placed(
        echo_worker: WorkerRuntime, echo_peer: Channel) -> None:
    """It answered Ref and left the value in the LRU, where the consumer still at the
    client could find it evicted: now the answer goes by value (the client sends it on),
    and the placed consumer is sent it from here too (a value delivered twice is taken
    once)."""
    fwd = echo_worker.forwarding
    fwd.kept = ForwardStore(capacity=1000)
    me = str(echo_worker.address)
    x = np.arange(1000.0)  # 8 kB: no room to pin
    echo_peer.send(Keep(1, "c.1", "c.2.0"))
    echo_peer.send(Forward(1, "c.1", "c.3.0", me))
    echo_peer.send(Call(1, "echo", [x]))
    echo_peer.send(Call(3, "echo", [Ref("fwd", "c.3.0")]))  # the placed consumer
    got = _results(echo_peer, 2)
    assert np.array_equal(got[1].value[0], x), got  # the producer's answer: the value
    assert np.array_equal(got[3].value[0][0], x), got  # the consumer had it from here
    assert fwd.kept.pinned == 0 and not fwd.targets


def test_a_kept_value_over_the_frame_limit_is_fetched_as_an_error_that_says_so() -> None:
    """A Fetch whose value cannot go back (over the replica's max_frame) was answered by
    nothing (the failed send taken for a gone client): the client waited out the fetch
    timeout and then said "gone or evicted". Now the Fetched says why."""
    from polybus.token import make_token
    from polybus.transport.endpoints import connect
    from polybus.wire.codec import Codec
    from polybus.worker.options import ServeOptions

    token = make_token()
    rt = WorkerRuntime("w", {"grow": lambda n: np.zeros(n)}, token,
                       options=ServeOptions(max_frame=1 << 20)).start()
    ch = connect(rt.address, token, Codec())
    try:
        ch.send(Keep(1, "c.1", "c.2.0"))
        ch.send(Call(1, "grow", [200_000]))  # 1.6 MB, kept there: the answer is a Ref
        _forwarded(_next(ch), 1, [])
        ch.send(Fetch("c.1", 7))
        got = _next(ch)
        assert isinstance(got, Fetched) and got.req == 7 and not got.ok, got
        kind, why = got.value
        assert kind == "MessageTooLarge" and "over the frame limit" in why, got
        ch.send(Call(2, "grow", [3]))  # and it serves on
        got = _next(ch)
        assert isinstance(got, Result) and got.id == 2 and list(got.value) == [0.0] * 3
    finally:
        ch.close()
        rt.stop()
