"""A call style or batching that holds a call must not change what the call sends.

``x[:] = i; f(x)`` in a loop sends each ``i`` when calls are written at once (sync,
async). Held calls (async-demand's backlog and the calls written with the next ones, an
aggregated batch) used to be encoded only when written, so each sent what ``x`` held by
then: with ``aggregate = 8`` the loop sent 7 eight times, with async-demand(1) 19 nineteen
times. Every configuration below must give the plain configuration's answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import polybus
from polybus.client.order import Ordered

# Its modules keep test records in globals over several replicas or processes, as
# meant: the note that each copy keeps its own (config/sharedstate.py) is not for them.
pytestmark = pytest.mark.filterwarnings("ignore:.*keeps state between calls")

SERVER = '''
import time

def slow_total(x, delay):
    time.sleep(delay)
    return float(x.sum())

_log = []

def append(x):
    _log.append(x)
    return len(_log)

def log():
    return list(_log)

def first(b, tag):
    return float(b[0])

def total(x, extra=None):
    s = float(x.sum())
    if extra is not None:
        s += float(sum(v.sum() for v in extra["arrays"])) + sum(extra["numbers"])
    return s
'''

LOOPS_CLIENT = '''
import numpy as np
from polybus import use, wait

total = use("total")

def main(calls, size, nested):
    x = np.zeros(size)
    buf = bytearray(8)
    numbers = [0]
    ps = []
    for i in range(calls):
        x[:] = i
        numbers[0] = i
        if nested:
            ps.append(total(x, extra={"arrays": [x[:2]], "numbers": numbers}))
        else:
            ps.append(total(x))
    return [wait(p) for p in ps]

def both(calls, size):
    # the loop with plain arrays, then with arrays and numbers nested in a dict
    return [main(calls, size, False), main(calls, size, True)]
'''

CLIENT = LOOPS_CLIENT + '''
slow_total = use("slow_total")

first = use("first")
append = use("append")
log = use("log")

def ordered(n):
    for i in range(n):
        append(i)
    return log()  # (sync: after the appends, which an open batch still holds)

def evicted():
    b, c = np.zeros(100_000), np.ones(100_000)  # 800 KB each; the cache holds one
    out = [wait(first(b, 0)), wait(first(c, 1))]  # c's Put evicts b (no call holds it)
    p = first(b, 2)  # named, as the client thinks the replica has b: it misses
    b[0] = 99.0  # (after the call: it is re-sent, after the miss, with b as it was)
    out.append(wait(p))
    from polybus.client.stubs import current
    return out + [current().dispatchers["first"].comm.resent]

def stolen(calls, size, delay):
    x = np.zeros(size)
    ps = []
    for i in range(calls):
        x[:] = i
        ps.append(slow_total(x, delay))
    return [wait(p) for p in ps]
'''

TOML = '''
[modules.srv]
source = "srv.py"
replication = 2
define.total = {}
define.slow_total = {}

[modules.evict]
source = "srv.py"
define.first = { cache = ["b"], cache_bytes = "1MiB" }
define.append = {}
define.log = {}

[modules.cli]
source = "cli.py"
entrypoint = "main"
args = [20, 10, false]
use.total = { callstyle = "async" }
use.first = { callstyle = "async" }
use.append = { callstyle = "async", aggregate = 8, linger = "1s" }
use.slow_total = { callstyle = "async", balance = "steal", loadratio = "1:0" }

[bind]
"cli.first" = "evict.first"
"cli.append" = "evict.append"
"cli.log" = "evict.log"
"cli.total" = "srv.total"
"cli.slow_total" = "srv.slow_total"
'''

#: the loops alone (`both`), bound to srv.total alone: without the module evict, whose
#: worker they started for nothing
LOOPS_TOML = """
[modules.srv]
source = "srv.py"
replication = 2
define.total = {}

[modules.cli]
source = "loops.py"
entrypoint = "both"
args = [20, 10]
use.total = { callstyle = "async" }

