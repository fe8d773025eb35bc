"""A stranger whose first bytes cannot begin a polybus proof, at a replica and at the
registry over loopback TCP: an HTTP client (curl, a browser) pointed at the wrong port,
whose request is shorter than the 72 bytes of a proof.

It is refused at once as "not a polybus peer", answered with that status, and its first
bytes are said in the log, as a TLS listener says them of a peer that speaks no TLS. It
was held for the whole `handshake_timeout` (5 s by default), waiting for the rest of a
proof that could never be one, then logged as `timed out (27 of its 72 bytes came in
time)`, and the client got nothing.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from polybus.registry.service import RegistryService
from polybus.transport.endpoints import connect
from polybus.wire import handshake
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"handshake-stranger-token-0123456"
TIMEOUT = 30.0  # the handshake's: far longer than the test waits for an answer
WAIT = 3.0  # how long the stranger waits for one
REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"  # 27 bytes


@pytest.fixture
def worker() -> Iterator[WorkerRuntime]:
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(handshake_timeout=TIMEOUT)).start()
    try:
        yield rt
    finally:
        rt.stop()


@pytest.fixture
def registry() -> Iterator[RegistryService]:
    with RegistryService(TOKEN, handshake_timeout=TIMEOUT) as reg:
        yield reg


def _answer_to(host: str, port: int, data: bytes) -> bytes:
    """What the listener at ``host:port`` sends after its greeting to a peer that sends
    ``data`` and waits (b"" if nothing came within WAIT)."""
    with socket.create_connection((host, port), timeout=WAIT) as s:
        hello = b""
        while len(hello) < handshake.HELLO_SIZE:
            chunk = s.recv(handshake.HELLO_SIZE - len(hello))
            assert chunk, "closed before its greeting"
            hello += chunk
        s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(4096):
                got += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return got


def test_a_replica_refuses_an_http_request_at_once_and_says_what_came(
        worker: WorkerRuntime, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    answer = _answer_to(worker.address.host, worker.address.port, REQUEST)
    assert answer[:1] == bytes([handshake.NOT_POLYBUS]), answer
    assert answer[1:] == bytes(32)  # (zeros, not a MAC)
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "not a polybus peer" in said and "b'GET /" in said, said
    assert "timed out" not in said, said
    good = connect(worker.address, TOKEN, Codec())  # and it serves on
    try:
        good.send(Call(1, "echo", [5]))
        got: list[object] = []
        while not got:
            got = good.receive()
        assert got == [Result(1, 5)]
    finally:
        good.close()


def test_the_registry_refuses_an_http_request_at_once(
        registry: RegistryService, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.registry")
    answer = _answer_to(registry.address.host, registry.address.port, REQUEST)
    assert answer[:1] == bytes([handshake.NOT_POLYBUS]), answer
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "not a polybus peer" in said and "b'GET /" in said, said


@pytest.mark.parametrize("first", [b"P", b"PB", b"PBU", b"PBUS\x01"])
def test_the_start_of_a_proof_is_still_waited_for(worker: WorkerRuntime, first: bytes) -> None:
    """Bytes that may begin a proof are not refused: the rest may yet come (a client
    whose proof arrives in pieces)."""
    with socket.create_connection((worker.address.host, worker.address.port), timeout=WAIT) as s:
        hello = s.recv(handshake.HELLO_SIZE)
        while len(hello) < handshake.HELLO_SIZE:
            hello += s.recv(handshake.HELLO_SIZE - len(hello))
        proof = handshake.ClientHandshake(TOKEN).proof(hello)
        assert proof.startswith(first)
        s.sendall(proof[:len(first)])
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):  # (nothing yet: it waits for the rest)
            s.recv(1)
        s.settimeout(WAIT)
        s.sendall(proof[len(first):])
        answer = s.recv(handshake.ANSWER_SIZE)
        assert answer[:1] == bytes([handshake.OK])


def test_a_stranger_that_spells_the_magic_wrong_late_is_refused(worker: WorkerRuntime) -> None:
    """The magic is checked byte by byte as it comes: b"PBX" cannot begin a proof."""
    answer = _answer_to(worker.address.host, worker.address.port, b"PBX")
    assert answer[:1] == bytes([handshake.NOT_POLYBUS]), answer
