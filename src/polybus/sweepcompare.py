"""`polybus sweep`'s comparisons: speedup against the baseline's cell with the other
varied values the same, and efficiency along a replica count (`compare`). Apart from
sweep.py, which runs the cells and holds them; tested through it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.sweep import Cell

__all__ = ["Expand", "compare", "efficiency_reference", "replicas", "served", "short"]

Expand = Callable[[Mapping[str, str]], dict[str, str]]
"""Values of some varied keys -> those with the values of the keys tied to them."""


def replicas(key: str, value: str) -> float | None:
    """The number of replicas a value of a ``...replication`` key stands for, as the run
    reads it (config/replication.py): a count (``2``, ``"2"``) or the replicas a string
    names, conditions and migration paths and all (``"a(oc=(load>1),uc=(load<1)),b"``
    and ``"a#b"`` are two); None for a value that is neither. (Split at its commas, the
    first counted three, and the others none.)"""
    from polybus.config.overrides import override_value
    from polybus.config.replication import parse_replication
    from polybus.errors import ConfigError

    if not key.endswith("replication"):
        return None
    try:
        return float(len(parse_replication(override_value(value), "server")[0]))
    except ConfigError:
        return None


def served(cell: Cell, key: str) -> float | None:
    """The replicas of the module of ``key`` (``modules.<m>.replication``) that served
    each run of ``cell``, when its runs counted them and found as many each; else None.
    At a registry a run goes on with the workers registered, fewer than the replication
    may ask for (said once, by the run), so its efficiency is per replica that served."""
    parts = key.split(".")
    if len(parts) != 3 or parts[0] != "modules" or parts[2] != "replication":
        return None
    counts = set(cell.replicas.get(parts[1], ()))
    return float(counts.pop()) if len(counts) == 1 else None


def short(cells: Sequence[Cell], key: str) -> list[tuple[Cell, int, int]]:
    """The cells with a figure whose runs found fewer replicas of ``key``'s module than
    their value of ``key`` asks for: each with the count that served and the count
    asked."""
    out = []
    for c in cells:
        n, asked = served(c, key), replicas(key, c.config.get(key, ""))
        if c.ok and n is not None and asked is not None and n < asked:
            out.append((c, int(n), int(asked)))
    return out


def _count(cell: Cell, key: str, value: str) -> float | None:
    """The replicas that served ``cell`` (at a registry, fewer than asked: `served`),
    else as ``key``'s ``value`` reads."""
    n = served(cell, key)
    return replicas(key, value) if n is None else n


def efficiency_reference(configs: Sequence[Mapping[str, str]], baseline: Mapping[str, str]
                         ) -> tuple[str, str] | None:
    """The replication key efficiency is measured along, and the value it is measured
    against: the baseline's replication key if it has one, else the first varied
    replication key at its first value (so ``--vary callstyle=sync,async --vary
    replication=1,2`` still has an efficiency); None when no replica count is varied,
    a replication varied over names of as many replicas each (``"slow:speed=0.25"``,
    ``"fast"``: one server at a time) included. ``configs`` are the combinations asked
    for, not only those that ran: a sweep interrupted before its second replica count
    varied it all the same."""

    def counts_vary(key: str) -> bool:
        counts = {replicas(key, c[key]) for c in configs if key in c}
        return len(counts - {None}) > 1

    for key, base in baseline.items():
        if replicas(key, base) is not None and counts_vary(key):  # (0 too: the client alone)
            return key, base
    first = configs[0] if configs else {}
    return next(((k, v) for k, v in first.items()
                 if replicas(k, v) is not None and counts_vary(k)), None)


def compare(cells: Sequence[Cell], baseline: Mapping[str, str],
            expand: Expand = dict, planned: Sequence[Mapping[str, str]] | None = None) -> None:
    """Speedup (baseline median / median) against the baseline with the other keys equal.

    Efficiency is (reference median / median) / (replicas / reference replicas), the
    reference the cell at ``efficiency_reference`` (the baseline's replica count, else
    the first) with every other key equal, whatever else the baseline names: so it is
    the speedup per replica when the baseline is a replication count alone, and always
    1 at the reference's count. A reference of 0 replicas (the client alone, the
    papers' sequential baseline) divides by the replicas themselves; a cell of 0
    replicas has none (no servers to share the work). (With ``--baseline callstyle=sync,replication=1`` it
    was against the baseline's cell, callstyle and all: 2.0 at one replica.) None when
    no replication count is varied.
    """
    by_config = {tuple(sorted(c.config.items())): c for c in cells}

    def ok_cell(config: Mapping[str, str]) -> Cell | None:
        found = by_config.get(tuple(sorted(config.items())))
        return found if found is not None and found.ok else None

    along = efficiency_reference([c.config for c in cells] if planned is None else planned,
                                 expand(baseline))
    for c in cells:
        if not c.ok or c.median <= 0:
            continue
        ref = ok_cell({**c.config, **expand(baseline)})
        if ref is not None:
            c.speedup = ref.median / c.median
        if along is None:
            continue
        key, value = along
        ref = ok_cell({**c.config, **expand({key: value})})
        if ref is None:
            continue
        p, p0 = _count(c, key, c.config[key]), _count(ref, key, value)
        if p and p0 is not None:  # (p = 0: no servers, no efficiency)
            c.efficiency = ref.median / c.median / (p / p0 if p0 else p)
