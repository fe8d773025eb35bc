"""A single-producer, single-consumer byte ring in shared memory (the ``shm`` small path).

Each side of an ``shm`` connection owns one ring for what it sends: a memfd whose
descriptor goes to the peer over the Unix socket when the channel is made. The ring is
a byte stream (the frames of shm.py, unchanged), so any frame fits: one larger than
the free space is written in pieces as the reader frees room.

Layout: three u64 counters and the reader's ``coalesce`` (below), each on its own
cache line, then ``capacity`` bytes (a power of two). ``written`` and ``read`` only ever grow; ``written - read`` bytes are
waiting. ``awake`` is set by the reader while it spins on ``written``; a writer that
finds it clear rings the socket's doorbell (one byte) so a sleeping reader wakes.
``coalesce`` (microseconds, set by the reader, 0 by default) asks the writer to hold
that bell back while it has more to write soon: a replica with calls still queued
rings once its queue is empty, or that long after the first answer it held (a
module's ``coalesce``; worker/bells.py).

Memory ordering (assumed, documented): x86-64 (TSO: stores become visible in program
order, loads are not reordered with older loads), with CPython executing each
``struct.pack_into`` of a native aligned ``Q`` as one 8-byte store. A counter is
written only after the bytes it covers, so a reader that sees it sees them. The one
reordering TSO allows, a later load passing an earlier store, matters only for the
sleep/wake handshake (reader: clear ``awake`` then re-check ``written``; writer:
publish ``written`` then check ``awake``); both sides put a full barrier between the
two (``fence()``: a lock round trip, a locked instruction on x86-64).

Why no wakeup is lost (Dekker): the reader stores ``awake = 0``, fences, loads
``written``; the writer stores ``written``, fences, loads ``awake``. With a full fence on
each side the four accesses fall in one order that keeps each side's own, so either the
writer's store comes before the reader's load (the reader sees the frame and does not
sleep) or the reader's store comes before the writer's load (the writer sees the flag
down and rings, or, asked to coalesce, owes the bell: it rings it within
``coalesce``, fencing and looking at the flag again as it does). A bell for a frame the
reader took anyway only wakes it to an empty ring. Raising the flag needs no fence (a writer that sees it up skips a bell the reader
does not need); what the protocol needs is that every raise is followed, before that
side next sleeps in the kernel, by a lowering, a fence and a look at that ring
(ShmChannel's fills, ``spin``, client/rings.py ``down``, the worker's ``_rings_down``).
A peer that dies with its flag up leaves no one asleep: a sleeping reader sleeps on the
socket as well, which the kernel closes with the dead process.
"""

from __future__ import annotations

import mmap
import os
import platform
import struct
import threading

from polybus.transport.memfd import check_sealed, sealed_memfd

__all__ = ["ATTACH_MAX", "CAPACITY", "Ring", "fence", "supported"]

CAPACITY = 1 << 20
# The largest ring a peer may hand over: its pages are faulted in as it is mapped
# (MAP_POPULATE), so a peer's 16 GiB memfd took that much memory here, and the mapping
# held the replica up meanwhile. Rings are made at CAPACITY.
ATTACH_MAX = 64 << 20
_HEADER = 4096
_WRITTEN, _READ, _AWAKE, _COALESCE = 0, 64, 128, 192
_U64 = struct.Struct("Q")  # native and 8-byte aligned: a single store/load
_FENCE = threading.Lock()
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # (Linux)


def supported() -> bool:
    """The ordering argument above holds here (x86-64 only; elsewhere shm uses the socket)."""
    return platform.machine().lower() in ("x86_64", "amd64")


def fence() -> None:
    """A full memory barrier: acquiring a lock is a locked read-modify-write."""
    _FENCE.acquire()
    _FENCE.release()


