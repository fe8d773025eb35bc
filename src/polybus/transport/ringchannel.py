"""The ring half of an ``shm`` channel: frames through shared rings (ring.py).

Every frame a side sends goes through its ring; the socket carries only descriptors,
the peer's going, and one-byte doorbells, sent only when the reader has said it is
going to sleep (the awake flag; the ordering argument is ring.py's). transport/shm.py
adds the socket side (bells, descriptors, sleeping) and shmseg.py the large buffers.

The small-call hot path has its own steps on both sides. A message with no buffers or
small ones (arrays of a few KiB) is written in one piece, prefix, header and buffers;
a whole plain frame at the head of the peer's ring (no flags, and if it has buffers
under 128 KiB: nearly every call and answer) is decoded where it lies, never copied
into the frame decoder (its buffers are copied out: they outlive their room).
Anything else is written in pieces, and read by copying into the decoder, as on any
channel. This file is the sending half; ringread.py the receiving half.
"""

from __future__ import annotations

import array
import select
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from polybus.errors import ConnectionLostError
from polybus.transport import ring as _ring
from polybus.transport.channel import LATER
from polybus.transport.ringread import RingReader
from polybus.transport.shmseg import _lens
from polybus.transport.spinning import SPIN_S, spin_until
from polybus.wire.codec import OOB_BYTES
from polybus.wire.framing import (
    JOIN_MAX,
    PREFIX,
    encode_frame,
    pieces_size,
    too_large,
)
from polybus.wire.messages import Message, Result
from polybus.wire.unencodable import lone_surrogate

if TYPE_CHECKING:  # (numpy is imported where an array needs it: polybus/lazynumpy.py)
    import numpy as np

__all__ = ["RingChannel"]

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_U64, _FENCE = _ring._U64, _ring._FENCE
_WRITTEN, _READ, _AWAKE = _ring._WRITTEN, _ring._READ, _ring._AWAKE
# Answer values encoded as they are, with no hook to call (no buffers, no pickle).
_PLAIN = frozenset({type(None), bool, int, float, str, bytes})


