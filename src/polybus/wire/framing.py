"""Frames on a byte stream, sans-IO: bytes in, frames out; no sockets here.

A frame (all integers little-endian)::

    u32  length        bytes that follow this field (<= the receiver's max_frame)
    u16  nbufs         raw buffers carried beside the header
    u16  flags         0, except on local transports (transport/shm.py: 1 = some
                       buffers are in shared memory, 2 = a channel control frame)
    u32  header_len    bytes of the msgpack header
    u64  buf_len       nbufs times, one per buffer
    ...  header        msgpack
    ...  buffers       in order, each starting at the next multiple of 64 bytes from
                       the start of the nbufs field (zero bytes pad the gaps), so an
                       array received in place is aligned for its dtype (numpy falls
                       off BLAS for unaligned arrays: 10x slower for row @ B)

The receiver fills memory the decoder lends it (`get_buffer` / `buffer_updated`, like
asyncio's BufferedProtocol), so a large frame is received straight into its own
bytearray and its buffers reach numpy without a copy. Small frames share one scratch
area; their buffers are copied out (cheaply) so they stay valid.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from polybus.errors import MessageTooLarge, ProtocolError
from polybus.wire.placing import BytesBuffers, Placed, plan
from polybus.wire.spares import ALIGN as SPARE_ALIGN
from polybus.wire.spares import SpareBodies

PREFIX = struct.Struct("<IHHI")  # length, nbufs, flags, header_len
BUFLEN = struct.Struct("<Q")
_SPLIT = struct.Struct("<HHI")
MAX_BUFFERS = 4096
MAX_FRAME = (1 << 32) - 1  # the most a frame's u32 length can say (config/cluster.py)
DEFAULT_MAX_FRAME = 1 << 30
# Small frames are read into one scratch area, many per read. A large frame's first
# read lands there too and is copied out, so the scratch is kept small.
_SCRATCH = 64 * 1024
_BIG = 128 * 1024  # frames at least this long get a bytearray of their own


@dataclass(slots=True)
class Frame:
    header: bytes | memoryview
    buffers: list[bytes | bytearray | memoryview]  # bytes: see wire/placing.py
    size: int  # bytes on the wire, prefix included
    flags: int = 0


ALIGN = SPARE_ALIGN  # buffers start on multiples of this (see the frame layout above)
# A frame up to this long is joined into one piece: written apart, each piece costs more
# (a send's iovec, a ring write of ~1.2 us of Python) than copying a few KiB (measured
# on the shm ring: a call with a 1x10 and a 10x10 array, 4 pieces, 5.0 us written
# piecewise, 0.9 us joined).
JOIN_MAX = 16 * 1024
_ZEROS = bytes(ALIGN)


def _padded(off: int) -> int:
    return (off + ALIGN - 1) & ~(ALIGN - 1)


def body_length(header_len: int, buffer_lens: list[int]) -> int:
    """Bytes after the length field: fixed part, buffer table, header, padded buffers."""
    off = 8 + 8 * len(buffer_lens) + header_len
    for n in buffer_lens:
        off = _padded(off) + n
    return off


def too_large(length: int, max_frame: int) -> MessageTooLarge:
    """The error for a message of ``length`` bytes over ``max_frame`` (raised by the
    encoder before anything is written)."""
    return MessageTooLarge(f"message of {length} bytes is over the frame limit of "
                           f"{max_frame} bytes ([cluster] max_frame in the configuration; "
                           "of the two ends of a connection, the lower)")


def _counted(n: int) -> None:
    if n > MAX_BUFFERS:
        raise ProtocolError(f"a frame carries at most {MAX_BUFFERS} buffers, not {n}")


def _prefix(length: int, header_len: int, buffer_lens: list[int], max_frame: int,
            flags: int) -> bytes:
    """The prefix of a frame whose body (after the length field) is ``length`` bytes."""
    if length > max_frame:
        raise too_large(length, max_frame)
    n = len(buffer_lens)
    out = PREFIX.pack(length, n, flags, header_len)
    if n == 1:
        return out + BUFLEN.pack(buffer_lens[0])
    return out + struct.pack(f"<{n}Q", *buffer_lens) if n else out


def frame_prefix(header_len: int, buffer_lens: list[int], max_frame: int, flags: int = 0) -> bytes:
    """The bytes that precede ``header`` on the wire."""
    _counted(len(buffer_lens))
    return _prefix(body_length(header_len, buffer_lens), header_len, buffer_lens, max_frame, flags)


def pieces_size(pieces: list[Any]) -> int:
    """The bytes in a frame's ``pieces`` (bytes, bytearrays, memoryviews, arrays)."""
    size = 0
    for p in pieces:
        size += len(p) if type(p) is bytes or type(p) is bytearray else p.nbytes
    return size


