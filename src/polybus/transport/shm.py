"""The ``shm`` transport: a Unix socket whose large buffers travel in shared memory.

Headers and small buffers go over the socket as on ``ipc``. A buffer of at least
``THRESHOLD`` bytes is copied once into a segment of anonymous shared memory (a
``memfd``, so nothing is ever named in /dev/shm and nothing can be left behind there)
and the frame carries a reference to it instead of the bytes; the receiver maps the
segment and hands numpy a view of it, without a copy.

Segments belong to the sender and are reused: the first frame that uses a segment
passes its file descriptor over the socket (SCM_RIGHTS) and the receiver keeps its
mapping; later frames name it by number. Fresh shared memory is slow to fill on these
machines (page allocation runs at well under 1 GB/s, against 6-8 GB/s for a copy into
pages already mapped), which is why segments are pooled rather than made per message.
The receiver gives a segment back when the last array viewing it is garbage collected
(``weakref.finalize`` on the view's base); the release rides on its next frame to the
sender. A sender holds at most ``POOL_BYTES`` and ``MAX_SEGMENTS`` of segments, in
flight or pooled (free ones are closed to make room, and the receiver told to forget
its mapping); a buffer that finds none then travels in the frame, as on ipc. Closing the channel
frees everything; arrays the program still holds keep their own mapping alive.

A large array that is not contiguous (a column block of a matrix) is gathered
straight into its segment: one pass over its bytes, where making it contiguous first
cost a second copy into fresh memory. The value of a ``Put`` (an operand named by its content hash) goes instead by the
process's one segment for that key (shmshare.py), shared by every channel that sends
it and given to receivers read-only: a client caching B on several replicas copies it
once. (This segment half of the channel, both ways, is shmseg.py.)

Small path (ring.py): on x86-64 every frame (headers and small buffers; large buffers
still by segment reference) goes through a shared ring per direction instead of the
socket, which then carries only descriptors, the peer's going, and one-byte doorbells
that a writer sends only when the reader has said it is going to sleep. A reader that
expects data spins ``spin_s`` on the ring first (yielding the CPU each turn), so a busy
pair makes no system call; `spin` does the same for a worker's poller over its channels.

Frame flags (wire/framing.py): ``FLAG_SHM`` — the last buffer is a table of
``(buffer index, has_fd, segment, length)`` entries (has_fd 2: a shared segment's
read-only descriptor) and those buffers are empty on the wire; ``FLAG_CTL`` — not a
message: buffer 0 lists released segments, buffer 1 segments the receiver must forget
(little-endian u64 each).
"""

from __future__ import annotations

import array
import os
import select
import socket
from collections.abc import Callable

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.transport import ring as _ring
from polybus.transport.channel import Channel
from polybus.transport.shmseg import FLAG_CTL, FLAG_SHM, MAX_FDS, SegmentFrames
from polybus.transport.spinning import SPIN_S, spin_until
from polybus.wire.codec import Codec
from polybus.wire.framing import PREFIX, Frame, too_large
from polybus.wire.messages import Message

__all__ = ["FLAG_CTL", "FLAG_SHM", "POOL_BYTES", "SPIN_S", "THRESHOLD", "ShmChannel", "spin"]

THRESHOLD = 256 * 1024
POOL_BYTES = 1 << 30
_ANC = socket.CMSG_SPACE(MAX_FDS * 4)
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
# A waiting reader spins on its ring (spin_until yields the CPU each turn: with client
# and replica on one CPU, a pure spin would hold off the very peer it waits for;
# measured: 600 us a round trip, not 30) for the channel's ``spin_s`` before it sleeps
# on the socket. Whoever owns the channel sets it (the module's ``spin``; spinning.py).

# A frame of several pieces (a header and small arrays) up to this long is joined and
# written to the ring at once: each piece written apart costs ~1.2 us of Python (view,
# bounds, counter), the join of a few KiB a fraction of that (measured: a call with a
# 1x10 and a 10x10 array, 4 pieces, 5.0 us written piecewise, 0.9 us joined).
JOIN_MAX = 16 * 1024


