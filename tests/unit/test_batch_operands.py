"""Which cached operands an aggregated call names, and how many a batch takes: at most
the replica's cache_bytes of distinct ones (client/batchcalls.py; no network)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from polybus.client.batchcalls import Pending, operand_bytes, sized_named
from polybus.worker.heldvalue import CACHE_ENTRY_BYTES


def _batch() -> Pending:
    batcher: Any = SimpleNamespace(interface="f", timeout=None)
    return Pending(batcher, 0.0)


def test_operands_are_the_cached_arrays_and_bytes_each_object_once() -> None:
    a, b, raw = np.zeros(100), np.zeros(10), b"x" * 50
    e = CACHE_ENTRY_BYTES  # (counted as the replica's cache counts it: its bytes and e)
    assert operand_bytes((a, b), (1,), None, 0) == {id(b): 80 + e}
    assert operand_bytes((a, a), (0, 1), None, 0) == {id(a): 800 + e}  # one object, once
    assert operand_bytes((a, [1, 2], 3), (1, 2), None, 0) is None  # (not named: by value)
    assert operand_bytes((a,), (1,), None, 0) is None  # (a position the call leaves out)
    # cache names *args: every position from rest on; "auto": arrays and bytes this big
    assert operand_bytes((a, b, raw), (), 1, 0) == {id(b): 80 + e, id(raw): 50 + e}
    assert operand_bytes((a, b, raw), (), None, 80) == {id(a): 800 + e, id(b): 80 + e}


def test_a_call_is_sized_without_its_named_operands_each_time_it_passes_one() -> None:
    # (a batch carries a name for each: a passed twice at named places is two names,
    # not once a's 800 bytes; at a place not named it goes by value, and is counted)
    a = np.zeros(100)
    named = [0]
    assert operand_bytes((a, a, 1), (0, 1), None, 0, named) == {id(a): 800 + CACHE_ENTRY_BYTES}
    assert named == [1600] and sized_named((a, a, 1), named[0]) == 16
    named = [0]
    operand_bytes((a, a, 1), (0,), None, 0, named)
    assert named == [800] and sized_named((a, a, 1), named[0]) == 816


def test_a_batch_takes_operands_up_to_the_bound() -> None:
    b = _batch()
    assert b.joins({1: 40}, 100) and b.joins({2: 40}, 100)
    assert b.joins({1: 40, 2: 40}, 100)  # (named already: nothing more)
    assert not b.joins({3: 40}, 100)  # 120 > 100: it goes in the next batch
    assert b.opbytes == 80 and b.ops == {1: 40, 2: 40} and not b.by_value(100, 1000)


def test_one_operand_larger_than_the_bound_is_named_and_shared() -> None:
    b = _batch()  # (the replica keeps one such operand, alone)
    assert b.joins({1: 500}, 100) and b.joins({1: 500}, 100)
    assert not b.joins({2: 1}, 100) and not b.by_value(100, 1000)


def test_operands_that_never_fit_together_go_by_value_in_one_call() -> None:
    b = _batch()
    assert b.joins({1: 60, 2: 60}, 100) and b.by_value(100, 1000)
    assert not b.joins({1: 60, 2: 60}, 100)  # (with values, each call would carry them)
    assert not b.joins({3: 1}, 100)
    assert not b.by_value(100, 110)  # (not in half a frame: named, as any batch)
