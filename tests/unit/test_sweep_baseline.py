"""What speedup and efficiency are compared against, and the line above the table that
says so exactly. Speedup: the baseline's cell with the other varied values the same.
Efficiency: along the replica count, at the baseline's count (else the first), with
every other value the same, whatever else the baseline names."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from polybus.cli.sweep_table import compared, title
from polybus.sweep import Sweep, run_sweep
from polybus.sweepargs import parse_baseline

CALLSTYLE = ("modules.client.use.f.callstyle", ["sync", "async"])
REPLICATION = ("modules.server.replication", ["1", "2"])
TIMES = {("sync", "1"): 8.0, ("sync", "2"): 5.0, ("async", "1"): 4.0, ("async", "2"): 2.5}


def _sweep(varies: list[tuple[str, list[str]]], baseline: str | None) -> Sweep:
    def runner(path: str, sets: Sequence[str]) -> float:
        d = dict(s.rsplit(".", 1)[-1].split("=", 1) for s in sets)
        return TIMES[d["callstyle"], d["replication"]]

    return run_sweep("a.toml", varies, 1, runner, parse_baseline(baseline, varies))


def _figures(sweep: Sweep) -> dict[tuple[str, str], tuple[float | None, float | None]]:
    return {(c.config[CALLSTYLE[0]], c.config[REPLICATION[0]]): (c.speedup, c.efficiency)
            for c in sweep.cells}


@pytest.mark.parametrize(("varies", "baseline", "said"), [
    ([CALLSTYLE, REPLICATION], None,
     "speedup vs modules.client.use.f.callstyle=sync at the same replication; efficiency: "
     "speedup vs modules.server.replication=1 at the same callstyle, per replica"),
    ([REPLICATION, CALLSTYLE], "callstyle=async",  # (the baseline not the first --vary)
     "speedup vs modules.client.use.f.callstyle=async at the same replication; efficiency: "
     "speedup vs modules.server.replication=1 at the same callstyle, per replica"),
    ([CALLSTYLE, REPLICATION], "replication=1",
     "speedup vs modules.server.replication=1 at the same callstyle; efficiency: that "
     "speedup per replica"),
    ([CALLSTYLE, REPLICATION], "replication=2",
     "speedup vs modules.server.replication=2 at the same callstyle; efficiency: that "
     "speedup divided by replicas/2"),
    ([CALLSTYLE, REPLICATION], "callstyle=sync,replication=1",
     "speedup vs modules.client.use.f.callstyle=sync, modules.server.replication=1; "
     "efficiency: speedup vs modules.server.replication=1 at the same callstyle, per "
     "replica"),
    ([CALLSTYLE], None, "speedup vs modules.client.use.f.callstyle=sync; no efficiency "
     "column (no replication count is varied)"),
])
def test_the_title_says_what_each_column_is_compared_against(
        varies: list[tuple[str, list[str]]], baseline: str | None, said: str) -> None:
    # It said "speedup vs callstyle=async; efficiency per replica vs replication=1",
    # not which other values each kept, and nothing of efficiency when the baseline
    # was the replica count.
    if varies == [CALLSTYLE]:
        sweep = run_sweep("a.toml", varies, 1, lambda p, s: 1.0)
    else:
        sweep = _sweep(varies, baseline)
    assert compared(sweep) == said
    assert f"of 1 run; {said}" in title(sweep)


def test_speedup_keeps_the_other_values_and_efficiency_is_along_the_replicas() -> None:
    got = _figures(_sweep([REPLICATION, CALLSTYLE], "callstyle=async"))
    assert got["sync", "1"] == (0.5, 1.0)  # 4 / 8 against async at one replica
    assert got["sync", "2"] == (0.5, pytest.approx(0.8))  # 2.5 / 5; 8 / 5 / 2
    assert got["async", "2"] == (1.0, pytest.approx(0.8))  # 4 / 2.5 / 2


def test_a_baseline_of_two_keys_leaves_efficiency_along_the_replicas() -> None:
    # Efficiency was against the baseline's cell, callstyle and all: 2.0 at one replica
    # for async (its speedup over sync), not a replica's efficiency.
    got = _figures(_sweep([CALLSTYLE, REPLICATION], "callstyle=sync,replication=1"))
    assert got["async", "1"] == (2.0, 1.0)
    assert got["async", "2"] == (pytest.approx(3.2), pytest.approx(0.8))
    assert got["sync", "2"] == (pytest.approx(1.6), pytest.approx(0.8))


def test_a_tied_key_moves_with_the_baseline_and_is_not_among_the_same() -> None:
    varies = [("modules.server.replication", ["1", "2"]),
              ("modules.client.args", ["[1]", "[2]"]), CALLSTYLE]
    sweep = run_sweep("a.toml", varies, 1, lambda p, s: 1.0,
                      tied={"modules.client.args"})
    assert compared(sweep) == (
        "speedup vs modules.server.replication=1 at the same callstyle; efficiency: that "
        "speedup per replica")
