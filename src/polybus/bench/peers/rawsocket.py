"""Raw Python socket peer: TCP (or Unix-socket) ping-pong and one-way bandwidth.

The server runs in a child process started here (loopback or a private Unix socket
only); the client is this process. The protocol is an 8-byte header ``<II`` = (op,
length) and then ``length`` payload bytes. ``ECHO`` sends header and payload back;
``SINK`` reads the payload into a preallocated buffer and answers with one ack byte.

This is the baseline the DESIGN measures the polybus call path against: the least a
Python program has to do to move the same bytes over the same kind of socket. With
``poll_s`` both ends wait the way polybus does by default (transport/spinning.py):
non-blocking reads, yielding the CPU between them, for up to ``poll_s`` before a
blocking one; so polybus is compared with the same technique in raw Python, too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Literal

import numpy as np

from polybus.bench.peers import PeerUnavailable
from polybus.bench.peers._proc import PYTHON, python_child_env, reap, spawn
from polybus.bench.placement import DEFAULT, Placement, cpu_sets, pinned_self
from polybus.bench.stats import Stat, repeat

__all__ = ["Family", "RawSocketPeer", "bandwidth_gbps", "iters_for", "rtt_us"]

Family = Literal["tcp", "unix"]
HEADER = struct.Struct("<II")
ECHO, SINK = 1, 2
_ACK = b"\x01"
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)


def iters_for(size: int, budget: int) -> int:
    """Round trips per repetition: ``budget`` for small payloads, fewer for large ones."""
    return max(3, min(budget, budget * 16384 // max(size, 1)))


def _polling_recv(conn: socket.socket, poll_s: float) -> Callable[[memoryview], int]:
    """``conn.recv_into``, or with ``poll_s`` one that polls that long before blocking."""
    if not poll_s:
        return conn.recv_into
    recv_into, clock = conn.recv_into, time.perf_counter
    nap = getattr(os, "sched_yield", lambda: None)

    def recv(view: memoryview) -> int:
        deadline = clock() + poll_s
        while True:
            try:
                return recv_into(view, 0, _DONTWAIT)
            except BlockingIOError:
                if clock() >= deadline:
                    return recv_into(view)
                nap()
    return recv


def _recv_exact(conn: socket.socket, view: memoryview, poll_s: float = 0.0) -> bool:
    """Fill ``view``; False on EOF before the first byte."""
    got, n = 0, len(view)
    recv = _polling_recv(conn, poll_s)
    while got < n:
        k = recv(view[got:])
        if k == 0:
            if got == 0:
                return False
            raise ConnectionError(f"peer closed after {got} of {n} bytes")
        got += k
    return True


def _nodelay(conn: socket.socket) -> None:
    if conn.family in (socket.AF_INET, socket.AF_INET6):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _send_both(conn: socket.socket, head: memoryview, payload: memoryview) -> None:
    """Header and payload in one gathered send (as polybus writes a frame), finishing a
    partial send without copying: two sends would put the header in a segment of its
    own and make the echo slower than the least a program has to do."""
    parts = [head, payload]
    while parts:
        sent = conn.sendmsg(parts)
        while parts and sent >= parts[0].nbytes:
            sent -= parts[0].nbytes
            parts.pop(0)
        if parts and sent:
            parts[0] = parts[0][sent:]


def _serve(listener: socket.socket, poll_s: float = 0.0) -> None:
    conn, _ = listener.accept()
    listener.close()
    _nodelay(conn)
    hdr = bytearray(HEADER.size)
    hview = memoryview(hdr)
    buf = bytearray(0)
    view = memoryview(buf)
    with conn:
        while _recv_exact(conn, hview, poll_s):
            op, n = HEADER.unpack(hdr)
            if len(buf) < n:
                buf = bytearray(n)
                view = memoryview(buf)
            if n and not _recv_exact(conn, view[:n], poll_s):
                return
            if op == ECHO:
                _send_both(conn, hview, view[:n])
            else:
                conn.sendall(_ACK)


def _serve_main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=["tcp", "unix"])
    ap.add_argument("path", nargs="?")
    ap.add_argument("--poll", type=float, default=0.0)
    args = ap.parse_args(argv)
    if args.family == "tcp":
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        address = str(listener.getsockname()[1])
    else:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(args.path)
        address = args.path
    listener.listen(1)
    sys.stdout.write(address + "\n")
    sys.stdout.flush()
    _serve(listener, args.poll)


class RawSocketPeer:
    """A connected client with its server child; use as a context manager."""

    def __init__(self, family: Family = "tcp", placement: Placement = DEFAULT,
                 poll_s: float = 0.0) -> None:
        if family not in ("tcp", "unix"):
            raise ValueError(f"family must be 'tcp' or 'unix', not {family!r}")
        if family == "unix" and not hasattr(socket, "AF_UNIX"):
            raise PeerUnavailable("no Unix sockets on this platform")
        self.family: Family = family
        self.placement: Placement = placement
        self.poll_s = poll_s
        self._cpus = cpu_sets(placement)
        self._stack = ExitStack()
        self.pid: int | None = None
        self._sock: socket.socket | None = None
        self._tmp: str | None = None

    def __enter__(self) -> RawSocketPeer:
        argv = [PYTHON, "-c", "from polybus.bench.peers.rawsocket import _serve_main; "
                "_serve_main()", "--poll", repr(self.poll_s), self.family]
        if self.family == "unix":
            self._tmp = tempfile.mkdtemp(prefix="polybus-bench-")
            argv.append(str(Path(self._tmp) / "s"))
        with pinned_self(self._cpus[1] if self._cpus else None):  # the child inherits it
            proc = spawn(argv, env=python_child_env())
        self.pid = proc.pid
        self._proc = proc
        try:
            self._stack.enter_context(pinned_self(self._cpus[0] if self._cpus else None))
            assert proc.stdout is not None
            line = proc.stdout.readline().decode().strip()
            if not line:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise PeerUnavailable(f"raw socket server did not start: {err.strip()[-500:]}")
            if self.family == "tcp":
                sock = socket.create_connection(("127.0.0.1", int(line)), timeout=30)
            else:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(30)
                sock.connect(line)
            _nodelay(sock)
            # Blocking from here on: with a timeout, every recv would poll() first (one
            # more system call a read than a plain blocking socket, and no real polling).
            sock.settimeout(None)
            self._sock = sock
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._close()

    def _close(self) -> None:
        try:
            if self._sock is not None:
                self._sock.close()  # the server sees EOF and exits
                self._sock = None
        finally:
            try:
                reap(self._proc)
            finally:
                self._stack.close()
                if self._tmp is not None:
                    shutil.rmtree(self._tmp, ignore_errors=True)
                    self._tmp = None

    @property
    def sock(self) -> socket.socket:
        if self._sock is None:
            raise RuntimeError("RawSocketPeer used outside its 'with' block")
        return self._sock

    def rtt_us(self, size: int, reps: int = 5, iters: int = 200, warmup: int = 1) -> Stat:
        """Round trip of a ``size``-byte payload, µs: each repetition the mean of ``iters``."""
        sock = self.sock
        msg = HEADER.pack(ECHO, size) + bytes(size)
        reply = memoryview(bytearray(HEADER.size + size))
        sendall, recv_into = sock.sendall, _polling_recv(sock, self.poll_s)
        total = len(reply)

        def once() -> float:
            t0 = time.perf_counter()
            for _ in range(iters):
                sendall(msg)
                got = 0
                while got < total:
                    k = recv_into(reply[got:])
                    if k == 0:
                        raise ConnectionError("raw socket server closed")
                    got += k
            return (time.perf_counter() - t0) / iters * 1e6

        return repeat(once, reps, warmup)

    def bandwidth_gbps(self, size: int, reps: int = 5, warmup: int = 1) -> Stat:
        """One-way transfer of a ``size``-byte numpy array, GB/s (1e9 bytes/s), acked."""
        sock = self.sock
        data = np.full(size, 7, dtype=np.uint8).data.cast("B")
        hdr = HEADER.pack(SINK, size)
        ack = memoryview(bytearray(1))

        def once() -> float:
            t0 = time.perf_counter()
            sock.sendall(hdr)
            sock.sendall(data)
            if not _recv_exact(sock, ack):
                raise ConnectionError("raw socket server closed")
            return size / (time.perf_counter() - t0) / 1e9

        return repeat(once, reps, warmup)


def rtt_us(sizes: Iterable[int], reps: int = 5, budget: int = 200,
           family: Family = "tcp", placement: Placement = DEFAULT) -> dict[int, Stat]:
    """Round trip in µs for each payload size, over one connection to one server child."""
    with RawSocketPeer(family, placement) as peer:
        return {s: peer.rtt_us(s, reps, iters_for(s, budget)) for s in sizes}


def bandwidth_gbps(sizes: Iterable[int], reps: int = 5, family: Family = "tcp",
                   placement: Placement = DEFAULT) -> dict[int, Stat]:
    """One-way GB/s for each buffer size, over one connection to one server child."""
    with RawSocketPeer(family, placement) as peer:
        return {s: peer.bandwidth_gbps(s, reps) for s in sizes}
