"""A steal keeps every binding's `async-demand(N)` window.

A binding's steal (`balance = "steal"`, migration paths) takes any of the client's
calls queued on a connection, other bindings' too (client/migrate.py). A call so given
back whose own binding keeps at most N calls at a replica (`async-demand(N)`) goes to
the steal's replica only where that binding has room; otherwise its binding places it
again, as it places every call (it went there whatever its window held before).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client.session import Session

from .comm_harness import Cluster, cluster
from .test_forward_migration import give_back, queued_behind, wait_until
from .test_forward_migration_aggregated import by_hand

CONF = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.hold = { callstyle = "async", loadratio = "1:0" }
use.wait = { callstyle = "async-demand(1)"%s }
use.double = { callstyle = "async", balance = "steal" }

[bind]
"client.hold" = "server.until"
"client.wait" = "server.until"
"client.double" = "server.double"
"""


def in_flight(s: Session, name: str) -> dict[str, int]:
    """The binding ``name``'s calls (or batches) in flight, by replica."""
    d = s.dispatchers[name]
    bt = next((b for b in s.batchers if b.d is d), None)
    counts = bt.inflight if bt is not None else d.inflight
    return {lk.name: counts[i] for i, lk in enumerate(d.links)}


def one_on_each(c: Cluster, s: Session, gate: Path, batch: int) -> list[Any]:
    """Three `wait` calls (or batches of ``batch``): one running on server-1, one queued
    on server-0 behind the gated `hold`, and (async-demand(1): no room left) one kept at
    the client."""
    ws = [s.call("wait", (i, str(gate)), {}) for i in range(1, 1 + 3 * max(1, batch))]
    queued_behind(c, "server-0", s, "until", batch=batch)
    wait_until(lambda: in_flight(s, "wait") == {"server-0": 1, "server-1": 1}, s,
               state=lambda: str(in_flight(s, "wait")))
    return ws


@pytest.mark.parametrize("aggregate", [False, True])
def test_a_call_another_binding_steals_stays_within_its_window(
        tmp_path: Path, aggregate: bool) -> None:
    hold, gate = tmp_path / "hold", tmp_path / "gate"
    extra = ', aggregate = 2, linger = "1h"' if aggregate else ""
    with cluster(tmp_path, CONF % extra, replicas=2) as c:
        s = c.session()
        m = by_hand(s)
        h = s.call("hold", (0, str(hold)), {})  # (server-0's one thread, till ``hold``)
        try:
            ws = one_on_each(c, s, gate, 2 if aggregate else 0)
            give_back(s, m, "server-0", "server-1")  # (it takes the queued `wait` call or batch)
            wait_until(lambda: not m._pending, s)  # (the Steal's answer taken in)
            # Given back, it went where its binding has room: back to server-0, not
            # beside the one running on server-1 (where it went before: 2 of 1 there).
            counts = in_flight(s, "wait")
            assert counts["server-1"] <= 1, counts
            # (not moved: counted neither out of server-0 nor into server-1, which the
            # summary's columns say; a batch that went back to server-0 neither)
            assert m.moved_out["server-0"] == m.moved_in["server-1"] == 0
            assert not any(w.done for w in ws)  # type: ignore[attr-defined]
        finally:
            gate.touch()
            hold.touch()
        assert [polybus.wait(w) for w in ws] == list(range(1, 1 + len(ws)))
        assert polybus.wait(h) == 0
