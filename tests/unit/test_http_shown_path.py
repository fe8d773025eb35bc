"""A request path in the front door's messages (http/server.py) is read as UTF-8, as
sent raw or percent-encoded alike: a raw "/héllo" was said "no route for GET /hÃ©llo"
(its bytes read one character each). Routing is left as it was: by the bytes sent."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from polybus.config.model import RouteSpec, ServeSpec
from polybus.errors import CallTimeoutError
from polybus.http.calls import CallBridge
from polybus.http.server import FrontDoor


class _Bridge:
    """Each call is past its timeout: its 504 is logged with the request."""

    async def call(self, name: str, kwargs: object, timeout: float | None,
                   dropped: object = None) -> object:
        raise CallTimeoutError("no answer", interface=name)


async def _talk(door: FrontDoor, sent: bytes) -> bytes:
    server = await asyncio.start_server(door.connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        await writer.drain()
        async with asyncio.timeout(10):
            got = await reader.read()  # (to the server's close: Connection: close)
        writer.close()
        return got
    finally:
        server.close()
        await server.wait_closed()


def _get(door: FrontDoor, path: bytes) -> bytes:
    return asyncio.run(_talk(door, b"GET " + path + b" HTTP/1.1\r\nHost: h\r\n"
                             b"Connection: close\r\n\r\n"))


@pytest.mark.parametrize("path,said", [
    ("/héllo".encode(), "/héllo"),  # raw UTF-8
    (b"/h%C3%A9llo", "/héllo"),  # percent-encoded, as before
    (b"/h\xffllo", "/h\\xffllo"),  # not UTF-8: the byte escaped
    (b"/h%FFllo?q=\xc3\xa9", "/h\\xffllo"),
])
def test_a_path_is_said_as_utf8(path: bytes, said: str) -> None:
    route = RouteSpec("GET /who", "GET", "/who", "h", "who")
    door = FrontDoor(ServeSpec(routes=(route,)), cast(CallBridge, _Bridge()), {route.key: None})
    got = _get(door, path)
    assert got.startswith(b"HTTP/1.1 404 "), got
    assert f"no route for GET {said}\n".encode() in got, got


def test_routing_is_by_the_bytes_sent_and_the_log_says_them_as_utf8(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A route is not matched by the escaped form a message shows of a path's bytes."""
    escaped = RouteSpec("GET /h\\xffllo", "GET", "/h\\xffllo", "h", "who")
    door = FrontDoor(ServeSpec(routes=(escaped,)), cast(CallBridge, _Bridge()),
                     {escaped.key: None})
    assert _get(door, b"/h\xffllo").startswith(b"HTTP/1.1 404 ")
    assert _get(door, b"/h%5Cxffllo?name=\xc3\xa9").startswith(b"HTTP/1.1 504 ")
    assert "GET /h%5Cxffllo?name=é -> h.who: 504" in capsys.readouterr().err


@pytest.mark.parametrize("query", [b"q=\x1b[31mred\x1b[0m", b"q=\x07", b"q=a\x00b", b"q=\x7f",
                                   b"q=a\tb"])
def test_a_control_character_in_the_query_is_400_and_never_reaches_the_log(
        capsys: pytest.CaptureFixture[str], query: bytes) -> None:
    """The path was checked for control characters, the query not: `?q=\\x1b[31m` was
    routed, passed to the handler, and its request line went raw into serve's log, so a
    client could write terminal escapes (erase a line, colour, retitle) where the
    operator reads the log. A request target holds no control character (RFC 9112 3.2)."""
    route = RouteSpec("GET /who", "GET", "/who", "h", "who")
    door = FrontDoor(ServeSpec(routes=(route,)), cast(CallBridge, _Bridge()), {route.key: None})
    got = _get(door, b"/who?" + query)
    assert got.startswith(b"HTTP/1.1 400 "), got
    assert b"a control character in the request target" in got, got
    assert _get(door, b"/who?q=fine").startswith(b"HTTP/1.1 504 ")  # (the route, reached)
    err = capsys.readouterr().err
    assert not any(c in err for c in "\x00\x07\x1b\x7f"), repr(err)
