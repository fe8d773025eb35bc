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


# Conditions on global load: every call goes to c (loadratio); c and d share a path, a
# and b are on none but are live replicas of the module, and count in mean and total.
GLOBAL = {
    "c pushes above the mean": "c(oc=(load>=mean+2))#d",
    "d pulls below the mean": "c#d(uc=(load<mean))",
    "c pushes above twice its peer": "c(oc=(load>2*peer))#d",
}
FED_AT_C = f"{U}.loadratio=0:0:1:0"


def _run_global(h: Harness, line: str) -> tuple[int, int, dict[str, tuple[int, int]]]:
    """The answer, the calls the replicas ran, and calls moved (in, out) per replica,
    with ``line`` as c and d."""
    before = _served(h)
    replication = f"modules.server.replication=a:speed=0.25,b:speed=0.5,{line}"
    _, got, stats = h.run("rows", [COSTS], (replication, FED_AT_C))
    ran = sum(r.calls for r in stats.replicas) - before
    return got, ran, {r.name: (r.migrated_in, r.migrated_out) for r in stats.replicas}


@pytest.mark.parametrize("case", list(GLOBAL))
def test_a_global_condition_moves_calls(harness: Harness, case: str) -> None:
    got, ran, moved = _run_global(harness, GLOBAL[case])
    assert got == sum(range(N)) and ran == N  # each call run once, wherever it went
    assert moved["d"][0] > 0 and moved["d"][0] == moved["c"][1]  # from c to d, and only so
    assert moved["a"] == moved["b"] == (0, 0)


def test_a_global_condition_that_never_holds_moves_nothing(harness: Harness) -> None:
    """A load is never above the total: nothing moves, where the path without its
    condition would pull to an idle d (uc=(load==0))."""
    got, ran, moved = _run_global(harness, "c(oc=(load>total))#d")
    assert got == sum(range(N)) and ran == N
    assert all(m == (0, 0) for m in moved.values())
    _, _, moved = _run_global(harness, "c#d")
    assert moved["d"][0] > 0
