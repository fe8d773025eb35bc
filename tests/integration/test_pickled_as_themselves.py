"""With pickle = true on the serving module, a dataclass (and a datetime, date, time,
timedelta, Decimal, UUID or enum member) arrives as itself: as an argument, as an
answer, in an aggregated batch, sent on from stage to stage, and inside a dataclass
argument that holds a promise. They arrived converted (a dataclass as a dict of its
fields) while a complex number already arrived as itself, unlike Ray, Dask or
multiprocessing, which a user who turned pickle on expected. A dataclass of a class the
other side cannot import is refused saying so (wire/pickling.py), and the run goes on."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_app

SHAPES = """
import enum
from dataclasses import dataclass


class Color(enum.Enum):
    RED = 1


@dataclass
class Point:
    x: int
    y: int


@dataclass(frozen=True)
class Pair:
    a: object
    b: object
"""

SERVER = """
    import datetime
    import decimal
    import uuid
    from dataclasses import dataclass

    from pkshapes import Color, Pair, Point


    @dataclass
    class Own:
        v: int


    def kinds(*values):
        return [type(v).__name__ for v in values]

    def moved(p, dx):
        assert isinstance(p, Point), type(p)
        return Point(p.x + dx, p.y)

    def length(p):
        assert isinstance(p, Point), type(p)
        return p.x + p.y

    def opened(pair):
        return [type(pair).__name__, type(pair.a).__name__, pair.b]

    def stamp(n):
        return {"when": datetime.datetime(2024, 5, 6, 7, 8) + datetime.timedelta(days=n),
                "day": datetime.date(2024, 5, 6), "at": datetime.time(7, 8),
                "took": datetime.timedelta(seconds=n), "price": decimal.Decimal("1.10"),
                "id": uuid.UUID(int=n), "color": Color.RED}

    def own():
        return Own(1)
"""

CLIENT = """
    import datetime
    import decimal
    import uuid
    from dataclasses import dataclass

    from pkshapes import Color, Pair, Point
    from polybus import RemoteException, use, wait
    from polybus.errors import UnsendableError

    kinds = use("kinds"); moved = use("moved"); amoved = use("amoved")
    length = use("length"); opened = use("opened"); stamp = use("stamp"); own = use("own")


    @dataclass
    class Mine:
        v: int


    def main():
        out = {}
        out["kinds"] = kinds(Point(1, 2), datetime.datetime(2024, 1, 2, 3, 4),
                             datetime.date(2024, 1, 2), datetime.time(3, 4),
                             datetime.timedelta(1), decimal.Decimal("1.1"), uuid.UUID(int=1),
                             Color.RED, [Point(3, 4)][0])
        p = moved(Point(1, 2), 10)
        out["moved"] = [type(p) is Point, p == Point(11, 2)]
        got = wait([amoved(Point(i, 0), 1) for i in range(6)])  # aggregated
        out["batch"] = [type(v) is Point and v == Point(i + 1, 0) for i, v in enumerate(got)]
        out["sent_on"] = wait([length(amoved(Point(i, 2), 1)) for i in range(3)])
        out["promise"] = opened(Pair(amoved(Point(0, 0), 1), 7))
        s = stamp(2)
        out["stamp"] = {k: type(v).__name__ for k, v in s.items()}
        out["color"] = s["color"] is Color.RED
        try:
            kinds(Mine(1))
            out["mine"] = "sent"
        except UnsendableError as e:
            out["mine"] = str(e)
        try:
            own()
            out["own"] = "answered"
        except RemoteException as e:
            out["own"] = str(e)
        out["after"] = moved(Point(0, 0), 1) == Point(1, 0)  # the replicas serve on
        return out
"""

TOML = """
    [modules.server]
    source = "server.py"
    replication = 2
    pickle = true
    transport = "TRANSPORT"

    [modules.second]
    source = "server.py"
    replication = 1
    pickle = true
    transport = "TRANSPORT"

    [modules.client]
    source = "client.py"
    entrypoint = "main"
    use.amoved = { callstyle = "async", aggregate = 3 }
    use.length = { callstyle = "async" }

    [bind]
    "client.kinds" = "server.kinds"
    "client.moved" = "server.moved"
    "client.amoved" = "server.moved"
    "client.length" = "second.length"
    "client.opened" = "server.opened"
    "client.stamp" = "server.stamp"
    "client.own" = "server.own"
"""


@pytest.fixture(autouse=True)
def _import_state_put_back(tmp_path: Path) -> Iterator[None]:
    """The run imports ``pkshapes`` in this process (its client's): forgotten after."""
    path, names = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - names:
        if (getattr(sys.modules[name], "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_values_pickle_carries_arrive_as_themselves(tmp_path: Path, transport: str) -> None:
    app = write_app(tmp_path, server=SERVER, client=CLIENT,
                    toml=TOML.replace("TRANSPORT", transport))
    (tmp_path / "pkshapes.py").write_text(SHAPES)
    r = polybus.run(app, worker_output=False, timeout=90)
    out = r.result
    assert out["kinds"] == ["Point", "datetime", "date", "time", "timedelta", "Decimal",
                            "UUID", "Color", "Point"], out["kinds"]
    assert out["moved"] == [True, True]
    assert out["batch"] == [True] * 6
    assert out["sent_on"] == [3, 4, 5]  # (length asserts it got a Point)
    assert r.interfaces["client.amoved"]["forwarded"] >= 1, r.interfaces
    assert r.interfaces["client.amoved"]["batches"] >= 1, r.interfaces
    assert out["promise"] == ["Pair", "Point", 7]
    assert out["stamp"] == {"when": "datetime", "day": "date", "at": "time",
                            "took": "timedelta", "price": "Decimal", "id": "UUID",
                            "color": "Color"}
    assert out["color"] is True
    assert out["mine"].startswith(
        "kinds(...) argument 1: a value of type Mine, a class of module 'client', cannot be "
        "sent: with pickle = true it is pickled, to arrive as itself, and no replica can "
        "import module 'client', which defines that class; send its fields as a dict"
    ), out["mine"]
    assert "the value it returned cannot be sent" in out["own"], out["own"]
    assert ("the client (or a replica of another module it is sent on to) cannot import "
            "module 'server', which defines that class") in out["own"], out["own"]
    assert out["after"] is True
