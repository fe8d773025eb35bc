"""A result digest compares values as the wire carries them (a tuple arrives as a list,
a dataclass as a dict, an enum as its value, a complex as two floats), so that a result
made in the client (``replication = 0``) and one that came from a replica agree; and
what else a sweep's comparison of results must get right."""

from __future__ import annotations

import dataclasses
import enum
import sys
from collections import namedtuple

import pytest

from polybus.cli.sweep_results import results_said
from polybus.resultdigest import result_digest
from polybus.sweep import Measured, run_sweep
from polybus.sweepsame import computing

REP = "modules.server.replication"


@dataclasses.dataclass
class Point:
    x: int
    y: tuple[int, ...]


class Color(enum.Enum):
    RED = 1


Pair = namedtuple("Pair", "a b")


@pytest.mark.parametrize(("made", "arrived"), [
    ((1, 3), [1, 3]),
    (((1, 2), 3), [[1, 2], 3]),
    (Pair(1, 2), [1, 2]),
    ({"k": (1, 2)}, {"k": [1, 2]}),
    (Point(1, (2,)), {"x": 1, "y": [2]}),
    (Color.RED, 1),
    (1 + 2j, [1.0, 2.0]),
])
def test_a_value_and_the_form_the_wire_gives_it_have_one_digest(made: object,
                                                                arrived: object) -> None:
    assert result_digest(made) == result_digest(arrived)
    assert result_digest(made)[0] is not None


def test_values_that_differ_still_differ() -> None:
    values = [(1, 2), [2, 1], [1, 2, 3], {"x": 1, "y": [2]}, {"x": 1, "y": [3]}, 2, "1",
              [1.0, 2.5], [1.0, 2.0, 0.0]]
    digests = [result_digest(v)[0] for v in values]
    assert None not in digests and len(set(digests)) == len(values)


def test_an_int_of_any_size_has_a_digest() -> None:
    """(str() of an int past 4300 digits raises ValueError: it had no digest.)"""
    big = 10 ** (sys.get_int_max_str_digits() + 10) if hasattr(
        sys, "get_int_max_str_digits") else 10 ** 5000
    digest, why = result_digest(big)
    assert why is None and digest is not None
    assert digest != result_digest(big + 1)[0] and digest != result_digest(-big)[0]


def test_a_binding_varied_changes_what_the_program_computes() -> None:
    assert computing('bind."client.stats"') and computing("bind.client.stats")
    assert not computing("modules.client.use.stats.callstyle")


def test_an_interrupted_sweep_does_not_say_every_combination() -> None:
    """Two of three combinations ran before Ctrl-C: their agreement is not every
    combination's."""
    def runner(path: str, sets: object) -> Measured:
        if f"{REP}=4" in list(sets):  # type: ignore[call-overload]
            raise KeyboardInterrupt
        return Measured(1.0, None, None, *result_digest(42))

    sweep = run_sweep("a.toml", [(REP, ["1", "2", "4"])], 1, runner)
    assert sweep.interrupted is not None and len(sweep.cells) == 2
    lines = results_said(sweep)
    assert len(lines) == 1
    assert lines[0].startswith("results: the same in every combination that ran")


def test_a_large_bytearray_is_read_in_place_not_copied() -> None:
    """(Its digest made a copy of it: a result of 1 GB took 1 GB more.)"""
    import tracemalloc

    big = bytearray(50_000_000)
    tracemalloc.start()
    try:
        digest = result_digest(big)[0]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert digest == result_digest(bytes(big))[0] and digest is not None
    assert peak < 5_000_000, peak
