"""docs/protocol.md, taken at its word: a client written from the document alone
(sockets, struct, hmac and msgpack; nothing of polybus.wire or polybus.transport) talks
to a live replica. Each step is the document's: the handshake's sizes, fields and MACs,
the frame layout with its buffers on 64-byte boundaries, the messages' fields in order,
arrays as ext 1 (a buffer) and ext 5 (in the header), bytes as ext 2, and the `Fail`s
of section 5. A change to the wire that the document does not follow fails here.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from polybus.token import make_token, read_token
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = make_token()


def _add(a: Any, b: Any) -> Any:
    return a + b


def _boom(message: str) -> None:
    raise ValueError(message)


def _scale(x: np.ndarray, k: float) -> np.ndarray:
    return x * k


def _echo(x: Any) -> Any:
    return x


@pytest.fixture
def replica() -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w0", {"add": _add, "boom": _boom, "scale": _scale, "echo": _echo},
                       TOKEN, options=ServeOptions(handshake_timeout=3.0)).start()
    try:
        yield rt
    finally:
        rt.stop()


def _exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def _dial(rt: WorkerRuntime, token: bytes = TOKEN) -> tuple[socket.socket, int]:
    """Section 1, the client's side; returns the socket and the server's answer status."""
    s = socket.create_connection((rt.address.host, rt.address.port), timeout=10)
    hello = _exact(s, 40)
    assert hello[:4] == b"PBUS"
    version, limit_s = struct.unpack_from("<HH", hello, 4)
    assert version == 1
    assert (limit_s & 0x7FF) << (limit_s >> 11) == 1 << 30  # the default max_frame
    nonce_s, nonce_c = hello[8:40], os.urandom(32)
    limit_c = (20 << 11) | 1024  # 1 GiB, as mantissa << shift
    limits = struct.pack("<HH", limit_s, limit_c)
    mac = hmac.new(token, b"c" + nonce_s + nonce_c + limits, hashlib.sha256).digest()
    s.sendall(b"PBUS" + struct.pack("<HH", 1, limit_c) + nonce_c + mac)
    answer = _exact(s, 33)
    if answer[0] == 0:
        want = hmac.new(token, b"s" + nonce_c + nonce_s + limits, hashlib.sha256).digest()
        assert hmac.compare_digest(answer[1:], want)
    else:
        assert answer[1:] == bytes(32)
    return s, answer[0]


def _pad(n: int) -> int:
    return (n + 63) & ~63


def _send(s: socket.socket, msg: list[Any], bufs: tuple[bytes, ...] = ()) -> None:
    """Section 2: offsets of the buffers counted from offset 4, each on 64 bytes."""
    header = msgspec.msgpack.encode(msg)
    body = struct.pack("<HHI", len(bufs), 0, len(header))
    body += b"".join(struct.pack("<Q", len(b)) for b in bufs) + header
    for b in bufs:
        body += bytes(_pad(len(body)) - len(body)) + b
    s.sendall(struct.pack("<I", len(body)) + body)


def _receive(s: socket.socket) -> tuple[Any, list[bytes], list[int]]:
    """One frame: the message (exts left as msgspec Ext), its buffers, their offsets."""
    (length,) = struct.unpack("<I", _exact(s, 4))
    body = _exact(s, length)
    nbufs, flags, header_len = struct.unpack_from("<HHI", body)
    assert flags == 0
    lens = struct.unpack_from(f"<{nbufs}Q", body, 8)
    at = 8 + 8 * nbufs
    header, pos = body[at:at + header_len], at + header_len
    bufs, offsets = [], []
    for n in lens:
        assert body[pos:_pad(pos)] == bytes(_pad(pos) - pos)  # zero padding
        pos = _pad(pos)
        bufs.append(body[pos:pos + n])
        offsets.append(pos)
        pos += n
    assert pos == length
    return msgspec.msgpack.decode(header), bufs, offsets


def _array_ext(dtype: str, shape: list[int], index: int) -> msgspec.msgpack.Ext:
    return msgspec.msgpack.Ext(1, msgspec.msgpack.encode([dtype, shape, index]))


def test_the_handshake_and_control_messages(replica: WorkerRuntime) -> None:
    bad, status = _dial(replica, b"not the token")
    bad.close()
    assert status == 2  # bad token, zero MAC
    s, status = _dial(replica)
    with s:
        assert status == 0
        _send(s, [10, 5])  # Ping(req=5)
        assert _receive(s)[0][:2] == [11, 5]
        _send(s, [8, 6])  # StatsRequest(req=6)
        stats = _receive(s)[0]
        assert stats[0] == 9 and stats[1] == "w0" and stats[8] == 6


def test_calls_failures_and_a_batch(replica: WorkerRuntime) -> None:
    s, _ = _dial(replica)
    with s:
        _send(s, [1, 1, "add", [2, 3]])  # trailing defaults left out
        assert _receive(s)[0] == [2, 1, 5]
        _send(s, [1, 2, "nope", [1], None, 0.0, 0.0, None])
        fail = _receive(s)[0]
        assert fail[:4] == [3, 2, "no-interface", "LookupError"]
        _send(s, [1, 3, "boom", ["my message"]])
        fail = _receive(s)[0]
        assert fail[:5] == [3, 3, "exception", "ValueError", "my message"]
        assert not fail[5].startswith("Traceback")  # (its first line left out)
        assert fail[5].rstrip().endswith("ValueError: my message")
        _send(s, [17, 7, "boom", [["a"], ["b"]], 0.0])  # CallBatch: both calls fail
        batch = _receive(s)[0]
        assert batch[:3] == [18, 7, [None, None]]
        assert [f[:5] for f in batch[3]] == [[3, 0, "exception", "ValueError", "a"],
                                            [3, 1, "exception", "ValueError", "b"]]
        _send(s, [4, [[1, 8, "add", [1, 1]], [1, 9, "add", ["a", "b"]]]])  # Batch of Calls
        got: list[Any] = []
        while len(got) < 2:
            m = _receive(s)[0]
            got += m[1] if m[0] == 4 else [m]
        assert sorted(got) == [[2, 8, 2], [2, 9, "ab"]]


def test_arrays_and_bytes(replica: WorkerRuntime) -> None:
    s, _ = _dial(replica)
    with s:
        big = np.arange(100_000, dtype="<f8").reshape(100, 1000)
        _send(s, [1, 1, "scale", [_array_ext("<f8", [100, 1000], 0), 2.0]],
              (big.tobytes(),))
        (tag, cid, value), bufs, offsets = _receive(s)
        assert (tag, cid) == (2, 1) and value.code == 1
        dtype, shape, index = msgspec.msgpack.decode(value.data)
        assert (dtype, shape) == ("<f8", [100, 1000])
        assert (offsets[index] % 64, len(bufs[index])) == (0, big.nbytes)
        assert np.array_equal(np.frombuffer(bufs[index], dtype).reshape(shape), big * 2)
        small = np.arange(6, dtype=">i4").reshape(2, 3)  # ext 5: [n, meta, bytes]
        meta = msgspec.msgpack.encode([">i4", [2, 3]])
        ext5 = msgspec.msgpack.Ext(5, bytes([len(meta)]) + meta + small.tobytes())
        _send(s, [1, 2, "echo", [ext5]])
        value = _receive(s)[0][2]
        n = value.data[0]
        assert value.code == 5 and msgspec.msgpack.decode(value.data[1:1 + n]) == [
            ">i4", [2, 3]]
        assert value.data[1 + n:] == small.tobytes()
        blob = bytes(range(256)) * 512  # 128 KiB: out of band as ext 2, both ways
        _send(s, [1, 3, "echo", [msgspec.msgpack.Ext(2, msgspec.msgpack.encode(0))]],
              (blob,))
        (_, _, value), bufs, _ = _receive(s)
        assert value.code == 2 and bufs[msgspec.msgpack.decode(value.data)] == blob


def test_the_token_is_the_files_stripped_bytes(tmp_path: Path) -> None:
    token = make_token()
    assert len(token) == 64 and bytes.fromhex(token.decode())  # 64 hex characters
    f = tmp_path / "token"
    f.write_bytes(b"  " + token + b"\n")
    f.chmod(0o600)
    assert read_token(f) == token  # the key as it is, not the 32 bytes it spells
