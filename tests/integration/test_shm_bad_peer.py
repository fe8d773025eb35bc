"""An shm peer that breaks the segment rules is refused alone; the replica serves on.

Each case once stopped or killed the whole replica: a frame naming a descriptor never
sent made the poller wait on that peer's socket (every client stalled while it kept
still); a peer that shrank a segment's memfd under the replica's mapping killed it with
SIGBUS (memfds are now sealed, and an unsealed one refused: transport/memfd.py); and one
that never let the replica forget its segments filled the descriptor table every peer
shares (now at most ``MAX_MAPS`` are mapped per peer).
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterator

import numpy as np
import pytest

from polybus.errors import ConnectionLostError
from polybus.testing.peers import next_message
from polybus.transport import ring as ring_mod
from polybus.transport import shmmaps, shmshare
from polybus.transport.endpoints import Address, connect
from polybus.transport.memfd import check_sealed, sealed_memfd
from polybus.transport.ring import Ring
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Goodbye, Result
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"shm-bad-peer-token-0123456789abcdef"
BIG = np.zeros(300_000 // 8)  # over the shm threshold: by segment


def shape(a: np.ndarray) -> list[int]:
    return list(a.shape)


@pytest.fixture
def replica(tmp_path: object) -> Iterator[str]:
    rt = WorkerRuntime("w", {"shape": shape, "echo": lambda x: x}, TOKEN,
                       f"shm://{tmp_path}/w.sock").start()
    try:
        yield rt.address
    finally:
        rt.stop()


def _serves(address: str) -> None:
    """A new client of ``address`` is answered, small call and large."""
    ch = connect(address, TOKEN, Codec())
    try:
        ch.send(Call(1, "echo", ["hi"]))
        assert next_message(ch, 5.0) == Result(1, "hi")
        ch.send(Call(2, "shape", [BIG]))
        assert next_message(ch, 5.0) == Result(2, [BIG.size])
    finally:
        ch.close()


def _refused(ch: ShmChannel, why: str) -> None:
    got = next_message(ch, 5.0)
    assert isinstance(got, Goodbye) and why in got.reason, got


def test_a_frame_naming_a_descriptor_never_sent_is_refused_at_once(
        replica: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    good = connect(replica, TOKEN, Codec())
    bad = connect(replica, TOKEN, Codec())
    try:
        sent = ShmChannel._send_ring

        def without_descriptors(self: ShmChannel, *a: object) -> int:
            self._fds_out = []  # the frame still names one
            return sent(self, *a)  # type: ignore[arg-type]

        bad._send_ring = without_descriptors.__get__(bad)  # type: ignore[method-assign]
        try:
            bad.send(Call(5, "shape", [BIG]))
        except ConnectionLostError:
            # The replica read the frame while the send still rang its bell, refused it
            # and closed first (broken pipe, ~3 runs in 40): its log says why.
            assert "without its descriptor" in caplog.text, caplog.text
        else:
            _refused(bad, "without its descriptor")
        good.send(Call(2, "echo", ["during"]))  # (it waited for the bad peer to go)
        assert next_message(good, 5.0) == Result(2, "during")
    finally:
        bad.close()
        good.close()
    _serves(replica)


def _unsealed(name: str, size: int) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    return fd


def test_an_unsealed_segment_is_refused(replica: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = connect(replica, TOKEN, Codec())
    try:
        monkeypatch.setattr(shmshare, "sealed_memfd", _unsealed)  # (this client's segments)
        bad.send(Call(1, "shape", [BIG]))
        _refused(bad, "not sealed against shrinking")
    finally:
        bad.close()
    monkeypatch.undo()
    _serves(replica)


def test_a_peer_is_refused_past_max_maps_segments(replica: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shmmaps, "MAX_MAPS", 3)
    bad = connect(replica, TOKEN, Codec())
    try:
        for i in range(1, 4):
            bad.send(Call(i, "shape", [BIG]))
            assert next_message(bad, 5.0) == Result(i, [BIG.size])
            for seg in list(bad._segments.values()):  # dropped without telling the replica
                seg.close()
            bad._segments.clear()
            bad._pooled = 0
        bad.send(Call(4, "shape", [BIG]))
        _refused(bad, "3 segments mapped at once")
    finally:
        bad.close()
    _serves(replica)


def test_what_is_sent_is_sealed_and_what_is_not_cannot_be_attached() -> None:
    fd = sealed_memfd("t", 1 << 16)
    try:
        check_sealed(fd)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 0)  # (the shrink that was a SIGBUS at the peer)
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SEAL  # and stays so
    finally:
        os.close(fd)
    fd = _unsealed("t", 64 + (1 << 12))
    try:
        with pytest.raises(ValueError, match="not sealed"):
            check_sealed(fd)
        if ring_mod.supported():
            with pytest.raises(ValueError, match="not sealed"):
                Ring.attach(fd)
    finally:
        os.close(fd)


def test_junk_where_the_ring_is_due_is_refused_and_said(
        replica: str, caplog: pytest.LogCaptureFixture) -> None:
    """A peer that passes the handshake on the shm socket and sends bytes with no
    descriptor, where its ring's is due, was left waiting for ever with no log line (its
    bytes taken for doorbells); over TCP such junk is refused. Now it is too: said in
    the replica's log, and its connection closed."""
    junk = connect(f"ipc://{Address.parse(str(replica)).path}", TOKEN, Codec())  # the handshake, and no ring
    try:
        with caplog.at_level("WARNING", logger="polybus.worker"):
            junk.sock.sendall(b"not a descriptor")
            junk.sock.settimeout(10.0)
            while junk.sock.recv(4096):  # (the replica's own ring, then its end)
                pass
        said = [m for m in caplog.messages if "bad input from" in m]
        assert len(said) == 1, caplog.messages
        assert said[0].endswith("sent 16 byte(s) where its ring's descriptor was due (the "
                                "first thing an shm peer sends)"), said[0]
    finally:
        junk.close()
    _serves(replica)
