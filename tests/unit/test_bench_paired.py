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


def test_a_variant_runs_in_the_same_rounds_with_a_row_and_ratio_of_its_own() -> None:
    log: list[str] = []

    def timed(name: str, t: float) -> Stat:
        log.append(name)
        return Stat(t, t, t, 7)

    result = BenchResult("matmul")
    st = paired_speedup(result, 1000, 2, 2, lambda: timed("one", 0.046),
                        lambda: timed("plain", 0.030),
                        {"coalesce=50ms": lambda: timed("coalesce", 0.023)})
    assert log == ["one", "plain", "coalesce"] * 2
    assert st.median == pytest.approx(0.046 / 0.030)
    plain = result.find("polybus", 2, "speedup", {"n": 1000, "interleaved": 2})
    held = result.find("polybus", 2, "speedup", {"n": 1000, "interleaved": 2,
                                                 "coalesce": "50ms"})
    assert plain is not None and plain.median == pytest.approx(0.046 / 0.030)
    assert held is not None and held.median == pytest.approx(2.0)
    assert "coalesce" not in plain.config
    names = [r.name for r in result.ratios]
    assert len(names) == 2 and "(polybus shm coalesce=50ms)" in names[1]
    assert result.ratios[1].value == pytest.approx(2.0)
