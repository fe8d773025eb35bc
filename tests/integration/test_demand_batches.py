"""What config/notes.py `note_demand_batches` says, seen in a run: under async-demand(N),
a binding with a priority places each call on its own, so its batches hold at most N
calls (none at N = 1), where one without a priority counts batches against N."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

import polybus

DNA = Path(__file__).resolve().parents[2] / "examples" / "dna" / "app.toml"


def _counts(*, window: int, priority: bool) -> dict[str, int]:
    over: dict[str, Any] = {
        "modules.client.use.compare.aggregate": 8,
        "modules.client.use.compare.callstyle": f"async-demand({window})",
    }
    if not priority:
        over["modules.server.define.compare"] = {}
    expect = pytest.warns(polybus.errors.ConfigWarning, match="aggregate batches nothing") \
        if priority and window == 1 else contextlib.nullcontext()
    with expect:
        got = polybus.run(DNA, over, worker_output=False)
    assert got.calls == 40
    return got.interfaces["client.compare"]


def test_with_a_priority_demand_1_batches_nothing_and_demand_4_at_most_4_a_batch() -> None:
    assert _counts(window=1, priority=True)["batches"] == 0
    four = _counts(window=4, priority=True)
    assert four["batched_calls"] <= 4 * four["batches"]


def test_without_a_priority_demand_1_sends_batches_of_several_calls() -> None:
    one = _counts(window=1, priority=False)
    assert one["batched_calls"] > one["batches"] >= 1
