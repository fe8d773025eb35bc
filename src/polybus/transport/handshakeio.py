"""Reading a handshake's fixed-size parts from a socket, within the handshake's deadline."""

from __future__ import annotations

import socket
import time


class Slow(TimeoutError):
    """A handshake's bytes that did not all come in time: ``data``, ``got`` of them,
    came (what they are may say who the peer is: a TLS record, where a greeting was due)."""

    def __init__(self, data: bytes, n: int) -> None:
        super().__init__(f"timed out ({len(data)} of its {n} bytes came in time)")
        self.data = data
        self.got = len(data)


def recv_exact(sock: socket.socket, n: int, deadline: float | None = None, *,
               starts: bytes = b"") -> bytes:
    """``n`` bytes of ``sock``, or fewer if it closes first. With ``deadline`` (a
    ``time.monotonic()``), TimeoutError once it passes: the socket's own timeout bounds
    each read alone, and a peer sending a byte at a time within it held a handshake for
    as many timeouts as it has bytes.

    ``starts``: what the bytes must begin with (a proof's magic). Those read so far are
    returned, fewer than ``n``, as soon as they cannot: a stranger (an HTTP client at
    the wrong port, whose request is shorter than a proof) is refused at once, not held
    for the rest of a proof that could never be one until the deadline."""
    data = b""
    while len(data) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Slow(data, n)
            sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(data))
        except TimeoutError:
            raise Slow(data, n) from None
        if not chunk:
            break
        data += chunk
        if not (data.startswith(starts) or starts.startswith(data)):
            break
    return data
