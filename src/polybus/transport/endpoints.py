"""Addresses by scheme, listening and connecting, with the token handshake.

``tcp://HOST:PORT`` (``HOST:PORT`` alone means tcp), ``ipc:///path/to.sock`` (a Unix
socket), ``shm:///path/to.sock`` (a Unix socket whose large buffers travel in shared
memory, see shm.py) and ``inproc://NAME`` (a listener and its connections within one
process, for tests; see inproc.py). An ``ipc``/``shm`` listener's socket file is made
0600 (put it in a 0700 directory; the local engine does). Listening binds to loopback
unless an address says otherwise.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from polybus.errors import AuthenticationError, ProtocolError, TLSHandshakeError, TransportError
from polybus.transport import inproc
from polybus.transport import tls as _tls
from polybus.transport.channel import Channel
from polybus.transport.handshakeio import Slow, recv_exact
from polybus.wire import handshake
from polybus.wire.codec import Codec

HANDSHAKE_TIMEOUT = 5.0
# Handshakes under way at once per listener, each in a thread of its own (so a silent
# peer holds no one else up) for up to its timeout. A crowd of strangers took a thread
# and a socket each, without limit; past this a new connection cuts short the oldest
# handshake under way, whatever its age. (It used to cut only one under way for 0.25 s
# or more and close the newcomer otherwise: a crowd that sent part of a proof and
# reconnected as it was closed kept the gate full of younger ones, and 1 good run in 3
# was closed out.) Peers that have passed the handshake are not counted.
MAX_HANDSHAKES = 64


class HandshakeGate:
    """Counts one listener's handshakes under way, at most ``limit`` at once.

    When it is full, a new connection cuts short the oldest handshake under way
    (`enter`'s ``cut``), whatever its age: a good client's takes a round trip, so it is
    cut only if ``limit`` more connections come within that round trip, while peers
    that connect and say nothing (or part of a proof), a crowd of them reconnecting as
    they are closed, each hold a place only until ``limit`` newer ones have come. Those
    cut still count until their threads leave, up to twice ``limit``; past that a new
    connection is closed at once."""

    def __init__(self, limit: int = MAX_HANDSHAKES) -> None:
        self.limit = limit
        self.pending = 0
        self.refused = 0  # connections closed since the gate was last below its limit
        self.cut = 0  # handshakes cut short for a newcomer since then
        self._lock = threading.Lock()

    def enter(self, cut: Callable[[], bool] | None = None) -> int:
        """0 if a handshake may start (it counts until `leave`); else how many
        connections have been refused since the gate was last below its limit, this
        one included (1: the first, the one to say why). Full, ``cut()`` is asked to
        cut the oldest handshake under way short (True if it did) to let this one in."""
        with self._lock:
            if self.pending >= self.limit:
                if self.pending >= 2 * self.limit or cut is None or not cut():
                    self.refused += 1
                    return self.refused
                self.cut += 1
            self.pending += 1
            return 0

    def leave(self) -> tuple[int, int]:
        """A handshake ended (passed or not); the first time the gate is below its limit
        again, how many connections were refused and how many handshakes cut short
        while it was full (else zeros)."""
        with self._lock:
            self.pending -= 1
            if self.pending >= self.limit:
                return 0, 0
            said = self.refused, self.cut
            self.refused = self.cut = 0
            return said


class Listener(Protocol):
    """What `listen` gives: a listening socket, or an inproc listener that behaves as one."""

    def accept(self) -> tuple[socket.socket, Any]: ...
    def fileno(self) -> int: ...
    def setblocking(self, flag: bool) -> None: ...
    def shutdown(self, how: int) -> None: ...
    def close(self) -> None: ...


WILDCARDS = ("0.0.0.0", "::", "")  # hosts that bind every interface and name none to dial


@dataclass(frozen=True)
class Address:
    scheme: str  # "tcp" | "ipc" | "shm" | "inproc"
    host: str = ""
    port: int = 0
    path: str = ""

    @classmethod
    def parse(cls, text: str) -> Address:
        scheme, sep, rest = text.partition("://")
        if not sep:
            scheme, rest = "tcp", text
        if scheme == "tcp":
            host, colon, port = rest.rpartition(":")
            if not colon or not (port.isascii() and port.isdecimal()):  # (not '²' or '٣')
                raise TransportError(f"bad address {text!r}: expected HOST:PORT or tcp://HOST:PORT")
            if int(port) > 65535:  # (bind and connect raised a bare OverflowError)
                raise TransportError(f"bad address {text!r}: the port must be 0-65535")
            return cls("tcp", host.strip("[]") or "127.0.0.1", int(port))
        if scheme in ("ipc", "shm"):
            if not rest:
                raise TransportError(f"bad address {text!r}: expected {scheme}:///path")
            return cls(scheme, path=rest)
        if scheme == "inproc":
            if not rest:
                raise TransportError(f"bad address {text!r}: expected inproc://NAME")
            return cls(scheme, path=rest)
        raise TransportError(f"unknown transport {scheme!r} in {text!r} "
                             "(tcp, ipc, shm, or inproc within one process)")

    def __str__(self) -> str:
        if self.scheme in ("ipc", "shm", "inproc"):
            return f"{self.scheme}://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def listen(address: Address, backlog: int = 128) -> tuple[Listener, Address]:
    """A listening socket and the address it really has (port 0 becomes a real port)."""
    if address.scheme == "inproc":
        return inproc.listen(address.path, backlog), address
    if address.scheme in ("ipc", "shm"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _bind_private(sock, address.path)
            sock.listen(backlog)
        except OSError as exc:
            sock.close()
            why = exc.strerror or str(exc)
            if len(os.fsencode(address.path)) > 107:
                why = (f"its path is {len(os.fsencode(address.path))} bytes, and a Unix "
                       "socket's is at most 107: choose a shorter path (for a run's own "
                       "sockets, a shorter TMPDIR)")
            raise TransportError(f"cannot listen on {address}: {why}") from None
        return sock, address
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address.host, address.port))
    except OSError as exc:
        sock.close()
        raise TransportError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    sock.listen(backlog)
    host, port = sock.getsockname()[:2]
    return sock, Address("tcp", host, port)


def _bind_private(sock: socket.socket, path: str) -> None:
    """Bind ``sock`` at ``path`` as a file of mode 0600 from its first moment.

    Bound as it was, the file took the umask's mode until the chmod after the bind, and
    another user of the host could connect through it meanwhile. On Linux the file
    takes the socket's own mode (less the umask), so the socket is made 0600 first;
    where that does nothing, the chmod after the bind remains."""
    try:
        os.fchmod(sock.fileno(), 0o600)
    except OSError:
        pass
    if os.path.lexists(path):
        os.unlink(path)  # a file left by an earlier run
    sock.bind(path)
    os.chmod(path, 0o600)


def _tune(sock: socket.socket) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 4 * 1024 * 1024)
        except OSError:
            pass


class PeerWentAway(TransportError):
    """The peer closed its end during the accepting side's handshake, before it was
    refused or accepted: a client that gave up waiting (its own handshake timed out
    against a process that was stopped or too busy to answer), or a port check. Not a
    refusal: the listener says it so (it logged such a client as "refused")."""


_GONE = "a client that gave up waiting for this process to answer, or a port check"


def connect(address: Address | str, token: bytes, codec: Codec,
            timeout: float = HANDSHAKE_TIMEOUT, tls: _tls.TLSConfig | None = None) -> Channel:
    """Connect and authenticate; raises TransportError / AuthenticationError.

    TCP connections use mutual TLS when ``tls`` (or this process's `tls.configure`) says so.
    """
    addr = Address.parse(address) if isinstance(address, str) else address
    tls = tls or _tls.current()
    try:
        if addr.scheme == "inproc":
            sock = inproc.dial(addr.path, timeout)  # (a TransportError if none listens)
        elif addr.scheme in ("ipc", "shm"):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(addr.path)
            except OSError:
                sock.close()  # (left to the collector, a ResourceWarning)
                raise
        else:
            sock = socket.create_connection((addr.host, addr.port), timeout=timeout)
    except OSError as exc:
        raise TransportError(f"cannot connect to {addr}: {exc.strerror or exc}") from None
    except UnicodeError as exc:  # (a host name IDNA cannot encode: "a..b", a 64-character label)
        raise TransportError(f"cannot connect to {addr}: its host is not a name ({exc})") from None
    tls = tls if addr.scheme == "tcp" else None  # (ipc, shm and inproc stay local and plain)
    greeted = False
    try:
        _tune(sock)
        deadline = time.monotonic() + timeout  # (TLS's, the greeting and the answer, together)
        if tls is not None:
            sock = _tls.wrap_client(sock, tls, addr.host, deadline)
        hs = handshake.ClientHandshake(token, codec.max_frame)
        try:
            hello = recv_exact(sock, handshake.HELLO_SIZE, deadline)
        except Slow as exc:  # (a TLS side's alert, its close not yet come: said as TLS)
            if tls is not None or addr.scheme != "tcp" or not _tls.looks_like_tls(exc.data):
                raise
            hello = exc.data
        greeted = bool(hello)
        if tls is None and addr.scheme == "tcp" and _tls.looks_like_tls(hello):
            raise TLSHandshakeError(
                f"handshake with {addr} failed: it answered in TLS (a TLS record where its "
                f"polybus greeting was due): it uses TLS, [cluster] tls, and this process "
                f"does not")
        if not greeted and addr.scheme == "inproc":  # (not "not a polybus server")
            raise TransportError(f"handshake with {addr} failed: it closed the connection "
                                 f"without a greeting (it stopped listening, or had "
                                 f"{MAX_HANDSHAKES} handshakes under way)")
        if not greeted:  # (not "not a polybus server", nor a peer in TLS: that says so)
            raise TransportError(
                f"handshake with {addr} failed: it closed the connection during the "
                f"greeting, before sending it (it may be stopping, or have had "
                f"{MAX_HANDSHAKES} handshakes under way and as many cut short not ended; "
                f"try again)")
        sock.sendall(hs.proof(hello))
        hs.verify(recv_exact(sock, handshake.ANSWER_SIZE, deadline))
        sock.settimeout(None)
        _narrow(codec, hs.peer_limit)
    except TransportError:  # (a TLSHandshakeError, or inproc's above)
        sock.close()
        raise
    except (ProtocolError, OSError) as exc:
        sock.close()
        if isinstance(exc, ProtocolError):
            raise
        # Said as what went wrong between the two, not as a peer that does not answer:
        # a TLS side and a plain one, or a certificate refused (a server's refusal of
        # this side's certificate may come with TLS 1.3 only at the first read).
        if isinstance(exc, ssl.SSLError) and tls is not None:
            raise TLSHandshakeError(f"TLS handshake with {addr} failed: "
                                    f"{_tls.refusal(exc, tls, addr.host)}") from None
        if isinstance(exc, TimeoutError) and not greeted and tls is None \
                and addr.scheme == "tcp" and not getattr(exc, "got", 0):
            raise TLSHandshakeError(
                f"handshake with {addr} failed: it accepted the connection but sent no "
                f"polybus greeting within {timeout:g} s (a peer that uses TLS, [cluster] "
                f"tls, waits for this side to start TLS; else it is stopped or "
                f"overloaded)") from None
        raise TransportError(f"handshake with {addr} failed: {exc}") from None
    except BaseException:  # (a stop signal's, raised in the wait: worker/main.py)
        sock.close()
        raise
    return _channel(sock, codec, str(addr), addr.scheme == "shm")


def accept(listener: Listener, token: bytes, codec: Codec,
           timeout: float = HANDSHAKE_TIMEOUT, *, shm: bool = False) -> Channel:
    """Accept one connection and authenticate it (see `authenticate`)."""
    sock, peer = listener.accept()
    return authenticate(sock, peer, token, codec, timeout, shm=shm)


_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def _local_name(sock: socket.socket) -> str:
    """A Unix-socket peer by its process ("local peer pid 4242"), so the log tells two
    local clients apart; "local peer" where the system does not say (SO_PEERCRED)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return "local peer"
    try:
        pid, _uid, _gid = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, opt, _CRED.size))
    except (OSError, struct.error):
        return "local peer"
    return f"local peer pid {pid}"


