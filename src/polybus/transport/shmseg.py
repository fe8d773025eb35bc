"""How the ``shm`` transport's frames carry large buffers by segment (see shm.py).

The segment half of `ShmChannel`: the sender copies (or, for a non-contiguous array,
gathers) each large buffer into a pooled segment of its own, or a ``Put``'s value into
the process's shared segment for that operand (shmshare.py), and writes a table in
its place; the receiver maps the segments and hands numpy views of them, given back
when the last view goes (shmmaps.py).

A call's array argument that goes by segment and that the program holds read-only
through and through (`program_froze`: its bytes cannot change) arrives read-only (answers and values
between replicas arrive writable, as on every transport). Sent again, the same array
object (or a view of the same place in the same array) goes by the process's shared
segment for its content, as a ``Put``'s value does: a stateless client that passes one
frozen B with every call copies it twice, not once per call (each later send hashes it,
so an array changed between two sends is sent as it is now, and the replicas read one
copy rather than a segment of their own per call: design.md). Below the threshold a segment costs more than the copies it saves (frozen arrays
of 64-256 KiB by segment: matmul n=100 stateless and n=500 stateful took longer), so
those go in the frame, writable, as any.
The ring and the socket are shm.py's.
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.lazynumpy import is_array
from polybus.transport.shmshare import (
    MAX_SHARED,
    SHARED_BIT,
    Segment,
    SharedSegment,
    content_name,
    copy_into,
    segment_size,
    sent_before,
    shelf,
)
from polybus.wire.arrays import program_froze
from polybus.wire.codec import Codec
from polybus.wire.framing import (
    Frame,
    body_length,
    encode_frame,
    frame_prefix,
    pieces_size,
    too_large,
)
from polybus.wire.messages import Batch, Call, Message, Put

if TYPE_CHECKING:  # (numpy is imported where an array needs it: polybus/lazynumpy.py)
    import numpy as np

__all__ = ["FD_READONLY", "FLAG_CTL", "FLAG_SHM", "MAX_FDS", "MAX_FDS_PENDING", "SegmentFrames"]

FLAG_SHM = 1
FLAG_CTL = 2
MAX_FDS = 250  # per frame; Linux passes at most 253 descriptors in one message
# Segments a sender holds at once (in flight or pooled). Each costs two descriptors here
# (the memfd and mmap's own copy of it) and one at the receiver: one per message in
# flight, an async client's burst of 2,000 large calls died of EMFILE at the usual
# limit of 1,024. A buffer that finds no segment travels in the frame, as on ipc.
MAX_SEGMENTS = 32
# Descriptors a peer has passed that no frame has named yet, at most. A sender passes a
# segment's descriptor once, with (or just before) the first frame that names it, and a
# segment cannot be replaced before the frame is read (it is busy, or held, till then):
# a well-behaved one has at most its ring, MAX_SEGMENTS and the MAX_SHARED of its process
# outstanding (97). Past twice that the peer is refused (a ProtocolError) and they are
# closed: unbounded, one peer could fill the process's descriptor table, every peer's.
MAX_FDS_PENDING = 2 * (1 + MAX_SEGMENTS + MAX_SHARED)
_DESC = struct.Struct("<IIQQ")  # buffer index, has_fd, segment id, length
FD_READONLY = 2  # has_fd: a shared segment's descriptor, to be mapped read-only
RO_VIEW = 4  # has_fd bit: the sender's array was read-only; so are the receiver's
def _contiguous(b: bytes | memoryview | np.ndarray[Any, Any]) -> bytes | memoryview:
    """A buffer as the frame carries it (an array left to gather that does not go by
    segment after all is made contiguous here)."""
    if is_array(b):
        import numpy as np

        a = np.ascontiguousarray(b)
        # (a uint8 view, not memoryview.cast: the buffer protocol has no datetime64)
        return memoryview(a.reshape(-1).view(np.uint8)) if a.nbytes else memoryview(b"")  # type: ignore[arg-type]
    return b


def _lens(bufs: list[bytes | memoryview | np.ndarray[Any, Any]]) -> list[int]:
    """The byte length of each buffer of a message (arrays left to gather included)."""
    return [b.nbytes if is_array(b) else memoryview(b).nbytes for b in bufs]


def _calls(batch: Batch) -> bool:
    """Whether every item of ``batch`` is a call (a client's held calls, written as one
    frame), not answers."""
    return all(type(m) is Call for m in batch.items)


def _u64s(ids: list[int]) -> bytes:
    return struct.pack(f"<{len(ids)}Q", *ids)


class SegmentFrames:
    """Mixed into ShmChannel: the segment side of its frames."""

    codec: Codec
    closed: bool
    peer: str

    def _init_segments(self, threshold: int, pool_bytes: int) -> None:
        self.threshold = threshold
        self.pool_bytes = pool_bytes
        self.max_segments = MAX_SEGMENTS
        # sender side
        self._segments: dict[int, Segment] = {}
        self._next_id = 1
        self._pooled = 0  # bytes of all segments held
        self._fds_out: list[int] = []
        self._forget_out: list[int] = []
        # shared segments (operands, shmshare.py) by id: frames sent and not yet released
        self._lent: dict[int, tuple[SharedSegment, int]] = {}
        self._lent_fds: set[int] = set()  # those whose descriptor the peer has
        self._shelved = False  # counted among the shelf's channels
        # Set by close (under ``_seg_lock``): a send in another thread takes no segment
        # from then on, nor a hold on a shared one (neither would ever be given back).
        self._seg_closed = False
        # The reading thread returns segments while a sending thread picks them.
        self._seg_lock = threading.Lock()
        # receiver side
        self._maps: dict[int, mmap.mmap] = {}
        self._fds_in: deque[int] = deque()
        # Filled by finalizers in any thread; list.append/del are atomic under the GIL.
        self._released: list[int] = []
        # Bytes passed by segment (not counted in bytes_sent/bytes_received, which are
        # what went through the socket and the rings): a shared segment lent to several
        # receivers counts once per frame that names it, as the bytes would in a frame.
        self.shm_bytes_sent = 0
        self.shm_bytes_received = 0
        # What the segments' bookkeeping added to those counts (control frames, tables,
        # empty buffer slots): a run reports its traffic without it, so the same program
        # counts the same bytes on every transport (client/session.py).
        self.shm_overhead_sent = 0
        self.shm_overhead_received = 0

    # -- sending ---------------------------------------------------------------
    def _encode(self, msg: Message) -> list[bytes | memoryview]:
        return self._encode_many([msg])

    def _encode_many(self, msgs: list[Message]) -> list[bytes | memoryview]:
        """Every message is encoded and its size checked before a segment is taken or a
        release note is consumed: one that cannot be sent (a value the codec refuses,
        too large) leaves the channel as it was. Taken first, a segment (and its
        descriptor, passed with the next send) went to a frame never sent, and release
        notes went nowhere (the peer's segments were held until the connection closed)."""
        max_frame = self.codec.max_frame
        parts = []
        for m in msgs:
            # Large non-contiguous arrays (a column block) come as they are and are
            # gathered straight into their segment: one copy of their bytes, not two.
            header, bufs = self.codec.encode_parts(m, self.threshold)
            if bufs:
                frame_prefix(len(header), _lens(bufs), max_frame)
            elif 8 + len(header) > max_frame:
                raise too_large(8 + len(header), max_frame)
            parts.append((m, header, bufs))
        pieces = self._control() if self._released or self._forget_out else []
        for m, header, bufs in parts:
            pieces += self._frame(m, header, bufs)
        return pieces

    def _frame(self, msg: Message, header: bytes,
               bufs: list[bytes | memoryview | np.ndarray[Any, Any]]) -> list[bytes | memoryview]:
        """The pieces of ``msg``'s frame from its encoded parts, large buffers placed in
        segments (their descriptors left in ``_fds_out`` for the send to pass)."""
        if not bufs:  # most messages: one piece, as on any channel
            return encode_frame(header, None, self.codec.max_frame)
        lens = _lens(bufs)
        if max(lens) < self.threshold:
            return encode_frame(header, bufs, self.codec.max_frame)  # type: ignore[arg-type]
        # The limit applies to the message, wherever its bytes travel.
        frame_prefix(len(header), lens, self.codec.max_frame)
        out = list(bufs)
        table = bytearray()
        fds: list[int] = []
        put = msg.key if type(msg) is Put else None  # an operand: one segment per host
        # (a call's arguments: read-only ones stay so; calls held and written together
        # as one Batch, whichever those were, the same)
        call = type(msg) is Call or (type(msg) is Batch and _calls(msg))
        moved = 0
        for i, (b, n) in enumerate(zip(bufs, lens, strict=True)):
            if n < self.threshold or len(fds) >= MAX_FDS:
                continue
            arr = b if call and is_array(b) else None
            ro = arr is not None and program_froze(arr)
            key, index = put, i
            if arr is not None and ro and arr.flags.c_contiguous and sent_before(arr):
                key, index = content_name(arr), 0
            entry = None
            if key is not None:
                try:
                    entry = self._lend(key, index, i, b, n, fds)
                except OSError:  # no descriptor or memory for it
                    entry = None
                if entry is None and put is not None:
                    continue  # (or the shelf is full of held operands): in the frame
            if entry is None:
                with self._seg_lock:
                    seg = self._acquire(n)
                if seg is None:
                    continue  # none to be had within the bounds: in the frame
                try:
                    copy_into(seg.view, b)
                except ValueError:  # (released: the channel was closed meanwhile)
                    if self.closed:
                        raise self._gone() from None
                    raise
                has_fd = not seg.shared
                if has_fd:
                    fds.append(seg.fd)
                    seg.shared = True
                entry = _DESC.pack(i, int(has_fd) | (RO_VIEW if ro else 0), seg.id, n)
            table += entry
            out[i] = b""
            self.shm_bytes_sent += n
            moved += n
        if not table:  # nothing went by segment after all
            return self._plain(header, bufs)
        out.append(bytes(table))
        self._fds_out.extend(fds)
        pieces = encode_frame(header, [_contiguous(b) for b in out], self.codec.max_frame,
                              FLAG_SHM)
        self.shm_overhead_sent += (pieces_size(pieces) + moved
                                   - 4 - body_length(len(header), lens))
        return pieces

    def _plain(self, header: bytes, bufs: list[bytes | memoryview | np.ndarray[Any, Any]]
               ) -> list[bytes | memoryview]:
        """A frame with every buffer in it (arrays left raw by the codec made contiguous)."""
        return encode_frame(header, [_contiguous(b) for b in bufs], self.codec.max_frame)

    def _lend(self, key: str, index: int, i: int, data: Any, n: int,
              fds: list[int]) -> bytes | None:
        """Buffer ``i`` of the frame, buffer ``index`` of operand ``key``, by the
        process's shared segment for it (transport/shmshare.py), read-only at the
        receiver; its table entry (None if the shelf has no segment to give)."""
        if not self._shelved:
            shelf().enter()
            with self._seg_lock:
                self._shelved = not self._seg_closed
            if not self._shelved:  # (closed meanwhile: close has left the shelf)
                shelf().leave()
                raise self._gone()
        s = shelf().lend(key, index, data, n)
        if s is None:
            return None
        with self._seg_lock:
            gone = self._seg_closed
            if not gone:
                held = self._lent.get(s.id)
                self._lent[s.id] = (s, 1 if held is None else held[1] + 1)
        if gone:  # (closed meanwhile: close gave back the holds it saw)
            shelf().give_back(s)
            raise self._gone()
        has_fd = s.id not in self._lent_fds
        if has_fd:
            fds.append(s.ro_fd)
            self._lent_fds.add(s.id)
            s.peers[self] = SegmentFrames._forget_later  # (not bound: shmshare.py)
        return _DESC.pack(i, FD_READONLY if has_fd else 0, s.id, n)

    def _gone(self) -> ConnectionLostError:
        return ConnectionLostError(f"connection to {self.peer} is closed")

    def _forget_later(self, seg_id: int) -> None:
        """A shared segment was closed: the peer is told to unmap it with the next frame."""
        with self._seg_lock:
            self._forget_out.append(seg_id)
            self._lent_fds.discard(seg_id)

    def _control(self) -> list[bytes | memoryview]:
        """A control frame with the releases and forgets not yet told to the peer."""
        if not self._released and not self._forget_out:
            return []
        released = self._released[:]
        del self._released[:len(released)]
        with self._seg_lock:
            forget, self._forget_out = self._forget_out, []
        pieces = encode_frame(b"", [_u64s(released), _u64s(forget)], self.codec.max_frame,
                              FLAG_CTL)
        self.shm_overhead_sent += pieces_size(pieces)
        return pieces

    def _acquire(self, n: int) -> Segment | None:
        """A free segment for ``n`` bytes, or a new one within ``pool_bytes`` and
        ``max_segments`` (free ones of other sizes closed to make room); else None.
        ConnectionLostError once the channel is closed. (``_seg_lock`` held.)"""
        if self._seg_closed:
            raise self._gone()
        best: Segment | None = None
        for seg in self._segments.values():
            if not seg.busy and n <= seg.size <= 4 * n and (best is None or seg.size < best.size):
                best = seg
        if best is None:
            size = segment_size(n)
            for seg in [s for s in self._segments.values() if not s.busy]:  # oldest first
                if not self._full(size):
                    break
                self._drop_segment(seg)
            if self._full(size):
                return None  # the rest are in flight
            try:
                best = Segment(self._next_id, size)
            except OSError:
                return None  # out of descriptors or memory
            self._next_id += 1
            self._segments[best.id] = best
            self._pooled += size
        best.busy = True
        return best

    def _full(self, size: int) -> bool:
        return (self._pooled + size > self.pool_bytes
                or len(self._segments) >= self.max_segments)

    def _drop_segment(self, seg: Segment) -> None:
        del self._segments[seg.id]
        self._pooled -= seg.size
        if seg.shared:
            self._forget_out.append(seg.id)
        seg.close()

    def _on_control(self, frame: Frame) -> None:
        self.shm_overhead_received += frame.size
        if len(frame.buffers) != 2 or any(len(b) % 8 for b in frame.buffers):
            raise ProtocolError("malformed shared-memory control frame")
        released, forget = (struct.unpack(f"<{len(b) // 8}Q", b) for b in frame.buffers)
        back: list[SharedSegment] = []
        with self._seg_lock:
            for seg_id in released:
                if seg_id & SHARED_BIT:
                    held = self._lent.get(seg_id)
                    if held is not None:
                        back.append(held[0])
                        if held[1] > 1:
                            self._lent[seg_id] = (held[0], held[1] - 1)
                        else:
                            del self._lent[seg_id]
                    continue
                seg = self._segments.get(seg_id)
                if seg is not None:
                    seg.busy = False
                    if self._pooled > self.pool_bytes:
                        self._drop_segment(seg)
        for s in back:  # (outside the channel's lock: the shelf's is taken first)
            shelf().give_back(s)
        for seg_id in forget:
            self._maps.pop(seg_id, None)  # arrays still viewing it keep the mapping alive

    def _close_segments(self) -> None:
        with self._seg_lock:
            self._seg_closed = True
            shelved, self._shelved = self._shelved, False
            for seg in list(self._segments.values()):
                seg.close()
            self._segments.clear()
            self._pooled = 0
            lent, self._lent = self._lent, {}
        for shared, times in lent.values():  # the peer may still view them: not reused
            shelf().give_back(shared, times, orphan=True)
        if shelved:
            shelf().leave()
        self._maps.clear()

    def segments_held(self) -> int:
        """Shared segments this side owns (for tests and stats)."""
        return len(self._segments)


