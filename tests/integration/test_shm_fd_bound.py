"""Descriptors an shm peer passes (SCM_RIGHTS) that no frame names are bounded.

A receiver keeps each descriptor until the frame that names it is read; a peer that
passed descriptors and never named them made it keep every one, until the process's
descriptor table (shared by every peer) was full. Past ``MAX_FDS_PENDING`` the peer is
refused as a protocol error and they are closed; a replica answers Goodbye and drops
that peer alone.
"""

from __future__ import annotations

import array
import gc
import logging
import os
import socket
from pathlib import Path

import pytest

from polybus.errors import ProtocolError
from polybus.testing.conformance import memfd_mappings
from polybus.testing.peers import next_message
from polybus.transport.endpoints import connect
from polybus.transport.shm import ShmChannel
from polybus.transport.shmseg import MAX_FDS, MAX_FDS_PENDING, MAX_SEGMENTS
from polybus.transport.shmshare import MAX_SHARED
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Goodbye, Ping, Pong, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"shm-descriptor-bound-token-0123456789"
PER_MESSAGE = 20  # descriptors passed on each write


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _pass_fds(sock: socket.socket, fd: int, frame: bytes) -> None:
    """One frame (a Ping: on the socket's stream without a ring, a doorbell's bytes
    with one) carrying PER_MESSAGE copies of ``fd`` that no frame names."""
    anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd] * PER_MESSAGE))]
    sock.sendmsg([frame], anc)


def test_the_limit_is_well_above_what_a_sender_may_have_outstanding() -> None:
    assert MAX_FDS_PENDING >= 2 * (1 + MAX_SEGMENTS + MAX_SHARED)
    assert MAX_FDS_PENDING + MAX_FDS < 1024  # one peer cannot fill a default table


def test_descriptors_no_frame_names_are_refused_and_closed() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    sender, receiver = ShmChannel(a, Codec(), "client"), ShmChannel(b, Codec(), "replica")
    frame = b"".join(bytes(p) for p in Codec().encode(Ping(0)))
    dummy = os.open(os.devnull, os.O_RDONLY)
    most = 0
    try:
        a.sendall(frame)
        receiver.fill(wait=True)  # (with a ring: the peer's, its mapping a descriptor)
        before = _open_fds()
        with pytest.raises(ProtocolError, match=r"descriptors passed that no frame has named "
                                                rf"\(at most {MAX_FDS_PENDING} may wait\)"):
            for _ in range(MAX_FDS_PENDING // PER_MESSAGE + 5):
                _pass_fds(a, dummy, frame)
                receiver.fill(wait=True)  # (one write's descriptors a read, at most)
                receiver.pending()
                most = max(most, len(receiver._fds_in))
        # Every one was kept until the limit (none lost to a frame), none after it.
        assert most > MAX_FDS_PENDING - PER_MESSAGE
        assert not receiver._fds_in
        assert _open_fds() == before  # closed, not left to the connection's close
    finally:
        os.close(dummy)
        sender.close()
        receiver.close()
    gc.collect()
    assert memfd_mappings() == 0


def _next(ch: ShmChannel, limit: float = 5.0) -> object:
    return next_message(ch, limit)


def test_a_replica_says_goodbye_to_that_peer_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, f"shm://{tmp_path}/w.sock",
                       ServeOptions(pool=2)).start()
    dummy = os.open(os.devnull, os.O_RDONLY)
    try:
        good = connect(str(rt.address), TOKEN, Codec())
        bad = connect(str(rt.address), TOKEN, Codec())
        try:
            assert isinstance(good, ShmChannel) and isinstance(bad, ShmChannel)
            good.send(Call(1, "echo", ["before"]))
            assert _next(good) == Result(1, "before")
            frame = b"".join(bytes(p) for p in Codec().encode(Ping(0)))
            for _ in range(MAX_FDS_PENDING // PER_MESSAGE + 2):
                try:
                    _pass_fds(bad.sock, dummy, frame)
                except OSError:  # refused and closed already
                    break
            bye = _next(bad)
            while isinstance(bye, Pong):  # (the Pings answered before the limit)
                bye = _next(bad)
            assert isinstance(bye, Goodbye), bye
            assert "descriptors passed that no frame has named" in bye.reason
            good.send(Call(2, "echo", ["still here"]))
            assert _next(good) == Result(2, "still here")
        finally:
            good.close()
            bad.close()
    finally:
        os.close(dummy)
        rt.stop()
    assert "bad input from" in caplog.text and "no frame has named" in caplog.text
