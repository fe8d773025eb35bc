"""Dask distributed peer: one tiny driver run per kind, positive figures, no worker left.

(The only runs of the Dask drivers in the suite: --quick leaves Dask out, as it does Ray.)"""

from __future__ import annotations

import pytest

from polybus.bench.peers import dask_peer

from .peer_checks import leaves_nothing, need, positive

pytestmark = [pytest.mark.peers, pytest.mark.slow]


@pytest.mark.parametrize(("kind", "args", "count"), [
    ("latency", [[0, 1000], 1, [3, 3]], 2),
    ("bandwidth", [[1000, 1_000_000], 1], 2),
    ("throughput", [50, 1], 1),
])
def test_dask_driver(kind: str, args: list[object], count: int) -> None:
    need("dask")
    with leaves_nothing():
        stats, startup = dask_peer.measure(kind, args, timeout=100)
    assert len(stats) == count and startup > 0
    positive(stats)
