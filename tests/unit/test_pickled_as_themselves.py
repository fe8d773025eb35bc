"""With pickle on, a dataclass, datetime, date, time, timedelta, Decimal, UUID or enum
member arrives as itself, in every message that carries a program's values (wire/
pickling.py). msgspec, which encodes every message, has a form of its own for each, so
they arrived converted (a dataclass as a dict of its fields) even with pickle on, where
a complex number already arrived as itself; a Ray, Dask or multiprocessing user who
turned pickle on expected the dataclass back. With pickle off they are converted, as
docs/configuration.md's table says (test_docs_codec.py)."""

from __future__ import annotations

import datetime
import decimal
import enum
import sys
import types
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pytest

from polybus.usernames import import_name
from polybus.wire.codec import Codec
from polybus.wire.framing import FrameDecoder
from polybus.wire.messages import (
    Batch,
    BatchResult,
    Call,
    CallBatch,
    Deliver,
    Fetched,
    Message,
    Put,
    Result,
)


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


@dataclass
class Point:
    x: int
    y: int


@dataclass(frozen=True, slots=True)
class Frozen:
    when: datetime.date
    tags: list[str] = field(default_factory=list)


@dataclass
class Holder:
    inner: Point
    arr: Any
    pair: tuple[int, int]


class Pair(NamedTuple):
    a: Any
    b: Any


TZ = datetime.timezone(datetime.timedelta(hours=2))
VALUES = [
    Point(1, 2), Frozen(datetime.date(2024, 5, 6), ["a"]),
    datetime.datetime(2024, 5, 6, 7, 8, 9, 500),
    datetime.datetime(2024, 5, 6, 7, 8, tzinfo=TZ),  # (its own zone, not UTC)
    datetime.date(2024, 5, 6), datetime.time(7, 8, 9, 500), datetime.time(7, 8, tzinfo=TZ),
    datetime.timedelta(days=1, seconds=2), decimal.Decimal("1.10"), uuid.UUID(int=1),
    Color.RED, Level.HIGH,
]


def received(msg: Message, pickle: bool = True) -> Any:
    pieces = Codec(allow_pickle=pickle).encode(msg)
    d = FrameDecoder()
    d.feed(b"".join(bytes(memoryview(p).cast("B")) for p in pieces))
    frame = d.next_frame()
    assert frame is not None
    return Codec(allow_pickle=pickle).decode(frame)


def same(got: Any, sent: Any) -> bool:
    return type(got) is type(sent) and got == sent and repr(got) == repr(sent)


@pytest.mark.parametrize("value", VALUES, ids=[type(v).__name__ for v in VALUES])
def test_each_arrives_as_itself_as_an_argument_and_an_answer(value: Any) -> None:
    call = received(Call(1, "f", [value, 3], {"k": value}))
    assert same(call.args[0], value) and call.args[1] == 3 and same(call.kwargs["k"], value)
    assert same(received(Result(1, value)).value, value)
    # With pickle off, converted, as before (the table in docs/configuration.md).
    off = received(Result(1, value), pickle=False).value
    assert not same(off, value)  # (a datetime with a zone arrives in UTC)


def test_inside_lists_tuples_dicts_and_sets_and_as_dict_keys() -> None:
    d = datetime.date(2024, 1, 2)
    sent = {"pts": [Point(1, 2), 5, "s"], "t": (Color.RED, 1), "nt": Pair(d, 2),
            "deep": [{"x": [Point(3, 4)]}], Color.RED: "key", (d, 1): "tuple key",
            frozenset({d}): "frozenset key", "set": {d}}
    got = received(Result(1, sent)).value
    assert same(got["pts"][0], Point(1, 2)) and got["pts"][1:] == [5, "s"]
    assert got["t"] == [Color.RED, 1] and type(got["t"][0]) is Color  # (a tuple: a list)
    assert got["nt"] == [d, 2] and got["deep"][0]["x"][0] == Point(3, 4)
    assert got[Color.RED] == "key" and got[(d, 1)] == "tuple key"
    assert got[(d,)] == "frozenset key" and got["set"] == [d]  # (as with no date in them)
    assert sent["pts"][0] == Point(1, 2) and type(sent["t"]) is tuple  # (not changed)


def test_a_dataclass_keeps_what_is_inside_it_as_it_was() -> None:
    arr = np.arange(6.0).reshape(2, 3)
    got = received(Call(1, "f", [Holder(Point(1, 2), arr, (1, 2))])).args[0]
    assert type(got) is Holder and type(got.inner) is Point and got.pair == (1, 2)
    assert np.array_equal(got.arr, arr) and got.arr.dtype == arr.dtype


@pytest.mark.parametrize("msg", [
    Batch([Call(1, "f", [Point(1, 2)]), Result(2, Point(1, 2))]),
    CallBatch(1, "f", [[1], [Point(1, 2)]]), BatchResult(1, [1, Point(1, 2)]),
    Put("k", {"p": Point(1, 2)}), Deliver("k", True, Point(1, 2)),
    Fetched(1, True, [Point(1, 2)]),
], ids=lambda m: type(m).__name__)
def test_every_message_that_carries_values(msg: Message) -> None:
    got = received(msg)
    assert type(got) is type(msg)
    assert "Point(x=1, y=2)" in repr(got) and "'x': 1" not in repr(got)


def test_values_with_none_of_them_are_sent_as_they_are() -> None:
    msg = Call(1, "f", [[1, 2.5, "a"], {"k": [b"x"]}, np.zeros(3)], None)
    from polybus.wire.pickling import message
    assert message(msg) is msg
    assert repr(received(msg).args) == repr(received(msg, pickle=False).args)


