"""Efficiency (speedup per replica) has a value only when a replication count is varied:
without one the table has no efficiency column and the line above it says why, once,
and the JSON and CSV leave it null and empty alike."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from polybus.cli.sweep_table import table, title
from polybus.sweep import Sweep, run_sweep

CALLSTYLE = ("modules.client.use.f.callstyle", ["sync", "async"])
REPLICATION = ("modules.server.replication", ["1", "2"])


def _runner(path: str, sets: Sequence[str]) -> float:
    if "modules.server.replication=2" in sets and "modules.client.use.f.callstyle=async" in sets:
        raise RuntimeError("no")
    per = 2.0 if "modules.client.use.f.callstyle=sync" in sets else 1.0
    return per / (2 if "modules.server.replication=2" in sets else 1)


def _csv(sweep: Sweep) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(sweep.to_csv())))


def test_no_replication_varied_no_efficiency_column_and_said_once() -> None:
    # A new user's sweep of callstyle alone had an efficiency column of dashes.
    sweep = run_sweep("a.toml", [CALLSTYLE], 1, _runner)
    headers = [c.header for c in table(sweep).columns]
    assert headers == ["callstyle", "elapsed s", "speedup"]
    said = title(sweep)
    assert said.count("efficiency") == 1
    assert "; no efficiency column (no replication count is varied)" in said, said
    data = sweep.to_dict()
    assert data["efficiency_vs"] is None
    assert [c["efficiency"] for c in data["cells"]] == [None, None]
    assert [row["efficiency"] for row in _csv(sweep)] == ["", ""]  # (the column kept, empty)


def test_a_varied_replication_keeps_the_column_and_a_failed_cell_its_dash() -> None:
    sweep = run_sweep("a.toml", [CALLSTYLE, REPLICATION], 1, _runner)
    t = table(sweep)
    headers = [c.header for c in t.columns]
    assert headers == ["callstyle", "replication", "elapsed s", "speedup", "efficiency"]
    assert list(t.columns[-1].cells) == ["1", "1", "1", "\u2013"]  # async, 2: failed
    assert "no efficiency column" not in title(sweep)
    data = sweep.to_dict()
    assert data["efficiency_vs"] == {"modules.server.replication": 1}
    assert [c["efficiency"] for c in data["cells"]] == [1.0, 1.0, 1.0, None]
    assert [row["efficiency"] for row in _csv(sweep)] == ["1.0", "1.0", "1.0", ""]


def test_replication_varied_by_names_of_one_replica_each_has_no_efficiency() -> None:
    # Kim and Purtilo's Table 1(a), each server alone in turn: the replication varied
    # over one named replica at a time gave an "efficiency" equal to the speedup
    # (5.97 on the fastest server), though the replica count never changed.
    names = ("modules.server.replication", ['"slow:speed=0.25"', '"fast"'])

    def runner(path: str, sets: Sequence[str]) -> float:
        return 4.0 if any("slow" in s for s in sets) else 1.0

    sweep = run_sweep("a.toml", [names, CALLSTYLE], 1, runner)
    assert [c.speedup for c in sweep.cells] == [1.0, 1.0, 4.0, 4.0]
    assert [c.efficiency for c in sweep.cells] == [None] * 4
    assert sweep.efficiency_vs is None
    assert "efficiency" not in [c.header for c in table(sweep).columns]
    assert "; no efficiency column (no replication count is varied)" in title(sweep)


def test_replication_varied_by_names_of_different_counts_keeps_efficiency() -> None:
    names = ("modules.server.replication", ['"a"', '"a,b"'])

    def runner(path: str, sets: Sequence[str]) -> float:
        return 1.0 if any('"a,b"' in s for s in sets) else 2.0

    sweep = run_sweep("a.toml", [names], 1, runner)
    assert [c.efficiency for c in sweep.cells] == [1.0, 1.0]
