"""Shared-memory segments, and one segment per cached operand for every replica.

`Segment` is a sender's memfd (transport/shm.py pools them per channel). `Shelf` is the
process-wide part: the value of a ``Put`` (an operand named by its content hash) that
goes over ``shm`` is copied once into a segment of its own, and every channel that
sends a ``Put`` of the same key passes that same segment: a client caching B on two
replicas of one host copies B once, not once per replica, and each replica maps it and
uses it in place. Those segments are given to the receivers read-only (a descriptor
opened ``O_RDONLY``, mapped ``PROT_READ``): what one replica holds another reads, so
none may write it, and the arrays a replica makes from it are read-only.

A segment is held once per frame that named it, until that receiver's last array of it
is freed (the release rides back as for any segment; for a cached operand, when the
replica's cache lets it go, e.g. on ``Drop``). A segment no receiver holds keeps its
content and its key, so a later ``Put`` of the same key sends it again without a copy,
until the memory is wanted for another operand (warm pages are reused: fresh shared
memory costs ~1 ms per MB to fault in here). When an operand needs a new segment, a
helper thread makes one more of that size, pages touched, for the next operand: a
program that sends a fresh B every round needs two (the replicas still hold the last
one when the next is copied in), and its second round no longer pays the faults on the
path of its first call. A segment whose channel closed while
its peer still held it is never reused (that peer's arrays may still view it); it is
closed when the last hold elsewhere goes. Closing a segment tells every peer it was
sent to to forget its mapping. At most ``MAX_SHARED`` are open at once (descriptors);
past that, with none free, an operand's value travels in its frame.

A call's frozen array that is sent again (`sent_before`) takes the same way, under a
key made of its bytes (`content_name`): see shmseg.py.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import xxhash

from polybus.lazynumpy import is_array
from polybus.transport.memfd import sealed_memfd
from polybus.wire.arrays import place_of

if TYPE_CHECKING:  # (numpy is imported where an array needs it: polybus/lazynumpy.py)
    import numpy as np

__all__ = [
    "KEEP_BYTES",
    "MAX_SHARED",
    "SHARED_BIT",
    "Segment",
    "SharedSegment",
    "Shelf",
    "content_name",
    "segment_size",
    "sent_before",
    "shelf",
]

MIN_SEGMENT = 1 << 20
SHARED_BIT = 1 << 63  # segment ids of shared segments (a channel's own count up from 1)
KEEP_BYTES = 256 << 20  # free shared segments kept warm for the next operands, at most
# Shared segments open at once, held or free: each costs two descriptors here (the
# read-only one to send, mmap's copy of the memfd) and one per replica mapping it. Past
# this an operand's value goes in its frame (120 live operands took 360 before).
MAX_SHARED = 64


class Segment:
    __slots__ = ("busy", "fd", "id", "map", "shared", "size", "view")

    def __init__(self, seg_id: int, size: int, populate: bool = False) -> None:
        self.id = seg_id
        self.size = size
        self.fd = sealed_memfd(f"polybus-shm-{seg_id}", size)  # (memfd.py: cannot shrink)
        flags = mmap.MAP_SHARED | (getattr(mmap, "MAP_POPULATE", 0) if populate else 0)
        try:
            self.map = mmap.mmap(self.fd, size, flags)
        except OSError:
            os.close(self.fd)
            raise
        self.view = memoryview(self.map)
        self.busy = False
        self.shared = False  # the receiver has its descriptor

    def close(self) -> None:
        self.view.release()
        try:
            self.map.close()
        except BufferError:
            pass  # a copy into it in another thread views it yet: unmapped after it
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def copy_into(view: memoryview, data: Any) -> int:
    """Copy a buffer (bytes-like, or an array that may not be contiguous: gathered in
    the same pass) to the start of ``view``; the bytes copied."""
    if is_array(data):
        import numpy as np

        n = data.nbytes
        np.copyto(np.frombuffer(view[:n], data.dtype).reshape(data.shape), data, casting="no")
        return n
    src = memoryview(data).cast("B")
    view[:src.nbytes] = src
    return src.nbytes


def segment_size(n: int) -> int:
    size = MIN_SEGMENT
    while size < n:
        size <<= 1
    return size


class SharedSegment:
    """A segment holding one operand's bytes for every channel that sends it."""

    __slots__ = ("dead", "holds", "key", "length", "peers", "ro_fd", "seg")

    def __init__(self, seg: Segment) -> None:
        self.seg = seg
        # What receivers get: the same memory, but they cannot map it for writing.
        self.ro_fd = os.open(f"/proc/self/fd/{seg.fd}", os.O_RDONLY | os.O_CLOEXEC)
        os.close(seg.fd)  # never sent: the mapping (and its own copy) is enough here
        seg.fd = -1
        self.key: tuple[str, int] | None = None
        self.length = 0
        self.holds = 0  # frames naming it whose receiver has not released it yet
        self.dead = False  # never reused (a closed channel's peer may still view it)
        # Each channel that passed the descriptor, with its forget(channel, seg_id): a
        # function, not the channel's bound method, which would hold the channel (and
        # its memory) for as long as the segment lives, closed or not.
        self.peers: weakref.WeakKeyDictionary[Any, Callable[[Any, int], None]] = (
            weakref.WeakKeyDictionary())

    @property
    def id(self) -> int:
        return self.seg.id

    def close(self) -> None:
        for ch, forget in list(self.peers.items()):
            forget(ch, self.seg.id)
        self.peers.clear()
        os.close(self.ro_fd)
        self.seg.close()


