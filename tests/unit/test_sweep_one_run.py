"""`polybus sweep --repeat 1`: each cell's time alone, not a range of one sample
(``0.012 [0.012-0.012]``), and --help says how many runs give a range."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from rich.console import Console

from polybus.cli.main import main
from polybus.cli.sweep_table import elapsed, table, title
from polybus.sweep import Sweep, run_sweep

VARIES = [("modules.server.replication", ["1", "2"])]


def _times(sweep: Sweep) -> list[str]:
    """The elapsed column as shown."""
    buf = io.StringIO()
    Console(file=buf, width=200).print(table(sweep))
    rows = [line.split("\u2502") for line in buf.getvalue().splitlines() if "\u2502" in line]
    return [row[2].strip() for row in rows]


def _runner(path: str, sets: Sequence[str]) -> float:
    return 0.5 / int(sets[-1].rsplit("=", 1)[1])


def test_one_run_shows_the_time_alone() -> None:
    sweep = run_sweep("a.toml", VARIES, 1, _runner)
    assert _times(sweep) == ["0.5", "0.25"]
    said = title(sweep)
    assert said.startswith("sweep a.toml: elapsed s of 1 run; speedup vs"), said
    assert "min" not in said
    cell = sweep.to_dict()["cells"][0]  # (the JSON keeps its fields: one sample's all three)
    assert (cell["median"], cell["min"], cell["max"]) == (0.5, 0.5, 0.5)


def test_two_runs_or_more_show_the_median_and_range() -> None:
    sweep = run_sweep("a.toml", VARIES, 2, _runner)
    assert _times(sweep) == ["0.5 [0.5\u20130.5]", "0.25 [0.25\u20130.25]"]
    assert "elapsed s, median [min\u2013max] of 2; speedup" in title(sweep)
    assert elapsed([3.0, 1.0, 2.0]) == "2 [1\u20133]" and elapsed([1.5]) == "1.5"


def test_a_cell_of_one_run_in_an_interrupted_sweep_has_no_range() -> None:
    calls: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        calls.append(sets)
        if len(calls) == 4:  # the second round's second run: replication=2 has one run
            raise KeyboardInterrupt
        return 1.0

    sweep = run_sweep("a.toml", VARIES, 3, runner)
    assert _times(sweep) == ["1 [1\u20131]", "1"]


def test_help_says_how_many_runs_give_a_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "with --repeat 1 each run's time alone, no range (3 or more for a median" in said
