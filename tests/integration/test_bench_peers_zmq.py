"""pyzmq REQ/REP peer: tiny latency and bandwidth runs, positive figures, server reaped."""

from __future__ import annotations

import pytest

from polybus.bench.peers import zmq_peer

from .peer_checks import leaves_nothing, need, positive

pytestmark = pytest.mark.peers


def test_req_rep_latency_and_bandwidth() -> None:
    need("pyzmq")
    with leaves_nothing(), zmq_peer.ZmqPeer("split") as peer:
        stats = [peer.rtt_us(0, 2, 20), peer.rtt_us(10_000, 2, 20),
                 peer.bandwidth_gbps(1_000_000, 2)]
    positive(stats)