[bind]
"cli.total" = "srv.total"
"""

CONFIGS = {
    "async-demand(1)": {"modules.cli.use.total": {"callstyle": "async-demand(1)"}},
    "async-demand(2)": {"modules.cli.use.total": {"callstyle": "async-demand(2)"}},
    "async-demand(1), cache": {"modules.cli.use.total": {"callstyle": "async-demand(1)"},
                               "modules.srv.define.total.cache": ["x"]},
    "aggregate": {"modules.cli.use.total": {"callstyle": "async", "aggregate": 8}},
    "aggregate, cache": {"modules.cli.use.total": {"callstyle": "async", "aggregate": 8},
                         "modules.srv.define.total.cache": ["x"]},
    "aggregate, demand": {"modules.cli.use.total": {"callstyle": "async-demand(1)",
                                                    "aggregate": 4}},
    "aggregate, shm": {"modules.cli.use.total": {"callstyle": "async", "aggregate": 8},
                       "modules.srv.transport": "shm"},
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("held")
    (d / "srv.py").write_text(SERVER)
    (d / "cli.py").write_text(CLIENT)
    (d / "app.toml").write_text(TOML)
    (d / "loops.py").write_text(LOOPS_CLIENT)
    (d / "loops.toml").write_text(LOOPS_TOML)
    return d / "app.toml"


def _expected(calls: int, size: int, nested: bool) -> list[float]:
    return [float(i * size + (i * 2 + i if nested else 0)) for i in range(calls)]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_held_call_sends_its_arguments_as_they_were_at_the_call(
        app: Path, name: str) -> None:
    """Each run makes the calls with plain arrays, then with arrays and numbers nested
    in a dict (`both`)."""
    plain, nested = polybus.run(app.with_name("loops.toml"), CONFIGS[name]).result
    assert plain == _expected(20, 10, False), name
    assert nested == _expected(20, 10, True), name


def test_the_plain_configuration_gives_the_same_answers(app: Path) -> None:
    plain, nested = polybus.run(app.with_name("loops.toml")).result
    assert plain == _expected(20, 10, False)
    assert nested == _expected(20, 10, True)


def test_a_call_moved_to_another_replica_sends_its_arguments_as_at_the_call(app: Path) -> None:
    """Every call goes to the first replica; the idle second one steals from its queue.
    A released call is sent again from the client: with what the array held then."""
    r = polybus.run(app, {"modules.cli.entrypoint": "stolen",
                          "modules.cli.args": [24, 10, 0.02]})
    assert r.result == [float(i * 10) for i in range(24)]
    assert sum(s.migrated_in for s in r.replicas) > 0  # calls did move


SIBLINGS = """
[modules.server]
source = "server.py"
replication = 2

[modules.client]
source = "client.py"
entrypoint = "main"
use.double = { callstyle = "async", balance = "steal" }
use.add = { callstyle = "async" }
use.scale = { callstyle = "async-demand(2)" }

[bind]
"client.double" = "server.double"
"client.add" = "server.add"
"client.scale" = "server.scale"
"""


def test_every_binding_to_a_module_whose_calls_may_move_keeps_its_arguments(
        tmp_path: Path) -> None:
    """A replica that gives calls up to a steal takes them from the back of its queue,
    of any interface on the connection: add and scale have no migration of their own,
    but their calls to these replicas may move with double's, so they keep theirs too
    (and add's calls leave the plain async entry, which keeps nothing)."""
    from .comm_harness import cluster

    with cluster(tmp_path, SIBLINGS, replicas=2) as c:
        s = c.session()
        assert all(s.dispatchers[n].keep_args for n in ("double", "add", "scale"))
        entry = s.entries["add"]  # (in order with scale's held calls: client/order.py)
        assert type(entry) is Ordered and entry.entry is s.dispatchers["add"]


def test_a_call_sent_again_after_its_operand_was_evicted_sends_it_as_it_was(app: Path) -> None:
    """The client's own next operand evicts the one an unanswered call names; the call
    misses and goes again by value: with b as it was at the call, not as changed since."""
    r = polybus.run(app, {"modules.cli.entrypoint": "evicted", "modules.cli.args": []})
    assert r.result == [0.0, 1.0, 0.0, 1]  # (the last: calls re-sent after a miss)


def test_a_sync_call_writes_the_batches_made_before_it_first(app: Path) -> None:
    """Six appends wait in an open batch (aggregate = 8, linger 1 s); the sync call to
    log made after them used to be written first and saw none of them."""
    r = polybus.run(app, {"modules.cli.entrypoint": "ordered", "modules.cli.args": [6]})
    assert r.result == [0, 1, 2, 3, 4, 5]
