"""The replica's operand cache (LRU by bytes) and the client's content names."""

from __future__ import annotations

import numpy as np

from polybus.client.operands import content_key
from polybus.wire.codec import Ref
from polybus.wire.messages import Call
from polybus.worker.cache import OperandCache, resolve


def test_hit_and_miss() -> None:
    c = OperandCache(1000)
    c.put("k", b"x" * 10)
    assert c.get("k") == b"x" * 10
    call = Call(1, "f", [1, Ref("op", "k")], {"z": Ref("op", "k")})
    assert resolve(c, call) is None
    assert call.args == [1, b"x" * 10] and call.kwargs == {"z": b"x" * 10}
    fail = resolve(c, Call(2, "f", [Ref("op", "nope")]))
    assert fail is not None and fail.kind == "cache-miss" and fail.message == "nope"
    assert c.hits == 3 and c.misses == 1


def test_lru_eviction_by_bytes() -> None:
    c = OperandCache(250)
    for k in "ab":
        c.put(k, np.zeros(100, np.uint8))
    c.get("a")  # a is now the most recent; b goes first
    c.put("c", np.zeros(100, np.uint8))
    assert "b" not in c and "a" in c and "c" in c
    assert c.bytes == 200 and c.evictions == 1


def test_one_oversized_entry_is_kept_alone() -> None:
    c = OperandCache(10)
    c.put("a", b"12345")
    c.put("big", b"x" * 100)
    assert "big" in c and "a" not in c


def test_content_key_names_content_not_object() -> None:
    a = np.arange(12.0).reshape(3, 4)
    assert content_key(a) == content_key(a.copy())
    assert content_key(a) != content_key(a.reshape(4, 3))       # shape is part of the name
    assert content_key(a) != content_key(a.astype(np.float32))  # and dtype
    assert content_key(a.T) == content_key(np.ascontiguousarray(a.T))
    assert content_key(b"abc") == content_key(bytearray(b"abc"))
    assert content_key([1, 2]) is None
    assert content_key(np.array(1.0)) == content_key(np.array(1.0))
