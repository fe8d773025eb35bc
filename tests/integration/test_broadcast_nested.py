"""Broadcast handles inside list, tuple and dict arguments travel as references.

A new-user trial passed ``[h, i]`` to every call and sent 19.2 MB where 6.4 MB (the
broadcast to two replicas) would do: a handle inside a container went by value with
each call. Now the client names it there (client/nested.py), the call marks the
argument (``Call.inside``), and the replica resolves it from its operand cache, with a
miss repaired as for a handle of its own.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

import polybus
from polybus import wait
from polybus.client.session import Session
from polybus.testing.apps import write_app

from .comm_harness import call, cluster

SIZE = 400_000  # bytes of the broadcast value

SERVER = """
    import numpy as np

    def first(xs, d, t):
        # the handle's value in each container, and what kind each container arrived as
        v = float(np.asarray(xs[0])[1] + np.asarray(d["k"])[2] + np.asarray(t[1])[3])
        return [v + xs[1], type(xs).__name__, type(t).__name__, type(d["k"]).__name__,
                bool(xs[0].flags.writeable)]

    def peek(xs):
        return float(xs[0][0])
"""

CLIENT = """
    import numpy as np
    import polybus
    from polybus import use, wait

    first = use("first")
    peek = use("peek")

    def main(calls=6, frozen=True):
        a = np.arange(50_000.0)  # 400 KB
        if frozen:
            a.flags.writeable = False
        h = polybus.broadcast(a)
        got = wait([first([h, i], {"k": h}, (i, h)) for i in range(calls)])
        small = np.arange(10.0)  # the same call with the arrays themselves, by value
        plain = wait(first([small, 0], {"k": small}, (0, small)))
        return got, plain

    def alternate():
        ha = polybus.broadcast(np.full(100_000, 1.0))  # 800 KB each, in a cache of
        hb = polybus.broadcast(np.full(100_000, 2.0))  # 1 MiB: each Put evicts the other
        return [wait(peek([h])) for h in (ha, hb, ha, hb, ha)]
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    transport = "TRANSPORT"
    define.first = {}
    define.peek = { cache_bytes = "1MiB" }

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.first = { callstyle = "async" }
    use.peek = { callstyle = "sync" }

    [bind]
    "client.first" = "server.first"
    "client.peek" = "server.peek"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("transport", "aggregate", "frozen"), [
    ("tcp", False, True), ("tcp", True, False), ("ipc", False, False), ("shm", True, True)])
def test_handles_in_a_list_tuple_and_dict_go_once_and_arrive_as_their_values(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, transport: str, aggregate: bool,
        frozen: bool) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.replace("TRANSPORT", transport))
    sets = [f"modules.client.args=[6, {str(frozen).lower()}]"]
    if aggregate:
        sets.append("modules.client.use.first.aggregate=3")
    with caplog.at_level("WARNING", logger="polybus.client"):
        r = polybus.run(app, sets, worker_output=None)
    got, plain = r.result
    assert [g[0] for g in got] == [6.0 + i for i in range(6)]
    # The containers arrive as the same calls' with arrays in them do (a tuple as a
    # list, as the codec carries it), and the value read-only, as a cached operand is.
    assert all(g[1:4] == plain[1:4] == ["list", "list", "ndarray"] for g in got)
    assert all(g[4] is False for g in got) and plain[4] is True
    assert not [m for m in caplog.messages if "broadcast" in m], caplog.messages
    # By value each call carried it three times: 2 x 400 KB for the broadcast, then 6 x
    # 3 x 400 KB. Now the broadcast and a few hundred bytes a call.
    assert r.bytes_sent < 2 * SIZE + SIZE, r.bytes_sent


@pytest.mark.timeout(60)
def test_a_handle_inside_a_list_evicted_at_the_replica_is_put_again(tmp_path: Path) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.replace("TRANSPORT", "tcp").replace("replication = 2",
                                                                  "replication = 1"))
    r = polybus.run(app, ["modules.client.entrypoint=\"alternate\""], worker_output=None)
    assert r.result == [1.0, 2.0, 1.0, 2.0, 1.0]


HARNESS = """
[modules.server]
source = "server.py"
replication = REPLICAS
PICKLE
define.inner = CACHE
define.slow_double = {}

[modules.client]
source = "client.py"
entrypoint = "main"
use.inner = { callstyle = "STYLE" }
use.slow_double = { callstyle = "async" }

[bind]
"client.inner" = "server.inner"
"client.slow_double" = "server.slow_double"
"""


def _toml(replicas: int = 1, style: str = "sync", cache: str = "{}",
          pickle: bool = False) -> str:
    return (HARNESS.replace("REPLICAS", str(replicas)).replace("STYLE", style)
            .replace("CACHE", cache).replace("PICKLE", "pickle = true" if pickle else ""))


def _frozen(n: int, fill: float = 1.0) -> np.ndarray:
    a = np.full(n, fill)
    a.flags.writeable = False
    return a


def _sent(s: Session) -> int:
    return sum(lk.channel.bytes_sent for lk in s.links["server"])


def test_a_replica_that_lost_the_value_gets_it_again(tmp_path: Path) -> None:
    a = _frozen(1000, 2.0)
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        h = polybus.broadcast(a)
        assert call(s, "inner", [h, 1]) == ["list", [2000.0], [True], None]
        cache = c.runtimes[0].cache
        cache.clear()  # what a restarted replica has: nothing
        assert wait(s.call("inner", (), {"xs": {"k": h}})) == ["dict", [2000.0], [True], None]
        assert cache.misses == 1 and s.dispatchers["inner"].comm.resent == 1  # type: ignore[union-attr]
        assert call(s, "inner", (h, h)) == ["list", [2000.0, 2000.0], [True, True], None]
        assert cache.misses == 1  # (put again with the repaired call, and held since)


