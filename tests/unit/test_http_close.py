"""The front door's last answer on a connection, then its close (http/server.py).

RFC 9112 9.6: a server that closes at once, with bytes of the client's still unread,
has its TCP stack reset the connection, and the reset may erase what the client has not
yet read of the answer. The front door closed so after a `Connection: close` answer
with a pipelined request behind it (the kernel dropped the answer's unsent part: the
client got the first megabyte of three, then a reset) and after a 413 to an uploader
(which saw its upload reset, not the 413). It now closes in stages: a half-close after
the answer, then it reads and drops what the client sends until the client closes, or
has taken all of the answer and is silent. Loopback sockets in-process, as
test_http_slow.py; waits are generous bounds, never measured.
"""

from __future__ import annotations

import socket

from unit.test_http_slow import _connect, _door, _serving

UPLOAD = 2 << 20


def _read_all(s: socket.socket) -> tuple[bytes, OSError | None]:
    """What the server sent until it closed, and the error that ended it (None: a
    clean end of stream)."""
    got = b""
    try:
        while chunk := s.recv(1 << 16):
            got += chunk
    except OSError as e:
        return got, e
    return got, None


def test_a_closing_answer_reaches_a_client_that_pipelined_more() -> None:
    """A 3 MB answer with `Connection: close`, a 900 KB request pipelined behind it,
    read through a small window: the whole answer comes, then the end of the stream."""
    n = 3_000_000

    def client(port: int) -> tuple[bytes, OSError | None]:
        s = _connect(port, rcvbuf=4096)
        s.settimeout(10)
        try:
            s.sendall(b"GET /big?n=%d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" % n
                      + b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 900000\r\n\r\n"
                      + b"y" * 900_000)
            return _read_all(s)
        finally:
            s.close()

    got, err = _serving(_door(), client)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"Connection: close" in head, head
    assert (len(body), err) == (n, None)


def test_an_upload_answered_413_is_taken_whole_and_the_413_read() -> None:
    """A 2 MiB upload over a 1 KiB max_body: the client sends all of it (the 413 came
    first), then reads the 413 and a clean end of stream, not a reset."""

    def client(port: int) -> tuple[OSError | None, bytes, OSError | None]:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            sent: OSError | None = None
            try:
                s.sendall(b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n"
                          % UPLOAD + b"u" * UPLOAD)
            except OSError as e:
                sent = e
            return (sent, *_read_all(s))
        finally:
            s.close()

    sent, got, err = _serving(_door(max_body=1024), client)
    assert got.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in got, got
    assert (sent, err) == (None, None)


def test_a_400_is_followed_by_a_clean_end_of_stream() -> None:
    """A malformed request with more bytes behind it than serve reads ahead: the 400,
    then the end of the stream once the client closes its side."""

    def client(port: int) -> tuple[OSError | None, bytes, OSError | None]:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            sent: OSError | None = None
            try:
                s.sendall(b"BAD REQUEST LINE HERE\r\n\r\n" + b"z" * UPLOAD)
                s.shutdown(socket.SHUT_WR)
            except OSError as e:
                sent = e
            return (sent, *_read_all(s))
        finally:
            s.close()

    sent, got, err = _serving(_door(), client)
    assert got.startswith(b"HTTP/1.1 400 "), got
    assert (sent, err) == (None, None)
