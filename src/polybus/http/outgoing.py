"""A front door connection's answers on their way out: sent, taken, and the close.

An answer must be taken: a client that takes none of it for ``idle_timeout`` is cut
off (the connection aborted, the bytes dropped; they stayed in memory for as long as
the client kept the connection). The last answer on a connection is followed by a
close in stages (RFC 9112 9.6), not at once: see `close_in_stages`.
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios

__all__ = ["close_in_stages", "drain", "flush"]

_OUTQ: int | None = getattr(termios, "TIOCOUTQ", None)  # (SIOCOUTQ: a socket's bytes
#                                                        sent and not yet acknowledged)
QUIET = 2.0  # s: closing, a client that has taken all of its answer and sent nothing
#              for this long is closed


async def flush(writer: asyncio.StreamWriter, within: float) -> None:
    """What was written sent, for up to ``within`` s; then the connection is aborted,
    what is left dropped (a client that reads nothing is not waited on)."""
    try:
        async with asyncio.timeout(within):
            await writer.drain()
    except TimeoutError:
        writer.transport.abort()
    except ConnectionError:
        pass


def untaken(writer: asyncio.StreamWriter) -> int:
    """Bytes written that the client has not taken: those in the transport and those in
    the kernel's send queue (which on loopback takes megabytes at once, so that the
    transport's alone showed no progress while a client read steadily)."""
    n = writer.transport.get_write_buffer_size()
    sock = writer.get_extra_info("socket")
    if _OUTQ is not None and sock is not None:
        try:
            n += int(struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0" * 4))[0])
        except (OSError, ValueError):  # (closed meanwhile)
            pass
    return n


async def drain(writer: asyncio.StreamWriter, idle_timeout: float) -> None:
    """Wait until the client has taken all that was written. One that takes none of
    it for ``idle_timeout`` is cut off: the connection is aborted and what it held
    dropped (TimeoutError); else a client that never read kept its whole answer in
    memory for as long as it kept the connection."""
    while True:
        left = untaken(writer)
        try:
            async with asyncio.timeout(idle_timeout):
                await writer.drain()
            return
        except TimeoutError:
            if untaken(writer) >= left:  # (nothing taken)
                writer.transport.abort()
                raise


async def close_in_stages(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          idle_timeout: float, head_timeout: float) -> None:
    """The last answer written, close in stages (RFC 9112 9.6): it is drained, a
    half-close ends it, then what the client sends is read and dropped until the client
    closes, or has taken all of the answer (`untaken`) and been silent for ``QUIET`` s,
    or ``head_timeout`` has passed since it took it all; one that takes none of the
    answer for ``idle_timeout`` is cut off, as `drain` does. The caller then closes.

    Closed at once with bytes of the client's unread, the kernel reset the connection
    and dropped what it still held of the answer: a client that pipelined a request
    behind a `Connection: close` one got part of its answer, and an uploader answered
    413 saw its upload reset, not the 413."""
    await drain(writer, idle_timeout)
    transport = writer.transport
    if transport.is_closing() or not transport.can_write_eof():
        return
    try:
        writer.write_eof()
    except OSError:  # (the client is gone)
        return
    loop = asyncio.get_running_loop()
    left, taken_at, poll = untaken(writer), loop.time(), 0.01
    done: float | None = None  # when all of the answer was taken
    while True:
        now, unsent = loop.time(), untaken(writer)
        if unsent < left:
            left, taken_at = unsent, now
        elif unsent and now - taken_at >= idle_timeout:
            transport.abort()  # (none of it taken)
            return
        if not unsent and done is None:
            done = now
        if done is not None and now >= done + head_timeout:
            return
        wait = poll if done is None else min(QUIET, done + head_timeout - now)
        try:
            async with asyncio.timeout(wait):
                if not await reader.read(1 << 16):
                    return  # the client closed
        except TimeoutError:
            if done is not None:
                return  # all taken, and the client silent
            poll = min(2 * poll, 0.2)
