"""The run's bytes each way count what went by shared memory too: the same program
over shm and over tcp reports the same traffic (stateful matmul: B to each replica once
by a shared segment, blocks of A and of C by segments of their own)."""

from __future__ import annotations

from pathlib import Path

import polybus

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "matmul"


def test_bytes_passed_by_segment_count_as_sent_and_received() -> None:
    got = {}
    for transport in ("tcp", "shm"):
        r = polybus.run(EXAMPLE / "stateful.toml",
                        [f"modules.server.transport={transport}", "modules.client.args=[200]"],
                        worker_output=False)
        assert r.result["correct"]
        got[transport] = (r.bytes_sent, r.bytes_received)
    # B (320 KB) goes to each of 2 replicas by a segment over shm: more than half of
    # what is sent; without it the count would be under half of tcp's.
    (tcp_out, tcp_in), (shm_out, shm_in) = got["tcp"], got["shm"]
    assert tcp_out > 2 * 200 * 200 * 8
    assert 0.9 * tcp_out < shm_out < 1.1 * tcp_out
    assert 0.9 * tcp_in < shm_in < 1.1 * tcp_in
