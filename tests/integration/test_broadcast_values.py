"""`polybus.broadcast` takes any value the codec can send (a dict, a list, a str, arrays
inside them, a dataclass), as Dask's ``scatter`` and Ray's ``ray.put`` do: it took only
arrays and bytes, so a lookup table had to go with every call. The value is named by
its encoding (client/broadcastvalue.py), sent once to each replica, and the handle
stands for it as it was broadcast."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import polybus
from polybus import wait
from polybus.errors import UnsendableError
from polybus.testing.apps import write_app

from .comm_harness import call, cluster

SERVER = """
    import os

    import numpy as np

    def lookup(table, k):
        return [table["rates"][k], os.getpid()]

    def total(d):
        return [float(d["w"].sum()) + d["n"], bool(d["w"].flags.writeable)]
"""

CLIENT = """
    import numpy as np
    import polybus
    from polybus import use, wait

    lookup = use("lookup")
    total = use("total")

    def main():
        table = {"rates": {"a": 1.5, "b": 2.5}, "name": "t"}
        h = polybus.broadcast(table)
        table["rates"]["a"] = 99.0  # after: the replicas see it as it was broadcast
        got = wait([lookup(h, k) for k in ["a", "b"] * 10])
        m = polybus.broadcast({"w": np.arange(10.0), "n": 2})
        sums = wait([total(m) for _ in range(4)])
        return [g[0] for g in got], len({g[1] for g in got}), sums
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    transport = "TRANSPORT"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.lookup = { callstyle = "async" }
    use.total = { callstyle = "async" }

    [bind]
    "client.lookup" = "server.lookup"
    "client.total" = "server.total"
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_a_dict_table_goes_once_to_each_replica_and_serves_every_call(
        tmp_path: Path, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.replace("TRANSPORT", transport))
    r = polybus.run(app, worker_output=None)
    rates, replicas, sums = r.result
    assert rates == [1.5, 2.5] * 10 and replicas == 2
    assert sums == [[47.0, False]] * 4  # (its array read-only, as a broadcast array is)
    assert r.broadcasts == {"values": 2, "puts": 4}  # each value once to each replica
    assert r.interfaces["client.lookup"]["operands_named"] == 20
    assert r.interfaces["client.lookup"]["operands_put"] == 0


HARNESS_TOML = """
[modules.server]
source = "server.py"

[modules.client]
source = "client.py"
entrypoint = "main"

[bind]
"client.echo" = "server.echo"
"""


@dataclass
class Point:
    x: int
    y: int


@pytest.mark.parametrize("value", [[1, (2, 3)], (1.0, 2.0), {"a": [1, {"b": "c"}]}, 3.5,
                                   "text", memoryview(b"ab"), np.float64(1.0), None,
                                   Point(1, 2)],
                         ids=lambda v: type(v).__name__)
def test_any_value_arrives_as_the_codec_carries_it(tmp_path: Path, value: object) -> None:
    """What a replica gets is what an argument of that value arrives as (with pickle
    off, a tuple as a list, a dataclass as a dict); the same content is put once."""
    with cluster(tmp_path, HARNESS_TOML) as c:
        s = c.session()
        h = polybus.broadcast(value)
        assert call(s, "echo", h) == call(s, "echo", value)
        assert polybus.broadcast(value).key == h.key  # (its content: the same name)
        assert s.stats().broadcasts == {"values": 2, "puts": 1}


def test_the_handle_stands_for_the_value_as_it_was_broadcast(tmp_path: Path) -> None:
    """A change the program makes afterwards reaches no replica: not the one holding
    it, nor one sent it again after losing it."""
    table = {"k": [1, 2], "w": np.zeros(3)}
    with cluster(tmp_path, HARNESS_TOML) as c:
        s = c.session()
        h = polybus.broadcast(table)
        table["k"].append(3)
        table["w"][:] = 5.0
        table["new"] = 1
        got = call(s, "echo", h)
        assert got["k"] == [1, 2] and "new" not in got and float(got["w"].sum()) == 0.0
        c.runtimes[0].cache.clear()  # (lost there: sent again, from the handle)
        got = call(s, "echo", h)
        assert got["k"] == [1, 2] and "new" not in got and float(got["w"].sum()) == 0.0
        assert polybus.broadcast(table).key != h.key  # (changed: another content)


def test_a_value_the_codec_cannot_send_fails_broadcast_saying_where(tmp_path: Path) -> None:
    with cluster(tmp_path, HARNESS_TOML) as c:
        s = c.session()
        with pytest.raises(UnsendableError) as e:
            polybus.broadcast({"n": 1, "lock": threading.Lock()})
        assert str(e.value).startswith(
            "broadcast(...), at ['lock']: a value of type lock cannot be sent at all "
            "(pickle cannot carry it either)"), str(e.value)
        with pytest.raises(UnsendableError, match=r"^broadcast\(\.\.\.\), at \[1\]: a value "
                           r"of type Fraction cannot be sent by the safe codec"):
            from fractions import Fraction
            polybus.broadcast([1, Fraction(1, 3)])
        assert s.stats().broadcasts == {"values": 0, "puts": 0}  # nothing was sent
        assert len(c.runtimes[0].cache) == 0


def test_an_array_or_bytes_is_named_by_its_bytes_as_before(tmp_path: Path) -> None:
    a = np.arange(5.0)
    a.flags.writeable = False
    with cluster(tmp_path, HARNESS_TOML) as c:
        c.session()
        from polybus.client.naming import content_key
        assert polybus.broadcast(a).key == content_key(a)
        assert polybus.broadcast(b"xy").key == content_key(b"xy")
        assert polybus.broadcast([a]).key != content_key(a)  # (a list: its encoding)
        h = polybus.broadcast(a)
        assert polybus.broadcast(h) is h  # (a handle: broadcast already)


def test_a_dataclass_arrives_as_itself_with_pickle_on(tmp_path: Path) -> None:
    toml = HARNESS_TOML.replace('source = "server.py"', 'source = "server.py"\npickle = true')
    with cluster(tmp_path, toml) as c:
        s = c.session()
        h = polybus.broadcast({"p": Point(1, 2)})
        assert wait(s.call("echo", (h,), {})) == {"p": Point(1, 2)}


@dataclass
class Weights:
    w: np.ndarray  # type: ignore[type-arg]
    n: int


def test_a_dataclass_s_arrays_are_read_only_with_pickle_on(tmp_path: Path) -> None:
    """With pickle on a dataclass arrives as itself: the arrays in its fields are
    read-only on the replica (and in the handle's copy) as a dict's are, so a call that
    writes one fails, rather than changing the value every later call is given."""
    toml = HARNESS_TOML.replace('source = "server.py"', 'source = "server.py"\npickle = true')
    with cluster(tmp_path, toml) as c:
        s = c.session()
        for value in (Weights(np.arange(3.0), 1), {"m": [Weights(np.arange(4.0), 2)]}):
            h = polybus.broadcast(value)
            assert wait(s.call("echo", (h,), {})) is not None  # (it is on the replica)
            held = c.runtimes[0].cache.get(h.key)
            for got in (held, h.value):
                one = got if type(got) is Weights else got["m"][0]
                assert type(one) is Weights
                assert not one.w.flags.writeable, type(got)
