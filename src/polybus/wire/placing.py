"""Where a large frame's raw buffers are received: bytes values straight into their bytes.

A large ``bytes`` argument or answer travels as a raw buffer (codec ext 2). Received into
the frame's own memory, it had to be copied once more into a new ``bytes`` object for the
program: a 1 MB echo paid that copy on both sides, a fifth of its round trip. Instead,
when the start of a large frame shows which of its buffers the header names as bytes
(the codec tells: `Codec.bytes_buffers`), each such buffer of at least `MIN_PLACED`
bytes is received straight into a new, not yet shared ``bytes`` object, which the codec
then hands out as it is.

Filling a new bytes object in place is what the C API allows for an object just made by
``PyBytes_FromStringAndSize(NULL, n)``, before anyone else has seen it; `new_bytes`
does that through ctypes. Where that is not available (not CPython), nothing is placed
and buffers are received (and copied out) as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from polybus.wire.spares import ALIGN  # (buffers start on its multiples: framing.py)

MIN_PLACED = 64 * 1024  # smaller bytes values are copied out: cheap, and no ctypes call
_SPLIT = struct.Struct("<HHI")

# Given a frame's msgpack header: the indices of the buffers it names as bytes values.
BytesBuffers = Callable[[memoryview], Collection[int]]


def _bytes_maker() -> Callable[[int], tuple[bytes, memoryview]] | None:
    try:
        import ctypes

        make = ctypes.pythonapi.PyBytes_FromStringAndSize
        data = ctypes.pythonapi.PyBytes_AsString
    except (ImportError, AttributeError):
        return None
    make.restype = ctypes.py_object
    make.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)
    data.restype = ctypes.c_void_p
    data.argtypes = (ctypes.py_object,)

    def new_bytes(n: int) -> tuple[bytes, memoryview]:
        obj: bytes = make(None, n)
        view = memoryview((ctypes.c_char * n).from_address(data(obj))).cast("B")
        return obj, view

    return new_bytes


new_bytes = _bytes_maker()
"""``new_bytes(n)``: a new bytes object of ``n`` uninitialised bytes and a writable view
of them (valid while the object lives; drop it before the object is shared), or None."""


@dataclass(slots=True)
class Placed:
    """A large frame whose bytes buffers are received into their own bytes objects.

    ``segments`` cover the frame body (offset 0 = the nbufs field) from the bytes already
    received to the end, in order, as (start, end, view of [start, end)).
    """

    body: Any                        # uint8 array: prefix, table, header, other buffers
    placed: dict[int, bytes]         # buffer index -> the bytes object it is received into
    segments: list[tuple[int, int, memoryview]]
    header: tuple[int, int]          # (offset, length) of the msgpack header in body
    buffers: list[tuple[int, int]]   # (offset, length) of each buffer in the frame body
    flags: int


def plan(start: memoryview, length: int, bytes_buffers: BytesBuffers | None) -> Placed | None:
    """A placement for a frame body of ``length`` bytes whose first bytes are ``start``,
    or None (receive it whole, as usual). None too for anything malformed: the usual
    path then reports it."""
    if new_bytes is None or bytes_buffers is None or start.nbytes < 8:
        return None
    nbufs, flags, header_len = _SPLIT.unpack_from(start, 0)
    head_end = 8 + 8 * nbufs + header_len
    if flags or not nbufs or nbufs > 4096 or start.nbytes < head_end:
        return None  # (flags: buffers may travel elsewhere, transport/shm.py)
    lens = list(struct.unpack_from(f"<{nbufs}Q", start, 8))
    bufs: list[tuple[int, int]] = []
    off = head_end
    for n in lens:
        off = (off + ALIGN - 1) & ~(ALIGN - 1)
        bufs.append((off, n))
        off += n
    if off != length:
        return None
    header = start[8 + 8 * nbufs:head_end]
    try:
        wanted = {i for i in bytes_buffers(header) if 0 <= i < nbufs and lens[i] >= MIN_PLACED}
    finally:
        header.release()
    if not wanted:
        return None
    have = start.nbytes
    # The body keeps everything that is not placed; it ends where the last of that ends.
    body_len, pos = have, 0
    regions: list[tuple[int, int, int]] = []  # (start, end, buffer index or -1 for body)
    for i, (boff, n) in enumerate(bufs):
        if i in wanted:
            regions.append((pos, boff, -1))
            regions.append((boff, boff + n, i))
            pos = boff + n
    regions.append((pos, length, -1))
    for s, e, i in regions:
        if i < 0 and e > s:
            body_len = max(body_len, e)
    import numpy as np

    body: Any = np.empty(body_len, dtype=np.uint8)
    body[:have] = np.frombuffer(start, dtype=np.uint8)
    placed: dict[int, bytes] = {}
    segments: list[tuple[int, int, memoryview]] = []
    for s, e, i in regions:
        if e <= s:
            continue
        if i < 0:
            view = memoryview(body)[s:e]
        else:
            obj, view = new_bytes(e - s)
            placed[i] = obj
            if s < have:  # the first read went past this buffer's start
                view[:min(have, e) - s] = start[s:min(have, e)]
        if e > have:
            segments.append((s, e, view))
    return Placed(body, placed, segments, (8 + 8 * nbufs, header_len), bufs, flags)
