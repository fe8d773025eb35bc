"""What the docs say the byte counts hold under ``shm`` (docs/strategies.md, "The bytes
a run counts", which the README links) is what is counted: the channel counts frames
and segment bytes apart, and the run adds them (tests/integration/test_shm_bytes.py
runs it)."""

from __future__ import annotations

import gc
import re
import socket
from pathlib import Path

import numpy as np

from polybus.transport.shm import THRESHOLD, ShmChannel
from polybus.wire.codec import Codec
from polybus.wire.messages import Call

ROOT = Path(__file__).resolve().parents[2]


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text().split())


def test_the_documented_threshold_and_entry_size_are_the_codes() -> None:
    readme = _text("docs/strategies.md")  # (the README links there)
    assert f"`bytes` of {THRESHOLD // 1024} KiB or more that went in a shared-memory segment" in readme
    assert re.search(rf"bytes of {THRESHOLD // 1024} KiB or more goes by segment, and is "
                     r"counted in the run's", _text("docs/configuration.md"))


def test_a_large_buffer_over_shm_is_counted_apart_from_the_frames() -> None:
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
        assert x.shm_bytes_sent == THRESHOLD == y.shm_bytes_received
        assert THRESHOLD - 1 < x.bytes_sent < 2 * THRESHOLD - 1  # the small one, not the big
        assert y.bytes_received == x.bytes_sent
        del got
    finally:
        x.close()
        y.close()
        gc.collect()


def test_what_the_readme_says_varies_the_counts_is_the_codes_sizes() -> None:
    """A ping is 15 B out and 17 B back; corked answers go up to 64 in one frame, about
    10 B of framing less per answer joined (strategies.md, what makes a count differ)."""
    from polybus.wire.messages import Batch, Fail, Message, Ping, Pong, Result
    from polybus.worker.replies import CORK_LIMIT

    codec = Codec()

    def size(msg: Message) -> int:
        return sum(memoryview(p).nbytes for p in codec.encode(msg))

    readme = _text("docs/strategies.md")  # (the README links there)
    assert (size(Ping(0)), size(Pong(0, 0, 0))) == (15, 17)
    assert "pinged: 15 B sent and 17 B received per ping" in readme
    assert f"up to {CORK_LIMIT} in one frame, about 10 B of framing less" in readme
    answers: list[Call | Result | Fail] = [Result(i, float(i)) for i in range(10)]
    saved = (sum(size(r) for r in answers) - size(Batch(answers))) / (len(answers) - 1)
    assert 9 <= saved <= 12


def test_the_readme_does_not_promise_forwarding_the_same_bytes_on_every_transport() -> None:
    """A Forward names the consumer's replica by its address, whose length is the
    transport's: the README said the same program reports the same traffic under every
    transport, which forwarding makes untrue (a new-user trial measured it)."""
    from polybus.transport.endpoints import Address
    from polybus.wire.messages import Forward

    codec = Codec()

    def size(to: str) -> int:
        return sum(memoryview(p).nbytes for p in codec.encode(Forward(7, "p" * 32, "k" * 32, to)))

    tcp = str(Address.parse("tcp://127.0.0.1:40123"))
    ipc = str(Address.parse("ipc:///tmp/polybus-run-abc123/part2-0.sock"))
    assert size(ipc) - size(tcp) >= len(ipc) - len(tcp) > 0  # (and msgpack's str header)
    readme = _text("docs/strategies.md")  # (the README links there)
    assert ("each `Forward` the client sends names the consumer's replica by its address, "
            "a socket path under `ipc` and `shm`, `tcp://127.0.0.1:PORT` under `tcp`, whose "
            "length is the transport's") in readme
    assert "four things make the count of one program differ from run to run" in readme
    assert "whether a value goes replica to replica or through the client is a race" in readme
