"""The receiving end of the ``shm`` transport's segments: a frame's table mapped.

A ``FLAG_SHM`` frame (shm.py) ends with a table of ``(buffer index, has_fd, segment,
length)`` entries, written by the sender's `SegmentFrames` (shmseg.py) for the buffers
that went by segment. `SegmentMaps._attach` checks the table and the message's whole
size against the frame limit before anything is mapped, maps each segment named with a
descriptor (sealed, at most ``MAX_MAPS`` per peer; a shared one read-only), and puts a
numpy view of the segment in each buffer's place, read-only where the sender's array
was; when the last view goes, the segment's release is noted for the next frame back
(shmseg.py's control frames). `ShmChannel` inherits it beside `SegmentFrames`, which
sets up and closes the state named below.
"""

from __future__ import annotations

import mmap
import os
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

from polybus.errors import ProtocolError
from polybus.transport.memfd import check_sealed
from polybus.transport.shmseg import _DESC, FD_READONLY, MAX_SEGMENTS, RO_VIEW
from polybus.transport.shmshare import MAX_SHARED
from polybus.wire.codec import Codec
from polybus.wire.framing import Frame, body_length

if TYPE_CHECKING:  # (numpy is imported where an array needs it: polybus/lazynumpy.py)
    import numpy as np

__all__ = ["MAX_MAPS", "SegmentMaps"]

# Segments of one peer mapped here at once, at most (each holds a descriptor: mmap's own
# copy). A well-behaved sender tells the receiver to forget a segment it closes, and
# holds at most MAX_SEGMENTS and its process's MAX_SHARED; past twice that the peer is
# refused, as for descriptors passed and not named.
MAX_MAPS = 2 * (MAX_SEGMENTS + MAX_SHARED)


class SegmentMaps:
    """Mixed into ShmChannel: the segments its peer's frames name, mapped here."""

    codec: Codec
    _maps: dict[int, mmap.mmap]  # segment id -> its mapping (shmseg.py's _init_segments)
    _fds_in: deque[int]  # descriptors the peer passed, not yet named by a frame
    _released: list[int]  # segments whose last view went, to tell the peer
    shm_bytes_received: int
    shm_overhead_received: int

    def _fds_pending(self) -> bool:
        """Read the socket once more for a descriptor the peer sent ahead of the frame
        that names it; False if none can still come that way."""
        return False

    def _attach(self, frame: Frame) -> None:
        if not frame.buffers:
            raise ProtocolError("shared-memory frame without its table")
        table = memoryview(frame.buffers.pop()).cast("B")
        if table.nbytes % _DESC.size:
            raise ProtocolError("malformed shared-memory table")
        # The message's full size is held to the limit wherever its bytes travel
        # (protocol.md), counted as its sender did (frame_prefix: the frame it would be
        # with every buffer in it), before anything is mapped or viewed.
        entries = list(_DESC.iter_unpack(table))
        lens = [len(b) for b in frame.buffers]
        moved = 0
        for idx, _has_fd, _seg_id, length in entries:
            moved += length
            if 0 <= idx < len(lens):  # (a bad index is refused below)
                lens[idx] += length
        size = body_length(len(frame.header), lens)
        if size > self.codec.max_frame:
            raise ProtocolError(f"shared-memory frame of {size} bytes is over the frame "
                                f"limit of {self.codec.max_frame} bytes")
        self.shm_overhead_received += frame.size + moved - 4 - size
        release = self._released.append
        for idx, has_fd, seg_id, length in entries:
            if not 0 <= idx < len(frame.buffers) or len(frame.buffers[idx]):
                raise ProtocolError(f"shared-memory table names buffer {idx} badly")
            kind = has_fd & ~RO_VIEW
            if kind:
                while not self._fds_in and self._fds_pending():
                    pass  # sent on the socket before the ring frame
                if not self._fds_in:
                    raise ProtocolError("shared-memory frame without its descriptor")
                fd = self._fds_in.popleft()
                prot = mmap.PROT_READ | (mmap.PROT_WRITE if kind == 1 else 0)
                try:
                    if kind not in (1, FD_READONLY):
                        raise ValueError(f"descriptor kind {has_fd}")
                    if seg_id not in self._maps and len(self._maps) >= MAX_MAPS:
                        raise ValueError(f"{MAX_MAPS} segments mapped at once, none of them "
                                         "forgotten (at most that many may be)")
                    check_sealed(fd)  # (a peer could shrink it under the mapping: memfd.py)
                    self._maps[seg_id] = mmap.mmap(fd, 0, mmap.MAP_SHARED, prot)
                except (OSError, ValueError) as exc:
                    raise ProtocolError(f"cannot map shared segment: {exc}") from None
                finally:
                    os.close(fd)
            seg = self._maps.get(seg_id)
            if seg is None or length > len(seg):
                raise ProtocolError(f"shared-memory reference to unknown segment {seg_id}")
            # The carrier is the base of every array the codec makes from this buffer;
            # when the last one goes, the segment goes back to the sender.
            self.shm_bytes_received += length
            import numpy as np

            carrier: np.ndarray[Any, Any] = np.frombuffer(seg, np.uint8, count=length)
            if has_fd & RO_VIEW:
                carrier.flags.writeable = False
            weakref.finalize(carrier, release, seg_id).atexit = False
            frame.buffers[idx] = memoryview(carrier)  # type: ignore[arg-type]
