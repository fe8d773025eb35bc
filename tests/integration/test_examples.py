"""The examples check their own answers against numpy."""

from __future__ import annotations

import pytest

import polybus
from integration.conftest import EXAMPLES


@pytest.mark.parametrize("replicas", [1, 3])
@pytest.mark.parametrize("algorithm", ["quicksort", "insertion"])
def test_sort(replicas: int, algorithm: str) -> None:
    n = 3000 if algorithm == "insertion" else 20000
    r = polybus.run(EXAMPLES / "sort" / "app.toml", {
        "modules.server.replication": replicas,
        "modules.client.args": [n, replicas, algorithm]})
    assert r.result["correct"] is True and r.result["n"] == n
    assert r.calls == replicas and len(r.replicas) == replicas


def test_matmul_small() -> None:
    r = polybus.run(EXAMPLES / "matmul" / "app.toml", {"modules.client.args": [16]})
    assert r.result["correct"] is True and r.calls == 16