def encode_frame(header: bytes, buffers: list[bytes | memoryview] | None = None,
                 max_frame: int = DEFAULT_MAX_FRAME, flags: int = 0) -> list[bytes | memoryview]:
    """The pieces to write, in order (for sendmsg / writelines). Buffers are not copied,
    except into one piece with the header when the frame is at most JOIN_MAX bytes."""
    if not buffers:
        length = 8 + len(header)
        if length > max_frame:
            raise too_large(length, max_frame)
        prefix = PREFIX.pack(length, 0, flags, len(header))
        # One piece is one plain send; a large header is not copied to make it one.
        return [prefix + header] if length < _BIG else [prefix, header]
    # body_length's steps in the same pass that places the pieces (a call's frame is
    # made per call: ~0.8 us less than calling it).
    count = len(buffers)
    _counted(count)
    lens = [b.nbytes if type(b) is memoryview else memoryview(b).nbytes for b in buffers]
    off = 8 + 8 * count + len(header)  # offsets count from the nbufs field
    pieces: list[bytes | memoryview] = []
    first_pad = b""
    for b, n in zip(buffers, lens, strict=True):
        pad = -off & (ALIGN - 1)
        if pad:
            if pieces:
                pieces.append(_ZEROS[:pad])
            else:
                first_pad = _ZEROS[:pad]
        pieces.append(b)
        off += pad + n
    prefix = _prefix(off, len(header), lens, max_frame, flags)
    if off <= JOIN_MAX:
        try:
            return [b"".join([prefix, header, first_pad, *pieces])]
        except (TypeError, BufferError):  # (a strided buffer: left as it is)
            pass
    return [prefix + header + first_pad, *pieces]


def split(body: memoryview, *, copy: bool) -> Frame:
    """The frame whose body (the bytes after its length field) is ``body``, every length
    checked; ``copy``: header and buffers copied out, so they outlive ``body``."""
    nbufs, flags, header_len = _SPLIT.unpack_from(body, 0)
    if nbufs == 0:  # the common small message: header only
        if 8 + header_len != body.nbytes:
            raise ProtocolError(f"frame lengths disagree: {8 + header_len} declared, "
                                f"{body.nbytes} received")
        return Frame(bytes(body[8:]) if copy else body[8:], [], 4 + body.nbytes, flags)
    if nbufs > MAX_BUFFERS:
        raise ProtocolError(f"frame declares {nbufs} buffers; at most {MAX_BUFFERS}")
    off = 8
    lens = []
    if off + 8 * nbufs > body.nbytes:
        raise ProtocolError("frame is shorter than its buffer table")
    for _ in range(nbufs):
        (n,) = BUFLEN.unpack_from(body, off)
        lens.append(n)
        off += 8
    total = body_length(header_len, lens)
    if total != body.nbytes:
        raise ProtocolError(f"frame lengths disagree: {total} declared, {body.nbytes} received")
    header: bytes | memoryview = bytes(body[off:off + header_len]) if copy else body[off:off + header_len]
    off += header_len
    buffers: list[bytes | bytearray | memoryview] = []
    for n in lens:
        off = _padded(off)
        piece = body[off:off + n]
        buffers.append(bytearray(piece) if copy else piece)
        off += n
    return Frame(header, buffers, 4 + body.nbytes, flags)


