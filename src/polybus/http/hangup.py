"""The front door hears a client hang up while its request runs.

A connection's socket is in the loop's selector for reading all along (the transport
reads what comes into the connection's StreamReader, pipelined requests too, until its
buffer is full). So a close from the client, EOF or a reset, reaches the protocol
(`eof_received`, `connection_lost`) whether or not anything reads the stream: while a
request of the connection is in flight (``watching``), the protocol cancels the
connection's task, which gives the call up as a route timeout does (http/calls.py) and
frees the connection's slot (http/server.py). Nothing is added to a request's path but
setting ``watching`` and clearing it: no syscall, no task. Bytes that come meanwhile
(a request pipelined behind it) stay in the StreamReader for the next request. A
request whose client closed before it began (one that gave up waiting for a slot: its
request and its close came together) is not called at all.

Not heard: a close behind more pipelined bytes than the StreamReader holds (twice its
limit, ``max_head`` + 64 KiB), since the transport stops reading then; nor a client
whose host vanished without a close (no packet comes: ``idle_timeout`` and the route's
``timeout`` bound those).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["HANGUP", "Watched", "listen"]

HANGUP = "the client closed its connection"  # (the cancel's message: http/calls.py)


class Watched(asyncio.StreamReaderProtocol):
    """A front door connection's protocol: cancels ``task`` on the client's close while
    ``watching`` (then ``hung_up``)."""

    task: asyncio.Task[Any] | None = None
    watching = False
    hung_up = False
    closed = False  # the client closed (heard at any time)

    def eof_received(self) -> bool | None:
        kept = super().eof_received()  # (the stream sees its end too)
        self._close_heard()
        return kept

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._close_heard()

    def _close_heard(self) -> None:
        self.closed = True
        if self.watching and not self.hung_up and self.task is not None:
            self.hung_up = True
            self.task.cancel(HANGUP)


async def listen(sock: Any, connected: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                Awaitable[None]],
                 limit: int) -> asyncio.Server:
    """As ``asyncio.start_server(connected, sock=sock, limit=limit)``, each connection's
    protocol a `Watched`."""
    loop = asyncio.get_running_loop()

    def made() -> Watched:
        return Watched(asyncio.StreamReader(limit=limit, loop=loop), connected, loop=loop)

    return await loop.create_server(made, sock=sock)
