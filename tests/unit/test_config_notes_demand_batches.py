"""``aggregate`` with ``async-demand(1)`` on a binding whose calls are placed one by one
(a priority, or migration) batches nothing, and is said as the other no-effect settings
are (config/notes.py): the DNA example with its longest-first priority, demand-driven,
ran its 40 calls in 0 batches under ``aggregate = 8``, and nothing said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from polybus.config import validate

DNA = Path(__file__).resolve().parents[2] / "examples" / "dna" / "app.toml"
AGG = "modules.client.use.compare.aggregate=8"
KEY = "modules.client.use.compare.aggregate"


def _notes(*sets: str) -> list[str]:
    cfg, problems = validate(str(DNA), (AGG, *sets))
    assert problems == [] and cfg is not None
    return [n.bare_message for n in cfg.notes if n.key == KEY]


def test_aggregate_under_demand_1_with_a_priority_is_said_to_batch_nothing() -> None:
    [note] = _notes()  # (the example: priority = "len(query)", async-demand(1))
    assert note.startswith("aggregate batches nothing here: interface 'compare' has a "
                           "priority")


@pytest.mark.parametrize("sets", [
    ('modules.server.replication="a#b"', "modules.server.define.compare={}"),
    ("modules.client.use.compare.balance=steal", "modules.server.define.compare={}"),
])
def test_so_is_it_with_calls_that_may_migrate(sets: tuple[str, ...]) -> None:
    [note] = _notes(*sets)
    assert "aggregate batches nothing here" in note


@pytest.mark.parametrize("sets", [
    ("modules.server.define.compare={}",),                      # no priority: batches count
    ('modules.client.use.compare.callstyle="async-demand(4)"',),  # batches of up to 4
    ('modules.client.use.compare.callstyle="async"',),
    # one replica: nothing to steal from, so no migrator, and batches of 8 (a run of
    # the DNA example so sent its 40 calls in 5 batches, the note saying it batched none)
    ("modules.client.use.compare.balance=steal", "modules.server.define.compare={}",
     "modules.server.replication=1"),
])
def test_nothing_is_said_where_calls_travel_together(sets: tuple[str, ...]) -> None:
    assert _notes(*sets) == []
