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
once. (This segment half of the channel is shmseg.py, but for the receiver's mapping of
the segments a frame names: shmmaps.py.)

Small path (ring.py): on x86-64 every frame (headers and small buffers; large buffers
still by segment reference) goes through a shared ring per direction instead of the
socket, which then carries only descriptors, the peer's going, and one-byte doorbells
that a writer sends only when the reader has said it is going to sleep. A reader that
expects data spins ``spin_s`` on the ring first (yielding the CPU each turn), so a busy
pair makes no system call; `spin` does the same for a worker's poller over its channels.
(The ring half of the channel, writing and reading frames, is ringchannel.py; this
module adds the socket: the rings' descriptors, the bells, sleeping.)

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
from polybus.transport.channel import LATER
from polybus.transport.ringchannel import RingChannel
from polybus.transport.shmmaps import SegmentMaps
from polybus.transport.shmseg import FLAG_CTL, FLAG_SHM, MAX_FDS, MAX_FDS_PENDING, SegmentFrames
from polybus.transport.spinning import SPIN_S, spin_until
from polybus.wire.codec import Codec
from polybus.wire.framing import Frame
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

class ShmChannel(SegmentFrames, SegmentMaps, RingChannel):
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
        self._coalesce = 0.0  # asked of the peer's writes (`coalesce`), once its ring is here
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

    def _send_pieces(self, pieces: list[bytes | memoryview],
                     on_blocked: Callable[[], None] | None) -> int:
        if self._tx is not None:  # (which takes what a LATER send left itself)
            return self._send_ring(self._tx, pieces, on_blocked)
        if self.unsent and not self.closed:  # (what a LATER send began goes first)
            pieces = self._take_unsent(pieces)
        if self._fds_out and not self.closed and pieces:
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
                    if on_blocked is LATER:  # none of it written: all of it for the next send
                        self.unsent = pieces
                        return 0
                    self._wait_writable(on_blocked)
                except OSError as exc:
                    self.closed = True
                    raise ConnectionLostError(
                        f"connection to {self.peer} broke while sending: {exc}") from None
            self._fds_out = []
            self.bytes_sent += 1
            return 1 + super()._send_pieces([first[1:], *pieces[1:]], on_blocked)
        return super()._send_pieces(pieces, on_blocked)

    def fill(self, *, wait: bool = True, stay: bool = False) -> int:
        if self._tx is None:
            return super().fill(wait=wait)
        try:
            return self._fill_ring(wait, stay)
        except (OSError, ValueError) as exc:
            raise self._broken(exc) from None

    def fill_soon(self, seconds: float, stay: bool = False) -> int:
        if self._tx is None:
            return super().fill_soon(seconds)
        rx = self._rx
        try:
            n = self._drain_ring()
            if n or rx is None:  # (no ring from the peer yet: its descriptor, then)
                return n or self._fill_ring(False)
            rx.set_awake(True)  # the writer rings no doorbell meanwhile
            if spin_until(rx.available, seconds) and stay:
                return self._drain_ring()  # (flag left up: see _fill_ring)
            rx.set_awake(False)
            _ring.fence()  # clear the flag, then look once more (see ring.py)
            return self._drain_ring()
        except (OSError, ValueError) as exc:
            raise self._broken(exc) from None

    def _fill_ring(self, wait: bool, stay: bool = False) -> int:
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
            if spin_until(rx.available, self.spin_s) and stay:
                # A frame came while spinning: the flag stays up, the caller lowering it
                # before it sleeps. Lowered here, it raced the writer's look at it, which
                # comes just after the frame it wrote: a reader quick enough to see the
                # frame first made the writer ring a needless doorbell (a system call of
                # several us; 13% of 0-byte sync calls, both ways, split CPUs).
                return self._drain_ring()
            rx.set_awake(False)
            _ring.fence()  # clear the flag, then look once more (see ring.py)
            n = self._drain_ring()
            if n:
                return n
        if self.wake is not None and not self._sleep():
            return self._drain_ring()  # rung, or sleep_s passed: the caller looks again
        self._recv_bells(0)  # sleep until a doorbell (or the peer's end)
        return self._drain_ring()

    def _recv_bells(self, flags: int) -> int:
        """Take doorbells and descriptors off the socket; the bytes (0 if none waited)."""
        try:
            n = self._recv_into(memoryview(self._scratch), flags)
        except (BlockingIOError, InterruptedError):
            return 0  # nothing, or SO_RCVTIMEO ran out: the caller looks again
        if n == 0:
            self.closed = True
            raise ConnectionLostError(f"{self.peer} closed the connection")
        if self._rx is None and not self._fds_in:
            # The first thing a peer sends is its ring's descriptor, on its first byte:
            # bytes without one are not from a polybus peer. Taken for doorbells, they
            # left it waiting for ever, unsaid; refused, it is told and dropped as a
            # peer sending junk over TCP is (worker/intake.py).
            raise ProtocolError(f"{self.peer} sent {n} byte(s) where its ring's descriptor "
                                "was due (the first thing an shm peer sends)")
        if self._rx is None:
            fd = self._fds_in.popleft()  # the peer's first descriptor is its ring
            try:
                self._rx = _ring.Ring.attach(fd)
            except (OSError, ValueError) as exc:
                raise ProtocolError(f"cannot map the peer's ring: {exc}") from None
            finally:
                os.close(fd)
            if self._coalesce:
                self._rx.set_coalesce(self._coalesce)
        return n

    def coalesce(self, seconds: float) -> None:
        """Ask the peer to hold back the bell of what it writes while it has more to
        write soon, for at most ``seconds`` (ring.py; 0: ring for every frame)."""
        self._coalesce = seconds
        if self._rx is not None and not self.closed:
            self._rx.set_coalesce(seconds)

    def _fds_pending(self) -> bool:
        # Without waiting: a sender passes a descriptor on the socket before it writes
        # the ring frame naming it, so one that was sent is there already. (A wait here
        # was a peer's to end: one that named a descriptor it never sent stopped the
        # replica's poller, every client's reads, for as long as it kept still.)
        if self._tx is None or self.closed:
            return False
        return self._recv_bells(_DONTWAIT) > 0

    def _recv_into(self, buf: memoryview, flags: int) -> int:
        n, anc, msg_flags, _ = self.sock.recvmsg_into([buf], _ANC, flags)
        if anc:  # (descriptors: rare, a segment's first use; never per frame)
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds = array.array("i")
                    fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
                    self._fds_in.extend(fds)
            if len(self._fds_in) > MAX_FDS_PENDING:
                self._refuse_fds(f"{len(self._fds_in)} descriptors passed that no frame "
                                 f"has named (at most {MAX_FDS_PENDING} may wait)")
        if msg_flags & socket.MSG_CTRUNC:
            self._refuse_fds(f"more than {MAX_FDS} descriptors in one message")
        return n

    def _refuse_fds(self, why: str) -> None:
        """The peer passed descriptors it may not: they are closed (every one not yet
        taken), and the peer refused; the connection is left for its owner to close."""
        while self._fds_in:
            os.close(self._fds_in.popleft())
        raise ProtocolError(f"{self.peer} sent {why}")

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
    try:  # (ValueError: a ring unmapped by a close in another thread; not looked at again)
        for r in rings:
            r.set_awake(True)
        # One client (the common case) looks at its ring alone: the tightest loop.
        spin_until(rings[0].available if len(rings) == 1 else
                   lambda: any(r.available() for r in rings), seconds)
    except ValueError:
        pass
    finally:
        for r in rings:
            try:
                r.set_awake(False)
            except ValueError:
                pass
    _ring.fence()  # flags cleared, then the last look (see ring.py)
    return [ch for ch in channels if ch.ring_ready()]
