"""Content names of cached operands at the client, and which replica holds which.

An operand is named by a content hash (XXH3-128 of dtype, shape and bytes: 8 MB in
~0.2 ms here, where SHA-256 took ~4.5 ms on the path before the first call can leave;
why a non-cryptographic hash is enough: docs/security.md, "Operand names"). An array is
hashed again at each call (it may have been changed in place), unless it is read-only
through and through: then its hash is remembered per array object (by identity, dropped
when the array is freed), with a sample of its bytes that each later call looks at again
(client/refrozen.py: an array made writable, changed and frozen again is hashed again if
the change touches the sample). When the last live array of a content is freed or changed,
each session's `Known` learns of it, and each replica it was sent to is told (``Drop``,
in the next message to that replica) to forget it (client/operands.py makes the
messages).
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np
import xxhash

from polybus.client.held import Held
from polybus.client.refrozen import Sample, said_changed, sample_of, unchanged
from polybus.client.snapshot import frozen
from polybus.wire.arrays import owner_of, place_of

if TYPE_CHECKING:
    from polybus.client.calls import ReplicaLink
    from polybus.client.session import Session

__all__ = ["Known", "adopt", "content_key", "forget", "known_for", "remembered"]

# id -> (the array, its key, whether it was read-only through and through when hashed,
# and if so the sample of its bytes then: refrozen.py; None for a copy polybus made)
_memo: dict[int, tuple[weakref.ref[Any], str, bool, Sample | None]] = {}
# (owner id, first byte's address, shape, strides, dtype) of a frozen view -> (owner, its
# key, the sample of the view's bytes when hashed),
# and owner id -> (the owner, the places of it named): `place_of`. At most VIEW_PLACES
# places at once (a program slicing ever new windows of one frozen array would grow
# them, ~0.5 KB each, and keep their blocks at the replicas, for the array's life):
# past that, a new place's view is named as any array is, per object.
VIEW_PLACES = 1 << 14
_views: dict[tuple[Any, ...], tuple[weakref.ref[Any], str, Sample]] = {}
_owned: dict[int, tuple[weakref.ref[Any], list[tuple[Any, ...]]]] = {}
_live: dict[str, int] = {}  # content key -> live memoized arrays with that content
# Every session's `Known`, told of freed keys (weak references: a list, which `_release`
# goes over in a few steps, where a WeakSet's iteration took ~1.3 us of each fresh B)
_knowns: list[weakref.ref[Known]] = []
# What bytes' digest hashes before them: an array's digest begins with its dtype (a
# byte order, <, > or |, or a structured one's fields, [...]) and shape, a subclass's
# with its class and a NUL, a broadcast value's with its own prefix (broadcastvalue.py);
# with none, bytes spelling those would share their name, and a replica holding one
# would hand it to a call passing the other.
_BYTES = b"bytes\0"
# (dtype, shape) -> what an array's digest hashes before its bytes (`_array_digest`)
_PREFIXES: dict[tuple[Any, tuple[int, ...]], bytes] = {}
# Keys of memoized arrays freed (appended by their finalizers, in any thread) and not yet
# counted in _live; _lock orders the counting (content_key and drops_for, which may run
# in several threads of one program at once).
_freed: deque[str] = deque()
_lock = threading.Lock()


def content_key(value: Any) -> str | None:
    """The content name of an array or bytes value (None for anything else; for an
    array holding Python objects, ``dtype=object`` or a structured dtype with such a
    field: its bytes are references, not content, so it cannot be named and goes by
    value, uncached; and for a masked array, which travels pickled, its mask and fill
    value with its data: named by its data alone, two masks would share a name; a numpy
    matrix likewise, pickled as itself or refused).

    An array's bytes are hashed at every call, unless they cannot change: a program may
    change an array in place between two calls (``x[:] = ...``), and a name remembered
    from before would send the replica's old copy in place of the new bytes. An array
    that is read-only, and views only read-only arrays or bytes (`frozen`), is hashed
    once: XXH3 hashes 16-30 GB/s here, so freezing a large operand that many calls share
    (``b.flags.writeable = False``) saves the client that pass per call. Its name is
    remembered from then on, with a sample of its bytes (refrozen.py: the whole of an
    array of 16 KiB or less, 64 elements spread over a larger one) that each later call
    compares: an array made writable again, changed and frozen again is hashed again
    (its old name let go, as for an array changed in place) and the program warned,
    once per array, if the change touches the sample; one that touches none of the
    sampled elements keeps its old name (docs/strategies.md, `cache`, says not to)."""
    if isinstance(value, np.ndarray):
        arr: np.ndarray[Any, Any] = value
        if arr.dtype.hasobject or (type(arr) is not np.ndarray
                                   and isinstance(arr, np.ma.MaskedArray | np.matrix)):
            return None
        ident = id(arr)
        hit = _memo.get(ident)
        still = frozen(arr)
        if hit is not None and hit[0]() is arr and still and hit[2]:
            if unchanged(arr, hit[3]):
                return hit[1]  # read-only when hashed and since, as far as the sample says
            _changed(arr)  # (hashed again below, its old name let go)
        sample = None
        if still and isinstance(arr.base, np.ndarray):
            owner, place = place_of(arr)
            seen = _views.get(place)
            if seen is not None and seen[0]() is owner:
                if unchanged(arr, seen[2]):
                    return seen[1]
                _changed(arr)
            sample = sample_of(arr)  # (before the hash: a change between is seen later)
            key = _array_digest(arr, sample)
            if _placed(owner, place, key, sample):
                return key
        else:
            if _owned and not still:  # writable now: what was named in it may change
                _unplace(arr)
            if still:
                sample = sample_of(arr)
            key = _array_digest(arr, sample)  # (outside the lock: 8 MB take ~0.2 ms)
        with _lock:
            _settle()
            hit = _memo.get(ident)
            if hit is not None and hit[0]() is arr:
                if key == hit[1]:
                    if still:  # (read-only now, or its sample taken anew: the same bytes)
                        _memo[ident] = (hit[0], key, True, sample)
                    elif hit[2]:  # writable now: may change where no sample looks, so
                        _memo[ident] = (hit[0], key, False, None)  # hashed when frozen
                    return key
                _release(hit[1])  # changed in place: one array less holds the old content
            # (a replaced weakref is freed with its callback, which then never runs)
            _memo[ident] = (weakref.ref(arr, _forget(ident, key)), key, still, sample)
            _live[key] = _live.get(key, 0) + 1
        return key
    if isinstance(value, bytes | bytearray):
        return _digest(_BYTES, value)
    return None


def remembered(value: Any) -> str | None:
    """The name `content_key` remembers for ``value``, an array read-only through and
    through when hashed and since, its sample unchanged (no pass over its bytes, no
    lock); None for anything else (a view is named per place, and a changed array named
    anew: `content_key` does both)."""
    hit = _memo.get(id(value))
    if hit is None or not hit[2]:
        return None
    arr = hit[0]()
    if arr is not value or not frozen(arr) or not unchanged(arr, hit[3]):
        return None
    return hit[1]


# A read-only view of a read-only array (``a[i:j]``, ``b[:, j:k]``) is named once per
# place in the array it views (its owner: the last array of its bases), for as long as
# the owner lives: a program that makes a fresh view of the same frozen rows for every
# call (ep's ``a[i:i+k]``) hashes them once, and their name stays live (the replicas
# keep them) while the owner does, not just while one call's view does.

def _placed(owner: Any, place: tuple[Any, ...], key: str, sample: Sample) -> bool:
    """Remember ``key`` (and ``sample``) for ``place`` in ``owner`` (live while the owner
    is); False when VIEW_PLACES are remembered already (the view is then named as any
    array is)."""
    with _lock:
        _settle()
        hit = _views.get(place)
        if hit is not None and hit[0]() is owner:
            return hit[1] == key  # (named meanwhile by another thread: the same bytes)
        if len(_views) >= VIEW_PLACES:
            return False
        places = _owned.get(id(owner))
        if places is None or places[0]() is not owner:
            places = _owned[id(owner)] = (weakref.ref(owner, _forgetowner_of(id(owner))), [])
        places[1].append(place)
        _views[place] = (places[0], key, sample)
        _live[key] = _live.get(key, 0) + 1
    return True


def _unplace(arr: np.ndarray[Any, Any]) -> None:
    """Forget the places named in the array at the end of ``arr``'s bases: it is
    writable again, so what they hold may change (each name one live array less)."""
    owner = owner_of(arr)
    with _lock:
        places = _owned.get(id(owner))
        if places is None or places[0]() is not owner:
            return
        del _owned[id(owner)]  # (its weakref goes with it: the callback never runs)
        for place in places[1]:
            hit = _views.pop(place, None)
            if hit is not None:
                _release(hit[1])


def _changed(arr: np.ndarray[Any, Any]) -> None:
    """``arr``, frozen, differs from the sample remembered with its name: it was made
    writable, changed and frozen again. The program is told (once per array), and what
    was named in the array it views goes as for an array seen writable: its places
    (`_unplace`), and its own name (it is hashed again at its next call)."""
    said_changed(arr)
    if _owned:
        _unplace(arr)
    owner = owner_of(arr)
    if owner is not arr:
        with _lock:
            hit = _memo.get(id(owner))
            if hit is not None and hit[0]() is owner and hit[2]:
                _memo[id(owner)] = (hit[0], hit[1], False, None)


def _forgetowner_of(ident: int) -> Any:
    def drop(_ref: Any) -> None:  # (as _forget's: any thread, no lock, nothing counted)
        places = _owned.pop(ident, None)
        for place in places[1] if places is not None else ():
            hit = _views.pop(place, None)
            if hit is not None:
                _freed.append(hit[1])
    return drop


def adopt(arr: np.ndarray[Any, Any], key: str) -> None:
    """Name ``arr``, a read-only copy just made of content already named ``key``, without
    a second pass over its bytes (Comm.held); it counts as a live array of ``key``."""
    ident = id(arr)
    with _lock:
        _settle()
        _memo[ident] = (weakref.ref(arr, _forget(ident, key)), key, True, None)
        _live[key] = _live.get(key, 0) + 1


def _array_digest(a: np.ndarray[Any, Any], sample: Sample | None = None) -> str:
    """XXH3-128 of ``a``'s kind, shape and bytes (and class, for a subclass of ndarray);
    ``sample``, if it holds the whole of ``a``'s bytes (a small array's: refrozen.py),
    is hashed in place of a pass over them (the same digest, in one step: the first call
    with a fresh small B spent ~5 us here)."""
    dt, shape = a.dtype, a.shape
    prefix = _PREFIXES.get((dt, shape))
    if prefix is None:
        # (a structured dtype by its fields: its str, "|V16", is the same for any of its size)
        kind = dt.descr if dt.names is not None else dt.str
        prefix = f"{kind}{shape}".encode()
        if dt.names is None and len(_PREFIXES) < 4096:  # (made once a kind and shape)
            _PREFIXES[dt, shape] = prefix
    # (a plain ndarray's alone: a subclass's tobytes or view may not be its bytes, and
    # its view may not reshape; a masked array is not named at all: content_key)
    exact = type(a) is np.ndarray
    if sample is not None and sample[0] is None and exact:
        return xxhash.xxh3_128_hexdigest(prefix + sample[1])
    if not exact:  # (one that travels pickled arrives as itself: a recarray a recarray,
        # and a plain array of its dtype, shape and bytes must not share its name)
        cls = type(a)
        prefix = f"{cls.__module__}.{cls.__qualname__}\0".encode() + prefix
    flat = a if exact and a.flags.c_contiguous else np.ascontiguousarray(a)
    return _digest(prefix, flat.reshape(-1).view(np.uint8).data)


def _digest(prefix: bytes, data: memoryview | bytes | bytearray) -> str:
    """XXH3-128 of ``prefix`` and ``data``, as 32 hex digits."""
    h = xxhash.xxh3_128(prefix)
    h.update(data)
    return h.hexdigest()


def _forget(ident: int, key: str) -> Any:
    def drop(_ref: Any) -> None:
        # Runs wherever the array is freed: any thread, inside any call, even inside
        # content_key's own locked steps (a collection there), so it takes no lock and
        # counts nothing: it notes the key, and the next holder of the lock settles it.
        _memo.pop(ident, None)
        _freed.append(key)
    return drop


def _settle() -> None:
    """Count the arrays freed since the last look (holding ``_lock``)."""
    while _freed:
        try:
            key = _freed.popleft()
        except IndexError:  # (another thread took the last)
            return
        _release(key)


def _release(key: str) -> None:
    """One array with content ``key`` less (freed, or changed in place; holding
    ``_lock``); at none, each session is told, to have the replicas holding it drop it."""
    left = _live.get(key, 1) - 1
    if left > 0:
        _live[key] = left
        return
    _live.pop(key, None)
    for ref in _knowns:
        known = ref()
        if known is not None:
            known.dead.append(key)


class Known:
    """Which operand keys each replica holds from us, as far as we know (one per session,
    by replica name: client/held.py), and which of them to tell it to drop (their arrays
    are gone)."""

    def __init__(self) -> None:
        self.by_replica: dict[str, Held] = {}
        self.dead: list[str] = []  # keys whose last array was freed (appended by finalizers)
        self._drops: dict[str, list[str]] = {}  # replica name -> keys to drop there
        with _lock:  # (the sessions gone let go of: _release goes over the list)
            _knowns[:] = [r for r in _knowns if r() is not None]
            _knowns.append(weakref.ref(self))

    def drops_for(self, link: ReplicaLink) -> list[str]:
        """Keys ``link``'s replica holds from us whose arrays are gone; they count as not
        sent from now on (a later array with the same content is sent again)."""
        if _freed:
            with _lock:
                _settle()
        while self.dead:
            try:
                key = self.dead.pop()  # (atomic: another thread's _settle may append)
            except IndexError:  # (another thread of this session took the last)
                break
            if key in _live:
                continue  # an array of that content again (named in this very call, say)
            for name, keys in self.by_replica.items():
                if key in keys:
                    keys.discard(key)
                    self._drops.setdefault(name, []).append(key)
        return self._drops.pop(link.name, []) if self._drops else []

    def drops_pending(self, link: ReplicaLink) -> bool:
        """Keys wait to be told to ``link``'s replica (`drops_for` would return some; keys
        freed and not yet counted aside)."""
        return link.name in self._drops if self._drops else False

    def forget(self, name: str) -> None:
        """Replica ``name`` holds nothing from us: a new connection to it (a replacement
        registered under that name, or the same process dialled again, whose cache let go
        of what only the lost connection used: worker/cache.py, `release`). Its operands
        are Put again, not named; nothing is left to drop there."""
        # (a new dict: another thread may be going over the old one, in drops_for)
        self.by_replica = {k: v for k, v in self.by_replica.items() if k != name}
        self._drops.pop(name, None)

    def of(self, link: ReplicaLink, capacity: int = 0) -> Held:
        """What ``link``'s replica holds from us; ``capacity``, its cache's bound (that
        of its module: ModuleSpec.cache_bytes), if known."""
        s = self.by_replica.get(link.name)
        if s is None:
            s = self.by_replica[link.name] = Held(capacity)
        elif capacity > s.capacity:
            s.capacity = capacity
        return s


_known: weakref.WeakKeyDictionary[Session, Known] = weakref.WeakKeyDictionary()


def known_for(session: Session) -> Known:
    """The session's `Known` (made at its first cached operand or broadcast)."""
    k = _known.get(session)
    if k is None:
        k = _known[session] = Known()
    return k


def forget(session: Session, name: str) -> None:
    """Replica ``name`` holds nothing from ``session`` (`Known.forget`), a new connection
    to it made (client/revive.py); nothing to do if the session never named an operand."""
    k = _known.get(session)
    if k is not None:
        k.forget(name)