def _small(pieces: list[bytes | memoryview]) -> bool:
    size = 0
    for p in pieces:
        size += p.nbytes if type(p) is memoryview else len(p)
    return size <= JOIN_MAX


class ShmChannel(SegmentFrames, Channel):
    """A Channel over a connected AF_UNIX socket that moves large buffers through memfds."""

    def __init__(self, sock: socket.socket, codec: Codec, peer: str,
                 threshold: int = THRESHOLD, pool_bytes: int = POOL_BYTES,
                 ring_capacity: int = _ring.CAPACITY) -> None:
        super().__init__(sock, codec, peer)
        self._init_segments(threshold, pool_bytes)
        # Small path (ring.py): every frame this side sends goes through its ring; the
        # socket then carries only descriptors and one-byte doorbells (and sees the peer
        # go). The ring's descriptor is the first thing this side ever sends.
        self._tx: _ring.Ring | None = None
        self._rx: _ring.Ring | None = None
        self._scratch = bytearray(4096)
        self._hup: select.poll | None = None
        # A message decoded straight from the ring by a fill (see `_drain_ring`), not
        # yet taken by `next_message`.
        self._ready: Message | None = None
        if _ring.supported():
            self._tx = _ring.Ring.create(ring_capacity)
            try:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [self._tx.fd]))]
                sock.sendmsg([b"R"], anc)
            except OSError as exc:
                self._tx.close()
                raise ConnectionLostError(f"cannot set up the ring with {peer}: {exc}") from None
            os.close(self._tx.fd)  # the mapping is enough; the peer holds its own copy
            self._tx.fd = -1

    def send(self, msg: Message, on_blocked: Callable[[], None] | None = None) -> int:
        """`Channel.send`; a message with no buffers goes into the ring in one piece,
        prefix and header written together (the small-call hot path: half the Python
        steps of the general way, measured 2.8 -> 1.2 us a send)."""
        tx = self._tx
        if tx is None:
            return super().send(msg, on_blocked)
        with self.send_lock:
            if self._released or self._forget_out or self._fds_out:
                return self._send_pieces(self._encode(msg), on_blocked)
            header, bufs = self.codec.encode_parts(msg, self.threshold)
            if bufs:
                return self._send_pieces(self._frame(msg, header, bufs), on_blocked)
            length = 8 + len(header)
            if length > self.codec.max_frame:
                raise too_large(length, self.codec.max_frame)
            data = PREFIX.pack(length, 0, 0, len(header)) + header
            if self.closed:
                raise ConnectionLostError(f"connection to {self.peer} is closed")
            try:
                n = tx.write_small(data)
                if not n:  # no room in one piece: in pieces, as the reader frees it
                    return self._send_ring(tx, [data], on_blocked)
                _ring.fence()  # publish, then look at the reader's flag (see ring.py)
                if not tx.reader_awake():
                    self._doorbell()
            except OSError as exc:
                self.closed = True
                raise ConnectionLostError(
                    f"connection to {self.peer} broke while sending: {exc}") from None
            except ValueError:  # the ring was unmapped by close() in another thread
                self.closed = True
                raise ConnectionLostError(f"connection to {self.peer} is closed") from None
            self.bytes_sent += n
            return n

    def _send_pieces(self, pieces: list[bytes | memoryview],
                     on_blocked: Callable[[], None] | None) -> int:
        if self._tx is not None:
            return self._send_ring(self._tx, pieces, on_blocked)
        if self._fds_out and not self.closed:
            # The descriptors ride on the first byte of the stream this send writes, so
            # the receiver meets them in order, before the frame that names them.
            first = memoryview(pieces[0]).cast("B")
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", self._fds_out))]
            flags = _DONTWAIT if on_blocked is not None else 0
            while True:
                try:
                    self.sock.sendmsg([first[:1]], anc, flags)
                    break
                except BlockingIOError:
                    self._wait_writable(on_blocked)
                except OSError as exc:
                    self.closed = True
                    raise ConnectionLostError(
                        f"connection to {self.peer} broke while sending: {exc}") from None
            self._fds_out = []
            self.bytes_sent += 1
            return 1 + super()._send_pieces([first[1:], *pieces[1:]], on_blocked)
        return super()._send_pieces(pieces, on_blocked)

    def _send_ring(self, tx: _ring.Ring, pieces: list[bytes | memoryview],
                   on_blocked: Callable[[], None] | None) -> int:
        if self.closed:
            raise ConnectionLostError(f"connection to {self.peer} is closed")
        try:
            if self._fds_out:
                # Descriptors go first on the socket, so they are there to be taken when
                # the reader meets the frame that names them in the ring.
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", self._fds_out))]
                self.sock.sendmsg([b"F"], anc)
                self._fds_out = []
            total = 0
            if len(pieces) == 1 and type(pieces[0]) is bytes and (n := tx.write_small(pieces[0])):
                pieces, total = [], n  # the common small frame, in one go
            elif len(pieces) > 1 and _small(pieces) and (n := tx.write_small(b"".join(pieces))):
                pieces, total = [], n  # a small frame with arrays: joined, then in one go
            for piece in pieces:
                view = memoryview(piece).cast("B")
                while view.nbytes:
                    n = tx.write(view)
                    if n == 0:
                        self._wait_room(tx, on_blocked)
                        continue
                    view = view[n:]
                    total += n
            _ring.fence()  # publish, then look at the reader's flag (see ring.py)
            if not tx.reader_awake():
                self._doorbell()
        except OSError as exc:
            self.closed = True
            raise ConnectionLostError(
                f"connection to {self.peer} broke while sending: {exc}") from None
        except ValueError:  # the ring was unmapped by close() in another thread
            self.closed = True
            raise ConnectionLostError(f"connection to {self.peer} is closed") from None
        self.bytes_sent += total
        return total

    def _doorbell(self) -> None:
        try:
            self.sock.send(b"\0", _DONTWAIT)
        except BlockingIOError:
            pass  # bytes the reader has not taken yet will wake it anyway

    def _wait_room(self, tx: _ring.Ring, on_blocked: Callable[[], None] | None) -> None:
        """The ring is full: wake the reader, read meanwhile, notice if it died."""
        _ring.fence()
        if not tx.reader_awake():
            self._doorbell()
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
    def fill(self, *, wait: bool = True) -> int:
        if self._tx is None:
            return super().fill(wait=wait)
        try:
            return self._fill_ring(wait)
        except (OSError, ValueError) as exc:
            raise self._broken(exc) from None

    def fill_soon(self, seconds: float) -> int:
        if self._tx is None:
            return super().fill_soon(seconds)
        rx = self._rx
        try:
            n = self._drain_ring()
            if n or rx is None:  # (no ring from the peer yet: its descriptor, then)
                return n or self._fill_ring(False)
            rx.set_awake(True)  # the writer rings no doorbell meanwhile
            spin_until(rx.available, seconds)
            rx.set_awake(False)
            _ring.fence()  # clear the flag, then look once more (see ring.py)
            return self._drain_ring()
        except (OSError, ValueError) as exc:
            raise self._broken(exc) from None

    def _broken(self, exc: OSError | ValueError) -> ConnectionLostError:
        """The error a failed ring read becomes (ValueError: unmapped by close() in
        another thread); the channel is closed from then on."""
        self.closed = True
        if isinstance(exc, ValueError):
            return ConnectionLostError(f"connection to {self.peer} is closed")
        return ConnectionLostError(f"connection to {self.peer} broke: {exc}")

    def _fill_ring(self, wait: bool) -> int:
        n = self._drain_ring()
        if n:
            return n
        rx = self._rx
        if rx is None or not wait:  # (a waiting reader spins first: no system call)
            if self._recv_bells(_DONTWAIT):
                return self._drain_ring()
            if not wait:
                return 0
        if rx is not None:
            rx.set_awake(True)
            spin_until(rx.available, self.spin_s)
            rx.set_awake(False)
            _ring.fence()  # clear the flag, then look once more (see ring.py)
            n = self._drain_ring()
            if n:
                return n
        if self.wake is not None and not self._sleep():
            return self._drain_ring()  # rung, or sleep_s passed: the caller looks again
        self._recv_bells(0)  # sleep until a doorbell (or the peer's end)
        return self._drain_ring()

    def _drain_ring(self) -> int:
        rx = self._rx
        if rx is None or not rx.available():
            return 0  # (an empty look, the common one while waiting: no view made)
        if self._ready is None and self.decoder.empty:
            # The common small frame is decoded where it lies in the ring: no copy into
            # the decoder, no second look for it there. (Malformed: the decoder's way,
            # which reports it when it is read.)
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
        (no buffers, no flags: nearly every call and answer) lies there in one piece."""
        try:
            pos, n = rx.peek()
            if n < 12:
                return None
            length, nbufs, flags, header_len = PREFIX.unpack_from(rx.data, pos)
            if nbufs or flags or length != 8 + header_len or n < 4 + length \
                    or length > self.codec.max_frame:
                return None
            header = rx.data[pos + 12:pos + 4 + length]
        except ValueError:  # the ring was unmapped by close() in another thread
            self.closed = True
            raise ConnectionLostError(f"connection to {self.peer} is closed") from None
        msg = self.codec.decode_header(header)  # (copies what it keeps: bytes, strings)
        del header
        rx.consume(4 + length)  # the writer may reuse the room only now
        self.bytes_received += 4 + length
        return msg

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

    def _recv_bells(self, flags: int) -> int:
        """Take doorbells and descriptors off the socket; the bytes (0 if none waited)."""
        try:
            n = self._recv_into(memoryview(self._scratch), flags)
        except (BlockingIOError, InterruptedError):
            return 0  # nothing, or SO_RCVTIMEO ran out: the caller looks again
        if n == 0:
            self.closed = True
            raise ConnectionLostError(f"{self.peer} closed the connection")
        if self._rx is None and self._fds_in:
            fd = self._fds_in.popleft()  # the peer's first descriptor is its ring
            try:
                self._rx = _ring.Ring.attach(fd)
            except (OSError, ValueError) as exc:
                raise ProtocolError(f"cannot map the peer's ring: {exc}") from None
            finally:
                os.close(fd)
        return n

    def _fds_pending(self) -> bool:
        if self._tx is None or self.closed:
            return False
        self._recv_bells(0)
        return True

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
        return not self.decoder.empty or self.ring_ready()

    def ring_ready(self) -> bool:
        """Frames wait in the ring (no system call)."""
        return self._ready is not None or (self._rx is not None and self._rx.available() > 0)

    def _recv_into(self, buf: memoryview, flags: int) -> int:
        n, anc, msg_flags, _ = self.sock.recvmsg_into([buf], _ANC, flags)
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
                self._fds_in.extend(fds)
        if msg_flags & socket.MSG_CTRUNC:
            raise ConnectionLostError(f"{self.peer} sent more descriptors than fit")
        return n

    def _next_frame(self) -> Frame | None:
        while (frame := self.decoder.next_frame()) is not None:
            if frame.flags & FLAG_CTL:
                self._on_control(frame)
                continue
            if frame.flags & FLAG_SHM:
                self._attach(frame)
            return frame
        return None

    def close(self) -> None:
        super().close()
        for r in (self._tx, self._rx):
            if r is not None:
                r.close()
        self._close_segments()
        while self._fds_in:
            os.close(self._fds_in.popleft())


def spin(channels: list[ShmChannel], seconds: float = SPIN_S) -> list[ShmChannel]:
    """Spin on the rings of ``channels`` for up to ``seconds`` (their writers ring no
    doorbell meanwhile); the channels with frames waiting. A poller calls this before
    it blocks, so a busy peer's next frame costs no system call."""
    rings = [ch._rx for ch in channels if ch._rx is not None and not ch.closed]
    if not rings:
        return []
    for r in rings:
        r.set_awake(True)
    try:
        # One client (the common case) looks at its ring alone: the tightest loop.
        spin_until(rings[0].available if len(rings) == 1 else
                   lambda: any(r.available() for r in rings), seconds)
    finally:
        for r in rings:
            r.set_awake(False)
    _ring.fence()  # flags cleared, then the last look (see ring.py)
    return [ch for ch in channels if ch.ring_ready()]
