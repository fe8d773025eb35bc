"""What a sweep's figures are of: --repeat once every round ran; after Ctrl-C the runs
each cell has (an interrupted round leaves some cells a run short), in the title, a
runs column when cells differ, and each cell's count in the JSON."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console

from polybus.cli.sweep_table import table, title
from polybus.sweep import Sweep, run_sweep

VARIES = [("modules.server.replication", ["1", "2", "4"])]


def _sweep(stop_at: int | None, repeat: int = 3) -> Sweep:
    """A sweep of three cells whose run number ``stop_at`` is interrupted by Ctrl-C."""
    calls: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> float:
        calls.append(sets)
        if len(calls) == stop_at:
            raise KeyboardInterrupt
        return 1.0

    return run_sweep("a.toml", VARIES, repeat, runner)


def _shown(sweep: Sweep) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200).print(table(sweep))
    return buf.getvalue()


def test_a_whole_sweep_says_repeat_and_has_no_runs_column() -> None:
    sweep = _sweep(None)
    assert "median [min\u2013max] of 3; speedup" in title(sweep)
    assert "runs" not in _shown(sweep)
    assert [c["n"] for c in sweep.to_dict()["cells"]] == [3, 3, 3]


def test_interrupted_after_two_rounds_says_two_runs_not_three() -> None:
    sweep = _sweep(7)  # the third round's first run: every cell has two
    said = title(sweep)
    assert "median [min\u2013max] of 2 runs (3 asked); speedup" in said, said
    assert "of 3;" not in said and "runs" not in _shown(sweep)
    assert said.endswith("(interrupted: every combination ran, not every round)"), said
    assert [c["n"] for c in sweep.to_dict()["cells"]] == [2, 2, 2]


def test_interrupted_in_the_second_round_says_one_run_not_one_runs() -> None:
    sweep = _sweep(4)  # the second round's first run: every cell has one
    said = title(sweep)
    assert "elapsed s of 1 run (3 asked); speedup" in said, said  # (no range of one)


def test_interrupted_mid_round_says_the_range_and_each_cells_count() -> None:
    sweep = _sweep(8)  # the third round's second run: the first cell has three, others two
    said = title(sweep)
    assert "of 2\u20133 runs (3 asked; each cell's in the runs column)" in said, said
    rows = [line for line in _shown(sweep).splitlines() if "[1" in line]
    assert "runs" in _shown(sweep) and len(rows) == 3
    assert [row.split("\u2502")[3].strip() for row in rows] == ["3", "2", "2"]
    assert [c["n"] for c in sweep.to_dict()["cells"]] == [3, 2, 2]


def test_a_failed_cell_does_not_count_and_shows_no_runs() -> None:
    def runner(path: str, sets: Sequence[str]) -> float:
        if "modules.server.replication=4" in sets:
            raise RuntimeError("no")
        return 1.0

    sweep = run_sweep("a.toml", VARIES, 2, runner)
    assert "of 2; speedup" in title(sweep)


def _later_failure(fail_at: int) -> Sweep:
    """Three cells of three runs, with bytes; replication=2 fails at its run ``fail_at``
    (the runs are in rounds: its run k is call 3 * (k - 1) + 2)."""
    from polybus.sweep import Measured

    calls: list[Sequence[str]] = []

    def runner(path: str, sets: Sequence[str]) -> Measured:
        calls.append(sets)
        if len(calls) == 3 * (fail_at - 1) + 2:
            raise RuntimeError("worker died")
        return Measured(1.0, 100, 50)

    return run_sweep("a.toml", VARIES, 3, runner)


def test_a_cell_that_fails_in_a_later_run_says_how_many_succeeded() -> None:
    # It said only "failed: ..." beside the bytes of the run before the failure, and the
    # JSON had median null while elapsed_s held the good run.
    sweep = _later_failure(2)
    row = next(line for line in _shown(sweep).splitlines() if "failed" in line)
    cells = [c.strip() for c in row.split("\u2502")[1:-1]]
    assert cells == ["2", "failed in run 2 of 3 (1 succeeded, 1 not run): RuntimeError: "
                     "worker died", "\u2013", "\u2013", "\u2013", "\u2013"]
    failed = sweep.to_dict()["cells"][1]
    assert (failed["runs"], failed["runs_ok"], failed["n"]) == (2, 1, 1)
    assert (failed["median"], failed["bytes_sent_median"], failed["bytes_received_median"],
            failed["speedup"]) == (None, None, None, None)
    assert failed["elapsed_s"] == [1.0] and failed["error"] == "RuntimeError: worker died"
    whole = sweep.to_dict()["cells"][0]
    assert (whole["runs"], whole["runs_ok"], whole["bytes_sent_median"]) == (3, 3, 100)
    header, first, second = sweep.to_csv().splitlines()[:3]
    assert header.split(",")[1:7] == ["median_s", "min_s", "max_s", "n", "runs", "speedup"]
    assert second == "2,,,,1,2,,,,,RuntimeError: worker died,True,"  # (no digest kept)
    assert first.startswith("1,1.0,1.0,1.0,3,3,1.0,")


def test_a_cell_that_fails_at_once_or_at_its_last_run() -> None:
    from polybus.cli.sweep_table import failed

    first, last = _later_failure(1).cells[1], _later_failure(3).cells[1]
    assert failed(first, 3) == "failed in run 1 of 3 (2 not run)"
    assert failed(last, 3) == "failed in run 3 of 3 (2 succeeded)"
    assert failed(first, 1) == "failed"


def test_the_title_says_the_set_overrides_every_run_had() -> None:
    # (they were only in the JSON's "set": a table read alone did not say what was fixed)
    sweep = run_sweep("a.toml", VARIES, 1, lambda path, sets: 1.0,
                      fixed=["modules.server.transport=shm", "modules.client.args=[9]"])
    said = title(sweep)
    assert said.startswith("sweep a.toml (with --set modules.server.transport=shm, "
                           "modules.client.args=[9]): elapsed s")
    assert "--set" not in title(_sweep(None))
