"""`polybus serve` given a response tuple HTTP cannot frame as a final answer: real
requests on 127.0.0.1, through the front door to a worker.

A handler's `(status, headers, body)` with a 1xx status, or with a header name that is
not an HTTP token, is that request's 500 naming the handler, and the same keep-alive
connection is answered on, each request with its own response.
"""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path

import pytest

from integration.conftest import Procs, read_line

WEB = '''\
def interim(query):
    return int(query.get("status", "100")), "hello"


def named(query):
    return 200, {query.get("name", "X"): "v"}, "ok"


def fine():
    return "fine"
'''

TOML = '''\
[modules.web]
source = "web.py"

[serve]
listen = "127.0.0.1:0"

[serve.routes]
"GET /interim" = "web.interim"
"GET /named" = "web.named"
"GET /fine" = "web.fine"
'''


@pytest.fixture
def door(procs: Procs, tmp_path: Path) -> tuple[str, int]:
    (tmp_path / "web.py").write_text(textwrap.dedent(WEB))
    (tmp_path / "app.toml").write_text(TOML)
    p = procs.start("serve", tmp_path / "app.toml")
    assert p.stderr is not None
    m = read_line(p.stderr, r"listening on http://([0-9.]+):([0-9]+)", timeout=60)
    return m.group(1), int(m.group(2))


def _responses(s: socket.socket, n: int) -> list[tuple[bytes, bytes]]:
    """The next ``n`` responses on ``s``: (status line, body), each framed by its
    Content-Length; a response with none, or the peer silent for 10 s, ends the list."""
    got: list[tuple[bytes, bytes]] = []
    buf = b""
    s.settimeout(10)
    while len(got) < n:
        while b"\r\n\r\n" not in buf:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                return got
            if not chunk:
                return got
            buf += chunk
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = [int(v) for k, _, v in (x.partition(b": ") for x in lines[1:])
                  if k.lower() == b"content-length"]
        if not length:
            got.append((lines[0], b""))
            return got
        while len(buf) < length[0]:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        got.append((lines[0], buf[:length[0]]))
        buf = buf[length[0]:]
    return got


def _a_500_then_fine(door: tuple[str, int], target: str) -> bytes:
    """``GET target`` and ``GET /fine`` pipelined on one connection: the first answered
    500 and the second 200 "fine" (the connection kept in step); the 500's body."""
    host, port = door
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: h\r\n\r\n"
                  "GET /fine HTTP/1.1\r\nHost: h\r\n\r\n".encode())
        got = _responses(s, 2)
    assert [line for line, _ in got] == [b"HTTP/1.1 500 Internal Server Error",
                                         b"HTTP/1.1 200 OK"], got
    assert got[1][1] == b"fine"
    return got[0][1]


@pytest.mark.parametrize("status", [100, 101, 199])
def test_a_1xx_status_from_a_handler_is_a_500_naming_it(door: tuple[str, int], status: int) -> None:
    """A 1xx is an interim response: serve sent `HTTP/1.1 100 Continue` and nothing
    after it, so the client waited for a final answer that never came, and on a
    keep-alive connection took the next request's answer for this one's."""
    body = _a_500_then_fine(door, f"/interim?status={status}")
    assert f"interim() returned a bad response status {status}".encode() in body


@pytest.mark.parametrize("name", ["Set-Cookie: a=b; X", "Bad Name", "X(y)"])
def test_a_header_name_that_is_not_a_token_is_a_500_naming_the_handler(
        door: tuple[str, int], name: str) -> None:
    """The name went out as it was: `Set-Cookie: a=b; X` as a name sent the client a
    Set-Cookie header the handler never named."""
    quoted = name.replace(" ", "%20").replace(":", "%3A").replace(";", "%3B").replace("=", "%3D")
    body = _a_500_then_fine(door, f"/named?name={quoted}")
    assert f"named() returned a response header {name!r} whose name".encode() in body
