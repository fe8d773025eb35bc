"""A client of docs/protocol.md written from the document alone, as a user of another
language would write one: sockets, struct, hmac and a msgpack library (msgspec's, as
plain msgpack: no polybus type), nothing of polybus. test_protocol_foreign_client.py
runs it against a worker started by hand.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import queue
import socket
import struct
import threading
from typing import Any

import msgspec

Ext = msgspec.msgpack.Ext
_ENC = msgspec.msgpack.Encoder()


class Refused(Exception):
    """The handshake's answer was not status 0 (``status``), or its MAC was wrong."""

    def __init__(self, status: int, mac: bytes) -> None:
        super().__init__(f"status {status}")
        self.status, self.mac = status, mac


def limit_code(limit: int) -> int:
    """A frame limit in the handshake's 16 bits: mantissa (11 bits) << shift (5 bits)."""
    shift = max(0, limit.bit_length() - 11)
    return (shift << 11) | (limit >> shift)


def limit_of(code: int) -> int:
    return (code & 0x7FF) << (code >> 11)


def exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return out


def proof(hello: bytes, token: bytes, limit: int = 0, version: int = 1,
          magic: bytes = b"PBUS") -> tuple[bytes, bytes]:
    """Section 1's 72-byte proof for the 40-byte ``hello``, and the MAC the server's
    answer must carry."""
    nonce_s, nonce_c, limit_c = hello[8:40], os.urandom(32), limit_code(limit) if limit else 0
    limits = hello[6:8] + struct.pack("<H", limit_c)
    mac = hmac.new(token, b"c" + nonce_s + nonce_c + limits, hashlib.sha256).digest()
    want = hmac.new(token, b"s" + nonce_c + nonce_s + limits, hashlib.sha256).digest()
    return magic + struct.pack("<HH", version, limit_c) + nonce_c + mac, want


def frame(msg: Any, bufs: tuple[bytes, ...] = (), flags: int = 0,
          header: bytes | None = None) -> bytes:
    """Section 2: the buffers on 64-byte boundaries counted from offset 4."""
    head = _ENC.encode(msg) if header is None else header
    body = struct.pack("<HHI", len(bufs), flags, len(head))
    body += b"".join(struct.pack("<Q", len(b)) for b in bufs) + head
    for b in bufs:
        body += bytes(-len(body) % 64) + b
    return struct.pack("<I", len(body)) + body


def decode(body: bytes) -> Any:
    """A frame's message, arrays as (dtype, shape, bytes), bytes out of band as bytes,
    references as ("ref", kind, key)."""
    nbufs, _flags, header_len = struct.unpack_from("<HHI", body)
    lens = struct.unpack_from(f"<{nbufs}Q", body, 8)
    pos = 8 + 8 * nbufs
    header = body[pos:pos + header_len]
    pos += header_len
    bufs = []
    for n in lens:
        pos += -pos % 64
        bufs.append(body[pos:pos + n])
        pos += n
    if pos != len(body):
        raise ValueError(f"frame lengths disagree: {pos} laid out, {len(body)} came")

    def ext(code: int, data: memoryview) -> Any:
        if code == 1:
            dtype, shape, i = msgspec.msgpack.decode(data)
            return (dtype, shape, bufs[i])
        if code == 2:
            return bufs[msgspec.msgpack.decode(data)]
        if code == 4:
            return ("ref", *msgspec.msgpack.decode(data))
        if code == 5:
            n = data[0]
            dtype, shape = msgspec.msgpack.decode(data[1:1 + n])
            return (dtype, shape, bytes(data[1 + n:]))
        raise ValueError(f"unknown ext {code}")

    return msgspec.msgpack.decode(header, ext_hook=ext)


class Conn:
    """An authenticated connection; a reader thread queues each message as it comes,
    and ("closed", reason) when the server closes it."""

    def __init__(self, address: tuple[str, int], token: bytes, limit: int = 0) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        hello = exact(self.sock, 40)
        if hello[:4] != b"PBUS":
            raise ValueError("not a polybus server")
        self.version, code = struct.unpack_from("<HH", hello, 4)
        self.limit_s = limit_of(code)
        sent, want = proof(hello, token, limit)
        self.sock.sendall(sent)
        answer = exact(self.sock, 33)
        if answer[0] != 0 or not hmac.compare_digest(answer[1:], want):
            self.sock.close()
            raise Refused(answer[0], answer[1:])
        self.sock.settimeout(None)
        self.inbox: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                (length,) = struct.unpack("<I", exact(self.sock, 4))
                self.inbox.put(decode(exact(self.sock, length)))
        except (EOFError, OSError) as exc:
            self.inbox.put(("closed", str(exc)))

    def send(self, msg: Any, bufs: tuple[bytes, ...] = ()) -> None:
        self.sock.sendall(frame(msg, bufs))

    def get(self, timeout: float = 20.0) -> Any:
        return self.inbox.get(timeout=timeout)

    def answers(self, n: int, timeout: float = 20.0) -> dict[int, Any]:
        """The next ``n`` answers (Result or Fail), by call id; other messages skipped."""
        got: dict[int, Any] = {}
        while len(got) < n:
            m = self.get(timeout)
            items = m[1] if m[0] == 4 else [m]
            for a in items:
                if a[0] in (2, 3):
                    got[a[1]] = a
                elif a[0] == "closed":
                    raise EOFError(f"closed with {got} answered")
        return got

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
