"""What `polybus sweep` says after its table of the runs' results (sweepsame.py): that
every strategy gave the same result, or which combinations did not and which varied key
made the difference, and which were not deterministic or had no digest."""

from __future__ import annotations

from collections.abc import Sequence

from polybus.cli.sweep_table import short_names
from polybus.sweep import Cell, Sweep
from polybus.sweepargs import shown_values
from polybus.sweepsame import Classes, Results, compare_results, computing

__all__ = ["SHOWN", "results", "results_said"]

SHOWN = 6  # combinations named in a line at most (then "and N more")


def results(sweep: Sweep) -> Results:
    return compare_results(sweep.cells, [k for k, _ in sweep.varies])


def _label(sweep: Sweep, cell: Cell, keys: Sequence[str]) -> str:
    short = short_names([k for k, _ in sweep.varies])
    return ", ".join(f"{short[k]}={sweep.shown(cell)[k]}" for k in keys) or "every run"


def _some(names: Sequence[str]) -> str:
    more = len(names) - SHOWN
    return "; ".join(names[:SHOWN]) + (f"; and {more} more" if more > 0 else "")


def _classes(key: str, classes: Classes) -> str:
    """``key=shm gives a different result from tcp/ipc`` (the fewer values first), or
    ``key: 1, 2/4 and 8 each give a different result``."""
    if len(classes) == 2:
        few, many = sorted(classes, key=len)
        return f"{key}={'/'.join(few)} gives a different result from {'/'.join(many)}"
    names = ["/".join(c) for c in classes]
    return f"{key}: {', '.join(names[:-1])} and {names[-1]} each give a different result"


def _made_it(split: dict[str, Classes], others: bool) -> str:
    if not split:
        return ("no single varied key (no one key's values separate the different "
                "results: they depend on two or more together)")
    said = "; ".join(_classes(k, c) for k, c in split.items())
    if len(split) > 1:
        return f"{said} (each alone separates the results)"
    return f"{said}, whatever the other varied keys" if others else said


def _shown(sweep: Sweep, split: dict[str, Classes]) -> dict[str, Classes]:
    """``split``'s values as the table shows them (`shown_values`: "a,b" as a,b)."""
    values = dict(sweep.varies)
    return {k: tuple(tuple(shown_values(values.get(k, list(c))).get(v, v) for v in c)
                     for c in classes) for k, classes in split.items()}


def differ_by(sweep: Sweep, found: Results) -> list[str]:
    """The lines saying which varied key made each group of combinations that should
    agree give different results: one for every group when they say the same."""
    keys = [k for k, _ in sweep.varies]
    program = [k for k in keys if computing(k)]
    others = sum(not computing(k) for k in keys) > 1
    if all(s == found.split_by[0] for s in found.split_by):
        return [f"  what made the difference: {_made_it(_shown(sweep, found.split_by[0]), others)}"]
    return [f"  what made the difference at {_label(sweep, group[0], program)}: "
            f"{_made_it(_shown(sweep, split), others)}" for group, split in zip(found.differing,
                                                                  found.split_by,
                                                                  strict=True)]


def results_said(sweep: Sweep, found: Results | None = None) -> list[str]:
    """The lines: ``results: ...`` (notes), and ``polybus sweep: warning: ...`` with a
    line per combination when a strategy changed a result."""
    found = results(sweep) if found is None else found
    keys = [k for k, _ in sweep.varies]
    strategies = [k for k in keys if not computing(k)]
    program = [k for k in keys if computing(k)]
    lines: list[str] = []
    if found.not_deterministic:
        names = [f"{_label(sweep, c, keys)}: {', '.join(sorted(set(map(str, c.digests))))}"
                 for c in found.not_deterministic]
        lines.append(f"results: not deterministic (the runs of one combination gave "
                     f"different results: unseeded randomness, a time it measured...), so "
                     f"not compared with the others: {_some(names)}")
    if found.no_digest:
        names = [_label(sweep, c, keys) for c in found.no_digest]
        lines.append(f"results: not compared, no digest ({found.no_digest[0].no_digest}): "
                     f"{_some(names)}")
    if found.differing:
        at = f" at the same {', '.join(short_names(keys)[k] for k in program)}" \
            if program else ""
        lines.append(f"polybus sweep: warning: a strategy changed the program's result: "
                     f"combinations that differ only in "
                     f"{', '.join(short_names(keys)[k] for k in strategies)}{at} gave "
                     f"different results (digests):")
        for group in found.differing:
            lines.extend(f"  {_label(sweep, c, keys)}: {c.digests[0]}" for c in group)
        lines.extend(differ_by(sweep, found))
        if sweep.runs[1] == 1:
            lines.append("  (one run each: a program that is not deterministic looks the "
                         "same; --repeat 2 or more tells them apart)")
    elif found.compared and len(found.digests) == 1:
        which = "every other" if found.not_deterministic or found.no_digest else "every"
        # (not every one did, or gave a result: a failed cell has none to agree with)
        ran = (" that succeeded" if not all(c.ok for c in sweep.cells) else
               " that ran" if sweep.interrupted is not None else "")
        lines.append(f"results: the same in {which} combination{ran} (digest "
                     f"{next(iter(found.digests))})")
    elif found.compared:  # (a failed cell gave no result: said, as above)
        ran = (", in the combinations that succeeded" if not all(c.ok for c in sweep.cells)
               else ", in the combinations that ran" if sweep.interrupted is not None else "")
        lines.append(f"results: the same across "
                     f"{', '.join(short_names(keys)[k] for k in strategies)} at each "
                     f"{', '.join(short_names(keys)[k] for k in program)}{ran} "
                     f"(digests in --json/--csv)")
    elif program and sum(c in found.ran for c in sweep.cells) > 1:
        # (each combination ran another program, --tie of the args with a strategy:
        # said, or the silence reads as if the check had not been made)
        lines.append(f"results: not compared (a result is compared between combinations "
                     f"that differ in strategies alone, and each of these runs the program "
                     f"with other {', '.join(short_names(keys)[k] for k in program)})")
    return lines
