"""A replica SIGKILLed while it runs several calls: their re-runs on the survivor run side
by side, not one after another (client/backlog.py: a call lost once is placed as any
call is; only a call lost twice runs alone).

A new user's trial found a failover that took 22 s for 10 calls of 2 s: each lost call
was run alone, in turn, on the one replica left, its 20 handlers 9% busy. This checks
the behaviour (two re-runs were running at the same time, by the begin and end times
the server writes in its side files), not a speed."""

from __future__ import annotations

import itertools
import time

import pytest

from polybus.client.promise import wait

from .conftest import Harness

CALLS = 8
SECONDS = 1.0


def _spans(harness: Harness) -> list[tuple[int, int, float, float]]:
    """(call, pid, began, ended) of every run of ``span`` that ended."""
    began: dict[tuple[int, int], float] = {}
    runs = []
    for f in harness.side.glob("*.log"):
        for line in f.read_text().splitlines():
            tag, *rest = line.split()
            if tag in ("begin", "end"):
                key = (int(rest[0]), int(rest[1]))
                if tag == "begin":
                    began[key] = float(rest[2])
                else:
                    runs.append((*key, began[key], float(rest[2])))
    return runs


def _begun(harness: Harness, pid: int) -> set[int]:
    f = harness.side / f"{pid}.log"
    lines = f.read_text().splitlines() if f.exists() else []
    return {int(ln.split()[1]) for ln in lines if ln.startswith("begin ")}


@pytest.mark.parametrize("style", ["async", "async-demand(4)"])
def test_calls_lost_with_a_replica_run_again_side_by_side(harness: Harness, style: str) -> None:
    # (span, bound here only: its pool and queue would be the module's for other tests)
    app = harness.app("modules.server.define.span.pool=8", "bind.client.span=server.span",
                      f"modules.client.use.span.callstyle={style}")
    harness.embedded_registry()
    harness.workers(2)
    session = harness.session(app)
    promises = [session.call("span", (i, SECONDS), {}) for i in range(CALLS)]
    w0 = next(lk for lk in session.reactor.links if lk.name == "w0")
    held = set(w0.outstanding)
    assert len(held) >= 2, held  # (calls are spread over both replicas)
    victim = harness.procs["w0"].pid
    deadline = time.monotonic() + 20
    while len(_begun(harness, victim)) < len(held):  # every call it holds is running
        assert time.monotonic() < deadline, harness.stderr("w0")
        session.reactor.poll()  # (async-demand holds a call to write it with the next)
        time.sleep(0.02)
    lost = _begun(harness, victim)
    harness.kill("w0")
    assert [wait(p) for p in promises] == list(range(CALLS))
    survivor = harness.procs["w1"].pid
    reruns = sorted((b, e) for i, pid, b, e in _spans(harness) if pid == survivor and i in lost)
    assert len(reruns) == len(lost), (reruns, lost)
    # Some two of the re-runs were running at the same time (sorted by when they began,
    # one began before the one before it ended).
    overlaps = [a for a, b in itertools.pairwise(reruns) if b[0] < a[1]]
    assert overlaps, f"the re-runs ran one after another: {reruns}"
