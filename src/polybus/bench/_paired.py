"""matmul's headline speedup, one process against polybus in interleaved rounds.

The matmul benchmark times the one-process loop once per size, before every polybus
row of that size; the stateful ``shm`` row at the largest size runs a minute or more
later. On this project's VMs one process's time drifts by 10-20% over a minute (42-54
ms at N=1000 in one sitting), so that ratio carries the drift of whichever ran at the
slower moment. Here the two run back to back in each of ``rounds`` rounds (one process,
then polybus), each round's ratio of medians is one figure, and the row is the median of
those: a drift slower than a round falls on both sides of each ratio alike. Variants
of the polybus configuration (``coalesce``: worker/bells.py) run in the same rounds,
each right after the plain one, with rows and ratios of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from polybus.bench.report import BenchResult, Ratio, Row
from polybus.bench.stats import Stat, summarize
from polybus.plural import plural

__all__ = ["ROUNDS", "paired_speedup"]

ROUNDS = 5


def paired_speedup(result: BenchResult, n: int, k: int, rounds: int,
                   one: Callable[[], Stat], mine: Callable[[], Stat],
                   variants: Mapping[str, Callable[[], Stat]] | None = None) -> Stat:
    """``rounds`` rounds of ``one()`` (one process) then ``mine()`` (polybus stateful
    over shm, ``k`` servers) and each of ``variants`` (``"key=value"``: that setting
    changed); each round's ``one / polybus`` of medians. Recorded as polybus rows
    ``interleaved=rounds`` (metric speedup; a variant's config has its setting) and
    ratios of record. Returns the plain configuration's."""
    systems = {"": mine, **(variants or {})}
    ratios: dict[str, list[float]] = {label: [] for label in systems}
    for _ in range(rounds):
        base = one()
        for label, fn in systems.items():
            ratios[label].append(base.median / fn().median)
    stats = {label: summarize(rs) for label, rs in ratios.items()}
    for label, st in stats.items():
        config: dict[str, str | int] = {"n": n, "mode": "stateful", "transport": "shm",
                                        "interleaved": rounds}
        key, _, value = label.partition("=")
        if key:
            config[key] = value
        result.add(Row.of("polybus", config, k, "speedup", st))
        result.ratios.append(Ratio(
            f"one_process / polybus stateful seconds n={n} servers={k} (polybus shm"
            f"{' ' + label if label else ''}), back to back in each of {plural(rounds, 'round')} "
            f"(median of the rounds' ratios)", st.median))
    return stats[""]
