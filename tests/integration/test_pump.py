"""Calls waiting at the client move while the program computes (client/pump.py).

Each test makes its calls, then computes (sleeps) until every call has started, THINK
seconds at most, before it waits for any answer. The replica notes when each call
started: every call must have started while the program was still computing, where
before the pump the calls held back, in the demand backlog or in a queued aggregated
batch, started only once the program waited (at THINK and after).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.testing.apps import write_app

# the longest the program computes; the calls take 0.1 s each, 0.6 s in all at most,
# and the program stops computing once each has started (the replica marks it)
THINK = 10.0

SERVER = """
import os, time

def slow(i, s, marks=None):
    t0 = time.time()
    if marks is not None:  # (the program looks for it: has every call started?)
        open(os.path.join(marks, str(i)), "w").close()
    time.sleep(s)
    return [i, t0]

def tag(t, i):
    return [t, i]

def quick(i):
    return i

def f(i, s):
    time.sleep(s)
    return i
"""

CLIENT = """
import os, random, threading, time
from polybus import use, wait

slow = use("slow")
tag = use("tag")
quick = use("quick")
f = use("f")

def main(k=4, s=0.1, think=3.0, kw=False, marks=None):
    t0 = time.time()
    ps = [slow(i, s=s, marks=marks) if kw else slow(i, s, marks) for i in range(k)]
    end = time.monotonic() + think
    while time.monotonic() < end and len(os.listdir(marks)) < k:  # (computing)
        time.sleep(0.01)
    computed = time.time() - t0
    out = [wait(p) for p in ps]
    return {"ids": [i for i, _ in out], "starts": [t - t0 for _, t in out],
            "computed": computed}

def spins(iters=120):
    # aggregate = 2, a 30 s linger: the last call's batch is open when the program
    # waits for it, and its flush queues it behind the others while the pump may be
    # in a turn (the two once took their locks in opposite orders and hung)
    rng = random.Random(1)
    for it in range(iters):
        ps = [f(i, 0.002) for i in range(21)]
        end = time.perf_counter() + rng.uniform(0.0, 0.04)
        while time.perf_counter() < end:
            pass
        if wait(ps[-1]) != 20 or wait(ps) != list(range(21)):
            return it
    return "ok"

def unwaited(n=200000, m=200):
    # a demand backlog keeps the pump awake while the run's last drain counts the
    # plain async calls never waited for (it once iterated a dict the pump changed)
    for i in range(m):
        slow(i, 0.002)
    for i in range(n):
        quick(i)
    return "returned"