def test_with_pickle_off_the_encoder_is_msgspecs_own() -> None:
    """Pickle off looks at nothing more than before: its encoder is msgspec's."""
    import msgspec
    assert type(Codec()._enc) is msgspec.msgpack.Encoder
    assert received(Result(1, [Point(1, 2)]), pickle=False).value == [{"x": 1, "y": 2}]


def _program_module(monkeypatch: pytest.MonkeyPatch, name: str, code: str) -> Any:
    module = types.ModuleType(import_name(name))
    monkeypatch.setitem(sys.modules, module.__name__, module)  # (first: @dataclass looks)
    exec(code, module.__dict__)
    return module


def _refused(value: Any) -> str:
    with pytest.raises(TypeError) as e:
        Codec(allow_pickle=True).encode(Call(1, "f", [value]))
    return str(e.value)


PROGRAM = """
import enum
from dataclasses import dataclass

@dataclass
class Box:
    v: int

class Mode(enum.Enum):
    ON = 1
"""


def test_a_dataclass_or_enum_of_the_programs_module_is_refused_saying_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    module = _program_module(monkeypatch, "client", PROGRAM)
    said = _refused([module.Box(1)])
    assert said == ("a value of type Box, a class of module 'client', cannot be sent: with "
                    "pickle = true it is pickled, to arrive as itself, and no replica can "
                    "import module 'client', which defines that class; send its fields as "
                    "a dict, or define the class in a module of its own that both sides "
                    "import"), said
    assert _refused({"m": module.Mode.ON}).startswith(
        "a value of type Mode, a class of module 'client', cannot be sent: "), said

    @dataclass
    class Local:
        v: int

    assert "no other process can import a class defined inside a function" in \
        _refused(Local(1))


def test_a_replica_returning_a_dataclass_of_its_own_module_names_the_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from polybus.client.stubs import importing, serving

    module = _program_module(monkeypatch, "server", PROGRAM)
    serving("server")  # (as a worker of module 'server' is)
    try:
        with pytest.raises(TypeError) as e:
            Codec(allow_pickle=True).encode(Result(1, module.Box(1)))
    finally:
        importing(None)
    assert ("the client (or a replica of another module it is sent on to) cannot import "
            "module 'server', which defines that class; return its fields as a dict"
            ) in str(e.value), str(e.value)


def test_a_dataclass_with_a_field_pickle_cannot_take_is_a_type_error() -> None:
    import threading
    said = _refused(Holder(Point(1, 2), threading.Lock(), (1, 2)))
    assert said.startswith("a value of type Holder cannot be pickled: cannot pickle"), said


def _nested(n: int, kind: type) -> Any:
    v: Any = [Point(1, 2)]
    for _ in range(n):
        v = kind([v]) if kind is not dict else {"k": v}
    return v


@pytest.mark.parametrize("kind", [list, tuple, dict])
def test_as_deep_a_value_as_with_pickle_off(kind: type) -> None:
    """The look through a value takes a frame a level, as msgspec does: a value 900
    deep is sent as with pickle off, and one 1500 deep is refused as there."""
    got = received(Result(1, _nested(900, kind))).value
    for _ in range(900):
        got = got["k"] if kind is dict else got[0]
    assert got == [Point(1, 2)] and type(got[0]) is Point
    with pytest.raises(TypeError, match=r"^a value nested too deeply"):
        Codec(allow_pickle=True).encode(Result(1, _nested(1500, kind)))


@dataclass(frozen=True)
class Job:
    a: Any
    b: Any = 7


def test_a_dataclass_holding_a_promise_or_handle_is_answered_first_and_goes_as_itself(
        caplog: pytest.LogCaptureFixture) -> None:
    """wireargs.wire, where the binding's module has pickle on: the dataclass's
    promises are answered when the call is made (as with pickle off, where it becomes
    the dict of its fields), in a copy that then travels as itself; a broadcast handle
    in it goes by value inside the pickle, said once."""
    from test_nested_handles import Ready  # tests/unit

    from polybus.client.shared import Shared
    from polybus.client.wireargs import wire

    sent = Job([Ready(2), 3])
    got = wire(sent, pickle=True)
    assert type(got) is Job and got == Job([2, 3]) and type(sent.a[0]) is Ready
    assert wire(sent) == {"a": [2, 3], "b": 7}  # (pickle off: as it always was)
    h = Shared("key", np.arange(3.0))
    with caplog.at_level("WARNING", logger="polybus.client"):
        got = wire(Job(h, Ready(1)), pickle=True)
    assert type(got) is Job and got.a is h and got.b == 1
    assert [m for m in caplog.messages if "was passed inside a Job" in m]
    arrived = received(Call(1, "f", [got])).args[0]
    assert type(arrived) is Job and np.array_equal(arrived.a, np.arange(3.0))


def test_in_a_table_of_records_or_rows_anywhere() -> None:
    d = datetime.date(2024, 1, 2)
    records = [{"n": i, "s": "x"} for i in range(50)]
    rows = [[i, "x"] for i in range(50)]
    plain = Call(1, "f", [records, rows, [(1, 2)] * 3])
    from polybus.wire.pickling import message
    assert message(plain) is plain  # (nothing to pickle: sent as it is)
    records[30] = {"n": 30, "s": d}
    rows[40] = [40, Point(1, 2)]
    got = received(Call(1, "f", [records, rows, [{d: 1}]])).args
    assert got[0][30] == {"n": 30, "s": d} and type(got[0][30]["s"]) is datetime.date
    assert got[1][40] == [40, Point(1, 2)] and got[0][29] == {"n": 29, "s": "x"}
    assert got[2] == [{d: 1}]
