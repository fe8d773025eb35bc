"""Every transport passes the same conformance check (polybus.testing.conformance)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.testing.conformance import check_transport


@pytest.mark.parametrize("scheme", ["tcp", "ipc", "shm", "inproc"])
def test_transport_conformance(scheme: str, tmp_path: Path) -> None:
    check_transport(scheme, tmp_path, large=32 << 20)


def test_shm_segments_are_reused_and_released(tmp_path: Path) -> None:
    """A sender's segments come back when the receiver's arrays go, and are reused."""
    import gc
    import socket

    import numpy as np

    from polybus.testing.conformance import memfd_mappings
    from polybus.transport.shm import ShmChannel
    from polybus.wire.codec import Codec
    from polybus.wire.messages import Call, Result

    a, b = socket.socketpair(socket.AF_UNIX)
    sender, receiver = ShmChannel(a, Codec(), "a"), ShmChannel(b, Codec(), "b")
    try:
        big = np.arange(1 << 18, dtype=np.float64)  # 2 MiB
        for i in range(10):
            sender.send(Call(i, "f", [big]))
            got: list[object] = []
            while not got:
                got = receiver.receive()
            call = got[0]
            assert isinstance(call, Call) and np.array_equal(call.args[0], big)
            del call, got
            gc.collect()
            receiver.send(Result(i, None))  # carries the release back
            while not sender.receive():
                pass
        assert sender.segments_held() == 1, "a released segment should be reused"
        assert sender.shm_bytes_sent == 10 * big.nbytes
        # an array the receiver keeps outlives both channels
        sender.send(Call(99, "f", [big]))
        kept: list[object] = []
        while not kept:
            kept = receiver.receive()
    finally:
        sender.close()
        receiver.close()
    msg = kept[0]
    assert isinstance(msg, Call) and np.array_equal(msg.args[0], big)
    del msg, kept
    gc.collect()
    assert memfd_mappings() == 0
