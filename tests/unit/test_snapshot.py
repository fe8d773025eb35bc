"""client/snapshot.py: what a held call keeps of its arguments, and Comm.held's copies."""

from __future__ import annotations

from typing import Any

import numpy as np

from polybus.client.operands import Comm, Known
from polybus.client.snapshot import frozen, snapshot, snapshot_kwargs, snapshot_row


def test_what_cannot_change_is_kept_as_it_is() -> None:
    b = np.arange(4.0)
    b.flags.writeable = False
    args: list[Any] = [1, 2.5, "s", b"x", None, True, (1, "t"), b, b[1:]]
    assert snapshot(args) is args  # nothing copied, not even the list
    row = tuple(args)
    assert snapshot_row(row) is row
    kw = {"a": 1, "b": b}
    assert snapshot_kwargs(kw) is kw
    assert snapshot_kwargs(None) is None


def test_what_could_change_is_copied_and_the_copy_is_read_only() -> None:
    x = np.zeros(3)
    buf = bytearray(b"ab")
    inner = [x]
    out = snapshot([x, buf, memoryview(b"cd"), inner, {"k": x}, (x, 1)])
    x[:] = 7
    buf[0] = ord("z")
    inner.append(1)
    assert out[0].tolist() == [0.0, 0.0, 0.0] and not out[0].flags.writeable
    assert out[1] == b"ab" and type(out[1]) is bytes
    assert out[2] == b"cd"
    assert len(out[3]) == 1 and out[3][0].tolist() == [0.0] * 3
    assert out[4]["k"].tolist() == [0.0] * 3
    assert type(out[5]) is tuple and out[5][0].tolist() == [0.0] * 3 and out[5][1] == 1
    assert frozen(out[0])


def test_a_view_of_a_writable_array_is_not_frozen_and_is_copied() -> None:
    a = np.zeros((4, 4))
    v = a[1:3]
    v.flags.writeable = False  # read-only itself, but its base can still change
    assert not frozen(v)
    (c,) = snapshot_row((v,))
    a[:] = 5
    assert c.tolist() == [[0.0] * 4] * 2


def test_kwargs_copied_only_where_needed() -> None:
    x = np.ones(2)
    kw = {"n": 3, "x": x}
    out = snapshot_kwargs(kw)
    assert out is not kw and out is not None
    assert out["n"] == 3 and out["x"] is not x


def _comm(**plan: Any) -> Comm:
    return Comm(None, None, Known(), **plan)  # type: ignore[arg-type]


def test_held_cached_operands_share_one_copy_per_content() -> None:
    comm = _comm(positions=frozenset({1}))
    b = np.arange(1000.0)
    first = snapshot([np.zeros(2), b], comm.held)
    second = snapshot([np.zeros(2), b], comm.held)
    assert first[1] is second[1]  # 2 held calls naming b's content: one copy
    assert first[1] is not b and not first[1].flags.writeable
    b[0] = -1  # new content: a copy of its own
    third = snapshot([np.zeros(2), b], comm.held)
    assert third[1] is not first[1] and third[1][0] == -1 and first[1][0] == 0
    assert comm.held(0, np.zeros(2)) is None  # not cached: snapshot copies it itself
    frozen_b = np.arange(3.0)
    frozen_b.flags.writeable = False
    assert comm.held(1, frozen_b) is None  # cannot change: kept as it is


def test_held_by_keyword_and_auto() -> None:
    comm = _comm(names=frozenset({"b"}))
    b = np.arange(10.0)
    out = snapshot_kwargs({"b": b}, comm.held)
    assert out is not None and out["b"] is comm.held("b", b)
    auto = _comm(auto=True)
    big = np.zeros(64 * 1024 // 8)
    assert auto.held(0, big) is not None
    assert auto.held(0, np.zeros(4)) is None


def test_subclasses_sets_namedtuples_and_numpy_scalars() -> None:
    from collections import OrderedDict, defaultdict, namedtuple

    pair = namedtuple("pair", "a b")
    x = np.zeros(2)
    scalar = np.float64(3.0)
    od: OrderedDict[str, Any] = OrderedDict(k=x)
    dd: defaultdict[str, list[Any]] = defaultdict(list, k=[x])
    out = snapshot([pair(x, 1), od, dd, {1, 2}, scalar, pair(1, 2)])
    x[:] = 9
    assert type(out[0]) is pair and out[0].a.tolist() == [0.0, 0.0] and out[0].b == 1
    assert type(out[1]) is OrderedDict and out[1]["k"].tolist() == [0.0, 0.0]
    assert type(out[2]) is defaultdict and out[2].default_factory is list
    assert out[2]["k"][0].tolist() == [0.0, 0.0]
    assert out[3] == {1, 2}
    assert out[4] is scalar  # cannot change
    assert out[5] is not None and snapshot([pair(1, 2)])[0] == pair(1, 2)


def test_a_binding_that_caches_nothing_has_no_keep() -> None:
    assert _comm().keep() is None
    assert _comm(positions=frozenset({0})).keep() is not None


def test_a_held_copy_is_named_without_hashing_it_again(monkeypatch: Any) -> None:
    from polybus.client import naming

    comm = _comm(positions=frozenset({0}))
    b = np.arange(50.0)
    hashed: list[int] = []
    real = naming._array_digest
    monkeypatch.setattr(naming, "_array_digest", lambda *a: hashed.append(1) or real(*a))
    (c,) = snapshot([b], comm.held)
    assert len(hashed) == 1  # b, once
    key = naming.content_key(c)
    assert len(hashed) == 1 and key == real(b)  # the copy's name is known: no second pass


def test_a_value_too_deep_to_copy_is_kept_as_it_is() -> None:
    """A held call's argument 1500 lists deep: copying it raised a bare RecursionError in
    the program's call. It is kept as it is: too deep to copy is too deep to send, which
    the codec says naming the call and argument (UnsendableError)."""
    v: list[object] = []
    for _ in range(1500):
        v = [v]
    args = [1, v]
    assert snapshot(args) is args
    row = (1, v)
    assert snapshot_row(row) is row
