"""Slow clients at the front door (http/server.py), over loopback sockets in-process.

A client that trickles a request head or body (a byte now and then, each within
`idle_timeout`) is answered 408 and closed once it is past `head_timeout` (the head) or
falls behind `min_body_rate` (the body): it held its connection slot for as long as it
kept trickling, and enough of them shut every other client out. A client that reads
nothing of its answer is cut off once `idle_timeout` passes with none of it taken: the
whole answer stayed in serve's memory for as long as the client kept the connection.
Slow but steady clients (an upload at a modest rate, a large answer read steadily)
are served in full. Clients here are plain blocking sockets in threads; the waits are
generous bounds, never measured.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from polybus.config.model import RouteSpec, ServeSpec
from polybus.http.calls import CallBridge
from polybus.http.server import FrontDoor

T = TypeVar("T")
BIG = RouteSpec("GET /big", "GET", "/big", "h", "big", fields=("query",))
ECHO = RouteSpec("POST /echo", "POST", "/echo", "h", "echo", fields=("body",))
ROUTES = (BIG, ECHO)
HEAD = b"GET / HTTP/1.1\r\nHost: h\r\nX-a: " + b"b" * 10_000  # never ended


class _Bridge:
    """``/big?n=N``: N bytes; ``/echo``: the length of the body."""

    async def call(self, name: str, kwargs: dict[str, Any], timeout: float | None,
                   dropped: object = None) -> Any:
        if name == BIG.key:
            return [200, [], b"x" * int(kwargs["query"]["n"])]
        return [200, [], str(len(kwargs["body"])).encode()]


def _door(**limits: Any) -> FrontDoor:
    spec = ServeSpec(routes=ROUTES, **limits)
    return FrontDoor(spec, cast(CallBridge, _Bridge()), {r.key: None for r in ROUTES})


def _serving(door: FrontDoor, client: Callable[[int], T],
             ended: Callable[[asyncio.StreamWriter], Awaitable[None]] | None = None,
             sndbuf: int | None = None) -> T:
    """``client(port)`` run in a thread while ``door`` serves; ``ended(writer)`` is
    awaited each time a connection's task ends, with that connection's writer;
    ``sndbuf``: the kernel's send buffer of the server's sockets (else autotuned)."""

    async def serve() -> T:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if sndbuf is not None:
                writer.get_extra_info("socket").setsockopt(
                    socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            try:
                await door.connection(reader, writer)
            finally:
                if ended is not None:
                    await ended(writer)

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            return await asyncio.to_thread(client, port)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(serve())


def _connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf is not None:  # (before connect, so the window is small from the start)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", port))
    return s


def _trickle(port: int, data: bytes, step: int, every: float, stop: threading.Event,
             at_once: int = 0, bound: float = 20.0) -> tuple[bytes, bool]:
    """Send ``data``, its first ``at_once`` bytes at once, then ``step`` bytes every
    ``every`` s until the server answers, ``stop`` is set or ``bound`` s pass; what came
    back, and whether the server closed."""
    s = _connect(port)
    s.settimeout(every)
    s.sendall(data[:at_once])
    got, closed, end = b"", False, time.monotonic() + bound
    try:
        for i in range(at_once, len(data), step):
            if stop.is_set() or time.monotonic() > end:
                break
            s.sendall(data[i:i + step])
            try:
                chunk = s.recv(1 << 16)
            except TimeoutError:
                continue
            s.settimeout(10)
            while chunk:  # answered: read to its end
                got += chunk
                chunk = s.recv(1 << 16)
            closed = True
            break
    except OSError:  # (reset by a server that closed with bytes unread)
        closed = True
    finally:
        s.close()
    return got, closed


def test_a_head_trickled_in_is_answered_408_and_closed() -> None:
    """One byte every 0.1 s, each well within idle_timeout: never timed out before."""
    door = _door(idle_timeout=5.0, head_timeout=0.5)
    got, closed = _serving(door, lambda port: _trickle(port, HEAD, 1, 0.1, threading.Event()))
    assert got.startswith(b"HTTP/1.1 408 "), got
    assert b"request head not complete within 0.5 s" in got and closed


def test_trickling_peers_holding_every_slot_do_not_shut_a_good_client_out() -> None:
    """4 peers trickling heads, 2 connection slots: a good GET is answered all the same
    (it waited for as long as the peers kept trickling)."""
    door = _door(idle_timeout=5.0, head_timeout=0.5, max_connections=2)
    stop = threading.Event()

    def clients(port: int) -> bytes:
        peers = [threading.Thread(target=_trickle, args=(port, HEAD, 1, 0.1, stop))
                 for _ in range(4)]
        for t in peers:
            t.start()
        try:
            time.sleep(0.3)  # (the peers hold the slots)
            with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
                s.sendall(b"GET /big?n=5 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
                got = b""
                while chunk := s.recv(1 << 16):
                    got += chunk
                return got
        except TimeoutError:
            return b"(no answer)"
        finally:
            stop.set()
            for t in peers:
                t.join()

    got = _serving(door, clients)
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"\r\n\r\nxxxxx"), got


def test_a_body_trickled_in_is_answered_408_and_closed() -> None:
    """10 bytes every 0.1 s (100 bytes/s) of a 100,000-byte body, min_body_rate 1 KiB."""
    door = _door(idle_timeout=5.0, head_timeout=0.5, min_body_rate=1024, max_body=1 << 20)
    data = (b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 100000\r\n\r\n"
            + b"y" * 100_000)
    head = data.index(b"\r\n\r\n") + 4
    got, closed = _serving(door, lambda port: _trickle(port, data, 10, 0.1,
                                                       threading.Event(), head))
    assert got.startswith(b"HTTP/1.1 408 "), got
    assert b"request body slower than min_body_rate (1024 bytes/s)" in got and closed


def test_a_steady_upload_slower_than_head_timeout_is_served() -> None:
    """100 KiB at about 50 KiB/s: 2 s, four times head_timeout, above min_body_rate."""
    door = _door(idle_timeout=5.0, head_timeout=0.5, min_body_rate=8192)
    body = b"z" * (100 << 10)
    data = (b"POST /echo HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got, _ = _serving(door, lambda port: _trickle(port, data, 5 << 10, 0.1,
                                                       threading.Event()))
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"\r\n\r\n102400"), got[:200]


def test_a_client_that_reads_nothing_of_its_answer_is_cut_off_and_the_answer_freed() -> None:
    """A 16 MB answer, none of it read: the connection is aborted once idle_timeout
    passes with nothing taken, and the bytes it held are dropped. (Small kernel buffers
    on both sides: most of the answer is the server's to hold, whatever the machine.)"""
    door = _door(idle_timeout=0.5)
    size = 16 << 20
    ends: list[int] = []
    ended = threading.Event()

    async def on_end(writer: asyncio.StreamWriter) -> None:
        ends.append(writer.transport.get_write_buffer_size())
        ended.set()

    def client(port: int) -> tuple[bool, int]:
        s = _connect(port, rcvbuf=4096)
        s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: h\r\n\r\n" % size)
        cut = ended.wait(15)  # (reading nothing meanwhile)
        s.settimeout(10)
        got = 0
        try:
            while chunk := s.recv(1 << 20):
                got += len(chunk)
        except OSError:
            pass
        s.close()
        return cut, got

    cut, got = _serving(door, client, on_end, sndbuf=64 << 10)
    assert cut, "the connection of a client that reads nothing was never closed"
    assert ends == [0] and got < size  # (the rest of the answer was dropped, not sent)


def test_a_large_answer_read_steadily_is_served_in_full() -> None:
    """6 MiB read 64 KiB at a time with pauses: several times idle_timeout in all.
    (The kernel's send buffer, autotuned, takes megabytes of it at once: the answer is
    being taken while serve's own part of it does not shrink.)"""
    door = _door(idle_timeout=0.5)
    size = 6 << 20

    def client(port: int) -> bytes:
        s = _connect(port, rcvbuf=64 << 10)
        s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" % size)
        s.settimeout(10)
        got = b""
        while chunk := s.recv(64 << 10):
            got += chunk
            time.sleep(0.03)
        s.close()
        return got

    got = _serving(door, client)
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"\r\n\r\n" + b"x" * size)
    assert len(got.partition(b"\r\n\r\n")[2]) == size
