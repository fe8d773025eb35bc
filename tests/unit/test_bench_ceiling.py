"""The matmul benchmark's parallel ceiling: the same tasks over k processes that send
nothing, timed per repetition; its processes are gone when it returns."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from polybus.bench._ceiling import ceiling_seconds
from polybus.bench.b_matmul import _matrices, _order


def test_the_ceiling_times_the_timed_repetitions_and_leaves_no_process() -> None:
    st = ceiling_seconds(64, 2, 3, 16, _matrices, _order(3, 1))
    assert st.n == 3  # the warm-up repetition is not timed
    assert 0 < st.min <= st.median <= st.max
    assert not mp.active_children()


def test_the_matmul_ratios_set_polybus_against_the_ceiling() -> None:
    from polybus.bench.b_matmul import _ratios
    from polybus.bench.report import BenchResult, Row
    from polybus.bench.stats import Stat

    result = BenchResult("matmul", {}, x_label="servers")
    result.add(Row.of("one_process", {"n": 500}, 1, "seconds", Stat(0.08, 0.08, 0.08, 1)))
    result.add(Row.of("parallel_ceiling", {"n": 500}, 2, "seconds", Stat(0.05, 0.05, 0.05, 1)))
    result.add(Row.of("polybus", {"n": 500, "mode": "stateful", "transport": "shm"}, 2,
                      "seconds", Stat(0.0625, 0.0625, 0.0625, 1)))
    _ratios(result, 500, 2)
    got = {r.name: r.value for r in result.ratios}
    assert got["one_process / parallel_ceiling n=500 processes=2 (this machine's most)"] == pytest.approx(1.6)
    assert got["parallel_ceiling / polybus stateful seconds n=500 servers=2 (polybus shm)"] == pytest.approx(0.8)


def _no_memory(n: int, rep: int) -> tuple[object, object]:
    raise MemoryError("no room for the matrices")


def test_a_ceiling_process_that_dies_is_an_error_not_a_hang() -> None:
    with pytest.raises(RuntimeError, match=r"ended.* before it said 'ready'"):
        ceiling_seconds(64, 2, 2, 16, _no_memory, _order(2, 0))
    assert not mp.active_children()
