"""What the client believes a replica's operand cache holds of its operands: the
replica's LRU steps, followed (client/held.py; no network)."""

from __future__ import annotations

import numpy as np

from polybus.client.held import Held, held_bytes
from polybus.wire.codec import OutOfBand
from polybus.worker.cache import OperandCache
from polybus.worker.heldvalue import CACHE_ENTRY_BYTES as E


def test_it_evicts_as_the_replica_does() -> None:
    # Six operands of 100 bytes held, a cache of 600: a batch naming five of them and a
    # new one puts that one, sparing the five (Put.keep), and the sixth goes, at the
    # replica and in the client's belief alike (each counting E an entry beside its bytes).
    replica, held = OperandCache(6 * (100 + E)), Held(6 * (100 + E))
    for k in "abcdef":
        replica.put(k, b"x" * 100)
        held.add(k, 100)
    held.settle("abcdef")
    named = ["b", "c", "g", "d", "e", "f"]
    replica.put("g", b"x" * 100, keep=[k for k in named if k != "g"])
    for k in named:
        replica.get(k)
    held.add("g", 100)
    assert held.settle(named) == ["a"]
    assert "a" not in replica and "a" not in held
    assert list(held) == named and held.bytes == 6 * (100 + E)


def test_without_a_capacity_nothing_is_evicted() -> None:
    held = Held()
    for k in "abc":
        held.add(k, 1 << 30)
    assert held.settle(["a"]) == [] and list(held) == ["b", "c", "a"]
    held.discard("b")
    held.discard("nope")
    assert list(held) == ["c", "a"] and held.bytes == 2 * ((1 << 30) + E)


def test_one_operand_larger_than_the_bound_is_kept_alone() -> None:
    held = Held(E + 100)
    held.add("a", 50)
    held.add("big", 150)
    assert held.settle(["big"]) == ["a"] and list(held) == ["big"]
    held.add("next", 10)
    assert held.settle(["next"]) == ["big"] and list(held) == ["next"]


def test_puts_past_twice_the_bound_let_the_least_recently_put_go() -> None:
    """Single calls never settle: past twice the bound, `add` lets the oldest go down
    to the bound (integration/test_cache_belief_bound.py)."""
    one = E + 10  # (an entry's count: E beside its bytes)
    held = Held(10 * one)
    for k in range(20):
        held.add(f"k{k}", 10)
    assert len(held) <= 20 and held.bytes <= 20 * one
    held.add("k20", 10)  # (21 entries: down to 10)
    assert list(held) == [f"k{k}" for k in range(11, 21)] and held.bytes == 10 * one
    held.add("huge", 20 * one)  # (one over the bound is kept alone)
    assert list(held) == ["huge"] and held.bytes == 20 * one + E
    unbounded = Held()  # (bound not known: nothing goes)
    for k in range(50):
        unbounded.add(f"k{k}", 10)
    assert len(unbounded) == 50


def test_operand_bytes_as_the_replica_counts_them() -> None:
    assert held_bytes(np.zeros(10)) == 80
    assert held_bytes(b"abc") == 3 and held_bytes(bytearray(4)) == 4
    assert held_bytes(OutOfBand(b"x" * 7)) == 7
    # Any other value (a broadcast dict: client/broadcastvalue.py) as the replica's walk
    from polybus.worker.cache import held_bytes as counted
    table = {"w": np.zeros(10), "names": ["a", "bc"]}
    assert held_bytes(table) == counted(table) > 80 and held_bytes(3) == counted(3)
