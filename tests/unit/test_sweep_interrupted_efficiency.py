"""A sweep interrupted before it ran a second replica count still varied it: its
efficiency is along that count, from the combinations asked for, not those that ran."""

from __future__ import annotations

from collections.abc import Sequence

from polybus.cli.sweep_table import table, title
from polybus.sweep import run_sweep

REPLICATION = ("modules.server.replication", ["1", "2"])


def test_a_sweep_interrupted_before_a_second_replica_count_ran_keeps_its_efficiency() -> None:
    # Ctrl-C during replication=2's run: the line above the table said "no efficiency
    # column (no replication count is varied)" of a sweep that varied it, and the JSON's
    # efficiency_vs was null, as if no count were varied.
    def runner(path: str, sets: Sequence[str]) -> float:
        if "modules.server.replication=2" in sets:
            raise KeyboardInterrupt
        return 1.0

    sweep = run_sweep("a.toml", [REPLICATION], 1, runner)
    assert sweep.interrupted is not None and len(sweep.cells) == 1
    assert sweep.efficiency_vs == ("modules.server.replication", "1")
    assert "no efficiency column" not in title(sweep), title(sweep)
    assert "efficiency" in [c.header for c in table(sweep).columns]
    assert [c.efficiency for c in sweep.cells] == [1.0]
    assert sweep.to_dict()["efficiency_vs"] == {"modules.server.replication": 1}
