"""What the client believes one replica's operand cache holds of its operands.

A replica keeps cached operands in an LRU bounded by bytes (worker/cache.py). The client
once kept a plain set of the keys it had put there, which its own Puts never shrank: when
the operands a program uses in turn pass the bound, a Put evicts an older operand at the
replica while the client still counts it as held, and the next call or batch naming it
missed, went again after a Put of it (which evicted another it named, believed held too),
missed again and, for a batch, went with values, each call carrying its own copy: 7
operands of 160 KB used in turn over a replica cache of 1 MiB sent 4x the bytes
aggregated (28 MB) that single calls sent (6.7 MB).

`Held` follows the replica's steps for the messages this client sends it, in their order:
a ``Drop`` removes its keys, a ``Put`` makes the keys it keeps (``Put.keep``) the most
recently used and then adds its operand, evicting least recently used first past the
bound, and a batch makes the operands it names the most recently used. So a batch the
client makes after a Put that evicted an operand puts that operand again, just before
it, rather than missing and being sent again. Single calls add their Puts but do not
follow the order (nor evict: `settle` is a batch's), so where they share a replica
with batches the order is an approximation; past twice the bound, `add` lets the least
recently put go (fresh bytes at each call, which no Drop takes out, were all kept). It is a belief: the replica's cache is
shared with other clients and interfaces, so a miss still happens and is repaired as
before (client/operands.py, ``missed``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from polybus.wire.codec import OutOfBand, Ref
from polybus.wire.messages import Message, Put
from polybus.wire.values import size_of
from polybus.worker.heldvalue import CACHE_ENTRY_BYTES
from polybus.worker.heldvalue import held_bytes as cache_bytes

__all__ = ["Held", "held_bytes", "named_keys", "spare"]


def held_bytes(value: Any) -> int:
    """The bytes a replica counts for an operand ``value`` it is put: its cache's
    ``held_bytes`` (an array's or bytes' size; of large bytes as the call carries them,
    marked OutOfBand), and of a value `broadcast` names by its encoding (a dict, a
    list: broadcastvalue.py) the same walk of it the replica makes."""
    if type(value) is np.ndarray:  # (the common operand, at its first call to a replica)
        return value.nbytes
    if type(value) is OutOfBand:
        value = value.data
    if isinstance(value, np.ndarray | bytes | bytearray):
        return size_of(value)
    return cache_bytes(value)


class Held(OrderedDict[str, int]):
    """Keys one replica holds from this client, least recently used first, with their
    bytes; ``capacity`` is the replica's cache bound (0 while not known: nothing is
    evicted). ``add``, ``discard`` and ``in`` are what a set of keys gave. A session's
    bindings share it, from any thread: the steps that change it take its lock."""

    def __init__(self, capacity: int = 0) -> None:
        super().__init__()
        self.capacity = capacity
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, key: str, nbytes: int = 0) -> None:
        """``key`` was put (``nbytes`` of it): the most recently used. Nothing is evicted
        until `settle`, which a batch's naming ends with; but past twice the bound, the
        least recently put go until the bound is met (single calls name operands
        without making them the most recently used, and only a freed array's Drop took
        one out: fresh bytes at each call, never dropped, were all kept). A name let go
        of here that the replica still holds is put again by the next call naming it."""
        with self._lock:
            old = self.pop(key, None)
            if old is not None:
                self.bytes -= old
            nbytes += CACHE_ENTRY_BYTES  # (as the replica counts it: worker/cache.py)
            self[key] = nbytes
            self.bytes += nbytes
            cap = self.capacity
            if cap and self.bytes > 2 * cap:
                while self.bytes > cap and len(self) > 1:
                    self.bytes -= self.popitem(last=False)[1]

    def discard(self, key: str) -> None:
        with self._lock:
            n = self.pop(key, None)
            if n is not None:
                self.bytes -= n

    def unput(self, msgs: Iterable[Message]) -> None:
        """The Puts among ``msgs`` were not sent (refused, not written): the replica
        does not hold their operands, and a later call must not name them."""
        for m in msgs:
            if type(m) is Put:
                self.discard(m.key)

    def settle(self, named: Iterable[str] = ()) -> list[str]:
        """A message was made that puts the keys added since and names ``named`` (in the
        order the replica looks them up): they become the most recently used, and the
        least recently used go while the bytes pass the bound, as at the replica (one
        entry is kept whatever its size). Returns the keys evicted."""
        gone: list[str] = []
        with self._lock:
            for k in named:
                if k in self:
                    self.move_to_end(k)
            cap = self.capacity
            if cap:
                while self.bytes > cap and len(self) > 1:
                    k, n = self.popitem(last=False)
                    self.bytes -= n
                    gone.append(k)
        return gone


def named_keys(values: Any) -> list[str]:
    """The keys of the cached operands among ``values`` (their Refs), in order."""
    return [v.key for v in values if type(v) is Ref and v.kind == "op" and type(v.key) is str]


def spare(puts: list[Message], keys: list[str]) -> None:
    """The first of a call's or batch's Puts ``puts`` keeps (``Put.keep``) the other
    operands it names (``keys``): made the replica's most recently used first, they are
    not what its own Puts evict (they were, when operands are used in turn: it missed)."""
    put = {p.key for p in puts if type(p) is Put}
    keep = [k for k in keys if k not in put]
    if keep:
        puts[0].keep = keep  # type: ignore[union-attr]  # (only Puts so far)
