"""A replica keeps no key longer than `KEY_MAX` characters (worker/keylimits.py).

A replica keeps the keys a client sends it beyond the message that carried them: a
cached operand's, a forwarded value's and its producer's, a client's nonce (a forwarded
key's first part), some of them long after (the last 100,000 keys taken or dropped).
Their count was bounded, their length not: 100,000 keys of a megabyte each would have
held 100 GB (found by tests/integration/test_fuzz_replica.py). Now a control message
with a key over the limit is answered ``Goodbye`` naming the message, the field, its
length and the limit, and its connection closed; a call naming one is answered
``Fail(kind="bad-call")`` alone and its connection served on; a ``Forward`` whose ``to``
is longer than any address is answered ``Undelivered`` at once. Nothing of them is kept,
and the replica serves its other clients on. The keys the project's own client makes,
at their longest, are taken as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from polybus.client.forward import Forwarder
from polybus.client.naming import content_key
from polybus.registry.limits import ADDRESS_MAX
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import (
    Batch,
    Call,
    CallBatch,
    Cancel,
    Deliver,
    Drop,
    Fail,
    Fetch,
    Fetched,
    Forward,
    Goodbye,
    Keep,
    Message,
    Ping,
    Pong,
    Put,
    Result,
    Undelivered,
)
from polybus.worker.keylimits import KEY_MAX
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"key-limits-token-0123456789abcdef"
LONG = "k" * (KEY_MAX + 1)
CLOSED = object()


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w", {"echo": lambda *xs, **kw: [*xs, *kw.values()]}, TOKEN).start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def peer(worker: WorkerRuntime) -> Iterator[Channel]:
    ch = connect(worker.address, TOKEN, Codec())
    try:
        yield ch
    finally:
        ch.close()


def _messages(ch: Channel, until: Any) -> list[Any]:
    """What ``ch`` is sent (a Batch's items one by one) up to and with the first for
    which ``until`` holds, or the end of the connection (`CLOSED`); bounded waits."""
    got: list[Any] = []
    while True:
        m = next_message(ch, 10.0, CLOSED)
        assert m is not None, ("nothing came", got)
        items = m.items if isinstance(m, Batch) else [m]
        got += items
        if m is CLOSED or any(until(x) for x in items):
            return got


def _served(rt: WorkerRuntime) -> None:
    """Another client is answered: the replica serves on."""
    ch = connect(rt.address, TOKEN, Codec())
    try:
        ch.send(Call(1, "echo", [7]))
        got = _messages(ch, lambda m: isinstance(m, Result))
        assert isinstance(got[-1], Result) and got[-1].value == [7], got
    finally:
        ch.close()


_WALKED = ("OperandCache", "ForwardStore", "Sessions", "_Pin", "OrderedDict")


def _long_kept(rt: WorkerRuntime) -> list[str]:
    """Every str longer than KEY_MAX the replica's operand cache and forwarding state
    hold (their dicts, lists, sets and the stores in them, walked)."""
    found: list[str] = []
    seen: set[int] = set()
    stack: list[Any] = [vars(rt.cache), {k: v for k, v in vars(rt.forwarding).items()
                                         if k != "rt"}]
    while stack:
        x = stack.pop()
        if type(x) is str:
            if len(x) > KEY_MAX:
                found.append(x)
            continue
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, dict):
            stack += [*x.keys(), *x.values()]
        elif isinstance(x, list | tuple | set | frozenset):
            stack += list(x)
        elif type(x).__name__ in _WALKED or dataclasses.is_dataclass(x):
            stack.append(vars(x) if hasattr(x, "__dict__") else {})
    return found


KEY_MESSAGES = [
    (Put(LONG, 1), "a Put's key"),
    (Put("fine", 1, ["a", LONG]), "a Put's keep [1]"),
    (Drop(["a", LONG]), "a Drop's keys [1]"),
    (Forward(5, LONG, "n.5.0", "tcp://127.0.0.1:1"), "a Forward's pkey"),
    (Forward(5, "n.5", LONG, "tcp://127.0.0.1:1"), "a Forward's key"),
    (Keep(5, LONG, "n.5.0"), "a Keep's pkey"),
    (Keep(5, "n.5", LONG), "a Keep's key"),
    (Fetch(LONG, 3), "a Fetch's pkey"),
    (Deliver(LONG, True, 1), "a Deliver's key"),
    (Cancel([], [LONG]), "a Cancel's keys [0]"),
]


@pytest.mark.parametrize(("msg", "field"), KEY_MESSAGES,
                         ids=[f.split(" ", 1)[1] for _, f in KEY_MESSAGES])
def test_a_control_message_with_a_key_over_the_limit_is_refused_and_nothing_kept(
        worker: WorkerRuntime, peer: Channel, msg: Message, field: str) -> None:
    peer.send_many([msg, Ping(9)])
    got = _messages(peer, lambda m: m is CLOSED or isinstance(m, Pong))
    bye = [m for m in got if isinstance(m, Goodbye)]
    assert bye and got[-1] is CLOSED, got
    assert bye[0].reason.startswith(f"protocol error: {field} 'kkkk"), bye[0].reason
    assert (f"is {KEY_MAX + 1} characters long, over a replica's limit of {KEY_MAX} "
            "for a key") in bye[0].reason, bye[0].reason
    assert len(bye[0].reason) < 300, bye[0].reason  # (the key quoted cut short)
    assert not _long_kept(worker)
    assert LONG not in worker.cache
    _served(worker)


def test_a_call_naming_a_key_over_the_limit_fails_alone_and_is_not_held(
        worker: WorkerRuntime, peer: Channel) -> None:
    peer.send_many([
        Call(1, "echo", [Ref("fwd", LONG)]),
        Call(2, "echo", [], {"x": Ref("op", LONG)}),
        Call(3, "echo", [[1, {"a": Ref("fwd", LONG)}]], inside=[0]),
        Call(4, "echo", [[Ref("op", LONG)]], inside=[0]),
        Call(5, "echo", [Ref("fwd", ["a"] * 3)]),  # (a peer's list: no key)
        CallBatch(6, "echo", [[1], [Ref("op", LONG)]]),
        Batch([Call(7, "echo", [Ref("fwd", "z" + LONG)]), Call(8, "echo", [8])]),
        Ping(9),
    ])
    got = _messages(peer, lambda m: isinstance(m, Pong) or m is CLOSED)
    if not any(isinstance(m, Result) and m.id == 8 for m in got):  # (queued: it may be later)
        got += _messages(peer, lambda m: isinstance(m, Result) or m is CLOSED)
    answers = {m.id: m for m in got if isinstance(m, Result | Fail)}
    assert sorted(answers) == [1, 2, 3, 4, 5, 6, 7, 8], got
    assert isinstance(answers[8], Result) and answers[8].value == [8], answers[8]
    where = {1: "argument 0", 2: "argument 'x'", 3: "inside argument 0",
             4: "inside argument 0", 6: "call 1's argument 0", 7: "argument 0"}
    for i, f in answers.items():
        if i == 8:
            continue
        assert isinstance(f, Fail) and f.kind == "bad-call", f
        if i == 5:
            assert f.type == "TypeError", f
            assert f.message == "argument 0 is a reference whose key is a list, not a str"
            continue
        assert f.type == "ValueError", f
        assert f.message.startswith(f"{where[i]} is a reference whose key 'kkk") \
            or f.message.startswith(f"{where[i]} is a reference whose key 'zkk"), f.message
        assert (f"is {len(LONG) + (i == 7)} characters long, over a replica's limit of "
                f"{KEY_MAX} for a key") in f.message, f.message
    assert worker.forwarding.held_calls() == 0
    assert not _long_kept(worker)
    # served on: a call with a forwarded value of a good key is held, and answered
    peer.send_many([Call(10, "echo", [Ref("fwd", "n.10.0")]), Deliver("n.10.0", True, 3)])
    got = _messages(peer, lambda m: isinstance(m, Result | Fail))
    assert isinstance(got[-1], Result) and got[-1].value == [3], got


def test_a_forward_to_longer_than_any_address_is_said_at_once_and_not_kept(
        worker: WorkerRuntime, peer: Channel) -> None:
    to = "tcp://127.0.0.1:" + "9" * ADDRESS_MAX
    peer.send(Forward(41, "n.41", "n.41.0", to))  # (call 41 is not sent: it waits)
    got = _messages(peer, lambda m: isinstance(m, Undelivered))
    u = got[-1]
    assert isinstance(u, Undelivered) and u.key == "n.41.0" and u.type == "TransportError", u
    assert "is not an address: it is longer than any" in u.message, u.message
    assert not worker.forwarding.targets
    assert not _long_kept(worker)
    peer.send(Call(41, "echo", [1]))  # (answered by value: nothing was asked of it)
    got = _messages(peer, lambda m: isinstance(m, Result))
    assert got[-1].value == [1], got


def _own_keys() -> dict[str, str]:
    """The longest keys of each kind the project's client makes, made by its own code
    (ids and indexes at their largest, 64 bits)."""
    reactor = SimpleNamespace(on_lost=lambda *a: None, on_undelivered=None)
    f = Forwarder(SimpleNamespace(reactor=reactor, dials_again=True))  # type: ignore[arg-type]
    big = 2**64 - 1
    assert len(f.nonce) == 17 and f.nonce.endswith("~"), f.nonce
    pkey = f.pkey(SimpleNamespace(id=big))  # type: ignore[arg-type]
    return {
        "operand": content_key(np.arange(3.0)) or "",
        "bytes operand": content_key(b"abc") or "",
        "pkey": pkey,
        "own": f"{pkey}.own",  # (client/fwdown.py `key`)
        "edge": f"{f.nonce}.{big}.{big}+{big}",  # (client/forward.py, fwdlost.py rerun)
    }


def test_the_clients_own_longest_keys_are_taken(worker: WorkerRuntime, peer: Channel) -> None:
    keys = _own_keys()
    assert all(0 < len(k) <= 80 for k in keys.values()), keys
    op, edge, pkey, own = keys["operand"], keys["edge"], keys["pkey"], keys["own"]
    peer.send_many([
        Put(op, np.arange(3.0), [keys["bytes operand"]]), Drop([keys["bytes operand"]]),
        Call(1, "echo", [Ref("op", op)]),
        Deliver(edge, True, 5), Call(2, "echo", [Ref("fwd", edge)]),
        Keep(3, pkey, own), Forward(3, pkey, edge, str(worker.address)),
        Call(3, "echo", [6]),
    ])
    answers: dict[int, Any] = {}
    while len(answers) < 3:
        got = _messages(peer, lambda m: isinstance(m, Result | Fail) or m is CLOSED)
        assert isinstance(got[-1], Result), got
        answers.update((m.id, m) for m in got if isinstance(m, Result))
    peer.send_many([Fetch(pkey, 4), Cancel([3], [edge])])  # (once call 3 is answered)
    got = _messages(peer, lambda m: isinstance(m, Fetched) or m is CLOSED)
    assert np.array_equal(answers[1].value[0], np.arange(3.0))
    assert answers[2].value == [5]
    assert isinstance(answers[3].value, Ref), answers[3]
    assert got[-1] == Fetched(4, True, [6]), got[-1]
    assert op in worker.cache
