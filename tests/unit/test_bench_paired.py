"""matmul's interleaved speedup: one process and polybus back to back in each round, the
row the median of the rounds' ratios (stand-in measurements: order and arithmetic only)."""

from __future__ import annotations

import pytest

from polybus.bench._paired import paired_speedup
from polybus.bench.report import BenchResult
from polybus.bench.stats import Stat


def test_each_round_pairs_one_process_with_polybus_and_the_row_is_their_median() -> None:
    log: list[str] = []
    one_s = iter([0.044, 0.046, 0.088])  # the machine twice as slow in the third round
    mine_s = iter([0.029, 0.028, 0.058])

    def one() -> Stat:
        log.append("one")
        t = next(one_s)
        return Stat(t, t, t, 7)

    def mine() -> Stat:
        log.append("polybus")
        t = next(mine_s)
        return Stat(t, t, t, 7)

    result = BenchResult("matmul")
    st = paired_speedup(result, 1000, 2, 3, one, mine)
    assert log == ["one", "polybus"] * 3
    ratios = sorted([0.044 / 0.029, 0.046 / 0.028, 0.088 / 0.058])
    assert st.median == pytest.approx(ratios[1]) and st.n == 3
    assert st.min == pytest.approx(ratios[0]) and st.max == pytest.approx(ratios[2])
    row = result.find("polybus", 2, "speedup", {"n": 1000, "interleaved": 3})
    assert row is not None and row.median == pytest.approx(ratios[1])
    (ratio,) = result.ratios
    assert ratio.name.startswith("one_process / polybus stateful seconds n=1000 servers=2")
    assert ratio.value == pytest.approx(ratios[1])
