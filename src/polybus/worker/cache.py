"""A replica's operand cache: values named by their content hash, bounded by bytes.

A client sends a cached operand once in a ``Put(key, value)`` and names it afterwards by
``Ref("op", key)``. Because keys are content hashes, calls from different clients that
interleave on one replica can never see each other's operands by mistake (the hazard of
seeds/002's stateful server). Entries leave least-recently-used first once the bytes held
pass ``capacity``; a call naming an entry that is gone is answered
``Fail(kind="cache-miss")`` and the client sends it again after a ``Put`` of the operand
(with the value in place of the ``Ref`` only if it misses again).

Each entry remembers which connections put or used it. When a client's connection
drops, `release` evicts the entries no live connection has used, so a dead client's
operands do not sit in memory until LRU pressure pushes them out (entries put without
a user, such as kept forwarding results, are left to the LRU). A live client that lets
an operand's array go says so (``Drop``), and `drop` does the same for those keys: a
client that sends a fresh B every round keeps one B here, not a cache full of old ones
(and, over ``shm``, the segment the old one arrived in goes back to the sender at once).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from polybus.lazynumpy import ndarray_type
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, CallBatch, Fail
from polybus.wire.values import INSIDE_DEPTH
from polybus.worker import readonly
from polybus.worker.heldvalue import CACHE_ENTRY_BYTES, freeze, held_bytes
from polybus.worker.keylimits import KEY_MAX, ref_fault

DEFAULT_CAPACITY = 512 * 1024 * 1024
class OperandCache:
    """LRU of content-named values, at most ``capacity`` bytes (one entry may exceed it,
    alone, so that a call whose operand is larger than the cache still runs)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._users: dict[str, set[object]] = {}      # key -> connections that used it
        self._keys_of: dict[object, set[str]] = {}    # connection -> keys it used
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def put(self, key: str, value: Any, user: object = None,
            keep: list[str] | None = None) -> None:
        """Hold ``value`` under ``key``; ``user`` (a connection) is recorded as using it.
        The entries ``keep`` names (what the call or batch this operand is put for names
        besides, ``Put.keep``) become the most recently used first, so that what this
        one evicts is none of them.

        An array is made read-only here, on every transport: every call that names this
        content gets this one object, so a write in place would change what later calls
        (from any client) see. Over shm the memory is read-only anyway (shmshare.py); so a
        module behaves the same whichever transport its configuration picks."""
        if type(value) is ndarray_type():  # (the usual operand: its steps written out,
            value.flags.writeable = False  # each a cold Python call once a product)
            readonly.held_array(value)
            n = value.nbytes + CACHE_ENTRY_BYTES
        else:
            freeze(value)
            n = held_bytes(value) + CACHE_ENTRY_BYTES  # (a dict's and what it holds: walked)
        with self._lock:
            entries = self._entries
            for k in keep or ():
                if k in entries:
                    entries.move_to_end(k)
            old = entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            entries[key] = (value, n)
            self.bytes += n
            if user is not None:
                self._use(key, user)
            if self.bytes > self.capacity:
                self._trim()

    def trim(self) -> None:
        """Evict down to ``capacity`` (after it was lowered)."""
        with self._lock:
            self._trim()

    def get(self, key: str, user: object = None) -> Any:
        """The value, or KeyError; a hit makes the entry the most recently used."""
        with self._lock:
            try:
                value, _ = self._entries[key]
            except KeyError:
                self.misses += 1
                raise
            self._entries.move_to_end(key)
            self.hits += 1
            if user is not None and user not in self._users.get(key, ()):
                self._use(key, user)
            return value

    def pop(self, key: str) -> tuple[Any, object | None]:
        """Take ``key``'s entry out (KeyError if absent), not counted as an eviction: its
        value and one connection that used it (or None)."""
        with self._lock:
            value, _ = self._entries[key]
            users = self._users.get(key)
            user = next(iter(users)) if users else None
            self._remove(key)
            return value, user

    def release(self, user: object) -> int:
        """``user``'s connection is gone: evict the entries only it had used.

        Returns how many entries left. Entries another connection used stay (content
        names are shared across clients), with their place in the LRU order.
        """
        with self._lock:
            keys = self._keys_of.pop(user, set())
            gone = 0
            for key in keys:
                users = self._users.get(key)
                if users is None:
                    continue
                users.discard(user)
                if not users:
                    self._evict(key)
                    gone += 1
            return gone

    def drop(self, keys: list[str], user: object) -> int:
        """``user`` no longer uses ``keys`` (its client let the arrays go): evict each
        entry no other connection uses. Returns how many entries left. Entries ``user``
        never used are left alone (another client's, or kept without a user)."""
        with self._lock:
            mine = self._keys_of.get(user)
            gone = 0
            for key in keys:
                if mine is None or key not in mine:
                    continue
                mine.discard(key)
                users = self._users.get(key)
                if users is not None:
                    users.discard(user)
                    if not users and key in self._entries:
                        # (`_evict`'s steps, no user left to tell: a fresh B each round
                        # drops the last one's here, once a product)
                        _, m = self._entries.pop(key)
                        self.bytes -= m
                        del self._users[key]
                        self.evictions += 1
                        gone += 1
            return gone

    def users(self, key: str) -> int:
        """How many live connections have used ``key``."""
        with self._lock:
            return len(self._users.get(key, ()))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._users.clear()
            self._keys_of.clear()
            self.bytes = 0

    # -- with the lock held ------------------------------------------------------------
    def _trim(self) -> None:
        while self.bytes > self.capacity and len(self._entries) > 1:
            self._evict(next(iter(self._entries)))

    def _use(self, key: str, user: object) -> None:
        # (at every hit: no set made to be thrown away, as setdefault(key, set()) did)
        users = self._users.get(key)
        if users is None:
            users = self._users[key] = set()
        elif user in users:
            return
        users.add(user)
        mine = self._keys_of.get(user)
        if mine is None:
            mine = self._keys_of[user] = set()
        mine.add(key)

    def _evict(self, key: str) -> None:
        self._remove(key)
        self.evictions += 1

    def _remove(self, key: str) -> None:
        _, m = self._entries.pop(key)
        self.bytes -= m
        for user in self._users.pop(key, ()):
            keys = self._keys_of.get(user)
            if keys is not None:
                keys.discard(key)


