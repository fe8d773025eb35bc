"""A sweep against ``replication = 0``, the client alone (the papers' no-server base):
speedup against it, efficiency as speedup per replica, and none (a dash) in the cells of 0
replicas, which have no servers to share the work."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from polybus.cli.sweep_table import DASH, table, title
from polybus.sweep import run_sweep

KEY = "modules.server.replication"
STYLE = "modules.client.use.f.callstyle"
TIMES = {"0": 8.0, "1": 10.0, "2": 5.0, "4": 4.0}  # (one server is slower than none)


def _runner(path: str, sets: Sequence[str]) -> float:
    n = next(s.partition("=")[2] for s in sets if s.startswith(KEY + "="))
    return TIMES[n] * (2 if f"{STYLE}=sync" in sets else 1)


def test_speedup_and_efficiency_against_the_client_alone() -> None:
    sweep = run_sweep("a.toml", [(KEY, ["0", "1", "2", "4"])], 1, _runner, {KEY: "0"})
    assert [c.speedup for c in sweep.cells] == [1.0, 0.8, 1.6, 2.0]
    assert [c.efficiency for c in sweep.cells] == [None, 0.8, 0.8, 0.5]
    t = table(sweep)
    assert [c.header for c in t.columns] == ["replication", "elapsed s", "speedup",
                                             "efficiency"]
    assert list(t.columns[2].cells) == ["1", "0.8", "1.6", "2"]
    assert list(t.columns[3].cells) == [DASH, "0.8", "0.8", "0.5"]
    said = title(sweep)
    assert ("speedup vs modules.server.replication=0; efficiency: that speedup per "
            "replica (none at replication=0)") in said, said
    data = sweep.to_dict()
    assert data["efficiency_vs"] == {KEY: 0}
    assert [c["efficiency"] for c in data["cells"]] == [None, 0.8, 0.8, 0.5]


def test_a_zero_row_beside_a_baseline_of_one_replica_has_no_efficiency() -> None:
    sweep = run_sweep("a.toml", [(KEY, ["0", "1", "2"])], 1, _runner, {KEY: "1"})
    assert [c.speedup for c in sweep.cells] == [1.25, 1.0, 2.0]
    assert [c.efficiency for c in sweep.cells] == [None, 1.0, 1.0]  # (as before: vs 1)
    assert "efficiency: that speedup per replica;" in title(sweep) + ";"


def test_with_another_key_each_cell_is_against_the_client_alone_at_its_value() -> None:
    sweep = run_sweep("a.toml", [(STYLE, ["sync", "async"]), (KEY, ["0", "2"])], 1,
                      _runner, {KEY: "0"})
    got = {(c.config[STYLE], c.config[KEY]): (c.speedup, c.efficiency) for c in sweep.cells}
    assert got == {("sync", "0"): (1.0, None), ("sync", "2"): (1.6, 0.8),
                   ("async", "0"): (1.0, None), ("async", "2"): (1.6, 0.8)}
    assert "at the same callstyle" in title(sweep)


@pytest.mark.parametrize("values", [["1", "2"], ["2", "4"]])
def test_sweeps_without_zero_are_as_before(values: list[str]) -> None:
    sweep = run_sweep("a.toml", [(KEY, values)], 1, _runner)
    assert sweep.cells[0].efficiency == 1.0
    assert sweep.to_dict()["efficiency_vs"] == {KEY: int(values[0])}
