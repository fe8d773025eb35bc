"""Cached ``bytes`` of 64 KiB or more are cached like arrays: sent once, then named.

Found by a new-user trial: ten calls ``checksum(blob)`` with a 256 KiB bytes sent
2,622,120 bytes with ``cache = "auto"``, ``cache = ["blob"]`` and ``cache = []`` alike
(an array of the same size: 263,136). The client marks large bytes to travel out of
band before the cache code looks at the call, and that code recognised only bytes and
bytearray, so it never named them.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SERVER = """
    import zlib

    def checksum(blob):
        return [len(blob), zlib.crc32(blob)]
"""

CLIENT = """
    from polybus import use, wait

    checksum = use("checksum")

    def main(k):
        blob = bytes(range(256)) * 1024  # 256 KiB
        other = blob[::-1]
        out = [checksum(blob) for _ in range(k)]
        out += [checksum(blob=other), checksum(blob=blob), checksum(other)]
        return [wait(p) for p in out]
"""

TOML = """
    [modules.server]
    source = "server.py"
    transport = "TRANSPORT"
    define.checksum = { cache = CACHE }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    args = [10]
    use.checksum = USE

    [bind]
    "client.checksum" = "server.checksum"
"""

BLOB = bytes(range(256)) * 1024
EXPECTED = ([[len(BLOB), zlib.crc32(BLOB)]] * 10
            + [[len(BLOB), zlib.crc32(BLOB[::-1])], [len(BLOB), zlib.crc32(BLOB)],
               [len(BLOB), zlib.crc32(BLOB[::-1])]])


def _run(tmp_path: Path, transport: str, cache: str, use: str) -> polybus.RunResult:
    toml = (TOML.replace("TRANSPORT", transport).replace("CACHE", cache)
            .replace("USE", use))
    app = write_app(tmp_path, server=SERVER, client=CLIENT, toml=toml)
    return polybus.run(app, worker_output=None)


STYLES = {"sync": '{ callstyle = "sync" }', "async": '{ callstyle = "async" }',
          "aggregated": '{ callstyle = "async", aggregate = 4 }'}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("style", list(STYLES))
@pytest.mark.parametrize("cache", ['["blob"]', '"auto"'], ids=["named", "auto"])
@pytest.mark.parametrize("transport", ["tcp", "ipc", "shm"])
def test_large_bytes_are_sent_once_then_named(
        tmp_path: Path, transport: str, cache: str, style: str) -> None:
    r = _run(tmp_path, transport, cache, STYLES[style])
    assert r.result == EXPECTED
    # Two contents, each sent once (13 calls by value would be 13 of them).
    assert r.bytes_sent < 3 * len(BLOB)


@pytest.mark.timeout(60)
def test_uncached_large_bytes_still_go_with_every_call(tmp_path: Path) -> None:
    r = _run(tmp_path, "tcp", "[]", STYLES["sync"])
    assert r.result == EXPECTED
    assert r.bytes_sent > 13 * len(BLOB)