class Forwarded:
    """What `resolve` returns for a call whose cached operands are all here and that
    waits for forwarded values (``Ref("fwd", key)``, left in place): Forwarding.hold
    holds it. ``nested``: those inside the arguments ``Call.inside`` marks, each as
    (its place: the argument's position or name, then the index or key of each list or
    map on the way; its key). Those that are arguments of their own, hold finds."""

    __slots__ = ("nested",)
    kind = "forwarded"

    def __init__(self, nested: list[tuple[tuple[Any, ...], str]]) -> None:
        self.nested = nested


FORWARDED = Forwarded([])  # (a call naming forwarded values as arguments of their own)


def resolve(cache: OperandCache, call: Call, user: object = None) -> Fail | Forwarded | None:
    """Replace the ``Ref("op", key)`` arguments of ``call`` by their values, in place
    (and those inside the list or map arguments ``call.inside`` names: `_resolve_inside`).

    Done when the call is queued, so an entry evicted while the call waits is still held
    by the call. ``user`` (the caller's connection) is recorded as using each entry.
    Returns the Fail to answer when an operand is not here, or a Ref's key is no key (not
    a str of at most KEY_MAX characters: ``bad-call``, keylimits.py, and nothing of the
    call kept); else a `Forwarded` when the
    call names a forwarded value (as an argument, or inside a marked one), else None.

    Every cached operand is looked up, whatever forwarded values the call also names: a
    call held for one holds its operands too (other Puts may evict them meanwhile), and a
    call that misses one is answered at once, before it takes a forwarded value, which is
    delivered once (the client sends the call again naming the same forwarded key, which
    must still be here for it).
    """
    waits: Forwarded | None = None
    args = call.args
    for i, a in enumerate(args):
        if type(a) is Ref:
            if type(a.key) is not str or len(a.key) > KEY_MAX:  # (never kept: keylimits.py)
                return ref_fault(call.id, a.key, f"argument {i}")
            if a.kind == "fwd":
                waits = FORWARDED
                continue
            try:
                args[i] = _value(cache, a, user)
            except KeyError:
                return _miss(call, a)
    if call.kwargs:
        for k, v in call.kwargs.items():
            if type(v) is Ref:
                if type(v.key) is not str or len(v.key) > KEY_MAX:
                    return ref_fault(call.id, v.key, f"argument {k!r}")
                if v.kind == "fwd":
                    waits = FORWARDED
                    continue
                try:
                    call.kwargs[k] = _value(cache, v, user)
                except KeyError:
                    return _miss(call, v)
    if call.inside is not None:  # (Refs inside list or map arguments: only those marked)
        got = _resolve_inside(cache, call, user)
        if got is not None:
            return got  # (a miss; or the forwarded values inside, with those outside)
    return waits


