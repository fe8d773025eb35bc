"""Calls of every size; returns what it saw, plus where its connections went."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from typing import Any

import numpy as np

from polybus import use

echo = use("echo")
scaled = use("scaled")
make = use("make")


def _digest(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"{value.dtype.str}{value.shape}" + hashlib.sha256(value.tobytes()).hexdigest()
    return hashlib.sha256(bytes(value)).hexdigest()


def _sockets() -> list[dict[str, Any]]:
    """The Unix socket files this client is connected to, and their modes."""
    from polybus.client.stubs import current

    out = []
    for links in current().links.values():
        for link in links:
            sock = link.channel.sock
            if sock.family == socket.AF_UNIX:
                path = sock.getpeername()
                out.append({"path": path, "mode": stat.S_IMODE(os.stat(path).st_mode),
                            "dir_mode": stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode),
                            "channel": type(link.channel).__name__})
            else:
                out.append({"path": "", "channel": type(link.channel).__name__})
    return out


def main(sizes: list[int]) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    seen: list[str] = []
    for n in sizes:
        arr = rng.random(n)
        back = echo(arr)
        if not np.array_equal(back, arr):
            raise AssertionError(f"echo of {n} floats changed")
        seen.append(_digest(back))
        seen.append(_digest(scaled(arr, 2.0)))
        raw = rng.integers(0, 255, n, dtype=np.uint8).tobytes()
        seen.append(_digest(echo(raw)))
    seen.append(_digest(make(3_000_000)))
    for i in range(200):  # many small calls, some large, interleaved
        seen.append(_digest(echo(np.full(1 + (i % 7) * 60_000, i, dtype=np.int32))))
    return {"digests": seen, "sockets": _sockets()}
