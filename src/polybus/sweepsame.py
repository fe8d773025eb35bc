"""Whether every strategy of a `polybus sweep` gave the same result.

Each run keeps a digest of its result (resultdigest.py). Combinations that differ only
in keys that do not change what the program computes (strategies: replication, call
style, aggregation, transport...) must give one result; those that differ in what the
program is given (a module's ``args``, ``kwargs``, ``entrypoint`` or ``source``, varied
or tied with --tie, or a binding: which function a call runs) may not, and are not
compared. A combination whose runs gave different results is not deterministic
(unseeded randomness, a time it measured) and is compared with none. Where a group of
cells that should agree does not, the varied strategy keys whose values alone separate
its results (`splits`: every cell with ``transport=shm`` gave one digest, every other
another) say which strategy made the difference. Apart from sweep.py, which holds the
cells; said by cli/sweep_results.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polybus.sweep import Cell

__all__ = ["COMPUTING", "Classes", "Results", "compare_results", "computing", "splits"]

Classes = tuple[tuple[str, ...], ...]
"""A key's values in a group, grouped by the result they gave: each class one digest,
the classes different ones (``(("shm",), ("tcp", "ipc"))``), in the order the values
first came."""

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
    yet gave different results (``differing``), for each of those the strategy keys
    whose values alone separate its results (``split_by``, as `splits`; empty when no
    single key does), how many groups of two cells or more were compared, and the
    deterministic cells (``ran``), those groups' and the lone ones'."""

    not_deterministic: list[Cell] = field(default_factory=list)
    no_digest: list[Cell] = field(default_factory=list)
    differing: list[list[Cell]] = field(default_factory=list)
    split_by: list[dict[str, Classes]] = field(default_factory=list)  # (as differing)
    compared: int = 0
    digests: set[str] = field(default_factory=set)  # of the deterministic cells
    ran: list[Cell] = field(default_factory=list)  # the deterministic cells (compared or not)

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
        out.ran.append(c)
    for group in groups.values():
        found = {digest(c) for c in group}
        out.digests |= {d for d in found if d is not None}
        if len(group) > 1:
            out.compared += 1
            if len(found) > 1:
                out.differing.append(group)
                out.split_by.append(splits(group, [k for k in keys if not computing(k)]))
    return out


def splits(group: Sequence[Cell], strategies: Sequence[str]) -> dict[str, Classes]:
    """The keys of ``strategies`` whose value alone decides the result of each cell of
    ``group`` (deterministic cells that should agree and do not), each with its values
    grouped by the result they gave: every cell with one value of the key gave one
    digest, and the values did not all give the same. Several keys when they move
    together (--tie); none when the result depends on two keys or more at once."""
    out: dict[str, Classes] = {}
    for key in strategies:
        gave: dict[str, set[str | None]] = {}
        for c in group:
            gave.setdefault(c.config[key], set()).add(digest(c))
        if any(len(d) != 1 for d in gave.values()):
            continue  # (one value of the key, several results: not this key alone)
        classes: dict[str | None, list[str]] = {}
        for value, d in gave.items():
            classes.setdefault(next(iter(d)), []).append(value)
        if len(classes) > 1:
            out[key] = tuple(tuple(vs) for vs in classes.values())
    return out