class RingChannel(RingReader):
    """A Channel whose frames go through rings (set up by ShmChannel): the sending
    half here, the receiving half in ringread.py."""

    # A put's frame may be taken once its header is committed (`_put_frame` commits,
    # then rings the bell, whose failure raises): a send that raised may have been
    # read, so no frame is ever known not to have reached the peer (transport/unwhole.py)
    frames_known = False

    _tx: _ring.Ring | None
    _hup: select.poll | None
    # (the segment side's: large buffers go by segment from this size; descriptors and
    # segment releases still to tell the peer, which go the general way)
    threshold: int
    _fds_out: list[int]
    _released: list[int]
    _forget_out: list[int]

    def _frame(self, msg: Message, header: bytes,
               bufs: list[bytes | memoryview | np.ndarray[Any, Any]]) -> list[bytes | memoryview]:
        """The pieces of ``msg``'s frame (the segment side places large buffers)."""
        return encode_frame(header, bufs or None, self.codec.max_frame)  # type: ignore[arg-type]

    # -- sending ---------------------------------------------------------------
    def send(self, msg: Message, on_blocked: Callable[[], None] | None = None) -> int:
        """`Channel.send`; a message with no buffers, or small ones, goes into the ring
        in one piece (the small-call hot path: about half the Python steps of the
        general way; design.md has the round trips measured)."""
        tx = self._tx
        if tx is None:
            return super().send(msg, on_blocked)
        lock = self.send_lock
        if not lock.acquire(False):
            self.wait_send_lock(on_blocked)
        try:
            if self._released or self._forget_out or self._fds_out:
                return self._send_pieces(self._encode(msg), on_blocked)
            if type(msg) is Result and type(v := msg.value) in _PLAIN and (
                    type(v) is not bytes or len(v) < OOB_BYTES):
                try:  # (a plain answer: no hook, no buffers)
                    header = self.codec._enc.encode(msg)
                except UnicodeEncodeError as exc:  # (a str with a lone surrogate: said as
                    raise lone_surrogate(exc) from None  # the codec says it)
            else:
                header, bufs = self.codec.encode_parts(msg, self.threshold)
                if bufs:
                    # A frame of at most JOIN_MAX comes as one piece (encode_frame joins
                    # it): one write, unless it has descriptors to pass first.
                    pieces = self._frame(msg, header, bufs)
                    if len(pieces) > 1 or self._fds_out:
                        return self._send_pieces(pieces, on_blocked)
                    return self._put_frame(tx, pieces[0], on_blocked)
            return self._put_header(tx, header, on_blocked)
        finally:
            lock.release()

    def send_many(self, msgs: list[Message],
                  on_blocked: Callable[[], None] | None = None) -> int:
        """`Channel.send_many`; messages with no buffers or small ones (a call after the
        Put of its small operand and a Drop) go into the ring in one write, as `send`
        writes one. A message with a buffer that goes by segment takes the general way,
        which encodes and checks every message before it takes a segment."""
        tx = self._tx
        if tx is None:
            return super().send_many(msgs, on_blocked)
        lock = self.send_lock
        if not lock.acquire(False):
            self.wait_send_lock(on_blocked)
        try:
            if self._released or self._forget_out or self._fds_out:
                return self._send_pieces(self._encode_many(msgs), on_blocked)
            max_frame = self.codec.max_frame
            pieces: list[bytes | memoryview] = []
            for m in msgs:
                header, bufs = self.codec.encode_parts(m, self.threshold)
                if bufs and max(_lens(bufs)) >= self.threshold:
                    return self._send_pieces(self._encode_many(msgs), on_blocked)
                # (too large: raised before anything is written, the channel as it was)
                pieces += encode_frame(header, bufs or None, max_frame)  # type: ignore[arg-type]
            if len(pieces) == 1:
                return self._put_frame(tx, pieces[0], on_blocked)
            if pieces_size(pieces) <= JOIN_MAX:
                return self._put_frame(tx, b"".join(pieces), on_blocked)
            return self._send_ring(tx, pieces, on_blocked)
        finally:
            lock.release()

    def send_header(self, header: bytes, on_blocked: Callable[[], None] | None = None) -> int:
        """Send a message already encoded with no buffers (the client's sync lane,
        client/lane.py); the caller has found no descriptors or segment notes to send
        first (`send` sends those)."""
        tx = self._tx
        assert tx is not None
        lock = self.send_lock
        if not lock.acquire(False):
            self.wait_send_lock(on_blocked)
        try:
            return self._put_header(tx, header, on_blocked)
        finally:
            lock.release()

    def _put_header(self, tx: _ring.Ring, header: bytes,
                    on_blocked: Callable[[], None] | None) -> int:
        """A frame of no buffers into the ring in one piece, prefix and header together.
        The send lock held."""
        length = 8 + len(header)
        if length > self.codec.max_frame:
            raise too_large(length, self.codec.max_frame)
        return self._put_frame(tx, PREFIX.pack(length, 0, 0, len(header)) + header, on_blocked)

    def _put_frame(self, tx: _ring.Ring, data: bytes | memoryview,
                   on_blocked: Callable[[], None] | None) -> int:
        """A whole frame into the ring in one piece (the ring's write_small and _publish
        written out: the small-call hot path). The send lock held."""
        if self.closed:
            raise ConnectionLostError(f"connection to {self.peer} is closed")
        try:
            n = len(data)
            written = tx.written
            pos = written & tx._mask
            if self.unsent or pos + n > tx.capacity or n > tx.capacity - (
                    written - _U64.unpack_from(tx.map, _READ)[0]):
                return self._send_ring(tx, [data], on_blocked)  # in pieces, as room frees
            tx.data[pos:pos + n] = data
            tx.written = written = written + n
            _U64.pack_into(tx.map, _WRITTEN, written)  # after the bytes it covers
            _FENCE.acquire()  # a full barrier, then the reader's flag (ring.py)
            _FENCE.release()
            if not tx.view[_AWAKE]:
                self._bell()
        except (OSError, ValueError) as exc:
            raise self._broken(exc, sending=True) from None
        self.bytes_sent += n
        return n

    def _send_ring(self, tx: _ring.Ring, pieces: list[bytes | memoryview],
                   on_blocked: Callable[[], None] | None) -> int:
        if self.closed:
            raise ConnectionLostError(f"connection to {self.peer} is closed")
        if self.unsent:  # (what a LATER send began goes first)
            if on_blocked is LATER and pieces and not tx.free():
                self.unsent.extend(pieces)  # (still full: behind the rest, untried, as
                return 0                    # on a socket: channel.py)
            pieces = self._take_unsent(pieces)
        try:
            if self._fds_out:
                # Descriptors go first on the socket, so they are there to be taken when
                # the reader meets the frame that names them in the ring.
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", self._fds_out))]
                try:
                    self.sock.sendmsg([b"F"], anc, _DONTWAIT if on_blocked is LATER else 0)
                except BlockingIOError:  # (LATER: nothing written, all of it for the next send)
                    if on_blocked is not LATER:
                        raise
                    self.unsent = pieces
                    return 0
                self._fds_out = []
            total = 0
            if len(pieces) == 1 and type(pieces[0]) is bytes and (n := tx.write_small(pieces[0])):
                pieces, total = [], n  # the common small frame, in one go
            elif len(pieces) > 1 and pieces_size(pieces) <= JOIN_MAX and (n := tx.write_small(b"".join(pieces))):
                pieces, total = [], n  # small pieces (segment notes and a frame): joined
            for k, piece in enumerate(pieces):
                view = memoryview(piece).cast("B")
                while view.nbytes:
                    n = tx.write(view)
                    if n:
                        view = view[n:]
                        total += n
                    elif on_blocked is LATER:  # the ring is full: the rest for the next send
                        self.unsent = [view, *pieces[k + 1:]]
                        break
                    else:
                        self._wait_room(tx, on_blocked)
                if self.unsent:
                    break
            self._publish(tx)
        except (OSError, ValueError) as exc:
            raise self._broken(exc, sending=True) from None
        self.bytes_sent += total
        return total

    def _publish(self, tx: _ring.Ring, *, now: bool = False) -> None:
        """After writing: fence, then ring the bell if the reader is not looking (ring.py)
        (held back inside `quiet`, unless ``now``)."""
        _ring.fence()
        if not tx.reader_awake():
            if now:
                self._doorbell()
            else:
                self._bell()

    # -- bells held back (a reader's ``coalesce``, ring.py; worker/bells.py) ----------
    _quiet_in = 0  # the thread whose sends hold their bell back (0: none)
    owed = False   # a frame was written with its bell held back; `ring_owed` rings it

    def _bell(self) -> None:
        if self._quiet_in and self._quiet_in == threading.get_ident():
            self.owed = True
        else:
            self._doorbell()

    def coalesce_s(self) -> float:
        """How long the reader lets this side hold a bell back (0: not at all)."""
        tx = self._tx
        return tx.coalesce() if tx is not None and not self.closed else 0.0

    def quiet(self) -> _Quiet:
        """``with ch.quiet(): ...``: what this thread sends meanwhile rings no bell; one
        that would have is owed (``owed``) until `ring_owed`. Another thread's sends ring
        as ever (a bell covers every frame before it), so none is ever lost."""
        return _Quiet(self)

    def ring_owed(self) -> None:
        """Ring the bell held back, if the reader still sleeps."""
        tx = self._tx
        if tx is None or not self.owed:
            return
        with self.send_lock:
            self.owed = False
            if self.closed:
                return
            try:
                self._publish(tx, now=True)
            except (OSError, ValueError):
                pass  # the reader is gone: the poller drops the connection

    def _doorbell(self) -> None:
        try:
            self.sock.send(b"\0", _DONTWAIT)
        except BlockingIOError:
            pass  # bytes the reader has not taken yet will wake it anyway
        except (BrokenPipeError, ConnectionResetError):
            # The reader has closed its end, the frame rung for already in the ring: it
            # may have read it and answered first (a Goodbye saying why it closed), which
            # this side reads, and the hangup is found there as for any peer gone. Raised
            # here, the send failed after the frame went, and what the peer said was
            # never read (a replica dropping a connection for its frame, over shm).
            pass

    def _wait_room(self, tx: _ring.Ring, on_blocked: Callable[[], None] | None) -> None:
        """The ring is full: wake the reader, read meanwhile, notice if it died."""
        self._publish(tx, now=True)
        if on_blocked is not None:
            on_blocked()
        if spin_until(tx.free, SPIN_S) > 0:
            return
        if self._hup is None:
            self._hup = select.poll()
            self._hup.register(self.sock, select.POLLRDHUP)
        for _, ev in self._hup.poll(1):  # also the pause before looking again
            if ev & (select.POLLHUP | select.POLLERR | select.POLLRDHUP):
                raise ConnectionLostError(f"{self.peer} closed the connection")


class _Quiet:
    """`RingChannel.quiet`'s context."""

    __slots__ = ("ch",)

    def __init__(self, ch: RingChannel) -> None:
        self.ch = ch

    def __enter__(self) -> RingChannel:
        self.ch._quiet_in = threading.get_ident()
        return self.ch

    def __exit__(self, *exc: object) -> None:
        self.ch._quiet_in = 0
