"""Whether every strategy of a `polybus sweep` gave the same result.

Each run keeps a digest of its result (resultdigest.py). Combinations that differ only
in keys that do not change what the program computes (strategies: replication, call
style, aggregation, transport...) must give one result; those that differ in what the
program is given (a module's ``args``, ``kwargs``, ``entrypoint`` or ``source``, varied
or tied with --tie, or a binding: which function a call runs) may not, and are not
compared. A combination whose runs gave different results is not deterministic
(unseeded randomness, a time it measured) and is compared with none. Apart from sweep.py, which holds the cells; said by
cli/sweep_results.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.sweep import Cell

__all__ = ["COMPUTING", "Results", "compare_results", "computing"]

COMPUTING = ("args", "kwargs", "entrypoint", "source")
"""A module's keys that change what the program computes (``modules.<m>.<key>``)."""


def computing(key: str) -> bool:
    """Whether a varied key changes what the program computes, not how it runs: a
    module's `COMPUTING` keys, or a binding (``bind."client.f"``: which function a call
    runs)."""
    parts = key.split(".")
    return (len(parts) >= 3 and parts[0] == "modules" and parts[2] in COMPUTING) \
        or (len(parts) >= 2 and parts[0] == "bind")


@dataclass
class Results:
    """The comparison: cells whose runs differ (not deterministic), cells with no digest
    (the result had no stable encoding), groups of cells that differ only in strategies
    yet gave different results (``differing``), and how many groups of two cells or
    more were compared."""

    not_deterministic: list[Cell] = field(default_factory=list)
    no_digest: list[Cell] = field(default_factory=list)
    differing: list[list[Cell]] = field(default_factory=list)
    compared: int = 0
    digests: set[str] = field(default_factory=set)  # of the deterministic cells

    @property
    def changed(self) -> bool:
        """A strategy changed a result."""
        return bool(self.differing)


def digest(cell: Cell) -> str | None:
    """The result every run of ``cell`` gave (None if they differ or have none)."""
    found = set(cell.digests)
    return next(iter(found)) if len(found) == 1 and None not in found else None


def compare_results(cells: Sequence[Cell], keys: Sequence[str]) -> Results:
    """Compare the results of ``cells`` (those that succeeded) whose values of the
    computing keys among ``keys`` (the varied ones) are the same."""
    out = Results()
    groups: dict[tuple[str, ...], list[Cell]] = {}
    program = [k for k in keys if computing(k)]
    for c in cells:
        if not c.ok or not c.digests:
            continue
        if None in c.digests:
            if c.no_digest is not None:
                out.no_digest.append(c)
            continue  # (the runner kept none: nothing to compare, nothing to say)
        if len(set(c.digests)) > 1:
            out.not_deterministic.append(c)
            continue
        groups.setdefault(tuple(c.config[k] for k in program), []).append(c)
    for group in groups.values():
        found = {digest(c) for c in group}
        out.digests |= {d for d in found if d is not None}
        if len(group) > 1:
            out.compared += 1
            if len(found) > 1:
                out.differing.append(group)
    return out
