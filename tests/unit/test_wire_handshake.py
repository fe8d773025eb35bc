"""Mutual HMAC handshake, sans-IO: fixed sizes, nothing decoded before proof."""

from __future__ import annotations

import struct

import pytest

from polybus.errors import AuthenticationError, ProtocolError
from polybus.wire.handshake import (
    ANSWER_SIZE,
    HELLO_SIZE,
    MAGIC,
    PROOF_SIZE,
    VERSION,
    ClientHandshake,
    ServerHandshake,
)

TOKEN = b"s3cret-token"


def test_good_token_both_ways() -> None:
    server, client = ServerHandshake(TOKEN), ClientHandshake(TOKEN)
    hello = server.hello()
    assert len(hello) == HELLO_SIZE and hello[:4] == MAGIC
    assert struct.unpack_from("<HH", hello, 4) == (VERSION, 0)
    proof = client.proof(hello)
    assert len(proof) == PROOF_SIZE
    answer, err = server.check(proof)
    assert err is None and len(answer) == ANSWER_SIZE and answer[0] == 0
    client.verify(answer)  # the server proved it holds the token too


def test_wrong_token_refused_by_server() -> None:
    server, client = ServerHandshake(TOKEN), ClientHandshake(b"other")
    answer, err = server.check(client.proof(server.hello()))
    # The reason alone: the accepting side logs "registry refused a connection: PEER:
    # wrong cluster token" ("peer refused: ..." there read as if the peer had refused).
    assert isinstance(err, AuthenticationError) and str(err) == "wrong cluster token"
    assert answer == bytes([2]) + bytes(32)
    with pytest.raises(AuthenticationError, match="wrong cluster token"):
        client.verify(answer)


def test_server_without_token_is_detected_by_client() -> None:
    server, client = ServerHandshake(b"impostor"), ClientHandshake(TOKEN)
    proof = client.proof(server.hello())
    # An impostor cannot make a valid answer; pretend it says OK anyway.
    forged = bytes([0]) + bytes(32)
    with pytest.raises(AuthenticationError, match="did not prove"):
        client.verify(forged)
    answer, err = server.check(proof)
    assert err is not None and answer[0] == 2


def test_wrong_magic() -> None:
    server, client = ServerHandshake(TOKEN), ClientHandshake(TOKEN)
    proof = bytearray(client.proof(server.hello()))
    proof[:4] = b"HTTP"
    answer, err = server.check(bytes(proof))
    assert err is not None and answer[0] == 3
    with pytest.raises(ProtocolError, match="not a polybus"):
        ClientHandshake(TOKEN).proof(b"XXXX" + server.hello()[4:])


def test_wrong_version() -> None:
    server, client = ServerHandshake(TOKEN), ClientHandshake(TOKEN)
    proof = bytearray(client.proof(server.hello()))
    struct.pack_into("<H", proof, 4, VERSION + 1)
    answer, err = server.check(bytes(proof))
    assert err is not None and "version" in str(err) and answer[0] == 1
    hello = bytearray(ServerHandshake(TOKEN).hello())
    struct.pack_into("<H", hello, 4, VERSION + 1)
    with pytest.raises(ProtocolError, match="version"):
        ClientHandshake(TOKEN).proof(bytes(hello))


def test_short_messages() -> None:
    server, client = ServerHandshake(TOKEN), ClientHandshake(TOKEN)
    proof = client.proof(server.hello())
    answer, err = server.check(proof[:-1])
    assert err is not None and answer[0] == 3
    with pytest.raises(ProtocolError, match="short"):
        ClientHandshake(TOKEN).proof(server.hello()[:-1])
    with pytest.raises(AuthenticationError, match="closed"):
        client.verify(b"")


def test_nonces_differ_so_proofs_cannot_be_replayed() -> None:
    s1, s2 = ServerHandshake(TOKEN), ServerHandshake(TOKEN)
    assert s1.hello() != s2.hello()
    proof_for_s1 = ClientHandshake(TOKEN).proof(s1.hello())
    _, err = s2.check(proof_for_s1)
    assert err is not None
