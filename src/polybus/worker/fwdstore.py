"""A replica's store of forwarded answers (worker/forwarding.py): an LRU beside pins.

A producer's answer that went to a next stage is kept under its ``pkey`` for the
client's ``Fetch`` and for later ``Forward``s, least recently used first out once the
store passes its bound (512 MiB). An answer kept for a consumer the client has not
placed yet (``Keep(id, pkey, key)``: that call waits in a backlog at the client) is
*pinned* for ``key`` instead: out of the LRU's reach until the ``Forward`` of that key
takes it (with no key left it then joins the LRU, as any forwarded answer), or until
its client goes. In the LRU, the backlog's first values, kept longest, would be the
first to go, and their consumers would fail when placed.

Pinned values count against the same bound, first: the LRU holds what they leave. An
answer there is no room to pin is not kept (``pin`` says so): its replica answers by
value, and the client sends it on itself, as it did before ``Keep``. The store also
remembers the last keys it held, so that a ``Forward`` of a value the LRU evicted is
failed (`had`), not left waiting for an answer that was given long ago.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from polybus.lazynumpy import is_plain_array
from polybus.worker.cache import DEFAULT_CAPACITY, OperandCache
from polybus.worker.heldvalue import freeze, held_bytes

PIN_BOUND = 100_000  # values pinned at once, at most (and at most the store's bytes)
HAD_BOUND = 100_000  # keys remembered as held (`had`)

__all__ = ["ForwardStore", "stored"]


def stored(value: Any) -> Any:
    """What the store is to hold of an answer: it makes an array read-only, so it holds
    a copy, not the array the function returned (which may be its own state, updated by
    its next call)."""
    if is_plain_array(value) and value.flags.writeable:
        return value.copy()
    return value


@dataclass(eq=False)
class _Pin:
    value: Any
    nbytes: int
    keys: set[str]   # the Forwards it waits for
    user: object     # the client's connection: it goes with it


class ForwardStore:
    """Forwarded answers by ``pkey``; every method is safe from any thread."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, pins_max: int = PIN_BOUND) -> None:
        self.capacity = capacity
        self.pins_max = pins_max
        self._lru = OperandCache(capacity)
        self._pins: dict[str, _Pin] = {}
        self.pinned_bytes = 0
        self._had: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.RLock()

    def __contains__(self, pkey: str) -> bool:
        with self._lock:
            return pkey in self._pins or pkey in self._lru

    def __len__(self) -> int:
        with self._lock:
            return len(self._pins) + len(self._lru)

    @property
    def pinned(self) -> int:
        """Values pinned now."""
        return len(self._pins)

    def put(self, pkey: str, value: Any, user: object) -> None:
        """Keep ``value`` in the LRU (``user``: the client's connection, which frees it)."""
        with self._lock:
            self._held(pkey)
            self._lru.put(pkey, value, user)

    def pin(self, pkey: str, value: Any, user: object, keys: set[str]) -> bool:
        """Keep ``value`` for the Forwards of ``keys``, out of the LRU, if there is room;
        False (nothing kept) if not."""
        with self._lock:
            pin = self._pins.get(pkey)
            if pin is not None:
                pin.keys |= keys
                return True
            n = held_bytes(value)
            if len(self._pins) >= self.pins_max or self.pinned_bytes + n > self.capacity:
                return False
            if pkey in self._lru:
                self._lru.pop(pkey)
            freeze(value)
            self._pins[pkey] = _Pin(value, n, set(keys), user)
            self.pinned_bytes += n
            self._held(pkey)
            self._fit()
            return True

    def keep(self, pkey: str, key: str) -> bool:
        """A ``Keep`` that came after ``pkey``'s answer: its value is pinned for ``key``
        if it is here and there is room (else it stays in the LRU). False: not here."""
        with self._lock:
            pin = self._pins.get(pkey)
            if pin is not None:
                pin.keys.add(key)
                return True
            try:
                value, user = self._lru.pop(pkey)
            except KeyError:
                return False
            if not self.pin(pkey, value, user, {key}):
                self._lru.put(pkey, value, user)
            return True

    def take(self, pkey: str, key: str) -> Any:
        """The value for the ``Forward`` of ``key`` (KeyError if gone): no longer pinned
        for it, and in the LRU once no key pins it."""
        with self._lock:
            pin = self._pins.get(pkey)
            if pin is None:
                return self._lru.get(pkey)
            pin.keys.discard(key)
            if not pin.keys:
                self._unpin(pkey)
                self._lru.put(pkey, pin.value, pin.user)
            return pin.value

    def unkeep(self, pkey: str, key: str, free: bool = False) -> None:
        """The consumer of ``key`` ended unplaced (``Keep`` with ``release``): the value
        is no longer pinned for it, and in the LRU once no key pins it; with ``free``
        (a ``forward = "keep"`` answer whose promise is gone or used: client/fwdown.py),
        gone then instead, remembered as had (a late Forward fails, not waits)."""
        with self._lock:
            pin = self._pins.get(pkey)
            if pin is not None:
                pin.keys.discard(key)
                if not pin.keys:
                    self._unpin(pkey)
                    if not free:
                        self._lru.put(pkey, pin.value, pin.user)

    def get(self, pkey: str) -> Any:
        """The value (a ``Fetch``), pinned or not; KeyError if gone."""
        with self._lock:
            pin = self._pins.get(pkey)
            return pin.value if pin is not None else self._lru.get(pkey)

    def had(self, pkey: str) -> bool:
        """A value was kept here under ``pkey``: here still, or evicted since (its call
        was answered: a Forward of it is not to wait for an answer)."""
        with self._lock:
            return pkey in self._pins or pkey in self._lru or pkey in self._had

    def release(self, user: object) -> None:
        """``user``'s connection is gone: what was kept for it goes."""
        with self._lock:
            for pkey in [k for k, p in self._pins.items() if p.user is user]:
                self._unpin(pkey)
            self._lru.release(user)

    def clear(self) -> None:
        with self._lock:
            self._pins.clear()
            self.pinned_bytes = 0
            self._lru.clear()
            self._fit()

    # -- with the lock held ------------------------------------------------------------
    def _unpin(self, pkey: str) -> None:
        self.pinned_bytes -= self._pins.pop(pkey).nbytes
        self._fit()

    def _fit(self) -> None:
        self._lru.capacity = max(0, self.capacity - self.pinned_bytes)
        self._lru.trim()

    def _held(self, pkey: str) -> None:
        self._had[pkey] = None
        self._had.move_to_end(pkey)
        if len(self._had) > HAD_BOUND:
            self._had.popitem(last=False)
