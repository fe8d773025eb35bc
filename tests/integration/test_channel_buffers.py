"""Channel over a real socket pair: raw buffers of every size, including empty ones."""

from __future__ import annotations

import socket
import threading
from typing import Any

import numpy as np
import pytest

from polybus.transport.channel import Channel
from polybus.wire.codec import Codec, OutOfBand
from polybus.wire.messages import Call, Result


@pytest.mark.timeout(20)
@pytest.mark.parametrize("value", [
    np.zeros((0, 4)),                                   # an empty buffer (used to spin)
    [np.zeros(0, dtype=np.int8), np.arange(3), np.zeros((2, 0))],
    OutOfBand(b""),
    np.arange(1 << 18, dtype=np.float64),               # 2 MiB: many partial writes
])
def test_values_with_raw_buffers_cross_a_socket(value: object) -> None:
    a, b = socket.socketpair()
    left, right = Channel(a, Codec(), "right"), Channel(b, Codec(), "left")
    try:
        msgs: list[Any] = []

        def read() -> None:
            while len(msgs) < 2:
                msgs.extend(right.receive(wait=True))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()  # reads while the sender writes, so a large frame cannot block
        left.send(Result(1, value), on_blocked=lambda: None)
        left.send(Call(2, "after", []), on_blocked=lambda: None)
        reader.join(10)
        assert len(msgs) == 2
        assert isinstance(msgs[0], Result) and isinstance(msgs[1], Call)
        expect = value.data if isinstance(value, OutOfBand) else value
        out = msgs[0].value
        if isinstance(expect, list):
            assert all(np.array_equal(x, y) and x.shape == y.shape for x, y in zip(out, expect, strict=True))
        elif isinstance(expect, np.ndarray):
            assert out.shape == expect.shape and np.array_equal(out, expect)
        else:
            assert out == expect
    finally:
        left.close()
        right.close()
