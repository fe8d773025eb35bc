"""An authenticated, framed connection over one stream socket.

Sends never wait on a peer that is not reading: a send that would block hands control
to ``on_blocked`` (which reads and handles what the peer sent meanwhile) before trying
again, so two sides that both write before reading cannot deadlock (seeds/002's
buffer deadlock is impossible by construction). A writer that must not wait at all
(the client's pump, client/pump.py) passes `LATER`: what the connection cannot take at
once stays in ``unsent``, and the next send on the connection writes it first. A send
that waits for another thread's write on the connection to end lets ``on_blocked`` read
meanwhile too (`Channel.wait_send_lock`).
Receives fill the frame decoder's memory directly, so large arrays are not copied on
the way in.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections.abc import Callable

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.transport.keepalive import cut as cut_socket
from polybus.transport.ready import readable, ready, writable
from polybus.transport.spinning import spin_until
from polybus.transport.tls import fill_tls
from polybus.transport.unwhole import FrameEnds
from polybus.transport.wake import Wake
from polybus.wire.codec import Codec
from polybus.wire.framing import Frame, FrameDecoder
from polybus.wire.messages import Message

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
_IOV_MAX = 512
# How often a send waiting for another thread's write to end lets ``on_blocked`` read
SEND_LOCK_LOOK_S = 0.005


def LATER() -> None:
    """``on_blocked`` for a writer that must never wait for its peer (the client's pump's
    turn, client/pump.py; an aggregating binding's linger timer, client/linger.py): a
    send that would block keeps the rest of its bytes in the channel's ``unsent`` and
    returns. Every later send on the connection writes them first (frames stay whole and
    in order), and `Channel.send_unsent` writes on with them alone. (Never called: it is
    told apart by identity.)"""


class Channel(FrameEnds):
    """Messages over one connected, authenticated socket."""

    # A waiting fill polls this long before it sleeps in the kernel (spinning.py);
    # 0 blocks at once. Set per connection by whoever owns it (the client's session).
    spin_s = 0.0
    # Called (with the channel) by whoever writes the last of ``unsent`` on, from any
    # thread: a replica reads that client again then (worker/unread.py). Set by the owner.
    on_caught_up: Callable[[Channel], None] | None = None
    # Set by an owner that cut the connection for a frame begun that stopped coming
    # (transport/stalls.py), having said so: whoever then finds it ended says no more.
    stalled = False

    def __init__(self, sock: socket.socket, codec: Codec, peer: str) -> None:
        self.sock = sock
        self.codec = codec
        self.peer = peer
        self.decoder = FrameDecoder(codec.max_frame, codec.bytes_buffers)
        self.send_lock = threading.Lock()
        self.bytes_sent = 0
        self.bytes_received = 0
        self.closed = False
        # Bytes of frames a `LATER` send could not write, written before anything else
        # (under ``send_lock``, as every write).
        self.unsent: list[bytes | memoryview] = []
        # TLS: no sendmsg or recv flags, so the socket is non-blocking and waits use
        # select; one lock keeps a reader and a writer thread out of OpenSSL together.
        self._look: select.epoll | None = None  # made when a reader first spins
        # A reader that sleeps here also wakes when ``wake`` rings (transport/wake.py),
        # and after ``sleep_s`` at most (None: until data). Set by the client's reactor.
        self.wake: Wake | None = None
        self.sleep_s: float | None = None
        self._sleeper: select.poll | None = None
        self.tls = isinstance(sock, ssl.SSLSocket)
        self._tls_lock = threading.Lock()
        # Held by `close` while it frees the descriptor and by `cut` while it shuts the
        # connection down, so a cut from another thread never reaches a descriptor
        # reused by a new connection after this one closed.
        self._end_lock = threading.Lock()
        if self.tls:
            sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- sending ---------------------------------------------------------------
    def send(self, msg: Message, on_blocked: Callable[[], None] | None = None) -> int:
        """Send one message; returns its size on the wire in bytes."""
        lock = self.send_lock
        if not lock.acquire(False):
            self.wait_send_lock(on_blocked)
        try:
            return self._send_one(self._encode(msg), msg, on_blocked)  # (unwhole.py)
        finally:
            lock.release()

    def send_many(self, msgs: list[Message], on_blocked: Callable[[], None] | None = None) -> int:
        lock = self.send_lock
        if not lock.acquire(False):
            self.wait_send_lock(on_blocked)
        try:
            return self._send_frames(msgs, on_blocked)  # (`_encode_many`'s: unwhole.py)
        finally:
            lock.release()

    def wait_send_lock(self, on_blocked: Callable[[], None] | None) -> None:
        """Take ``send_lock``, which another thread's write holds: while it waits,
        ``on_blocked`` reads, as it does while the connection is full. That write may be
        waiting for room while its own reads are left to this thread (the client's
        reader: one thread at a time reads a connection), and a peer that stops reading
        while its answers go unread would leave the two waiting for each other."""
        lock = self.send_lock
        if on_blocked is None or on_blocked is LATER:
            lock.acquire()
            return
        while not lock.acquire(timeout=SEND_LOCK_LOOK_S):
            on_blocked()

    def send_unsent(self, on_blocked: Callable[[], None] | None = LATER) -> int:
        """Write on with what `LATER` sends left in ``unsent`` (with `LATER`: as much as
        the connection takes now); the bytes written."""
        with self.send_lock:
            return self._send_one([], None, on_blocked) if self.unsent else 0

    def _take_unsent(self, pieces: list[bytes | memoryview]) -> list[bytes | memoryview]:
        """``pieces`` behind the bytes left unsent, which this write takes on (send lock held)."""
        out = [*self.unsent, *pieces]
        self.unsent = []
        return out

    # Hooks for a transport that carries some bytes its own way (transport/shm.py):
    # how messages become pieces, how bytes are read, how frames come out.
    def _encode(self, msg: Message) -> list[bytes | memoryview]:
        return self.codec.encode(msg)

    def _encode_many(self, msgs: list[Message]) -> list[bytes | memoryview]:
        pieces: list[bytes | memoryview] = []
        for m in msgs:
            pieces.extend(self._encode(m))
        return pieces

    def _recv_into(self, buf: memoryview, flags: int) -> int:
        return self.sock.recv_into(buf, 0, flags)

    def _next_frame(self) -> Frame | None:
        frame = self.decoder.next_frame()
        if frame is not None and frame.flags:  # (shm's frames are ShmChannel's)
            raise ProtocolError(f"frame flags {frame.flags} from {self.peer}: this "
                                "transport uses none")
        return frame

    def _send_pieces(self, pieces: list[bytes | memoryview], on_blocked: Callable[[], None] | None) -> int:
        if self.closed:
            raise ConnectionLostError(f"connection to {self.peer} is closed")
        if self.unsent:  # (what a LATER send began goes first)
            if on_blocked is LATER and not self.tls and pieces and not writable(self.sock):
                # Still full: behind the rest, untried (tried, a burst of LATER sends went
                # over every piece left each time: 8,000 Revokes took 25 s)
                self.unsent.extend(v for v in (memoryview(p).cast("B") for p in pieces)
                                   if v.nbytes)
                return 0
            pieces = self._take_unsent(pieces)
        flags = _DONTWAIT if on_blocked is not None else 0
        if len(pieces) == 1 and type(pieces[0]) is bytes and not self.tls:
            # The common small message: one write, no views (this is the hot path).
            # (Not for TLS: an SSL socket takes no send flags; the loop below handles it.)
            try:
                n = self.sock.send(pieces[0], flags)
            except BlockingIOError:
                n = 0
            except OSError as exc:
                self.closed = True
                raise ConnectionLostError(f"connection to {self.peer} broke while sending: {exc}") from None
            if n == len(pieces[0]):
                self.bytes_sent += n
                return n
            self.bytes_sent += n
            return n + self._send_pieces([memoryview(pieces[0])[n:]], on_blocked)
        total = 0
        # Empty buffers (an empty array) are dropped: send() of 0 bytes returns 0 and
        # the loop below would never pop them.
        views = [v for v in (memoryview(p).cast("B") for p in pieces) if v.nbytes]
        try:
            while views:
                try:
                    if self.tls:
                        with self._tls_lock:
                            n = self.sock.send(views[0])
                    elif len(views) == 1:
                        n = self.sock.send(views[0], flags)
                    else:
                        n = self.sock.sendmsg(views[:_IOV_MAX], [], flags)
                except _WOULD_BLOCK:
                    if on_blocked is LATER:  # the rest for the next send (unsent)
                        self.unsent = list(views)
                        break
                    self._wait_writable(on_blocked)
                    continue
                total += n
                i = 0  # (the views written whole, taken off at once: not one pop(0) each)
                while n and i < len(views):
                    if n >= views[i].nbytes:
                        n -= views[i].nbytes
                        i += 1
                    else:
                        views[i] = views[i][n:]
                        n = 0
                if i:
                    del views[:i]
        except OSError as exc:
            self.closed = True
            raise ConnectionLostError(f"connection to {self.peer} broke while sending: {exc}") from None
        finally:  # (also what went before a break: unwhole.py reads it)
            self.bytes_sent += total
        return total

    def _wait_writable(self, on_blocked: Callable[[], None] | None) -> None:
        fd = self.sock.fileno()  # (a poll: select() takes no descriptor past 1,023)
        can_read, _ = ready([fd], [fd], 1.0)
        if can_read and on_blocked is not None:
            on_blocked()

    # -- receiving -------------------------------------------------------------
    def pending(self) -> list[Message]:
        """Messages already received in full (no system call)."""
        out: list[Message] = []
        while (msg := self.next_message()) is not None:
            out.append(msg)
        return out

    def receive(self, *, wait: bool = True) -> list[Message]:
        """Read once from the socket (waiting for data if ``wait``) and decode what is whole.

        Messages already whole in the decoder are returned first, without reading: a
        reader that took only its own answer leaves the rest there, and a wait on the
        socket for them would never end. Raises ConnectionLostError when the peer has
        closed, ProtocolError on bad bytes.
        """
        msgs = self.pending()
        if msgs:
            return msgs
        return self.pending() if self.fill(wait=wait) else []

    def fill(self, *, wait: bool = True, stay: bool = False) -> int:
        """Read once from the socket into the decoder, decoding nothing (see next_message);
        the bytes read (0 if none were waiting). Raises ConnectionLostError. ``stay``:
        see `fill_soon`."""
        if self.tls:
            return fill_tls(self, wait)
        n = 0
        if wait and self.spin_s:
            n = spin_until(self._read_nowait, self.spin_s)
        if not n:
            if wait and self.wake is not None and not self._sleep():
                return 0  # rung, or sleep_s passed: the caller looks again
            n = self._read_once(0 if wait else _DONTWAIT)
        # Inside a large frame, take everything already here before going back to the
        # poller: one select per socket-buffer-full costs a third of the bandwidth.
        while n and self.decoder.receiving_large and (more := self._read_once(_DONTWAIT)):
            n += more
        return n

    def fill_soon(self, seconds: float, stay: bool = False) -> int:
        """Read what arrives within ``seconds``, polling and never sleeping in the kernel
        (a replica waiting for a client's next call, worker/direct.py); the bytes read,
        0 if none came. Raises ConnectionLostError. ``stay`` (shm): a frame that came
        while this side spun leaves its awake flag up, the caller having undertaken to
        lower it, fence and look before it next sleeps (transport/ring.py)."""
        if self.tls:  # (whole records, and what OpenSSL has decrypted but select cannot see)
            return spin_until(self._fill_tls_nowait, seconds)
        n = spin_until(self._read_nowait, seconds)
        while n and self.decoder.receiving_large and (more := self._read_once(_DONTWAIT)):
            n += more
        return n

    def wait_readable(self, seconds: float) -> bool:
        """Sleep in the kernel (no spin) until something comes to read, for ``seconds`` at
        most: whether it came (then `fill(wait=False)` takes it). For a wait that must
        not take a CPU, with nothing whole left in the decoder (client/stats.py)."""
        sock = self.sock  # (TLS: records decrypted already, which no poll sees)
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        return readable(sock, seconds)

    def _fill_tls_nowait(self) -> int:
        return fill_tls(self, False)

    def look(self) -> select.epoll:
        """The socket's own ``epoll`` (made on first use): a spinning reader's look, a
        quarter of the cost of a failed non-blocking read, which raises. Not for TLS
        (decrypted bytes it cannot see) nor where there is no epoll."""
        look = self._look
        if look is None:
            look = self._look = select.epoll(1)
            look.register(self.sock.fileno(), select.EPOLLIN)
        return look

    def _read_nowait(self) -> int:
        """A spinning reader's look: a read only when the socket has something."""
        look = self._look
        if look is None:
            if self.tls or not hasattr(select, "epoll"):
                return self._read_once(_DONTWAIT)
            look = self.look()
        try:
            if not look.poll(0):
                return 0
        except (ValueError, OSError):  # closed by another thread meanwhile
            self.closed = True
            raise ConnectionLostError(f"connection to {self.peer} is closed") from None
        return self._read_once(_DONTWAIT)

    def _sleep(self) -> bool:
        """Sleep until the socket has something (True), or ``wake`` rings or ``sleep_s``
        passes (False). Raises ConnectionLostError if the socket was closed meanwhile."""
        wake = self.wake
        assert wake is not None
        sleeper = self._sleeper
        if sleeper is None:
            sleeper = self._sleeper = select.poll()
            sleeper.register(self.sock.fileno(), select.POLLIN)
            sleeper.register(wake.fileno(), select.POLLIN)
        try:
            events = sleeper.poll(-1 if self.sleep_s is None else self.sleep_s * 1000)
        except (ValueError, OSError):  # closed by another thread meanwhile
            self.closed = True
            raise ConnectionLostError(f"connection to {self.peer} is closed") from None
        if any(fd == wake.fileno() for fd, _ in events):
            wake.clear()
            return False
        return bool(events)

    def _read_once(self, flags: int) -> int:
        """One read into the decoder's memory; 0 if nothing was waiting (or a receive
        timeout passed). Raises ConnectionLostError."""
        try:
            if self.tls:
                with self._tls_lock:  # TLS records: no flags, one reader or writer at a time
                    n = self.sock.recv_into(self.decoder.get_buffer())
            else:
                n = self._recv_into(self.decoder.get_buffer(), flags)
        except _WOULD_BLOCK:
            return 0
        except OSError as exc:
            self.closed = True
            raise ConnectionLostError(f"connection to {self.peer} broke: {exc}") from None
        if n == 0:
            self.closed = True
            raise ConnectionLostError(f"{self.peer} closed the connection")
        self.decoder.buffer_updated(n)
        self.bytes_received += n
        return n

    def next_message(self) -> Message | None:
        """The next message already received in full, or None; ProtocolError on bad bytes."""
        d = self.decoder
        header = d.next_small()
        if header is not None:
            return self.codec.decode_header(header)
        if d.empty:  # nothing received: the common look of a waiting reader
            return None
        frame = self._next_frame()
        return None if frame is None else self.codec.decode(frame)

    def buffered(self) -> bool:
        """Something already read that no selector will report (frames whole or partial
        in the decoder): a reader that sleeps before taking it waits for the next bytes."""
        return not self.decoder.empty

    def close(self) -> None:
        if not self.closed:
            self.closed = True
        self.unsent = []
        if self._look is not None:
            self._look.close()
        with self._end_lock:
            try:
                self.sock.close()
            except OSError:
                pass

    def cut(self) -> None:
        """End the connection to a peer taken for cut off, from any thread (its reader
        finds it ended: transport/keepalive.py's `cut`); nothing once it is closed."""
        with self._end_lock:
            if self.sock.fileno() != -1:
                cut_socket(self.sock)

