"""A replica's operand cache: values named by their content hash, bounded by bytes.

A client sends a cached operand once in a ``Put(key, value)`` and names it afterwards by
``Ref("op", key)``. Because keys are content hashes, calls from different clients that
interleave on one replica can never see each other's operands by mistake (the hazard of
seeds/002's stateful server). Entries leave least-recently-used first once the bytes held
pass ``capacity``; a call naming an entry that is gone is answered
``Fail(kind="cache-miss")`` and the client re-sends it with the value.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Any

from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Fail

DEFAULT_CAPACITY = 512 * 1024 * 1024


def size_of(value: Any) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(value, bytes | bytearray | str):
        return len(value)
    return sys.getsizeof(value)


class OperandCache:
    """LRU of content-named values, at most ``capacity`` bytes (one entry may exceed it,
    alone, so that a call whose operand is larger than the cache still runs)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def put(self, key: str, value: Any) -> None:
        n = size_of(value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._entries[key] = (value, n)
            self.bytes += n
            while self.bytes > self.capacity and len(self._entries) > 1:
                _, (_, m) = self._entries.popitem(last=False)
                self.bytes -= m
                self.evictions += 1

    def get(self, key: str) -> Any:
        """The value, or KeyError; a hit makes the entry the most recently used."""
        with self._lock:
            try:
                value, _ = self._entries[key]
            except KeyError:
                self.misses += 1
                raise
            self._entries.move_to_end(key)
            self.hits += 1
            return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


def resolve(cache: OperandCache, call: Call) -> Fail | None:
    """Replace the ``Ref("op", key)`` arguments of ``call`` by their values, in place.

    Done when the call is queued, so an entry evicted while the call waits is still held
    by the call. Returns the Fail to answer when an operand is not here.
    """
    args = call.args
    for i, a in enumerate(args):
        if type(a) is Ref:
            try:
                args[i] = _value(cache, a)
            except KeyError:
                return _miss(call, a)
    if call.kwargs:
        for k, v in call.kwargs.items():
            if type(v) is Ref:
                try:
                    call.kwargs[k] = _value(cache, v)
                except KeyError:
                    return _miss(call, v)
    return None


def _value(cache: OperandCache, ref: Ref) -> Any:
    if ref.kind != "op":
        raise KeyError(ref.key)
    return cache.get(str(ref.key))


def _miss(call: Call, ref: Ref) -> Fail:
    # The message is the key alone: the client forgets exactly that entry for this replica.
    return Fail(call.id, "cache-miss", "KeyError", str(ref.key))
