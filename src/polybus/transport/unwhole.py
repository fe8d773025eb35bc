"""Which of a stream connection's frames never reached its peer whole.

A peer decodes, and so runs, only whole frames. Over a stream socket (tcp, ipc, TLS
over tcp) the bytes of a connection go in order, so a frame reached the peer whole only
if every one of its bytes was written to the socket: a frame whose bytes were not all
written when the connection ended (left in ``unsent`` by a send that does not wait, or
cut short by the send that found the connection broken) cannot have run there.

`FrameEnds` (a mixin of transport/channel.py's `Channel`) counts the bytes handed to
the connection's writes (``queued``, each frame whole) beside those written
(``bytes_sent``), and keeps, while some are left unwritten, where each message's frame
ends in the stream. `FrameEnds.stop_writes` ends the connection's writes and says which
calls' frames ended past the bytes written (the client's replica lost:
client/unwritten.py). It answers only what it can prove: None when a write is under
way (it cannot wait for it), or after a write was cut short by anything but the
connection breaking (a Ctrl-C inside a write: the counts no longer say where the peer's
frames begin). A transport that carries frames its own way (shm's rings: a frame put
may be read once its header is committed, before the put returns) says None.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from polybus.wire.messages import Batch, Call, CallBatch, Message

__all__ = ["FrameEnds", "call_ids", "size"]


def size(pieces: list[bytes | memoryview]) -> int:
    """The bytes of ``pieces``."""
    n = 0
    for p in pieces:
        n += len(p) if type(p) is bytes else memoryview(p).nbytes
    return n


def call_ids(msgs: list[Message]) -> set[int]:
    """The ids of the calls and aggregated batches ``msgs`` carry."""
    ids: set[int] = set()
    for m in msgs:
        if type(m) is Call or type(m) is CallBatch:
            ids.add(m.id)
        elif type(m) is Batch:
            ids.update(c.id for c in m.items if type(c) is Call)
    return ids


class FrameEnds:
    """Where the frames not yet written whole end (a `Channel`'s; its state below)."""

    bytes_sent: int
    closed: bool
    unsent: list[bytes | memoryview]
    send_lock: threading.Lock
    # False for a transport that carries frames its own way (shm's rings, whose
    # `_encode_many` also takes segments): `stop_writes` proves nothing there
    frames_known = True
    queued = 0  # bytes handed to writes, whole frames (beside bytes_sent: those written)
    # A write was cut short by other than a broken connection (a Ctrl-C inside it): what
    # was written is not known, nor is what its caller put back to write again (held)
    untracked = False
    _ends: list[tuple[int, Message]] | None = None  # (end in the stream, message)

    if TYPE_CHECKING:
        def _encode(self, msg: Message) -> list[bytes | memoryview]: ...
        def _encode_many(self, msgs: list[Message]) -> list[bytes | memoryview]: ...
        def _send_pieces(self, pieces: list[bytes | memoryview],
                         on_blocked: Callable[[], None] | None) -> int: ...

    def _send_one(self, pieces: list[bytes | memoryview], msg: Message | None,
                  on_blocked: Callable[[], None] | None) -> int:
        """Write ``pieces``, ``msg``'s frame (None: on with ``unsent`` alone), its end
        kept while it is not written whole (the send lock held)."""
        if not self.unsent and self._ends is None and msg is not None:
            # The common case, every earlier byte written (``queued`` is ``bytes_sent``):
            # its size counted only if it is not written whole (the hot path)
            try:
                n = self._send_pieces(pieces, on_blocked)
            except BaseException:
                self.queued += size(pieces)
                self._cut([(self.queued, msg)])
                raise
            if self.unsent:
                self.queued += size(pieces)
                self._wrote([(self.queued, msg)])
            else:
                self.queued = self.bytes_sent
            return n
        end = self.queued = self.queued + size(pieces)
        try:
            n = self._send_pieces(pieces, on_blocked)
        except BaseException:
            self._cut([] if msg is None else [(end, msg)])
            raise
        if self.unsent or self._ends:  # (else nothing to keep: the common case)
            self._wrote([] if msg is None else [(end, msg)])
        return n

    def _send_frames(self, msgs: list[Message], on_blocked: Callable[[], None] | None) -> int:
        """`_send_one` for ``msgs``: their frames' ends counted only if they are not all
        written whole (the send lock held)."""
        if not self.frames_known:
            return self._send_pieces(self._encode_many(msgs), on_blocked)
        pieces: list[bytes | memoryview] = []
        counts: list[int] = []  # (each message's pieces)
        for m in msgs:  # (every one encoded before any is counted: one may raise)
            p = self._encode(m)
            pieces += p
            counts.append(len(p))
        fast = not self.unsent and self._ends is None  # (``queued`` is ``bytes_sent``)
        base = self.queued
        try:
            n = self._send_pieces(pieces, on_blocked)
        except BaseException:
            self._cut(self._frame_ends(msgs, pieces, counts, base))
            raise
        if fast and not self.unsent:
            self.queued = self.bytes_sent
        else:
            self._wrote(self._frame_ends(msgs, pieces, counts, base))
        return n

    def _frame_ends(self, msgs: list[Message], pieces: list[bytes | memoryview],
                    counts: list[int], base: int) -> list[tuple[int, Message]]:
        """Where each of ``msgs``' frames (``pieces``, ``counts`` of them each) ends in
        the stream, the first after ``base``; ``queued`` is the last."""
        ends: list[tuple[int, Message]] = []
        i = 0
        for m, k in zip(msgs, counts, strict=True):
            base += size(pieces[i:i + k])
            i += k
            ends.append((base, m))
        self.queued = base
        return ends

    def _wrote(self, ends: list[tuple[int, Message]]) -> None:
        """A send returned: ``ends`` kept while bytes are left unsent, else all forgotten."""
        if self.unsent:
            if self._ends is None:
                self._ends = []
            self._ends.extend(ends)
        elif self._ends:
            self._ends = None

    def _cut(self, ends: list[tuple[int, Message]]) -> None:
        """A send raised: by a broken (or closed) connection, ``ends`` kept; by anything
        else, what was written is not known."""
        if not self.closed:
            self.untracked = True
        if self._ends is None:
            self._ends = []
        self._ends.extend(ends)

    def stop_writes(self) -> set[int] | None:
        """No write from now on (any later send raises); the ids of the calls whose
        frames provably never reached the peer whole, or None if that is not known."""
        got = self.send_lock.acquire(False)
        self.closed = True
        if not got:  # (a write under way: its bytes are not counted yet)
            return None
        if not self.frames_known:
            self.send_lock.release()
            return None
        try:
            if self.untracked:
                return None
            sent = self.bytes_sent
            return call_ids([m for end, m in self._ends or () if end > sent])
        finally:
            self.send_lock.release()
