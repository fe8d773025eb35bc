"""The benchmark's HTTP load generator: asyncio streams over keep-alive connections.

``C`` connections are opened before the clock starts; then each sends a request, reads
the whole response, and sends the next, until ``N`` requests have been answered in all.
It reads only the status line and Content-Length, so it costs little per request; the
completion time of every request is kept, so one sequential run of N gives the time of
every shorter run too.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

__all__ = ["LoadResult", "load"]


@dataclass
class LoadResult:
    seconds: float                      # first request sent .. last answer read
    done_at: list[float] = field(default_factory=list)  # seconds since start, per answer
    failures: dict[int, int] = field(default_factory=dict)  # non-2xx status -> count

    def seconds_for(self, n: int) -> float:
        """The time the first ``n`` answers took (sequential runs: the run of ``n``)."""
        return self.done_at[n - 1]


async def _one_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          request: bytes, todo: list[int], t0: float,
                          out: LoadResult) -> None:
    while todo[0] > 0:
        todo[0] -= 1
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"content-length:")
        if at < 0:  # every server of the benchmark frames its answers by length
            raise RuntimeError(f"an answer without Content-Length: {bytes(head[:200])!r}")
        end = lower.index(b"\r\n", at)
        await reader.readexactly(int(head[at + 15:end]))
        out.done_at.append(time.perf_counter() - t0)
        if not 200 <= status < 300:
            out.failures[status] = out.failures.get(status, 0) + 1


async def _load(host: str, port: int, path: str, n: int, c: int) -> LoadResult:
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    conns = [await asyncio.open_connection(host, port) for _ in range(min(c, n))]
    out = LoadResult(0.0)
    todo = [n]
    t0 = time.perf_counter()
    try:
        await asyncio.gather(*(_one_connection(r, w, request, todo, t0, out)
                               for r, w in conns))
        out.seconds = time.perf_counter() - t0
    finally:
        for _, w in conns:
            w.close()
    out.done_at.sort()
    return out


def load(host: str, port: int, path: str, n: int, c: int = 1) -> LoadResult:
    """``n`` GET requests of ``path`` over ``c`` keep-alive connections."""
    return asyncio.run(_load(host, port, path, n, c))
