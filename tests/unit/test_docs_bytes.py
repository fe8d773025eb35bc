"""What the README says the byte counts hold under ``shm`` is what the channel counts."""

from __future__ import annotations

import gc
import re
import socket
from pathlib import Path

import numpy as np

from polybus.transport.shm import THRESHOLD, ShmChannel
from polybus.transport.shmseg import _DESC
from polybus.wire.codec import Codec
from polybus.wire.messages import Call

ROOT = Path(__file__).resolve().parents[2]


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text().split())


def test_the_documented_threshold_and_entry_size_are_the_codes() -> None:
    readme = _text("README.md")
    assert f"buffers under {THRESHOLD // 1024} KiB, and a {_DESC.size}-byte entry" in readme
    assert f"`bytes` of {THRESHOLD // 1024} KiB or more" in readme
    assert re.search(rf"bytes of {THRESHOLD // 1024} KiB or more goes by segment, and is not "
                     r"counted", _text("docs/configuration.md"))


def test_a_large_buffer_over_shm_is_not_in_bytes_sent_or_received() -> None:
    a, b = socket.socketpair(socket.AF_UNIX)
    x, y = ShmChannel(a, Codec(), "x"), ShmChannel(b, Codec(), "y")
    try:
        big = np.zeros(THRESHOLD, dtype=np.uint8)       # by segment
        small = np.zeros(THRESHOLD - 1, dtype=np.uint8)  # in the frame
        x.send(Call(1, "f", [big]))
        x.send(Call(2, "f", [small]))
        got: list[object] = []
        while len(got) < 2:
            got += y.receive()
        assert x.shm_bytes_sent == THRESHOLD
        assert THRESHOLD - 1 < x.bytes_sent < 2 * THRESHOLD - 1  # the small one, not the big
        assert y.bytes_received == x.bytes_sent
        del got
    finally:
        x.close()
        y.close()
        gc.collect()