def _resolve_inside(cache: OperandCache, call: Call, user: object) -> Fail | Forwarded | None:
    """`resolve`'s step for the arguments ``call.inside`` names (broadcast handles in a
    list, tuple or dict, client/nested.py; promises forwarded from one, fwdargs.py):
    each ``Ref("op", key)`` among their items and map values, at most INSIDE_DEPTH
    containers deep, replaced by its value in place, and each ``Ref("fwd", key)`` found
    there (a `Forwarded`, if any and no miss). Only these arguments are looked into, and
    only for a call that names some."""
    found: list[tuple[tuple[Any, ...], str]] = []
    for at in call.inside or ():
        holder: Any = call.args if type(at) is int else call.kwargs
        if holder is None or (at not in holder if type(at) is str
                              else not 0 <= at < len(holder)):  # type: ignore[operator]
            return Fail(call.id, "bad-call", "LookupError",
                        f"the call marks argument {at!r} as holding operands, and has none")
        lost = _inside(cache, holder[at], user, 1, (at,), found)
        if lost is not None:
            if type(lost.key) is not str or len(lost.key) > KEY_MAX:
                return ref_fault(call.id, lost.key, f"inside argument {at!r}")
            return _miss(call, lost)
    return Forwarded(found) if found else None


def _inside(cache: OperandCache, x: Any, user: object, depth: int, path: tuple[Any, ...],
            found: list[tuple[tuple[Any, ...], str]]) -> Ref | None:
    """Replace the ``Ref("op")`` items of ``x`` (a list, or a map's values; its keys are
    never operands) by their values in place, and those of the lists and maps in it;
    the first Ref whose operand is not here, or whose key is no key (not a str of at most
    KEY_MAX characters), else None. Each ``Ref("fwd")`` is added to
    ``found`` with its place (``path``, the place of ``x``, and its step). A list of
    numbers or strings alone is passed over without a Python step per item."""
    t = type(x)
    if t is list:
        if _plain().issuperset(map(type, x)):
            return None
        items: Any = enumerate(x)
    elif t is dict:
        items = x.items()
    else:
        return None
    for k, v in items:
        tv = type(v)
        if tv is Ref:
            if type(v.key) is not str or len(v.key) > KEY_MAX:
                return v  # type: ignore[no-any-return]
            if v.kind == "op":
                try:
                    x[k] = _value(cache, v, user)  # (a map's value: its size is unchanged)
                except KeyError:
                    return v  # type: ignore[no-any-return]
            else:  # ("fwd": the only other kind a decoder makes)
                found.append(((*path, k), v.key))
        elif (tv is list or tv is dict) and depth < INSIDE_DEPTH:
            lost = _inside(cache, v, user, depth + 1, (*path, k), found)
            if lost is not None:
                return lost
    return None


# Item types a list can hold with no Ref, list or map among them (`_inside`)
_PLAIN: dict[type[Any] | None, frozenset[type[Any]]] = {
    None: frozenset({int, float, bool, str, bytes, type(None)})}  # (by numpy.ndarray)


def _plain() -> frozenset[type[Any]]:
    """The item types of `_PLAIN`, numpy's arrays among them once numpy is imported."""
    nd = ndarray_type()
    kinds = _PLAIN.get(nd)
    if kinds is None:
        kinds = _PLAIN[nd] = _PLAIN[None] | {nd} if nd is not None else _PLAIN[None]
    return kinds


def resolve_batch(cache: OperandCache, batch: CallBatch, user: object = None) -> Fail | None:
    """`resolve` for every call of an aggregated batch: a batch whose calls name cached
    operands (client/batching.py) runs only if all of them are here; otherwise the
    whole batch is answered ``cache-miss`` (with the batch's id) and none of it runs.

    A batch that misses still looks up every operand it names: the miss names all it
    lacks (its keys, separated by spaces), so the client puts them all before it goes
    again, and those here become the most recently used, so that those Puts evict
    operands the batch does not name. (Stopping at the first, the batch went again
    after a Put of that one, which evicted another it named, still the least recently
    used: it missed again and went with values, each call carrying its own copy.)"""
    got: dict[Any, Any] = {}  # (the calls of a batch often name one operand: looked up once)
    lost: list[str] | None = None
    for row, args in enumerate(batch.args):
        for i, a in enumerate(args):
            if type(a) is Ref:
                if type(a.key) is not str or len(a.key) > KEY_MAX:  # (keylimits.py)
                    return ref_fault(batch.id, a.key, f"call {row}'s argument {i}")
                v = got.get(a.key, got)
                if v is got:
                    try:
                        v = _value(cache, a, user)
                    except KeyError:
                        if lost is None:
                            lost = []
                        lost.append(a.key)
                        got[a.key] = _LOST
                        continue
                    got[a.key] = v
                elif v is _LOST:
                    continue
                else:
                    cache.hits += 1  # (a hit per call that names it, as for single calls)
                args[i] = v
    if lost is not None:
        return Fail(batch.id, "cache-miss", "KeyError", " ".join(lost))
    return None


_LOST = object()  # (resolve_batch: a key already found missing in this batch)


def _value(cache: OperandCache, ref: Ref, user: object) -> Any:
    if ref.kind != "op":
        raise KeyError(ref.key)
    return cache.get(str(ref.key), user)


def _miss(call: Call, ref: Ref) -> Fail:
    # The message is the key alone: the client forgets exactly that entry for this replica.
    return Fail(call.id, "cache-miss", "KeyError", str(ref.key))