def threads(n=4, calls=300):
    bad = []
    def one(t):
        ps = []
        for i in range(calls):
            ps.append((i, tag(t, i)))
            if i % 25 == 0:
                time.sleep(0.003)  # outside polybus long enough for the pump's turns
        for i, p in ps:
            if wait(p) != [t, i]:
                bad.append((t, i))
    ts = [threading.Thread(target=one, args=(t,)) for t in range(n)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return bad
"""

TOML = """
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.slow = { callstyle = "async-demand(4)" }
use.tag = { callstyle = "async-demand(2)" }

[bind]
"client.slow" = "server.slow"
"client.tag" = "server.tag"
"client.quick" = "server.quick"
"client.f" = "server.f"
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_app(tmp_path_factory.mktemp("pump"), server=SERVER, client=CLIENT, toml=TOML)


def _run(app: Path, k: int, sets: dict[str, Any]) -> dict[str, Any]:
    r = polybus.run(app, sets)
    assert r.result["ids"] == list(range(k))  # every answer its own call's
    return r.result  # type: ignore[no-any-return]


@pytest.mark.parametrize(("style", "transport", "replicas", "extra"), [
    # calls held to be written with the next (a window of 4, one call at the replica)
    ("async-demand(4)", "tcp", 1, {}),
    # the demand backlog, refilled as answers come (flags down over shm: bells wake it)
    ("async-demand(1)", "shm", 2, {}),
    ("async-demand(1)", "ipc", 1, {}),
    # aggregated batches queued behind a full window
    ("async-demand(1)", "shm", 1, {"modules.client.use.slow.aggregate": 2}),
    # keyword calls on an aggregating binding, held the general way (policies/aggregate.py)
    ("async-demand(4)", "tcp", 1, {"modules.client.use.slow.aggregate": 4,
                                   "modules.client.use.slow.linger": "5ms",
                                   "modules.client.args": [3, 0.1, THINK, True]}),
])
def test_calls_start_while_the_program_computes(app: Path, style: str, transport: str,
                                                replicas: int, extra: dict[str, Any],
                                                tmp_path: Path) -> None:
    k, *more = extra.get("modules.client.args", [6, 0.1, THINK, False])
    res = _run(app, k, {"modules.client.use.slow.callstyle": style,
                        "modules.server.transport": transport,
                        "modules.server.replication": replicas, **extra,
                        "modules.client.args": [k, *more, str(tmp_path)]})
    # Every call started while the program computed (one held for its wait starts
    # after: the program computes THINK s, then waits, and the call starts).
    assert max(res["starts"]) < res["computed"], res


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_threads_making_demand_calls_beside_the_pump_get_their_own_answers(
        app: Path, transport: str) -> None:
    r = polybus.run(app, {"modules.client.entrypoint": "threads",
                          "modules.client.args": [4, 300],
                          "modules.server.transport": transport,
                          "modules.server.replication": 2})
    assert r.result == []
    assert r.calls == 4 * 300


@pytest.mark.slow
def test_waiting_for_an_open_batch_while_the_pump_takes_its_turns(app: Path) -> None:
    r = polybus.run(app, {"modules.client.entrypoint": "spins", "modules.client.args": [100],
                          "modules.client.use.f.aggregate": 2,
                          "modules.client.use.f.linger": "30s",
                          "modules.client.use.f.callstyle": "async-demand(1)"})
    assert r.result == "ok"


@pytest.mark.slow
def test_the_last_drain_beside_an_awake_pump(app: Path) -> None:
    r = polybus.run(app, {"modules.client.entrypoint": "unwaited",
                          "modules.client.use.slow.callstyle": "async-demand(1)",
                          "modules.client.use.quick.callstyle": "async"})
    assert r.result == "returned"
    assert r.calls == 200000 + 200


FULL_SERVER = """
import os, time

_gave_up = [False]

def fill(marker):
    # runs until the program says its call to the other module came back (or, once, 20 s)
    end = time.monotonic() + 20
    while not os.path.exists(marker) and not _gave_up[0]:
        _gave_up[0] = time.monotonic() > end
        time.sleep(0.01)
    return os.path.exists(marker)

def size(data):
    return len(data)

def quick(i):
    return i
"""

FULL_CLIENT = """
import time
from polybus import use, wait

fill = use("fill")
size = use("size")
quick = use("quick")
rows = use("rows")

def main(marker, n=6):
    # one call runs and one waits: the queue (1) is full and the replica reads no more
    f = [fill(marker), fill(marker)]
    # the first written at once, the others held, then written by the pump's turn
    ps = [size(b"")] + [size(bytes([i]) * (4 << 20)) for i in range(n)]
    time.sleep(0.5)  # the program computes
    q = quick(7)  # another module
    open(marker, "w").close()
    return {"quick": q, "fill": [wait(x) for x in f], "sizes": [wait(p) for p in ps]}

def lingers(marker, k=3):
    import numpy as np
    f = [fill(marker), fill(marker)]  # the queue (1) is full: the replica reads no more
    first = size(b"")  # written at once; the next ones are held
    blocks = []
    for i in range(k):
        a = np.full(1 << 20, i, dtype=np.float64)
        a.flags.writeable = False
        blocks.append(a)
    r = [rows(a) for a in blocks]  # one batch of 24 MiB, left open: the linger timer writes it
    time.sleep(0.5)  # the program computes
    ps = [size(bytes([i]) * (1 << 20)) for i in range(2)]  # held: the pump's turn writes them
    time.sleep(0.5)
    q = quick(7)  # another module
    open(marker, "w").close()
    return {"quick": q, "fill": [wait(x) for x in f], "rows": [wait(x) for x in r],
            "sizes": [wait(p) for p in [first, *ps]]}
"""

FULL_TOML = """
[modules.server]
source = "server.py"
transport = "tcp"
define.fill = { queue = 1 }
define.size = { queue = 1 }
define.quick = { queue = 1 }

[modules.other]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"
use.fill = { callstyle = "async" }
use.size = { callstyle = "async-demand(8)" }
use.rows = { callstyle = "async", aggregate = 64, linger = "100ms" }

[bind]
"client.fill" = "server.fill"
"client.size" = "server.size"
"client.quick" = "other.quick"
"client.rows" = "server.size"
"""


def test_a_replica_that_stops_reading_holds_no_call_to_another_module(tmp_path: Path) -> None:
    """``overflow = "block"``: the replica's queue is full, so it reads no more, and the
    pump's turn writes 24 MiB of held calls to it. The program's call to another module
    waited for that write (the turn held the gate's lock) until the full replica ran
    its calls, which here wait for that call to come back: it gave up after 20 s."""
    app = write_app(tmp_path / "app", server=FULL_SERVER, client=FULL_CLIENT, toml=FULL_TOML)
    r = polybus.run(app, {"modules.client.args": [str(tmp_path / "marker")]})
    assert r.result["quick"] == 7
    assert r.result["fill"] == [True, True], "the call to the other module waited"
    assert r.result["sizes"] == [0] + [4 << 20] * 6


def test_a_batch_the_linger_timer_writes_to_a_full_replica_holds_no_call_to_another_module(
        tmp_path: Path) -> None:
    """The same full replica, and a 24 MiB aggregated batch that the linger timer closes
    and writes to it while the program computes. The timer's write waited for room holding
    the connection's send lock; the pump's turn, writing the calls held for that replica,
    waited for the lock holding the gate's; and the program's call to another module
    waited for the turn, until the full replica ran its calls, which wait for that call
    to come back: it gave up after 20 s."""
    app = write_app(tmp_path / "app", server=FULL_SERVER, client=FULL_CLIENT, toml=FULL_TOML)
    r = polybus.run(app, {"modules.client.entrypoint": "lingers",
                          "modules.client.args": [str(tmp_path / "marker")]})
    assert r.result["quick"] == 7
    assert r.result["fill"] == [True, True], "the call to the other module waited"
    assert r.result["rows"] == [1 << 20] * 3
    assert r.result["sizes"] == [0, 1 << 20, 1 << 20]
