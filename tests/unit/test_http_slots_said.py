"""The front door says when every connection slot (`[serve] max_connections`) is taken.

Connections past the bound wait, accepted, for a slot (config docs, security.md "Known
limits"): a few peers that connect and never speak hold the slots for `idle_timeout`
each, and every other client waits meanwhile. serve said nothing of it, so whoever ran
it saw clients hang and nothing in its log. It says it once a minute, with how many
waited meanwhile, and what to change.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, cast

import pytest

from polybus.config.model import RouteSpec, ServeSpec
from polybus.http.calls import CallBridge
from polybus.http.server import FrontDoor

PAGE = RouteSpec("GET /", "GET", "/", "h", "page", fields=())


class _Bridge:
    async def call(self, name: str, kwargs: dict[str, Any], timeout: float | None,
                   dropped: object = None) -> Any:
        return [200, [], b"ok"]


def _get(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
        got = b""
        while chunk := s.recv(1 << 16):
            got += chunk
        return got


def _with_silent_peers(door: FrontDoor, silent: int, rounds: int = 1) -> bytes:
    """A GET while ``silent`` peers that never speak are connected, ``rounds`` times
    (the last GET's answer)."""

    async def serve() -> bytes:
        server = await asyncio.start_server(door.connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        got = b""
        try:
            for _ in range(rounds):
                peers = [socket.create_connection(("127.0.0.1", port)) for _ in range(silent)]
                try:
                    await asyncio.sleep(0.2)  # (the peers take their slots)
                    got = await asyncio.to_thread(_get, port)
                finally:
                    for p in peers:
                        p.close()
        finally:
            server.close()
            await server.wait_closed()
        return got

    return asyncio.run(serve())


def _door(max_connections: int) -> FrontDoor:
    spec = ServeSpec(routes=(PAGE,), max_connections=max_connections, idle_timeout=1.0)
    return FrontDoor(spec, cast(CallBridge, _Bridge()), {PAGE.key: None})


def test_serve_says_when_every_connection_slot_is_taken(
        capsys: pytest.CaptureFixture[str]) -> None:
    got = _with_silent_peers(_door(max_connections=2), silent=2)
    assert got.startswith(b"HTTP/1.1 200 "), got  # (served once a silent peer was closed)
    err = capsys.readouterr().err
    assert "all 2 connection slots" in err and "max_connections" in err, err
    assert "idle_timeout" in err, err


def test_nothing_is_said_while_a_slot_is_free(capsys: pytest.CaptureFixture[str]) -> None:
    got = _with_silent_peers(_door(max_connections=3), silent=2)
    assert got.startswith(b"HTTP/1.1 200 "), got
    assert "connection slots" not in capsys.readouterr().err


def test_it_is_said_once_a_minute_not_per_connection(
        capsys: pytest.CaptureFixture[str]) -> None:
    got = _with_silent_peers(_door(max_connections=1), silent=1, rounds=3)
    assert got.startswith(b"HTTP/1.1 200 "), got
    assert capsys.readouterr().err.count("connection slots") == 1
