"""matmul's headline speedup, one process against polybus in interleaved rounds.

The matmul benchmark times the one-process loop once per size, before every polybus
row of that size; the stateful ``shm`` row at the largest size runs a minute or more
later. On this project's VMs one process's time drifts by 10-20% over a minute (42-54
ms at N=1000 in one sitting), so that ratio carries the drift of whichever ran at the
slower moment. Here the two run back to back in each of ``rounds`` rounds (one process,
then polybus), each round's ratio of medians is one figure, and the row is the median of
those: a drift slower than a round falls on both sides of each ratio alike.
"""

from __future__ import annotations

from collections.abc import Callable

from polybus.bench.report import BenchResult, Ratio, Row
from polybus.bench.stats import Stat, summarize

__all__ = ["ROUNDS", "paired_speedup"]

ROUNDS = 5


def paired_speedup(result: BenchResult, n: int, k: int, rounds: int,
                   one: Callable[[], Stat], mine: Callable[[], Stat]) -> Stat:
    """``rounds`` rounds of ``one()`` (one process) then ``mine()`` (polybus stateful
    over shm, ``k`` servers); each round's ``one / mine`` of medians. Recorded as the
    polybus row ``interleaved=rounds`` (metric speedup) and a ratio of record."""
    ratios = []
    for _ in range(rounds):
        base = one()
        ratios.append(base.median / mine().median)
    st = summarize(ratios)
    result.add(Row.of("polybus", {"n": n, "mode": "stateful", "transport": "shm",
                                  "interleaved": rounds}, k, "speedup", st))
    result.ratios.append(Ratio(
        f"one_process / polybus stateful seconds n={n} servers={k} (polybus shm), back to "
        f"back in each of {rounds} rounds (median of the rounds' ratios)", st.median))
    return st
