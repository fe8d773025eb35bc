"""Broadcast handles inside list, tuple and dict arguments: found and marked at the
client (wireargs.inside, client/nested.py, Comm.messages), looked for at the replica
only in the arguments a call marks (worker/cache.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, NamedTuple

import msgspec
import numpy as np
import pytest

from polybus.client.calls import CallRecord
from polybus.client.nested import HANDLE, MAX_DEPTH, Nested
from polybus.client.operands import Comm, Known
from polybus.client.shared import Shared
from polybus.client.snapshot import snapshot
from polybus.client.wireargs import holds_handle, inside, plain_args, wire
from polybus.wire.codec import Codec, Ref
from polybus.wire.framing import FrameDecoder
from polybus.wire.messages import Call, Put, _Msg
from polybus.worker.cache import OperandCache, resolve
from unit.ready import LINK, Ready


def _handle(n: int = 4, start: float = 0.0) -> Shared:
    a = np.arange(start, start + n)
    a.flags.writeable = False
    return Shared(f"key{start:g}", a)


# -- the client: which arguments hold handles, and where ------------------------------
def test_a_container_without_handles_is_what_wait_makes_of_it() -> None:
    assert wire([1, 2, [3]]) == [1, 2, [3]]  # (no promise: as it is)
    out = wire([1, Ready(2), (Ready(3), "x"), {"k": Ready(4)}])
    assert type(out) is list and out == [1, 2, (3, "x"), {"k": 4}]
    assert type(out[2]) is tuple


def test_handles_in_lists_tuples_and_dicts_are_found_where_they_are() -> None:
    h, g = _handle(), _handle(start=10.0)
    arg = [1, h, (g, Ready(5)), {"k": h, "n": 3, 7: [g]}]
    got = wire(arg)
    assert type(got) is Nested
    assert got.places == {1: HANDLE, 2: {0: HANDLE}, 3: {"k": HANDLE, 7: {0: HANDLE}}}
    assert got.handles() == [h, g, h, g]
    v = got.value
    assert v is not arg and type(v[2]) is tuple and v[2][1] == 5  # promises answered
    assert v[1] is h and v[3]["k"] is h  # handles left for the Comm to name


def test_named_copies_only_the_way_to_each_handle_and_keeps_tuples() -> None:
    h = _handle()
    untouched = [1, 2, 3]
    got = inside((untouched, (h, 9), {"a": h}))
    assert type(got) is Nested
    out = got.named(lambda handle: Ref("op", handle.key))
    assert type(out) is tuple and type(out[1]) is tuple and type(out[2]) is dict
    assert out[0] is got.value[0]  # (no handle in it: not copied)
    assert type(out[1][0]) is Ref and out[1][1] == 9 and type(out[2]["a"]) is Ref
    assert got.value[1][0] is h  # the Nested itself is unchanged (sent again elsewhere)


def test_a_handle_deeper_than_the_bound_or_in_a_key_or_set_goes_by_value_said_once(
        caplog: pytest.LogCaptureFixture) -> None:
    h = _handle()
    deep: Any = [h]
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    got = wire(deep)  # h in MAX_DEPTH lists: named
    assert type(got) is Nested and got.handles() == [h]
    with caplog.at_level("WARNING", logger="polybus.client"):
        assert type(wire([deep])) is list  # one level more: by value
        b = Shared("kb", b"xy")
        assert wire({b: 1}) == {b: 1}  # a dict's key is never a handle
        wire([{b}, 1])
        wire([{b}])  # (said once a handle)
    said = [r.getMessage() for r in caplog.records if "cannot be named" in r.getMessage()]
    assert len(said) == 2, said
    assert "(32 bytes)" in said[0] and "(2 bytes)" in said[1]
    # A handle named in one place and left in another is still said (a set here).
    caplog.clear()
    g = _handle(start=50.0)
    with caplog.at_level("WARNING", logger="polybus.client"):
        got = wire([g, {g}])
    assert type(got) is Nested and got.handles() == [g]
    assert any("cannot be named" in r.getMessage() for r in caplog.records)


class Pair(NamedTuple):
    h: Any
    n: int


def test_a_handle_in_a_namedtuple_is_named_as_in_a_tuple(
        caplog: pytest.LogCaptureFixture) -> None:
    # A namedtuple arrives as a list, as any tuple does (docs/configuration.md): its
    # handle is named, not sent with every call (it went by value, and nothing said so).
    h = _handle()
    with caplog.at_level("WARNING", logger="polybus.client"):
        got = wire(Pair(h, 1))
        deeper = wire([Pair(2, h)])
    assert type(got) is Nested and got.places == {0: HANDLE} and got.handles() == [h]
    out = got.named(lambda handle: Ref("op", handle.key))
    assert type(out[0]) is Ref and out[1] == 1
    assert type(deeper) is Nested and deeper.places == {0: {1: HANDLE}}
    assert wire(Pair(1, 2)) == Pair(1, 2)  # (no handle or promise: as it is)
    assert not caplog.records


def test_a_handle_in_a_set_or_a_list_subclass_argument_is_said_to_go_by_value(
        caplog: pytest.LogCaptureFixture) -> None:
    class Row(list[Any]):
        pass

    b, c = Shared("kb", b"xy"), Shared("kc", b"xyz")
    with caplog.at_level("WARNING", logger="polybus.client"):
        assert wire({b}) == {b}  # (it goes as it is: by value)
        wire(frozenset({b}))  # (said once a handle)
        row = Row([c, 1])
        assert wire(row) is row
        assert wire({1, 2}) == {1, 2}
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert "inside a set" in said[0] and "(2 bytes)" in said[0]
    assert "inside a Row" in said[1] and "(3 bytes)" in said[1]


def test_the_aggregated_lean_path_leaves_containers_with_handles_to_the_general_path() -> None:
    h = _handle()
    assert plain_args(([1, h], 2)) is False
    assert plain_args((Pair(h, 1), 2)) is False and plain_args(({h}, 2)) is False
    assert plain_args((Pair(1, 1), {1}, 2)) is True
    assert plain_args(([1, Ready(2)], 2)) is None  # a promise alone: waited for there
    assert plain_args(([1, 2], 2)) is True
    assert holds_handle({"k": (1, h)}) and not holds_handle([Ready(1)])


def test_a_held_call_keeps_a_copy_of_what_could_change_beside_its_handles() -> None:
    h, row = _handle(), np.zeros(3)
    got = wire([h, row])
    kept = snapshot([got])[0]
    assert type(kept) is Nested and kept.places == got.places
    assert kept.value[0] is h and kept.value[1] is not row
    row[:] = 7.0
    assert not kept.value[1].any()


# -- the client: the messages a call makes -------------------------------------------
def _comm() -> Comm:
    comm = Comm(None, None, Known())  # type: ignore[arg-type]
    comm.known.drops_for(LINK)  # (arrays other tests freed: counted, as a first call would)
    return comm


def _rec(args: list[Any], kwargs: dict[str, Any] | None = None) -> CallRecord:
    d: Any = SimpleNamespace(interface="f", timeout=None)
    return CallRecord(1, d, [wire(a) for a in args],
                      {k: wire(v) for k, v in kwargs.items()} if kwargs else None, 0.0)


def test_a_call_marks_the_arguments_holding_handles_and_puts_what_the_replica_lacks() -> None:
    comm, h, g = _comm(), _handle(), _handle(start=20.0)
    comm.known.of(LINK).add(h.key)  # the replica holds h (broadcast), not g
    msgs = comm.messages(_rec([[h, 1], 5, (g,)], {"d": {"x": h}, "n": 3}), LINK)
    puts, call = msgs[:-1], msgs[-1]
    assert type(call) is Call and call.inside == [0, 2, "d"]
    assert [type(m) for m in puts] == [Put] and puts[0].key == g.key  # type: ignore[union-attr]
    a0, a2, d = call.args[0], call.args[2], call.kwargs["d"]  # type: ignore[index]
    assert (type(a0[0]), a0[1]) == (Ref, 1) and a0[0].key == h.key
    assert type(a2) is tuple and a2[0].key == g.key and d["x"].key == h.key
    assert call.args[1] == 5 and call.kwargs["n"] == 3  # type: ignore[index]
    assert puts[0].keep == [h.key]  # type: ignore[union-attr]  # (its Put spares h)


def test_a_call_without_handles_inside_is_not_marked() -> None:
    comm = _comm()
    call = comm.messages(_rec([[1, 2], {"k": 3}, _handle()]), LINK)[-1]
    assert type(call) is Call and call.inside is None  # (a handle of its own: a Ref)
    assert type(call.args[2]) is Ref and call.args[:2] == [[1, 2], {"k": 3}]


def test_a_call_sent_with_values_after_a_second_miss_carries_them_unmarked() -> None:
    comm, h = _comm(), _handle()
    call = comm.messages(_rec([[h]]), LINK, inline=True)[-1]
    assert type(call) is Call and call.inside is None
    assert call.args[0][0] is h.value


# -- the wire and the replica ----------------------------------------------------------
def _roundtrip(msg: Call) -> Call:
    codec = Codec()
    dec = FrameDecoder()
    dec.feed(b"".join(bytes(p) for p in codec.encode(msg)))
    frame = dec.next_frame()
    assert frame is not None
    out = codec.decode(frame)
    assert type(out) is Call
    return out


class _Before(_Msg, tag=1):
    """Call as it was before ``inside``: its place held ``forward``, never sent but nil
    (``again``, added after it, as it is: its one byte is test_rerun_mark.py's)."""

    id: int
    iface: str
    args: list[Any]
    kwargs: dict[str, Any] | None = None
    prio: float = 0.0
    deadline: float = 0.0
    forward: list[Any] | None = None
    again: bool = False


def test_the_mark_travels_and_costs_a_call_without_it_nothing() -> None:
    enc = msgspec.msgpack.Encoder()
    assert enc.encode(Call(3, "f", [[1, 2]], {"k": 1}, 2.0)) == enc.encode(
        _Before(3, "f", [[1, 2]], {"k": 1}, 2.0))  # byte for byte: no call pays for it
    got = _roundtrip(Call(3, "f", [[1, Ref("op", "k")]], {"d": {"x": Ref("op", "k")}},
                          inside=[0, "d"]))
    assert got.inside == [0, "d"] and type(got.args[0][1]) is Ref


def test_the_replica_looks_only_into_the_marked_arguments() -> None:
    cache = OperandCache(1000)
    cache.put("k", b"K")
    unmarked = Call(1, "f", [[1, Ref("op", "k")]])
    assert resolve(cache, unmarked) is None
    assert type(unmarked.args[0][1]) is Ref and cache.hits == 0  # not looked into
    marked = Call(2, "f", [[1, [Ref("op", "k")]], [Ref("op", "k")]],
                  {"d": {Ref("op", "k").key: Ref("op", "k")}}, inside=[0, "d"])
    assert resolve(cache, marked) is None
    assert marked.args[0] == [1, [b"K"]] and marked.kwargs == {"d": {"k": b"K"}}
    assert type(marked.args[1][0]) is Ref  # (argument 1 is not marked)
    assert cache.hits == 2


def test_a_marked_operand_that_is_gone_is_a_cache_miss_naming_it() -> None:
    cache = OperandCache(1000)
    fail = resolve(cache, Call(4, "f", [{"a": [Ref("op", "gone")]}], inside=[0]))
    assert fail is not None and (fail.id, fail.kind, fail.message) == (4, "cache-miss", "gone")


def test_a_mark_naming_no_argument_is_a_bad_call() -> None:
    cache = OperandCache(1000)
    for at in (1, -1, "k"):
        fail = resolve(cache, Call(5, "f", [[1]], inside=[at]))
        assert fail is not None and fail.kind == "bad-call", at


def test_the_replica_looks_no_deeper_than_the_bound() -> None:
    cache = OperandCache(1000)
    cache.put("k", b"K")
    deep: Any = [Ref("op", "k")]
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    call = Call(6, "f", [deep, [deep]], inside=[0, 1])
    assert resolve(cache, call) is None
    inner = call.args[0]
    for _ in range(MAX_DEPTH - 1):
        inner = inner[0]
    assert inner == [b"K"]
    assert cache.hits == 1  # (the second argument's Ref is one level deeper: left)


def test_the_handle_value_the_codec_sends_where_no_comm_names_it() -> None:
    h = _handle()
    got = wire((h, 2))
    assert type(got) is Nested
    out = _roundtrip(Call(7, "f", [got]))
    assert out.inside is None and out.args[0][0].tolist() == h.value.tolist()


KEY_REFUSED = ("a broadcast handle of an array cannot be a dict key: it would go by "
               "value, and an array is no key; key the dict by something else, and pass "
               "the handle as an item or an argument")


def test_an_array_handle_as_a_dict_key_is_refused_at_the_client_naming_the_argument(
        caplog: pytest.LogCaptureFixture) -> None:
    # It was said to go by value, then failed at the replica: "a dict key arrived as a
    # map or a reference". (A bytes handle is a key by value: above.)
    from polybus.client.unsendable import named

    h = _handle()
    for arg in ({h: 1}, {(h, 2): 1}, [{"ok": 1}, {h: 1}]):
        with caplog.at_level("WARNING", logger="polybus.client"):
            got = wire(arg)
        assert not [r for r in caplog.records if "cannot be named" in r.getMessage()]
        with pytest.raises(TypeError) as e:
            Codec().encode(Call(1, "readb", [got, 3]))
        assert str(named("readb", [got, 3], None, e.value, False)).startswith(
            "readb(...) argument 1")
        assert str(e.value) == KEY_REFUSED