class Ring:
    """One direction of a connection. The writer side made it (``create``); the reader
    maps the descriptor it was sent (``attach``)."""

    def __init__(self, fd: int, *, owns_fd: bool, length: int = 0) -> None:
        self.fd = fd if owns_fd else -1
        # Mapped with its pages in: a ring's first laps otherwise fault page by page on
        # both sides, in the middle of the first calls (matmul n=100 over shm: ~1,000
        # faults across client and replicas in the first product); here it is setup.
        # ``length``: that much of it (0: all of it).
        self.map = mmap.mmap(fd, length, mmap.MAP_SHARED | _POPULATE)
        self.capacity = len(self.map) - _HEADER
        if self.capacity <= 0 or self.capacity & (self.capacity - 1):
            self.map.close()
            raise ValueError(f"bad ring size {len(self.map)}")
        self.view = memoryview(self.map)
        self.data = self.view[_HEADER:]
        self._mask = self.capacity - 1
        # Each side's own counter, kept locally; only the other one is read from memory.
        self.written: int = _U64.unpack_from(self.map, _WRITTEN)[0]
        self.read: int = _U64.unpack_from(self.map, _READ)[0]

    @classmethod
    def create(cls, capacity: int = CAPACITY) -> Ring:
        fd = sealed_memfd("polybus-shm-ring", _HEADER + capacity)  # (memfd.py)
        try:
            return cls(fd, owns_fd=True)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def attach(cls, fd: int) -> Ring:
        """The ring a peer sent; ValueError for one over ATTACH_MAX, not a ring, or not
        sealed against shrinking (memfd.py)."""
        check_sealed(fd)
        size = os.fstat(fd).st_size
        if size > _HEADER + ATTACH_MAX:
            raise ValueError(f"ring of {size} bytes is over the limit of "
                             f"{_HEADER + ATTACH_MAX} bytes")
        if size <= _HEADER:
            raise ValueError(f"bad ring size {size}")
        # The size checked, not the file's whole length when it is mapped (sealed, it
        # cannot change now; the length is kept all the same).
        return cls(fd, owns_fd=False, length=size)

    # -- writer ------------------------------------------------------------------
    def free(self) -> int:
        read: int = _U64.unpack_from(self.map, _READ)[0]
        return self.capacity - (self.written - read)

    def write(self, data: memoryview) -> int:
        """Copy as much of ``data`` as fits and publish it; the bytes written."""
        n = min(data.nbytes, self.free())
        if n <= 0:
            return 0
        pos = self.written & self._mask
        first = min(n, self.capacity - pos)
        self.data[pos:pos + first] = data[:first]
        if n > first:
            self.data[:n - first] = data[first:n]
        self.written += n
        _U64.pack_into(self.map, _WRITTEN, self.written)  # after the bytes it covers
        return n

    def write_small(self, data: bytes | bytearray | memoryview) -> int:
        """All of ``data`` (bytes-like, 1-D) published at once if it fits without
        wrapping round; else 0 and nothing written (`write` takes it in pieces)."""
        n = len(data)
        pos = self.written & self._mask
        if pos + n > self.capacity or n > self.capacity - (self.written - _U64.unpack_from(self.map, _READ)[0]):
            return 0
        self.data[pos:pos + n] = data
        self.written += n
        _U64.pack_into(self.map, _WRITTEN, self.written)  # after the bytes it covers
        return n

    def reader_awake(self) -> bool:
        return self.view[_AWAKE] != 0

    def coalesce(self) -> float:
        """How long the reader lets a bell be held back (s; 0: ring every frame)."""
        us: int = _U64.unpack_from(self.map, _COALESCE)[0]
        return us / 1e6

    # -- reader ------------------------------------------------------------------
    def available(self) -> int:
        # A counter seen half-updated would be smaller than the real one; never larger.
        n: int = _U64.unpack_from(self.map, _WRITTEN)[0] - self.read
        return n if n > 0 else 0

    def read_into(self, buf: memoryview) -> int:
        """Copy waiting bytes into ``buf`` (up to its size) and free their room."""
        n = min(self.available(), buf.nbytes)
        if n <= 0:
            return 0
        pos = self.read & self._mask
        first = min(n, self.capacity - pos)
        buf[:first] = self.data[pos:pos + first]
        if n > first:
            buf[first:n] = self.data[:n - first]
        self.read += n
        _U64.pack_into(self.map, _READ, self.read)
        return n

    def set_awake(self, awake: bool) -> None:
        self.view[_AWAKE] = 1 if awake else 0

    def set_coalesce(self, seconds: float) -> None:
        _U64.pack_into(self.map, _COALESCE, max(0, round(seconds * 1e6)))

    def close(self) -> None:
        for v in (self.data, self.view):
            try:
                v.release()
            except (BufferError, ValueError):
                pass
        try:
            self.map.close()
        except (BufferError, ValueError):
            pass  # another thread's view of it is still alive; freed with it
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
