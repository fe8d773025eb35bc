"""The sweep's CSV says whether the sweep finished, as its JSON's ``complete`` does: a
last column ``complete`` (True or False on every row), which any CSV reader takes as it
takes the others (a ``#`` comment line would need pandas' comment='#')."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from polybus.sweep import run_sweep


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_a_finished_sweep_csv_is_complete_on_every_row() -> None:
    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 2, lambda p, s: 1.0)
    rows = _rows(sweep.to_csv())
    assert sweep.to_csv().splitlines()[0].endswith(",error,complete,digests")
    assert [r["complete"] for r in rows] == ["True", "True"]


def test_an_interrupted_sweep_csv_says_so_on_every_row() -> None:
    calls = []

    def runner(path: str, sets: Sequence[str]) -> float:
        calls.append(sets)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return 1.0

    sweep = run_sweep("a.toml", [("modules.s.replication", ["1", "2"])], 2, runner)
    assert sweep.to_dict()["complete"] is False
    rows = _rows(sweep.to_csv())
    assert len(rows) == 2 and [r["complete"] for r in rows] == ["False", "False"]