class Shelf:
    """The process's shared segments, by operand key."""

    def __init__(self, keep_bytes: int = KEEP_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self._lock = threading.Lock()
        self._by_key: dict[tuple[str, int], SharedSegment] = {}
        self._free: list[SharedSegment] = []  # held by no receiver, oldest first
        self._free_bytes = 0
        self._next_id = 1
        self.max_segments = MAX_SHARED
        self._open = 0  # segments open, held, free or orphaned
        self._channels = 0  # open channels that have lent segments
        self.copies = 0  # operands copied in (a Put sent twice from one copy counts once)
        self._makers: dict[int, threading.Thread] = {}  # segment size -> making a spare

    def lend(self, key: str, index: int, data: Any, n: int) -> SharedSegment | None:
        """The segment holding buffer ``index`` (``n`` bytes) of the operand ``key``
        (copied in now if no segment has it), held once more: the caller sends it in
        one frame. None if ``max_segments`` are open and held: the caller sends the
        value in the frame."""
        with self._lock:
            s = self._by_key.get((key, index))
            if s is None or s.length != n:
                s, fresh = self._take(n)
                if s is None:
                    return None
                copy_into(s.seg.view, data)
                self.copies += 1
                s.key, s.length = (key, index), n
                self._by_key[key, index] = s
                if fresh:
                    self._spare_for(s.seg.size)
            elif s.holds == 0:
                self._free.remove(s)
                self._free_bytes -= s.seg.size
            s.holds += 1
            return s

    def give_back(self, s: SharedSegment, times: int = 1, *, orphan: bool = False) -> None:
        """A receiver released ``s`` (``times`` frames' worth); with ``orphan``, its
        channel closed while the peer may still view it, so it is never reused."""
        with self._lock:
            s.holds -= times
            if orphan and not s.dead:
                s.dead = True
                self._unkey(s)
            if s.holds > 0:
                return
            if s.dead:
                self._close(s)
                return
            self._free.append(s)
            self._free_bytes += s.seg.size
            # (With no channel left, none is kept: `leave` closed the free ones, and a
            # hold given back after it, a send or a release that met the last close in
            # another thread, is the last of its segment.)
            while self._free and (self._free_bytes > self.keep_bytes or self._channels <= 0):
                self._close_free(self._free[0])

    def enter(self) -> None:
        """A channel lends its first segment."""
        with self._lock:
            self._channels += 1

    def leave(self) -> None:
        """A channel that lent closed; with the last one, the free segments close too
        (closing every channel frees everything, as for a channel's own segments)."""
        with self._lock:
            self._channels -= 1
            last = self._channels <= 0
            if last:
                while self._free:
                    self._close_free(self._free[0])
            makers = list(self._makers.values()) if last else []
        for t in makers:  # (each closes its spare itself, seeing no channel left)
            t.join()

    def held(self) -> int:
        """Shared segments open (for tests and stats)."""
        with self._lock:
            return self._open

    # -- with the lock held ------------------------------------------------------------
    def _take(self, n: int) -> tuple[SharedSegment | None, bool]:
        """A free segment for ``n`` bytes, or a new one, and whether it is new; None if
        ``max_segments`` are open and none is free."""
        best: SharedSegment | None = None
        for s in self._free:
            if n <= s.seg.size <= 4 * n and (best is None or s.seg.size < best.seg.size):
                best = s
        if best is not None:
            self._free.remove(best)
            self._free_bytes -= best.seg.size
            self._unkey(best)
            return best, False
        while self._open >= self.max_segments and self._free:
            self._close_free(self._free[0])  # none fits: the oldest free one makes room
        if self._open >= self.max_segments:
            return None, False
        seg = Segment(SHARED_BIT | self._next_id, segment_size(n))
        self._next_id += 1
        try:
            s = SharedSegment(seg)
        except OSError:
            seg.close()
            raise
        self._open += 1
        return s, True

    def _spare_for(self, size: int) -> None:
        """A new segment had to be made (and faulted in, ~1 ms per MB here, on the path
        of the Put): make one more of that size, pages touched, on a helper thread,
        while the replicas compute. A program that sends a fresh operand every round
        needs two (the replicas still hold the last one when the next is copied in), so
        its second round copies into warm memory too. At most ``keep_bytes / 4`` each,
        and only while the free segments stay within ``keep_bytes``."""
        if (size > self.keep_bytes // 4 or size in self._makers
                or self._free_bytes + size > self.keep_bytes
                or self._open >= self.max_segments):
            return
        self._open += 1  # counted from now: its descriptors are open while it is made
        t = threading.Thread(target=self._make_spare, args=(size,), daemon=True,
                             name="polybus-shm-spare")
        self._makers[size] = t
        try:
            t.start()
        except RuntimeError:  # no thread to be had: no spare (and nothing counted)
            del self._makers[size]
            self._open -= 1

    def _make_spare(self, size: int) -> None:
        s: SharedSegment | None = None
        try:
            with self._lock:
                seg_id = self._next_id
                self._next_id += 1
            seg = Segment(SHARED_BIT | seg_id, size, populate=True)  # (the GIL is let go)
            try:
                s = SharedSegment(seg)
            except OSError:
                seg.close()
        except OSError:
            pass  # no spare: the next operand gets a new segment, as without one
        with self._lock:
            del self._makers[size]
            if s is not None and self._channels > 0 and self._free_bytes + size <= self.keep_bytes:
                self._free.append(s)
                self._free_bytes += size
                s = None
            else:
                self._open -= 1  # (counted when its maker started)
        if s is not None:
            s.close()

    def _unkey(self, s: SharedSegment) -> None:
        if s.key is not None and self._by_key.get(s.key) is s:
            del self._by_key[s.key]
        s.key = None

    def _close_free(self, s: SharedSegment) -> None:
        self._free.remove(s)
        self._free_bytes -= s.seg.size
        self._unkey(s)
        self._close(s)

    def _close(self, s: SharedSegment) -> None:
        self._open -= 1
        s.close()


_shelf: Shelf | None = None
_shelf_lock = threading.Lock()


def shelf() -> Shelf:
    """This process's shelf (made on first use)."""
    global _shelf
    if _shelf is None:
        with _shelf_lock:
            if _shelf is None:
                _shelf = Shelf()
    return _shelf


# Frozen arrays sent by segment lately, by place (wire/arrays.place_of: the owner and
# where the array lies in it; each checked by a weak reference to the owner): one
# sent again goes by its shared segment. Emptied when full (a miss costs a copy).
_SEEN_MAX = 4096
_seen: dict[tuple[Any, ...], weakref.ref[Any]] = {}


def sent_before(a: np.ndarray[Any, Any]) -> bool:
    """Whether this array, or a view of the same place in the same frozen array (ep's
    ``a[i:i+k]``, sliced afresh for each task), went by segment before; noted if not."""
    owner, place = place_of(a)
    ref = _seen.get(place)
    if ref is not None and ref() is owner:
        return True
    if len(_seen) >= _SEEN_MAX:
        _seen.clear()
    _seen[place] = weakref.ref(owner)
    return False


def content_name(a: np.ndarray[Any, Any]) -> str:
    """A contiguous array's bytes by their XXH3-128 (a shelf key no ``Put`` has)."""
    import numpy as np

    return "~" + xxhash.xxh3_128(a.reshape(-1).view(np.uint8).data).hexdigest()
