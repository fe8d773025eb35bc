"""Single-copy transfers over ``shm``: the receiver reads a large argument straight out of
the sender's memory (Linux's cross-memory attach, ``process_vm_readv``).

By segment (shmseg.py) a large buffer is copied twice on its way: by the sender into a
segment, and read by the receiver from there (in place, but the sender's copy is on its
path). A client that hands out blocks of a matrix spends most of its time on those
copies (``bench ep``: 316 us of its ~375 us per task, while the workers waited), and
the copy cannot start before the call is made. Here the sender copies nothing: the
frame names the buffer's address and length, and the receiver copies it into memory of
its own in one pass, off the sender's path (the way MPI's shared-memory transport moves
large messages on one host).

Only what cannot change is lent: a C-contiguous numpy array that is read-only through
and through (`frozen`: the program's promise, as for a held call, client/snapshot.py;
a writable argument still goes by segment, copied when the call is made). The sender
holds a reference to each array lent until the receiver says it has read it (the
release rides back like a segment's), so its memory stays put meanwhile.

Who may read whom is the kernel's to say (same user, ptrace allowed: Yama's
``ptrace_scope`` 1, common on desktops, forbids a child to read its parent), so each
side proves it before it is relied on: a side *advertises* the address of 16 random
bytes of its own; the peer reads them from the process the socket names
(``SO_PEERCRED``, never a number from a frame) and, if they match, *acknowledges*; only
then does the advertiser lend. Where the read is refused, nothing is acknowledged and
buffers keep going by segment. A reference from a peer this side never acknowledged is
a protocol error.

After each read the receiver checks that the connection is still up: a sender that
closed its end (and so may have let go of what it lent) or died (its pid could later
name another process) hangs the socket up before either, so a read that completes
with the socket still up read memory the sender still held.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import struct
import sys
import threading
from typing import Any

import numpy as np

from polybus.errors import ConnectionLostError, ProtocolError
from polybus.wire.arrays import frozen

__all__ = ["CMA_BIT", "KIND", "Lender", "supported"]

KIND = 3  # shmseg's table: "has_fd" 3, the segment field is the sender's address
CMA_BIT = 1 << 62  # a release of a lent address (segment ids: low numbers or SHARED_BIT)
_ADVERT = struct.Struct("<Q16s")  # address, the 16 bytes found there
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_HUNG = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)


class _Iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_readv: Any = None


def supported() -> bool:
    """Whether this system has ``process_vm_readv`` at all (Linux, glibc or musl)."""
    global _readv
    if _readv is None:
        fn: Any = False
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).process_vm_readv
                fn.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong,
                               ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.c_ulong]
                fn.restype = ctypes.c_ssize_t
            except (OSError, AttributeError):
                fn = False
        _readv = fn
    return bool(_readv)


def _read(pid: int, addr: int, out: np.ndarray[Any, Any]) -> None:
    """Copy ``out.nbytes`` bytes at ``addr`` in process ``pid`` into ``out``."""
    n = out.nbytes
    base = out.ctypes.data
    done = 0
    while done < n:
        local = _Iovec(base + done, n - done)
        remote = _Iovec(addr + done, n - done)
        got = _readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err) if err else "nothing read")
        done += got


class Lender:
    """One channel's side of single-copy transfers: what it lends, what it may read.

    ``sock``: the channel's connected Unix socket (its peer's pid, and its hang-up)."""

    def __init__(self, sock: socket.socket, max_bytes: int = 1 << 30) -> None:
        self._sock = sock
        self._lock = threading.Lock()  # a sending thread lends, the reading one releases
        self._held: dict[int, list[Any]] = {}  # address -> buffers lent at it, unreleased
        # A release rides on the peer's next frame: a replica answering a long burst of
        # calls before the client writes again would hold every answer it lent. Past
        # this many bytes held, buffers go by segment (whose pool has its own bound).
        self.max_bytes = max_bytes
        self._held_bytes = 0
        self.lending = False  # the peer acknowledged our advert: we may lend
        self._peer_pid = 0  # we read the peer's advert: we may read it
        self._probe: np.ndarray[Any, Any] | None = None
        self._poll: select.poll | None = None
        # [advert, ack] for the next control frame, if any: the channel's own list
        # (its send paths look at it, as at the segment releases, to send it first)
        self.notes: list[bytes] = []
        self.lent = self.taken = 0  # buffers lent, and read from the peer (tests, stats)
        if supported() and _peer(sock) is not None:
            self._probe = np.frombuffer(os.urandom(16), np.uint8).copy()
            self.notes[:] = [_ADVERT.pack(self._probe.ctypes.data, self._probe.tobytes()), b""]

    def take_notes(self) -> list[bytes]:
        """The advert and acknowledgement to send (each once), or [] if none waits."""
        notes = self.notes[:]
        self.notes.clear()
        return notes

    # -- lending -------------------------------------------------------------
    def lend(self, buf: memoryview) -> int:
        """The address to name for ``buf`` if it may be lent (held until released),
        else 0 (it goes by segment): bytes, or a frozen numpy array's whole buffer."""
        if not self.lending or not buf.c_contiguous:
            return 0
        obj: Any = buf.obj
        if type(obj) is np.ndarray:
            if not frozen(obj):
                return 0
        elif type(obj) is not bytes:
            return 0
        n = buf.nbytes
        addr: int = np.frombuffer(buf, np.uint8).ctypes.data
        with self._lock:
            if self._held_bytes + n > self.max_bytes:
                return 0
            self._held.setdefault(addr, []).append((obj, n))
            self._held_bytes += n
            self.lent += 1
        return addr

    def released(self, addr: int) -> None:
        with self._lock:
            held = self._held.get(addr)
            if held:
                self._held_bytes -= held.pop()[1]
                if not held:
                    del self._held[addr]

    def held(self) -> int:
        """Arrays lent and not yet released (for tests and stats)."""
        with self._lock:
            return sum(len(v) for v in self._held.values())

    def close(self) -> None:
        """The channel closed (its socket first: a reader sees that before this)."""
        with self._lock:
            self._held.clear()
            self._held_bytes = 0

    # -- reading -------------------------------------------------------------
    def on_notes(self, advert: bytes, ack: bytes) -> None:
        """The peer's advert (read it: can we?) and its acknowledgement of ours."""
        if ack:
            if self._probe is None:
                raise ProtocolError("acknowledgement of an advert this side never sent")
            self.lending = True
        if advert:
            if len(advert) != _ADVERT.size:
                raise ProtocolError("malformed single-copy advert")
            addr, want = _ADVERT.unpack(advert)
            pid = _peer(self._sock)
            if pid is None or not supported():
                return
            got = np.empty(16, np.uint8)
            try:
                _read(pid, addr, got)
            except OSError:
                return  # not permitted here (Yama, another user, a container): segments
            if got.tobytes() == want:
                self._peer_pid = pid
                self.notes[:] = [self.notes[0] if self.notes else b"", b"\1"]  # (ours may wait)

    def read(self, addr: int, length: int) -> memoryview:
        """``length`` bytes the peer lent at ``addr``, in memory of this side's own."""
        if not self._peer_pid:
            raise ProtocolError("a single-copy reference from a peer not set up for it")
        out = np.empty(length, np.uint8)
        try:
            _read(self._peer_pid, addr, out)
        except OSError as exc:
            raise ProtocolError(f"cannot read {length} bytes the peer lent at {addr:#x}: "
                                f"{exc}") from None
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self._sock, _HUNG)
        if any(ev & _HUNG for _, ev in self._poll.poll(0)):
            raise ConnectionLostError("the peer went while its buffer was being read")
        self.taken += 1
        return memoryview(out)  # type: ignore[arg-type]


def _peer(sock: socket.socket) -> int | None:
    """The pid at the other end of ``sock`` if it runs as this user; else None."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None or sock.family != socket.AF_UNIX:
        return None
    try:
        pid, uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, opt, _CRED.size))
    except (OSError, struct.error):
        return None
    return pid if pid > 0 and uid == os.getuid() else None
