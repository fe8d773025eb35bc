"""Mutual token authentication, sans-IO, with fixed-size messages only.

Nothing a peer sends is decoded (no msgpack, no pickle) before it has proved it holds
the cluster token; the token itself never crosses the wire::

    server -> client  HELLO  40 bytes: b"PBUS" u16 version u16 limit_s  nonce_s[32]
    client -> server  PROOF  72 bytes: b"PBUS" u16 version u16 limit_c  nonce_c[32]
                                       HMAC-SHA256(token, b"c" + nonce_s + nonce_c + limits)[32]
    server -> client  ANSWER 33 bytes: u8 status  HMAC-SHA256(token, b"s" + nonce_c + nonce_s + limits)[32]

status: 0 accepted, 1 version not supported, 2 bad token, 3 not polybus. On any status
but 0 the MAC is zeros and the server closes the connection.

``limit_s``, ``limit_c``: each side's frame limit (``[cluster] max_frame``) in 16 bits,
rounded down (`limit_code`; 0: not said), and ``limits`` the two u16s as sent (so both
MACs vouch for them). Each side then frames no message over the smaller of the two: a
call or an answer the other side could not take fails alone, before it is sent (it
used to reach the other side and cost the connection, and with it every call on it).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct

from polybus.errors import AuthenticationError, ProtocolError

MAGIC = b"PBUS"
VERSION = 1
HELLO_SIZE = 40
PROOF_SIZE = 72
ANSWER_SIZE = 33
_HEAD = struct.Struct("<4sHH")

OK, BAD_VERSION, BAD_TOKEN, NOT_POLYBUS = 0, 1, 2, 3
_REASONS = {BAD_VERSION: "protocol version not supported", BAD_TOKEN: "wrong cluster token",
            NOT_POLYBUS: "not a polybus peer"}


_LIMITS = struct.Struct("<HH")
_MANTISSA_BITS = 11


def limit_code(limit: int) -> int:
    """``limit`` bytes (> 0) in 16 bits, rounded down: an 11-bit mantissa shifted by a
    5-bit exponent (within 0.1% of it; a 1 GiB limit is exact)."""
    shift = max(0, limit.bit_length() - _MANTISSA_BITS)
    return (min(shift, 31) << _MANTISSA_BITS) | (limit >> shift)


def limit_of(code: int) -> int | None:
    """The limit `limit_code` gave ``code`` for (None for 0: not said)."""
    mantissa = code & ((1 << _MANTISSA_BITS) - 1)
    return mantissa << (code >> _MANTISSA_BITS) if mantissa else None


def _mac(token: bytes, role: bytes, a: bytes, b: bytes, limits: bytes) -> bytes:
    return hmac.new(token, role + a + b + limits, hashlib.sha256).digest()


class ServerHandshake:
    """The accepting side: `hello()` to send, then `check(proof)` -> (answer, error)."""

    def __init__(self, token: bytes, limit: int | None = None) -> None:
        self._token = token
        self._nonce = os.urandom(32)
        self._limit = limit_code(limit) if limit else 0
        self.peer_limit: int | None = None  # the client's frame limit, once checked

    def hello(self) -> bytes:
        return _HEAD.pack(MAGIC, VERSION, self._limit) + self._nonce

    def check(self, proof: bytes) -> tuple[bytes, AuthenticationError | None]:
        """The answer to send, and the reason to drop the peer (None if accepted)."""
        status = OK
        limits = b""
        if len(proof) != PROOF_SIZE:
            status = NOT_POLYBUS
        else:
            magic, version, theirs = _HEAD.unpack_from(proof, 0)
            nonce_c, mac = proof[8:40], proof[40:72]
            limits = _LIMITS.pack(self._limit, theirs)
            if magic != MAGIC:
                status = NOT_POLYBUS
            elif version != VERSION:
                status = BAD_VERSION
            elif not hmac.compare_digest(
                    mac, _mac(self._token, b"c", self._nonce, nonce_c, limits)):
                status = BAD_TOKEN
            else:
                self.peer_limit = limit_of(theirs)
        if status != OK:
            return bytes([status]) + bytes(32), AuthenticationError(_REASONS[status])
        return bytes([OK]) + _mac(self._token, b"s", nonce_c, self._nonce, limits), None


class ClientHandshake:
    """The connecting side: `proof(hello)` to send, then `verify(answer)`."""

    def __init__(self, token: bytes, limit: int | None = None) -> None:
        self._token = token
        self._nonce = os.urandom(32)
        self._server_nonce = b""
        self._limit = limit_code(limit) if limit else 0
        self._limits = b""
        self.peer_limit: int | None = None  # the server's frame limit, once verified
        self._said: int | None = None

    def proof(self, hello: bytes) -> bytes:
        if len(hello) != HELLO_SIZE:
            raise ProtocolError("peer is not a polybus server (short greeting)")
        magic, version, theirs = _HEAD.unpack_from(hello, 0)
        if magic != MAGIC:
            raise ProtocolError("peer is not a polybus server")
        if version != VERSION:
            raise ProtocolError(f"server speaks protocol version {version}, this is {VERSION}")
        self._server_nonce = hello[8:40]
        self._limits = _LIMITS.pack(theirs, self._limit)
        self._said = limit_of(theirs)
        return (_HEAD.pack(MAGIC, VERSION, self._limit) + self._nonce
                + _mac(self._token, b"c", self._server_nonce, self._nonce, self._limits))

    def verify(self, answer: bytes) -> None:
        if len(answer) != ANSWER_SIZE:
            # (Which of the two, this side cannot tell: a server that stops ends its
            # handshakes under way so, and one with too many at once cuts the oldest
            # short, which its log says. The hint was the second alone, at every stop.)
            raise AuthenticationError("server closed the connection during the handshake "
                                      "(it may be stopping, or have had too many connections "
                                      "in their handshake at once; try again)")
        status = answer[0]
        if status != OK:
            raise AuthenticationError(
                f"server refused this connection: {_REASONS.get(status, f'status {status}')}")
        expected = _mac(self._token, b"s", self._nonce, self._server_nonce, self._limits)
        if not hmac.compare_digest(answer[1:], expected):
            raise AuthenticationError("server did not prove it holds the cluster token")
        self.peer_limit = self._said
