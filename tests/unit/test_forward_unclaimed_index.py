"""The unclaimed values' index by nonce (worker/fwdgone.py's `Unclaimed`) agrees with
the values after any mix of what changes them: a value arriving before its call, a
call claiming it, a consumer ended elsewhere dropping it, the bound pushing the oldest
out, a client gone forgetting its own; and a client gone takes its own values only."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from polybus.wire.codec import Ref
from polybus.wire.messages import Call
from polybus.worker.fwdgone import Unclaimed
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"forward-unclaimed-index-token-0123456789"


class Conn:
    """A client's connection, as far as the forwarding state looks at one."""


@pytest.fixture
def fwd() -> Iterator[Any]:
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN)
    try:
        yield rt.forwarding
    finally:
        rt.stop()


def agree(u: Unclaimed) -> None:
    """The index is the values' keys by nonce, in the values' order, and the bytes are
    theirs."""
    want: dict[str, list[str]] = {}
    for key in u.values:
        nonce, dot, _ = key.partition(".")
        if dot:
            want.setdefault(nonce, []).append(key)
    assert {n: list(keys) for n, keys in u.by_nonce.items()} == want
    assert u.nbytes == sum(n for _, _, n in u.values.values())


def held(fwd: Any, ch: Conn, cid: int, *keys: str) -> None:
    assert fwd.hold(ch, Call(cid, "echo", [[Ref("fwd", k) for k in keys]], inside=[0]),
                    [((0, i), k) for i, k in enumerate(keys)])


def test_the_index_agrees_with_the_values(fwd: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(fwd.rt, "_send_quietly", lambda ch, msg: None)  # (Fails, Busy)
    monkeypatch.setattr(fwd.rt, "_enqueue", lambda ch, call: True)  # (a call settled)
    fwd.arrived_max = 10  # (the bound pushes the oldest out, often)
    rng = random.Random(5)
    conns: dict[str, Conn] = {}  # a connection per nonce, while it lives
    did: dict[str, int] = {}
    n = 0
    for _ in range(3000):
        nonce = f"n{rng.randrange(8)}"
        what = rng.choice(["arrive"] * 6 + ["claim", "ended", "gone", "odd"])
        if what == "arrive":  # (a value before its call: kept, unclaimed)
            n += 1
            fwd.arrive(f"{nonce}.{n}.0", True, b"v" * rng.randrange(100))
        elif what == "claim" and list(fwd._arrived):  # (its call comes and takes it)
            key = rng.choice(list(fwd._arrived))
            ch = conns.setdefault(key.partition(".")[0], Conn())
            n += 1
            held(fwd, ch, n, key)
        elif what == "ended" and list(fwd._arrived):  # (its consumer ended elsewhere)
            fwd.ended([rng.choice(list(fwd._arrived))])
        elif what == "gone" and nonce in conns:  # (its client's connection ends)
            fwd.dropped(conns.pop(nonce))
        elif what == "odd":  # (a key with no nonce: under none, bounded as any)
            n += 1
            fwd.arrive(f"odd{n}", True, n)
        did[what] = did.get(what, 0) + 1
        agree(fwd._arrived)
    assert fwd.unclaimed_dropped > 0 and fwd.gone_dropped > 0, (did, fwd.unclaimed_dropped)
    assert all(did.get(w, 0) > 100 for w in ("arrive", "claim", "ended", "gone", "odd")), did


def test_a_client_gone_takes_its_own_values_only(fwd: Any) -> None:
    a, b = Conn(), Conn()
    held(fwd, a, 1, "na.1.0")  # (each client's nonce known by its connection's call)
    held(fwd, b, 1, "nb.1.0")
    for i in range(2, 6):
        fwd.arrive(f"na.{i}.0", True, i)
        fwd.arrive(f"nb.{i}.0", True, i)
        fwd.arrive(f"nab.{i}.0", True, i)  # (a nonce that begins as na's: not na's)
    fwd.arrive("na", True, 0)  # (a key with no nonce: not na's either)
    fwd.dropped(a)
    assert list(fwd._arrived) == [*(f"n{x}.{i}.0" for i in range(2, 6) for x in ("b", "ab")),
                                  "na"]
    assert fwd.gone_dropped == 4 and "na" not in fwd._arrived.by_nonce
    agree(fwd._arrived)
