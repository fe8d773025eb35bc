"""The front door's idle timeout (http/server.py), over a loopback socket in-process:
a connection that begun a request and went quiet is answered 408 before it is closed;
one that is merely idle between requests is closed without a word."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from polybus.config.model import ServeSpec
from polybus.http.calls import CallBridge
from polybus.http.server import FrontDoor


async def _talk(sent: bytes) -> bytes:
    door = FrontDoor(ServeSpec(idle_timeout=0.2), cast(CallBridge, None), {})
    server = await asyncio.start_server(door.connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        await writer.drain()
        async with asyncio.timeout(10):
            got = await reader.read()  # (to the server's close)
        writer.close()
        return got
    finally:
        server.close()
        await server.wait_closed()


def _run(sent: bytes) -> Any:
    return asyncio.run(_talk(sent))


@pytest.mark.parametrize("sent", [
    b"GET / HTTP/1.1\r\nHost: h\r\n",  # a head never ended
    b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc",  # a body cut short
])
def test_a_request_begun_and_left_is_answered_408(sent: bytes) -> None:
    got = _run(sent)
    assert got.startswith(b"HTTP/1.1 408 "), got
    assert b"request incomplete after 0.2 s" in got and b"Connection: close" in got


def test_a_quiet_connection_between_requests_is_closed_without_an_answer() -> None:
    got = _run(b"GET /none HTTP/1.1\r\nHost: h\r\n\r\n")
    assert got.startswith(b"HTTP/1.1 404 ") and got.count(b"HTTP/1.1 ") == 1, got
