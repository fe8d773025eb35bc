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


@pytest.mark.parametrize("example", ["dna", "mandelbrot"])
def test_a_mil_configuration_runs_as_its_toml(example: str) -> None:
    """CORD's notation (app.cfg) runs the same program as app.toml, with the same
    strategies: the same answers, calls, replicas and (mandelbrot's ring) migrations."""
    toml = polybus.run(EXAMPLES / example / "app.toml")
    mil = polybus.run(EXAMPLES / example / "app.cfg")
    assert mil.result == toml.result
    assert mil.calls == toml.calls
    assert sorted((r.name, r.speed) for r in mil.replicas) == sorted(
        (r.name, r.speed) for r in toml.replicas)
    if example == "mandelbrot":  # calls moved along the ring CORD's notation drew
        assert sum(r.migrated_in for r in mil.replicas) > 0


def test_sort_timed_with_and_without_the_merge() -> None:
    """The paper times the sort both ways, with and without the client's merge:
    ``timing=true`` reports each part (the answer is the same either way)."""
    over = {"modules.server.replication": 2, "modules.client.args": [3000, 2, "insertion"]}
    plain = polybus.run(EXAMPLES / "sort" / "app.toml", over).result
    timed = polybus.run(EXAMPLES / "sort" / "app.toml",
                        {**over, "modules.client.kwargs": {"timing": True}}).result
    assert timed.pop("sort_s") > 0 and timed.pop("merge_s") >= 0
    assert timed == plain and "sort_s" not in plain


@pytest.mark.parametrize("watermark", [1, 4])
@pytest.mark.parametrize("cache", [False, True])
def test_ep_watermark_and_cache_are_configuration_changes(watermark: int, cache: bool) -> None:
    """The on-demand multiply of Qureshi and Rashid: another watermark, or stateful
    servers, is a --set away, and the product is the same."""
    over: dict[str, object] = {
        "modules.client.args": [64, 16],
        "modules.client.use.multiply_block.callstyle": f"async-demand({watermark})"}
    if cache:
        over["modules.server.define.multiply_block.cache"] = ["rows", "cols"]
    r = polybus.run(EXAMPLES / "ep" / "app.toml", over)
    assert r.result["correct"] is True and r.result["tasks"] == 16 and r.calls == 16
    counts = r.interfaces["client.multiply_block"]
    if cache:  # each of the 32 blocks the tasks carry is put once per replica, then named
        assert counts["operands_put"] > 0
        assert counts["operands_put"] + counts["operands_named"] == 32
    else:
        assert counts["operands_put"] == counts["operands_named"] == 0
