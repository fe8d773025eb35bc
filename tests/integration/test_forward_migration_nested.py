"""A consumer whose promises sit inside a list and a dict, moved by migration.

``gather([p1, 3.0], {"k": p2})`` is sent at once, ``Ref``s in the promises' places
inside its containers (``Call.inside``), and held on its replica until both values come
from the producers' replica. Queued there behind a busy call, a ``Steal`` gives it back
and the client sends it to another replica, then back: each replica it goes to puts the
values in their places again, sent again from the producer's replica (they stay pinned
there while the consumer may move), and neither value passes through the client.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client.session import Session

from . import comm_harness
from .comm_harness import Cluster, cluster
from .test_forward_backlog import SLACK, client_bytes, replica, settled
from .test_forward_migration import (  # noqa: F401 (_grow: the same autouse fixture)
    EXTRA,
    NEVER,
    N,
    _grow,
    give_back,
    grown,
    queued_behind,
    wait_until,
)

GATHER = '''

def gather(xs, named):
    # each array among a list's items and a dict's values summed in its place
    s = lambda x: float(x.sum()) if isinstance(x, np.ndarray) else x
    return [[s(x) for x in xs], {k: s(v) for k, v in sorted(named.items())}]
'''

CONF = f"""
[modules.server]
source = "server.py"
replication = "server-0{NEVER}#server-1{NEVER}#server-2{NEVER}"

[modules.client]
source = "client.py"
entrypoint = "main"
use.grow = {{ callstyle = "async", loadratio = "1:0:0" }}
use.busy1 = {{ callstyle = "async", loadratio = "0:1:0" }}
use.busy2 = {{ callstyle = "async", loadratio = "0:0:1" }}
use.gather = {{ callstyle = "async", loadratio = "0:1:0" }}

[bind]
"client.grow" = "server.grow"
"client.busy1" = "server.grow"
"client.busy2" = "server.grow"
"client.gather" = "server.gather"
"""


@pytest.fixture(autouse=True)
def _gather(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(comm_harness, "SERVER", comm_harness.SERVER + EXTRA + GATHER)
    yield


def steal(c: Cluster, s: Session, src: str, dst: str) -> None:
    """Move one waiting gather call of ``src`` to ``dst``, as migration does."""
    m = next(m for m in s.migrators if m.d.interface == "gather")
    before = m.moved_in[dst]
    give_back(s, m, src, dst)
    wait_until(lambda: m.moved_in[dst] > before, s)


def queued_with_values(c: Cluster, name: str, s: Session) -> None:
    """Until gather waits in ``name``'s queue behind its gated call, with its values in
    place (held for them, it would not be in the queue)."""
    fwd = next(rt for rt in c.runtimes if rt.name == name).forwarding
    queued_behind(c, name, s, iface="gather", also=lambda: not fwd.held_calls())


def test_a_consumer_with_promises_in_a_list_and_a_dict_moves_and_back(tmp_path: Path) -> None:
    gates = [tmp_path / "gate1", tmp_path / "gate2"]
    with cluster(tmp_path, CONF, replicas=3) as c:
        s = c.session()
        b1, b2 = (s.call(f"busy{k + 1}", (0, str(g)), {}) for k, g in enumerate(gates))
        p1 = s.call("grow", (1, str(tmp_path / "go")), {})
        p2 = s.call("grow", (2, str(tmp_path / "go")), {})
        q = s.call("gather", ([p1, 3.0], {"k": p2}), {})  # (sent at once)
        assert not p1._rec.done and not p2._rec.done  # type: ignore[attr-defined]
        assert replica(c, q).name == "server-1"
        f = s.forwarder  # type: ignore[attr-defined]
        assert f.forwarded == 2
        (tmp_path / "go").touch()
        try:
            queued_with_values(c, "server-1", s)
            steal(c, s, "server-1", "server-2")
            queued_with_values(c, "server-2", s)  # (busy2 holds it there in turn)
            gates[0].touch()
            settled(b1)
            steal(c, s, "server-2", "server-1")  # (back where it took the values once)
        finally:
            for g in gates:
                g.touch()
        settled(q)
        got: Any = polybus.wait(q)
        assert got == [[float(grown(1).sum()), 3.0], {"k": float(grown(2).sum())}]
        assert replica(c, q).name == "server-1"
        sent, recv = client_bytes(c)
        assert sent < SLACK and recv < 2 * N + SLACK, (sent, recv)  # b1, b2: no p came
        assert f.relayed == 0 and f.fetched == 0
        assert sum(sum(m.moved_in.values()) for m in s.migrators) == 2
        polybus.wait(b2)
        store = next(rt for rt in c.runtimes if rt.name == "server-0").forwarding.kept
        wait_until(lambda: store.pinned == 0, s)  # (q ended: its values let go)
