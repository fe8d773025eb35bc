"""A steal that takes another binding's call with no room at its replica still moves
the stealing binding's own calls (a call, or an aggregated batch).

A replica gives a steal the client's calls from the back of its queue, any binding's
(client/migrate.py). One whose binding keeps at most N calls at a replica
(`async-demand(N)`) and has N at the steal's replica is placed again by its binding:
back where it waited, at the back of that queue, first to go to the next steal. A
binding whose own calls waited ahead of it asked again on every tick, for ever, and
none of its calls moved.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus

from .comm_harness import cluster
from .test_forward_migration import wait_until
from .test_forward_migration_aggregated import by_hand
from .test_steal_window import CONF, in_flight


@pytest.mark.timeout(60)
@pytest.mark.parametrize("aggregate", [False, True])
def test_a_steal_moves_its_own_calls_past_a_call_that_cannot_go(
        tmp_path: Path, aggregate: bool) -> None:
    hold, gate = tmp_path / "hold", tmp_path / "gate"
    extra = ', aggregate = 2, linger = "1h"' if aggregate else ""
    k = 2 if aggregate else 1  # (calls a batch)
    with cluster(tmp_path, CONF % extra, replicas=2) as c:
        s = c.session()
        m = by_hand(s)
        h = s.call("hold", (0, str(hold)), {})  # (server-0's one thread, till ``hold``)
        try:
            ds = [s.call("double", (i,), {}) for i in range(4)]
            wait_until(lambda: in_flight(s, "double") == {"server-0": 2, "server-1": 0}, s,
                       state=lambda: str(in_flight(s, "double")))
            # Then async-demand(1)'s calls: one running on server-1, one queued on
            # server-0 behind double's two (the back of that queue), one at the client.
            ws = [s.call("wait", (i, str(gate)), {}) for i in range(10, 10 + 3 * k)]
            wait_until(lambda: in_flight(s, "wait") == {"server-0": 1, "server-1": 1}, s,
                       state=lambda: str(in_flight(s, "wait")))
            del m.tick  # (migration on: double's steals for server-1)
            wait_until(lambda: in_flight(s, "double")["server-1"] >= 1 or m.steals >= 50, s,
                       state=lambda: f"{in_flight(s, 'double')}, {m.steals} steals")
            assert in_flight(s, "double")["server-1"] >= 1, (
                f"none of double's calls moved in {m.steals} steals; "
                f"moved out: {m.moved_out}, in: {m.moved_in}")
            assert in_flight(s, "wait")["server-1"] <= 1
            steals = m.steals  # (balanced now: no steal more, however often it looks)
            for _ in range(100):
                s.reactor.poll()
            assert m.steals == steals, f"{m.steals - steals} more steals, {m.moved_out}"
        finally:
            gate.touch()
            hold.touch()
        assert [polybus.wait(d) for d in ds] == [0, 2, 4, 6]
        assert [polybus.wait(w) for w in ws] == list(range(10, 10 + 3 * k))
        assert polybus.wait(h) == 0
