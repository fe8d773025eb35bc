"""A sweep's efficiency is per replica that served: a run at a registry with fewer
workers registered than its replication asks for goes on with those, and the runner
says how many served each module (`Measured.replicas`). The cell keeps each run's count
(``replicas`` in the JSON) and a line under the table says which cells ran short."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from polybus.cli.sweep_table import short_said
from polybus.sweep import Measured, run_sweep

REPLICATION = ("modules.server.replication", ["1", "2", "4"])


def _registered(n: int) -> Callable[[str, Sequence[str]], Measured]:
    """A runner at a registry with ``n`` workers: each run uses at most ``n``."""

    def runner(path: str, sets: Sequence[str]) -> Measured:
        asked = int(next(s for s in sets if s.startswith(REPLICATION[0])).split("=")[1])
        used = min(asked, n)
        return Measured(1.0 / used, replicas={"server": used, "client_side": 1})

    return runner


def test_efficiency_divides_by_the_replicas_that_served() -> None:
    sweep = run_sweep("a.toml", [REPLICATION], 2, _registered(2))
    by = {c.config[REPLICATION[0]]: c for c in sweep.cells}
    assert by["4"].speedup == 2.0
    assert by["4"].efficiency == 1.0  # (2 served; it was 0.5, as if 4 had)
    assert by["2"].efficiency == 1.0
    assert by["4"].to_dict()["replicas"] == {"server": [2, 2], "client_side": [1, 1]}
    assert short_said(sweep) == [
        "replication=4: its runs found 2 replicas of the 4 asked for registered, and ran "
        "with those; its efficiency is per replica that served"]


def test_as_many_as_asked_changes_nothing() -> None:
    sweep = run_sweep("a.toml", [REPLICATION], 1, _registered(8))
    assert [c.efficiency for c in sweep.cells] == [1.0, 1.0, 1.0]
    assert short_said(sweep) == []


def test_a_runner_that_counts_none_reads_the_value() -> None:
    sweep = run_sweep("a.toml", [REPLICATION], 1,
                      lambda path, sets: 1.0 if "modules.server.replication=1" in sets else 0.5)
    assert [c.efficiency for c in sweep.cells] == [1.0, 1.0, 0.5]
    assert [c.to_dict()["replicas"] for c in sweep.cells] == [{}, {}, {}]
