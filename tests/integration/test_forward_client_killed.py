"""A client process killed while its forwarded values wait at a consumer's replica.

Values forwarded replica to replica wait at the consumer's replica for the calls that
name them (worker/fwdheld.py). A client that is killed never sends those calls, or sent
them unread: the replica stopped reading its connection, its queue full. The replica
drops the dead client's calls and the calls it held for values; the values that came
for it, and those that come later, went only once the bound on unclaimed values pushed
them out (512 MiB). They go now, as soon as the replica sees the connection end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from .comm_harness import Cluster, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 2
define.until = { pool = 2, queue = 1 }
define.gated_double = { pool = 2, queue = 1 }
define.inner = { queue = 1 }

[modules.client]
source = "client.py"
entrypoint = "main"
use.gated_double = { callstyle = "async", loadratio = "1:0" }
use.until = { callstyle = "async", loadratio = "0:1" }
use.inner = { callstyle = "async", loadratio = "0:1" }

[bind]
"client.gated_double" = "server.gated_double"
"client.until" = "server.until"
"client.inner" = "server.inner"
"""

# The client: producers on server-0, held until the test lets them go (each asked to
# forward by then); on server-1 a consumer of p1 (the replica reads the client's keys
# there), one of p1 and p3 (held till the client is gone: p3 answers after), two calls
# that run and one queued (the queue's bound: the replica reads no more of the client),
# then a consumer of p2 left unread, whose value comes and waits for it.
CLIENT = """
import sys
import time
from pathlib import Path

import numpy as np

from polybus.client.session import Session
from polybus.config import load


def after(name):  # (the test makes the file once the replicas are where it wants them)
    while not (tmp / name).exists():
        time.sleep(0.005)


tmp = Path(sys.argv[1])
s = Session(load(tmp / "app.toml"), sys.argv[2], bytes.fromhex(sys.argv[3]))
X = np.arange(32768.0)
go, late, hang = (str(tmp / n) for n in ("go", "late", "hang"))
p1, p2, p3 = (s.call("gated_double", (X + i, g), {}) for i, g in ((1, go), (2, go), (3, late)))
s.call("inner", ([p1, 1.0],), {})
s.call("inner", ({"a": p1, "b": p3},), {})
for i in range(3):
    s.call("until", (i, hang), {})
s.reactor.flush_all()
(tmp / "busy").touch()
after("full")
s.call("inner", ({"z": [p2]},), {})
s.reactor.flush_all()
(tmp / "sent").touch()
time.sleep(120)
"""


X_BYTES = 32768 * 8  # a value's


def _until(cond: Callable[[], bool], what: str, within: float = 10.0,
           state: Callable[[], object] = lambda: "") -> None:
    deadline = time.monotonic() + within
    while not cond():
        assert time.monotonic() < deadline, f"never: {what} {state()}"
        time.sleep(0.005)


def _client(c: Cluster) -> subprocess.Popen[bytes]:
    (c.tmp / "killed_client.py").write_text(textwrap.dedent(CLIENT))
    with (c.tmp / "client.err").open("wb") as err:  # (the child has its own copy)
        return subprocess.Popen(
            [sys.executable, str(c.tmp / "killed_client.py"), str(c.tmp),
             str(c.registry.address), c.token.hex()],
            stdout=subprocess.DEVNULL, stderr=err)


def _said(c: Cluster) -> str:
    return (c.tmp / "client.err").read_text()


def test_a_killed_clients_forwarded_values_go_from_the_consumers_replica(
        tmp_path: Path) -> None:
    with cluster(tmp_path, TOML, replicas=2) as c:
        rt = next(r for r in c.runtimes if r.name == "server-1")
        fwd = rt.forwarding
        proc = _client(c)
        try:
            made = lambda name: (tmp_path / name).exists() or proc.poll() is not None  # noqa: E731
            _until(lambda: made("busy"), "the client made its first calls")
            assert proc.poll() is None, _said(c)
            # (server-1 runs two calls and one waits, its queue's bound: it reads no more
            # of the client; the consumer of p1 and p3 is held there)
            _until(lambda: rt._running == 2 and len(rt._queue) == 1 and fwd.held_calls() == 2,
                   "server-1 full", state=lambda: (rt._running, len(rt._queue), fwd.held_calls()))
            (tmp_path / "full").touch()
            _until(lambda: made("sent"), "the client made its consumer")
            assert proc.poll() is None, _said(c)
            producer = next(r for r in c.runtimes if r.name == "server-0").forwarding
            _until(lambda: len(producer.targets) == 3 and bool(rt._paused),
                   "each producer asked to forward, the consumer unread",
                   state=lambda: (len(producer.targets), len(rt._paused)))
            (tmp_path / "go").touch()
            # (p2's value waits unclaimed for its unread consumer; the consumer of p1 and
            # p3 is held with p1's value)
            _until(lambda: len(fwd._arrived) == 1 and fwd.held_calls() == 1
                   and fwd._holding_bytes > X_BYTES,
                   "a value waiting unclaimed, a call held", state=lambda: (
                       len(fwd._arrived), fwd.held_calls(), fwd._holding_bytes))
            assert fwd._arrived.nbytes > X_BYTES
            client = next(iter(rt._paused))  # (the client's connection)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            _until(lambda: client not in rt._channels and fwd.held_calls() == 0,
                   "the replica saw the client go")
            (tmp_path / "late").touch()  # (p3 answers now: for no one)
            _until(lambda: fwd._arrived.nbytes == 0 and not fwd._arrived, "the values went",
                   state=lambda: (len(fwd._arrived), fwd._arrived.nbytes))
            assert fwd.held_calls() == 0 and fwd._holding_bytes == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            for name in ("go", "late", "hang"):
                (tmp_path / name).touch()
