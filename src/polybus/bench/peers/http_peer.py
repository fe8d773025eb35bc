"""The rudy benchmark's peers: a plain asyncio HTTP server, and uvicorn when installed.

Each serves ``GET /work?ms=M`` like the polybus program does: the handler runs in a
pool of ``--pool`` threads (the paper's pool size PS; more requests wait for a thread),
sleeps M ms (modelled work) and answers a small JSON. Run as a module; prints
``port N`` on stdout once it listens on 127.0.0.1 and serves until stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl, urlsplit


def work(query: dict[str, str]) -> bytes:
    """The same work as bench/programs/rudy_web.py."""
    ms = float(query.get("ms", "40"))
    if ms > 0:
        time.sleep(ms / 1000)
    return json.dumps({"slept_ms": ms}, separators=(",", ":")).encode()


def _query(target: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(target).query))


async def _asyncio_server(pool: ThreadPoolExecutor) -> None:
    loop = asyncio.get_running_loop()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                target = head.split(b" ", 2)[1].decode("latin-1")
                body = await loop.run_in_executor(pool, work, _query(target))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark closes stdin
    server.close()


def _uvicorn(pool: ThreadPoolExecutor) -> None:
    import socket

    import uvicorn

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        body = await asyncio.get_running_loop().run_in_executor(pool, work, query)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted ones
    sock.listen(1024)  # connections wait in the backlog until uvicorn serves them
    print(f"port {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))

    async def main() -> None:
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.should_exit = True
        await serving

    asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", type=int, default=1)
    ap.add_argument("--uvicorn", action="store_true")
    args = ap.parse_args()
    with ThreadPoolExecutor(max_workers=args.pool) as pool:
        if args.uvicorn:
            _uvicorn(pool)
        else:
            asyncio.run(_asyncio_server(pool))


if __name__ == "__main__":
    main()