class FrameDecoder:
    """Turns received bytes into `Frame`s, checking every length before trusting it."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME,
                 bytes_buffers: BytesBuffers | None = None) -> None:
        self.max_frame = max_frame
        self.bytes_buffers = bytes_buffers  # which buffers are bytes values (wire/placing.py)
        self._scratch = bytearray(_SCRATCH)
        self._start = 0
        self._end = 0
        self._big: Any = None  # body of a large frame being received (uint8 ndarray)
        self._spares = SpareBodies()
        self._big_filled = 0
        self._big_len = 0  # the large frame's body length (its memory may be shorter)
        self._placed: Placed | None = None  # its bytes buffers' own memory, if any
        self.empty = True  # no byte received and not yet taken (kept by the methods below)

    # -- the receiving side's half -------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Memory to receive into (at least 1 byte)."""
        if self._big is not None and self._big_filled < self._big_len:
            return self._big_view()
        if self._end == len(self._scratch):
            pending = self._end - self._start
            if self._start:
                self._scratch[:pending] = self._scratch[self._start:self._end]
                self._start, self._end = 0, pending
            if self._end == len(self._scratch) and pending >= 4:
                # Scratch is full of one frame's start: a large frame gets its own memory.
                (length,) = struct.unpack_from("<I", self._scratch, self._start)
                # (Not if that frame is already whole here: a grown scratch can hold it
                # and the start of the next, more than its own memory would take; nor
                # while a whole large frame waits to be taken: it has the memory.)
                if (self._big is None and _BIG <= length <= self.max_frame
                        and pending - 4 < length):
                    self._begin_large(length)
                    return self._big_view()
            if self._end == len(self._scratch):  # whole small frames not yet taken
                self._scratch.extend(bytes(len(self._scratch)))
        return memoryview(self._scratch)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        # A complete large frame not yet taken: later bytes go to scratch (feed() of
        # more than one frame would otherwise get a 0-byte buffer and spin).
        if nbytes:
            self.empty = False
        if self._big is not None and self._big_filled < self._big_len:
            self._big_filled += nbytes
        else:
            self._end += nbytes
            if self._end == len(self._scratch) and self._start == 0 and self._big is None:
                # The read filled the scratch with the start of a frame: if it is a large
                # one, the rest goes straight to its own memory (and `receiving_large`
                # tells the reader to go on reading). Not while a whole large frame
                # waits to be taken: that would lose it (next_frame starts this one).
                (length,) = struct.unpack_from("<I", self._scratch, 0)
                if _BIG <= length <= self.max_frame and 4 + length > self._end:
                    self._begin_large(length)

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` in (for tests and callers without a socket)."""
        view = memoryview(data).cast("B")
        while view.nbytes:
            buf = self.get_buffer()
            n = min(buf.nbytes, view.nbytes)
            buf[:n] = view[:n]
            del buf  # an exported view would stop the scratch from growing
            self.buffer_updated(n)
            view = view[n:]

    @property
    def wants_spare(self) -> bool:
        """True when `prepare_spare` has a body to make ready for the next large frame."""
        return self._spares.short != 0

    def prepare_spare(self) -> None:
        """Idle time: touch the memory the next large frame of the last size will need
        (SpareBodies.prepare). Call from the receiving thread only."""
        self._spares.prepare()

    def begun(self) -> tuple[int, int] | None:
        """The frame begun and not yet whole: its bytes held and its size on the wire
        (0 while its length has not all come), or None if there is none. Read by a
        thread that looks at connections (transport/stalls.py) as well as the reader's."""
        if self._big is not None and self._big_filled < self._big_len:
            return 4 + self._big_filled, 4 + self._big_len
        # Whole frames held and not yet taken are not a frame begun: only what follows
        # the last whole one is (two whole 15-byte frames were once reported as "30 of
        # its 15 bytes").
        pos, end = self._start, self._end
        while end - pos >= 4:
            (length,) = struct.unpack_from("<I", self._scratch, pos)
            if end - pos - 4 < length:
                return end - pos, 4 + length
            pos += 4 + length
        return (end - pos, 0) if end > pos else None

    def partial(self) -> str:
        """What is held of a frame not yet whole, for a report ("" if nothing is): a
        peer that goes in the middle of a frame loses it, and the log says how much."""
        begun = self.begun()
        if begun is None:
            return ""
        have, size = begun
        return f"{have} of its {size} bytes" if size else f"{have} of the 4 bytes of its length"

    @property
    def receiving_large(self) -> bool:
        """True while a large frame is only partly received."""
        return self._big is not None and self._big_filled < self._big_len

    # -- frames out --------------------------------------------------------------
    def next_small(self) -> bytearray | None:
        """The header of the next frame if it is whole, header-only and plain (no
        buffers, flags 0: nearly every call and answer); else None, and `next_frame`
        takes (or refuses) what is there. The hot path: no Frame, one small copy."""
        start = self._start
        if self._big is not None or self._end - start < 12:
            return None
        length, nbufs, flags, header_len = PREFIX.unpack_from(self._scratch, start)
        if (nbufs or flags or length != 8 + header_len or length > self.max_frame
                or self._end - start - 4 < length):
            return None  # next_frame checks (and reports) anything malformed
        end = start + 4 + length
        header = self._scratch[start + 12:end]
        if end == self._end:
            self._start = self._end = 0
            self.empty = True
        else:
            self._start = end
        return header

    def next_frame(self) -> Frame | None:
        """The next complete frame, or None until more bytes arrive."""
        if self._big is not None:
            if self._big_filled < self._big_len:
                return None
            body, self._big, self._big_filled = self._big, None, 0
            self.empty = self._start == self._end
            if self._placed is not None:
                return self._take_placed()
            return split(memoryview(body), copy=False)
        avail = self._end - self._start
        if avail < 4:
            return None
        (length,) = struct.unpack_from("<I", self._scratch, self._start)
        if length > self.max_frame:
            raise ProtocolError(f"frame of {length} bytes is over the limit of {self.max_frame} bytes")
        if length < PREFIX.size - 4:
            raise ProtocolError(f"frame length {length} is shorter than a frame header")
        if avail - 4 >= length:
            s = self._start + 4
            self._start += 4 + length
            if self._start == self._end:
                self._start = self._end = 0
                self.empty = True
            return split(memoryview(self._scratch)[s:s + length], copy=True)
        if length >= _BIG:
            self._begin_large(length)
        return None

    def _begin_large(self, length: int) -> None:
        """Give the frame at the front its own memory; the rest is received straight
        into it (from spares: see SpareBodies). Buffers sliced from it stay writable."""
        have = self._end - self._start - 4
        start = memoryview(self._scratch)[self._start + 4:self._end]
        try:
            placed = plan(start, length, self.bytes_buffers) if self.bytes_buffers else None
        finally:
            start.release()  # (an exported scratch could not grow)
        if placed is not None:
            body = placed.body
        else:
            body = self._spares.take(length)
            memoryview(body)[:have] = self._scratch[self._start + 4:self._end]
        self._start = self._end = 0
        self._big, self._big_filled, self._big_len, self._placed = body, have, length, placed

    def _big_view(self) -> memoryview:
        """Memory for the next bytes of the large frame (a placed frame's is in pieces)."""
        if self._placed is None:
            return memoryview(self._big)[self._big_filled:]
        at = self._big_filled
        for start, end, view in self._placed.segments:
            if at < end:
                return view[at - start:]
        raise AssertionError("placed segments end before the frame does")

    def _take_placed(self) -> Frame:
        p, self._placed = self._placed, None
        assert p is not None
        p.segments.clear()  # no writable view outlives the filling of a bytes object
        body = memoryview(p.body)
        off, n = p.header
        buffers: list[bytes | bytearray | memoryview] = [
            p.placed[i] if i in p.placed else body[o:o + ln] for i, (o, ln) in enumerate(p.buffers)]
        return Frame(body[off:off + n], buffers, 4 + self._big_len, p.flags)
