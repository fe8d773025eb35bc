"""A fault inside polybus while the front door calls a route (http/server.py) is that
request's 500, with a message, and the server serves on. It escaped the connection's
task: the connection closed with no answer, every request of the route alike, and the
log said `Unhandled exception in client_connected_cb` (an IndexError in a load ratio)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from polybus.config.model import RouteSpec, ServeSpec
from polybus.http.calls import CallBridge
from polybus.http.server import FrontDoor

ROUTE = RouteSpec("GET /who", "GET", "/who", "h", "who")
REQUEST = b"GET /who HTTP/1.1\r\nHost: h\r\n\r\n"


class _Broken:
    """A bridge whose dispatch fails as the load ratio did."""

    def __init__(self) -> None:
        self.calls = 0

    async def call(self, name: str, kwargs: dict[str, Any], timeout: float | None,
                   dropped: object = None) -> Any:
        self.calls += 1
        return [self.calls][1]  # (IndexError: list index out of range)


async def _talk(door: FrontDoor, sent: bytes, answers: int) -> bytes:
    server = await asyncio.start_server(door.connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = b""
        async with asyncio.timeout(10):
            for _ in range(answers):
                writer.write(sent)
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                size = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                got += head + await reader.readexactly(size)
            got += await reader.read() if b"Connection: close" in head else b""
        writer.close()
        return got
    finally:
        server.close()
        await server.wait_closed()


def test_an_internal_error_calling_a_route_is_a_500_and_the_connection_serves_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    bridge = _Broken()
    door = FrontDoor(ServeSpec(routes=(ROUTE,)), cast(CallBridge, bridge), {ROUTE.key: None})
    got = asyncio.run(_talk(door, REQUEST, 2))
    assert got.count(b"HTTP/1.1 500 ") == 2 and bridge.calls == 2, got
    assert b"polybus failed calling h.who: IndexError: list index out of range" in got
    err = capsys.readouterr().err
    assert "GET /who -> h.who: 500 polybus failed calling h.who: IndexError" in err
    assert "Traceback" in err  # (for the report of a bug)


def test_a_fault_anywhere_in_a_request_is_answered_500(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def respond(self: FrontDoor, req: Any) -> Any:
        raise RuntimeError("a step of the front door's own")

    monkeypatch.setattr(FrontDoor, "respond", respond)
    door = FrontDoor(ServeSpec(routes=(ROUTE,)), cast(CallBridge, _Broken()),
                     {ROUTE.key: None})
    got = asyncio.run(_talk(door, REQUEST, 1))
    assert got.startswith(b"HTTP/1.1 500 "), got
    assert b"RuntimeError: a step of the front door's own" in got
    assert b"Connection: close" in got
