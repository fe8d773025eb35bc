"""The run's bytes each way count what went by shared memory too, and not the segments'
bookkeeping (control frames, tables): the same program over shm and over tcp reports the
same traffic (stateful matmul: B to each replica once by a shared segment, blocks of A
and of C by segments of their own)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import polybus
from polybus.client import dispatch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "matmul"


def test_bytes_passed_by_segment_count_as_sent_and_received(
        monkeypatch: pytest.MonkeyPatch) -> None:
    got = {}
    for transport in ("tcp", "shm"):
        # Call ids come from one counter per process and are msgpack ints, a byte wider
        # past 127, 255 and 65,535: each run starts from the same id, so both runs' calls
        # are the same size.
        monkeypatch.setattr(dispatch, "_ids", itertools.count(1000))
        r = polybus.run(EXAMPLE / "stateful.toml",
                        [f"modules.server.transport={transport}", "modules.client.args=[200]"],
                        worker_output=False)
        assert r.result["correct"]
        got[transport] = (r.bytes_sent, r.bytes_received)
    # B (320 KB) goes to each of 2 replicas by a segment over shm: more than half of
    # what is sent; without it the count would be under half of tcp's.
    (tcp_out, tcp_in), (shm_out, shm_in) = got["tcp"], got["shm"]
    assert tcp_out > 2 * 200 * 200 * 8
    # What the client sends is the same message for message. What it receives is too,
    # but a replica puts answers that are ready together in one frame, as it happens,
    # on every transport (a few hundred bytes of framing either way in 0.3 MB).
    assert shm_out == tcp_out
    assert abs(shm_in - tcp_in) < 0.01 * tcp_in