def authenticate(sock: socket.socket, peer: object, token: bytes, codec: Codec,
                 timeout: float = HANDSHAKE_TIMEOUT, tls: _tls.TLSConfig | None = None,
                 *, shm: bool = False) -> Channel:
    """Run the server side of the handshake before anything the peer sends is decoded.

    ``shm``: the socket came from an ``shm://`` listener. Raises AuthenticationError
    (the peer has been told why, if it stayed, and disconnected), PeerWentAway (it
    closed its end before its proof), or TransportError.
    """
    name = (f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple)
            else str(peer) if isinstance(peer, inproc.Peer) else _local_name(sock))
    tls = tls or _tls.current()
    # The whole handshake's end, TLS's and the proof, however the peer cuts them up: each
    # part had a timeout of its own, and a peer taking nearly each held it for three.
    deadline = time.monotonic() + timeout
    try:
        sock.settimeout(timeout)
        _tune(sock)
        if tls is not None and sock.family != socket.AF_UNIX:
            _tls.client_hello(sock, timeout)  # (a peer that speaks no TLS: said as such)
            sock = _tls.wrap_server(sock, tls, deadline)  # before anything else is read
        hs = handshake.ServerHandshake(token, codec.max_frame)
        sock.sendall(hs.hello())
        proof = recv_exact(sock, handshake.PROOF_SIZE, deadline, starts=handshake.MAGIC)
        if not proof:  # (closed before a byte of it: gone, not a stranger refused)
            raise PeerWentAway(f"{name} went away during the handshake (it closed the "
                               f"connection before sending its proof; {_GONE})")
        answer, error = hs.check(proof)
        if error is not None:  # (refused whether or not it stayed to be told: a
            # member in TLS at a plain listener closes as soon as it reads the greeting)
            with contextlib.suppress(OSError):
                sock.sendall(answer)
            raise AuthenticationError(f"{name}: {error}{_began(proof)}")
        sock.sendall(answer)
        sock.settimeout(None)
        _narrow(codec, hs.peer_limit)
    except (AuthenticationError, PeerWentAway):
        sock.close()
        raise
    except _tls.NotTLS as exc:
        sock.close()
        raise TLSHandshakeError(f"handshake with {name} failed: {exc}") from None
    except ssl.SSLEOFError:  # (closed in the TLS handshake, no alert: gone, not refused)
        sock.close()
        raise PeerWentAway(f"{name} went away during the handshake (it closed the "
                           f"connection in its TLS handshake; {_GONE})") from None
    except ssl.SSLError as exc:
        sock.close()
        why = _tls.accepted_refusal(exc, tls) if tls is not None else str(exc)
        raise TLSHandshakeError(f"TLS handshake with {name} failed: {why}") from None
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
        sock.close()  # (a write or read after the peer closed its end)
        raise PeerWentAway(f"{name} went away during the handshake ({exc}; {_GONE})"
                           ) from None
    except OSError as exc:
        sock.close()
        raise TransportError(f"handshake with {name} failed: {exc}") from None
    return _channel(sock, codec, name, shm)


