"""Migration end to end: every call answered exactly once, the same result as sync."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from polybus.bench._balance import Harness

N = 60
COSTS = [0.002 * (1 + (i % 7)) for i in range(N)]  # uneven tasks
REPLICATION = "a:speed=0.25,b:speed=0.5,c,d"
RING = "a:speed=0.25#b:speed=0.5#c#d#a:[1/2]"
LINE = "a:speed=0.25(oc=(load>=2))#b:speed=0.5(oc=(load>=2))#c(oc=(load>=2))#d:[1/2]"
U = "modules.client.use.work"

STRATEGIES = {
    "ring": (f"modules.server.replication={RING}",),
    "line fed at its head": (f"modules.server.replication={LINE}", f"{U}.loadratio=1:0:0:0"),
    "steal": (f"{U}.balance=steal",),
    "steal with demand": (f"{U}.balance=steal", f"{U}.callstyle=async-demand(8)"),
}


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    with Harness(REPLICATION) as h:
        yield h


def _served(h: Harness) -> int:
    _, _, stats = h.run("rows", [[]], (f"{U}.callstyle=sync",))
    return sum(r.calls for r in stats.replicas)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_call_runs_once_with_the_sync_answer(harness: Harness, strategy: str) -> None:
    _, want, _ = harness.run("rows", [COSTS], (f"{U}.callstyle=sync",))
    before = _served(harness)
    _, got, stats = harness.run("rows", [COSTS], STRATEGIES[strategy])
    after = sum(r.calls for r in stats.replicas)
    assert got == want == sum(range(N))
    assert after - before == N  # run exactly once in all, whatever moved
    moved_in = sum(r.migrated_in for r in stats.replicas)
    moved_out = sum(r.migrated_out for r in stats.replicas)
    assert moved_in == moved_out
    assert moved_in > 0  # uneven speeds: something did move
