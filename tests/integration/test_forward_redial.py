"""A consumer's replica taken for lost, then dialled again by a run at a shared registry.

A client takes a live replica for dead (a call holding its GIL for 3 heartbeats, the
network) and closes its connection; a run whose workers were started apart looks for it
again and dials it again (client/rejoin.py), and the consumer lost with it is sent
again there, naming the same forwarded keys. Its value, which came from the producer's
replica while the consumer waited unread (the replica's queue full: one cause of being
taken for dead), must wait there for it: the replica let it go with the client it took
for gone, and answered the consumer ``forward-dropped`` (a RemoteError in the program).
The client's nonce now says it may dial again (worker/fwdgone.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

import polybus
from polybus.client.session import Session
from polybus.client.stubs import activate
from polybus.errors import ConnectionLostError
from polybus.wire.messages import Replica
from polybus.worker.main import options_for
from polybus.worker.runtime import WorkerRuntime

from .comm_harness import cluster, heard

TOML = """
[modules.server]
source = "server.py"
replication = 1
define.until = { pool = 1, queue = 1 }

[modules.prod]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = { callstyle = "async" }
use.gated_double = { callstyle = "async" }

[bind]
"client.until" = "server.until"
"client.gated_double" = "prod.gated_double"
"""


def _until(what: str, done: object, s: Session | None = None, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not done() and time.monotonic() < deadline:  # type: ignore[operator]
        if s is not None:
            s.reactor.poll()
        time.sleep(0.01)
    assert done(), f"not {what} within {within} s"  # type: ignore[operator]


def test_a_consumer_sent_again_on_a_replica_dialled_again_gets_its_value(
        tmp_path: Path) -> None:
    with cluster(tmp_path, TOML) as c:
        prod = WorkerRuntime("prod-0", c.functions, c.token, "tcp://127.0.0.1:0",
                             options_for(c.app.modules["prod"], None, 1 << 30)).start()
        c.runtimes.append(prod)
        c.reg_client.register(Replica("prod-0", "prod", str(prod.address),
                                      sorted(c.functions)))
        s = Session(c.app, str(c.registry.address), c.token, rejoin=True)
        c.sessions.append(s)
        activate(s)
        consumer = c.runtimes[0].forwarding
        done, hang, gate = tmp_path / "done", tmp_path / "hang", tmp_path / "gate"
        done.touch()
        x = np.arange(16.0)
        # A consumer held and answered: server-0 knows the client's nonce.
        first = s.call("until", (s.call("gated_double", (x, str(done)), {}), str(done)), {})
        assert np.array_equal(polybus.wait(first), x * 2)
        # server-0 busy, its queue full: it reads no more of the client, whose consumer
        # there stays unread while its value comes from prod-0 and waits for it.
        busy = [s.call("until", (x, str(hang)), {}) for _ in range(3)]
        p = s.call("gated_double", (x, str(gate)), {})
        q = s.call("until", (p, str(done)), {})
        # The gate opens once prod-0 has read the Forward: read after p's answer, p came
        # to the client by value, which sends it on itself, on the connection server-0
        # does not read (the value never reached it while the test waited).
        heard(c, s, p)
        gate.touch()
        _until("delivered to server-0", lambda: consumer.received >= 2, s)
        # The client takes server-0 for lost (as after 3 silent heartbeats): it closes
        # its connection, which server-0, alive, sees end.
        link = next(lk for lk in s.links["server"] if lk.name == "server-0")
        s.reactor._lost(link, ConnectionLostError("server-0 taken for dead (the test)"))
        _until("ended on server-0", lambda: not consumer._sessions.nonces)
        hang.touch()
        # The run dials server-0 again, and sends it the consumer again (same keys).
        for _ in polybus.as_completed([q, *busy], timeout=20):  # (bounded)
            pass
        assert np.array_equal(polybus.wait(q), x * 2)
        assert consumer.gone_dropped == 0
