"""Ray peer: one tiny driver run (actor latency), positive figures, no daemon left."""

from __future__ import annotations

import pytest

from polybus.bench.peers import ray_peer

from .peer_checks import leaves_nothing, need, positive

pytestmark = [pytest.mark.peers, pytest.mark.slow]


def test_actor_latency() -> None:
    need("ray")
    with leaves_nothing():
        stats, startup = ray_peer.measure("latency", [[0, 1000], 1, [3, 3]], timeout=100)
    assert len(stats) == 2 and startup > 0
    positive(stats)