def test_calls_without_handles_inside_are_not_marked_and_not_looked_into(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from polybus.worker import cache as replica_cache

    looked: list[object] = []
    walk = replica_cache._resolve_inside

    def counted(*args: object) -> object:
        looked.append(args[1])
        return walk(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(replica_cache, "_resolve_inside", counted)
    a = _frozen(1000)
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        h = polybus.broadcast(a)  # every binding names handles from now on
        assert call(s, "inner", [np.ones(3), 1]) == ["list", [3.0], [False], None]
        assert call(s, "inner", {"k": [1, 2]}, h) == ["dict", [], [], 1000.0]
        assert looked == [] and c.runtimes[0].cache.hits == 1  # (the handle of its own)
        assert call(s, "inner", [np.ones(3), h]) == ["list", [3.0, 1000.0], [False, True], None]
        assert len(looked) == 1


def test_many_calls_over_two_replicas_send_the_value_once_per_replica(tmp_path: Path) -> None:
    a = _frozen(SIZE // 8)
    with cluster(tmp_path, _toml(replicas=2, style="async")) as c:
        s = c.session()
        h = polybus.broadcast(a)
        ps = [s.call("inner", ((h, i),), {}) for i in range(10)]
        assert all(wait(p) == ["list", [float(SIZE // 8)], [True], None] for p in ps)
        assert _sent(s) < 2 * SIZE + SIZE  # by value: 2 + 10 times SIZE
        assert sum(rt.cache.hits for rt in c.runtimes) == 10


def test_handles_beside_promises_forwarded_and_waited_for(tmp_path: Path) -> None:
    a = _frozen(1000)
    with cluster(tmp_path, _toml(replicas=2, style="async")) as c:
        s = c.session()
        h = polybus.broadcast(a)
        p = s.call("slow_double", (np.ones(4), 0.2), {})
        # A promise inside the list goes replica to replica (forwarded from there); the
        # handle beside it is named.
        q = s.call("inner", ([h, p],), {})
        assert wait(q) == ["list", [1000.0, 8.0], [True, False], None]
        # A promise of its own goes replica to replica; the handle in the list is named.
        p2 = s.call("slow_double", (np.ones(4), 0.2), {})
        q2 = s.call("inner", ({"h": h, "n": 3},), {"b": p2})
        assert wait(q2) == ["dict", [1000.0], [True], 8.0]
        assert sum(rt.forwarding.forwarded for rt in c.runtimes) == 2
        assert _sent(s) < 2 * a.nbytes + 16 * 1024


def test_handles_beside_a_cached_operand(tmp_path: Path) -> None:
    a, b = _frozen(20_000, 1.0), _frozen(20_000, 3.0)
    with cluster(tmp_path, _toml(cache='{ cache = ["b"] }')) as c:
        s = c.session()
        h = polybus.broadcast(a)
        for _ in range(4):
            assert call(s, "inner", [h, h]) == ["list", [20_000.0] * 2, [True] * 2, None]
            got = wait(s.call("inner", ([h],), {"b": b}))
            assert got == ["list", [20_000.0], [True], 60_000.0]
        assert _sent(s) < a.nbytes + b.nbytes + 16 * 1024  # each once
        assert c.runtimes[0].cache.misses == 0


def test_a_handle_beside_values_that_are_pickled(tmp_path: Path) -> None:
    a = _frozen(1000)
    with cluster(tmp_path, _toml(pickle=True)) as c:
        s = c.session()
        h = polybus.broadcast(a)
        assert call(s, "inner", [Fraction(1, 3), h]) == ["list", [1000.0], [True], None]
        assert call(s, "inner", {"f": Fraction(1, 3), "h": (h,)}) == ["dict", [], [], None]
        assert c.runtimes[0].cache.hits == 2


class Pair(NamedTuple):
    h: object
    n: int


@pytest.mark.parametrize("aggregate", [False, True])
def test_a_handle_in_a_namedtuple_goes_once_and_one_in_a_set_is_said_to_go_by_value(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, aggregate: bool) -> None:
    # The trial's P(h, i) sent the whole value with every call, and {h} did too, both
    # silently; a namedtuple now names it as a tuple does, and a set says so once.
    toml = _toml(style="async")
    if aggregate:
        toml = toml.replace('use.inner = { callstyle = "async" }',
                            'use.inner = { callstyle = "async", aggregate = 3 }')
    a = _frozen(SIZE // 8)
    with cluster(tmp_path, toml) as c:
        s = c.session()
        h = polybus.broadcast(a)
        with caplog.at_level("WARNING", logger="polybus.client"):
            got = wait([s.call("inner", (Pair(h, i),), {}) for i in range(3)])
            assert got == [["list", [float(SIZE // 8)], [True], None]] * 3
            assert _sent(s) < SIZE + 16 * 1024  # the broadcast, then short references
            assert not caplog.records
            before = _sent(s)
            got = wait([s.call("inner", ({h},), {}) for _ in range(3)])
        assert got == [["list", [float(SIZE // 8)], [False], None]] * 3  # (by value)
        assert _sent(s) - before > 3 * SIZE
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "inside a set" in said[0], said
