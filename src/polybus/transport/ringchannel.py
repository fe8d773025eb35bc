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
channel.
"""

from __future__ import annotations

import array
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.transport import ring as _ring
from polybus.transport.channel import LATER, Channel
from polybus.transport.spinning import SPIN_S, spin_until
from polybus.wire.codec import OOB_BYTES
from polybus.wire.framing import (
    _BIG,
    JOIN_MAX,
    PREFIX,
    encode_frame,
    pieces_size,
    split,
    too_large,
)
from polybus.wire.messages import Message, Result

__all__ = ["RingChannel"]

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_U64, _FENCE = _ring._U64, _ring._FENCE
_WRITTEN, _READ, _AWAKE = _ring._WRITTEN, _ring._READ, _ring._AWAKE
# Answer values encoded as they are, with no hook to call (no buffers, no pickle).
_PLAIN = frozenset({type(None), bool, int, float, str, bytes})
_yield = getattr(os, "sched_yield", lambda: None)  # (as spinning.py: a peer on this CPU runs)


class RingChannel(Channel):
    """A Channel whose frames go through rings (set up by ShmChannel)."""

    _tx: _ring.Ring | None
    _rx: _ring.Ring | None
    # A message decoded straight from the ring by a fill (see `_drain_ring`), not yet
    # taken by `next_message`.
    _ready: Message | None
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
        with self.send_lock:
            if self._released or self._forget_out or self._fds_out:
                return self._send_pieces(self._encode(msg), on_blocked)
            if type(msg) is Result and type(v := msg.value) in _PLAIN and (
                    type(v) is not bytes or len(v) < OOB_BYTES):
                header = self.codec._enc.encode(msg)  # (a plain answer: no hook, no buffers)
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

    def send_header(self, header: bytes, on_blocked: Callable[[], None] | None = None) -> int:
        """Send a message already encoded with no buffers (the client's sync lane,
        client/lane.py); the caller has found no descriptors or segment notes to send
        first (`send` sends those)."""
        tx = self._tx
        assert tx is not None
        with self.send_lock:
            return self._put_header(tx, header, on_blocked)

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

    def _broken(self, exc: OSError | ValueError, *, sending: bool = False) -> ConnectionLostError:
        """The error a failed ring write or read becomes (ValueError: unmapped by close()
        in another thread); the channel is closed from then on."""
        self.closed = True
        if isinstance(exc, ValueError):
            return ConnectionLostError(f"connection to {self.peer} is closed")
        doing = " while sending" if sending else ""
        return ConnectionLostError(f"connection to {self.peer} broke{doing}: {exc}")

    def _doorbell(self) -> None:
        try:
            self.sock.send(b"\0", _DONTWAIT)
        except BlockingIOError:
            pass  # bytes the reader has not taken yet will wake it anyway

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

    # -- receiving -------------------------------------------------------------
    def _drain_ring(self) -> int:
        rx = self._rx
        if rx is None or not rx.available():
            return 0  # (an empty look, the common one while waiting: no view made)
        if self._ready is None and self.decoder.empty:
            # The common small frame is decoded where it lies in the ring: no copy into
            # the decoder, no second look for it there (small buffers are copied out).
            # (Malformed: the decoder's way, which reports it when it is read.)
            before = self.bytes_received
            try:
                self._ready = self._take_plain(rx)
            except ProtocolError:
                pass
            if self._ready is not None:
                return self.bytes_received - before
        total = 0
        while True:
            buf = self.decoder.get_buffer()
            room = buf.nbytes
            n = rx.read_into(buf)
            del buf  # a live view would stop the decoder growing its scratch
            if not n:
                break
            self.decoder.buffer_updated(n)
            total += n
            if n < room:
                break  # took all there was (more that came meanwhile: the next fill)
        self.bytes_received += total
        return total

    def _take_plain(self, rx: _ring.Ring) -> Message | None:
        """The message at the head of the ring, decoded in place, if a whole plain frame
        (no flags, small buffers if any: nearly every call and answer) lies there in
        one piece: read where it lies, then its room freed (``read`` advanced), with no
        call into the ring (this runs once per message)."""
        try:
            read = rx.read
            pos = read & rx._mask
            # (The count first: the prefix is read only once all of it is written; a
            # writer short of room publishes a frame in pieces.)
            if pos > rx.capacity - 12 or (ahead := _U64.unpack_from(rx.map, _WRITTEN)[0] - read) < 12:
                return None
            length, nbufs, flags, header_len = PREFIX.unpack_from(rx.data, pos)
            if (flags or length > self.codec.max_frame or pos + 4 + length > rx.capacity
                    or ahead < 4 + length
                    or (length != 8 + header_len if not nbufs else length >= _BIG or length < 8)):
                return None
            body = rx.data[pos + (4 if nbufs else 12):pos + 4 + length]
        except ValueError as exc:  # the ring was unmapped by close() in another thread
            raise self._broken(exc) from None
        try:  # (ProtocolError: malformed)
            msg = self._decode_body(body, nbufs) if nbufs else self.codec.decode_header(body)
        finally:
            del body
        rx.read = read = read + 4 + length
        _U64.pack_into(rx.map, _READ, read)  # the writer may reuse the room only now
        self.bytes_received += 4 + length
        return msg

    def _decode_body(self, body: memoryview, nbufs: int) -> Message:
        """The message of a whole frame lying in the ring (``body``: after its length
        field); buffers are copied out, as they must outlive the frame's room (a frame
        with buffers is under 128 KiB here: a larger one goes the decoder's way, into
        memory of its own). ProtocolError for anything malformed."""
        if not nbufs:
            return self.codec.decode_header(body[8:])  # (copies what it keeps)
        return self.codec.decode(split(body, copy=True))

    def next_message(self) -> Message | None:
        msg = self._ready
        if msg is not None:
            self._ready = None
            return msg
        if self.decoder.empty:
            rx = self._rx
            # (Anything else in the ring, a frame in pieces or with buffers: the next
            # fill copies it into the decoder.)
            return None if rx is None else self._take_plain(rx)
        return super().next_message()

    def take_soon(self, seconds: float) -> Message | None:
        """The next message, if one is here or comes within ``seconds`` (spinning on
        the ring, never sleeping): `next_message` and `fill_soon(seconds, stay=True)`
        in one call, for a replica waiting for a lone client's next call
        (worker/direct.py). The awake flag is left up if a frame came (the caller has
        the poller lower it before it sleeps); None if none did (the flag lowered, a
        fence and a last look; with no ``seconds``, nothing is here) or if what came is
        not a whole message yet."""
        msg = self._ready
        if msg is not None:
            self._ready = None
            return msg
        rx = self._rx
        if rx is None or not self.decoder.empty:
            msg = self.next_message()
            if msg is None and self.fill_soon(seconds, True):
                msg = self.next_message()
            return msg
        try:
            rmap = rx.map
            unpack = _U64.unpack_from
            read = rx.read
            if unpack(rmap, _WRITTEN)[0] == read:
                if not seconds:
                    return None
                rx.view[_AWAKE] = 1  # the writer rings no doorbell meanwhile
                clock = time.perf_counter
                deadline = clock() + seconds
                while unpack(rmap, _WRITTEN)[0] == read:
                    if clock() >= deadline:
                        rx.view[_AWAKE] = 0
                        _FENCE.acquire()  # flag down, then look once more (ring.py)
                        _FENCE.release()
                        if unpack(rmap, _WRITTEN)[0] == read:
                            return None
                        break
                    _yield()
            msg = self._take_plain(rx)  # (a whole plain frame at the head)
            if msg is not None:
                return msg
        except ValueError as exc:  # unmapped by close() in another thread
            raise self._broken(exc) from None
        self._drain_ring()  # buffers, or in pieces: the decoder's way
        return self.next_message()

    def stay_awake(self, on: bool) -> None:
        """Say whether this side will look at its ring before it next sleeps: while it
        will, the peer rings no doorbell (a system call, with a wake-up of a process
        that was running anyway). A reader that clears it fences and looks once more
        before sleeping (see `spin`)."""
        rx = self._rx
        if rx is not None and not self.closed:
            try:
                rx.set_awake(on)
            except ValueError:  # unmapped by close() in another thread
                pass

    def buffered(self) -> bool:
        # Frames left in the ring count: those written while this side's flag was up
        # rang no doorbell, so no selector reports them either.
        rx = self._rx  # (ring_ready's look, written out: once per call on a replica)
        return (not self.decoder.empty or self._ready is not None
                or (rx is not None and _U64.unpack_from(rx.map, _WRITTEN)[0] != rx.read))

    def ring_ready(self) -> bool:
        """Frames wait in the ring (no system call)."""
        return self._ready is not None or (self._rx is not None and self._rx.available() > 0)


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