def _began(proof: bytes) -> str:
    """A stranger's first bytes, for the log ("not a polybus peer" alone said nothing
    of what it was), as a TLS listener says those of a peer that speaks no TLS."""
    if handshake.MAGIC.startswith(proof[:4]):
        return ""  # (a polybus peer: a wrong token or version says all)
    if _tls.looks_like_tls(proof):  # (as its side says "does not speak TLS")
        return (" (it sent a TLS ClientHello: a polybus process with [cluster] tls, and "
                "this one runs without it? or another TLS client)")
    return (f" (it sent {proof[:8]!r}...: another protocol, such as HTTP, or a client "
            f"that is not polybus)")


def _narrow(codec: Codec, peer_limit: int | None) -> None:
    """Frame nothing over the peer's limit either (the handshake said it): a message
    the peer would refuse fails alone here, before it is sent, instead of costing the
    connection there. The peer does the same, so nothing larger comes in."""
    if peer_limit is not None and peer_limit < codec.max_frame:
        codec.max_frame = peer_limit


def _channel(sock: socket.socket, codec: Codec, peer: str, shm: bool) -> Channel:
    if shm and sock.family == socket.AF_UNIX:
        from polybus.transport.shm import ShmChannel

        return ShmChannel(sock, codec, peer)
    return Channel(sock, codec, peer)
