"""Comm.quick: a plain async call's cached operands named without the general path, with
the Drop and the Put that path would send before it, and only when that is all it would
do (else None: the call takes that path)."""

from __future__ import annotations

import gc
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from polybus.client.naming import content_key
from polybus.client.operands import Comm, Known
from polybus.wire.codec import Ref
from polybus.wire.messages import Call, Drop, Message, Put

LINK: Any = SimpleNamespace(name="server-0")
OTHER: Any = SimpleNamespace(name="server-1")


def _comm(**plan: Any) -> Comm:
    comm = Comm(None, None, Known(), **{"positions": frozenset({1}), **plan})  # type: ignore[arg-type]
    gc.collect()
    comm.known.drops_for(LINK)  # (arrays other tests freed: counted, as a first call would)
    comm.known.dead.clear()
    return comm


def _frozen(n: int = 8, start: float = 0.0) -> np.ndarray:
    b = np.arange(start, start + n)
    b.flags.writeable = False
    return b


def _rec(args: list[Any]) -> Any:
    return SimpleNamespace(message=lambda: Call(1, "f", list(args), None, 0.0), args=args,
                           kwargs=None)


def _shown(msgs: list[Message]) -> list[Any]:
    """Messages as comparable values (a Ref by its key, an array by its bytes)."""
    def v(x: Any) -> Any:
        if type(x) is Ref:
            return ("ref", x.key)
        return x.tobytes() if isinstance(x, np.ndarray) else x
    out: list[Any] = []
    for m in msgs:
        if type(m) is Drop:
            out.append(("drop", sorted(m.keys)))
        elif type(m) is Put:
            out.append(("put", m.key, v(m.value), m.keep))
        else:
            assert type(m) is Call
            out.append(("call", [v(a) for a in m.args]))
    return out


def test_a_fresh_frozen_operand_each_round_makes_what_the_general_path_makes() -> None:
    """The program it is for: a fresh frozen B each round, rows of a frozen A, calls
    spread over two replicas. Every call's messages (the Drop of the B it replaces, the
    Put of B to each replica once, the Refs) and the counts are the general path's."""
    quick, general = _comm(), _comm()
    for c in (quick, general):
        c.known.of(LINK), c.known.of(OTHER)  # (written to before: the first is general)
    rng = np.random.default_rng(5)
    taken = 0
    for _ in range(4):
        a, b = rng.random((6, 6)), rng.random((6, 6))  # (the last round's B freed here)
        a.flags.writeable = b.flags.writeable = False
        for lo in range(6):
            link = (LINK, OTHER)[lo % 2]
            args = (a[lo:lo + 1], b, 0.0)
            got = quick.quick(args, link)
            assert got is not None
            named, lead = got
            taken += 1
            want = general.messages(_rec(list(args)), link)
            assert _shown([*lead, Call(1, "f", named, None, 0.0)]) == _shown(want)
            assert named[0] is args[0] and named[2] == 0.0
    assert taken == 24
    for c in (quick, general):
        assert (c.counts.operands_put, c.counts.operands_named) == (8, 16)
    assert quick.known.by_replica[LINK.name] == general.known.by_replica[LINK.name]
    assert len(quick.known.by_replica[LINK.name]) == 1  # one B held there at a time


def test_a_held_frozen_operand_is_named_by_one_ref() -> None:
    comm, b, row = _comm(), _frozen(), np.ones(3)
    key = content_key(b)
    assert key is not None
    comm.known.of(LINK).add(key)
    got = comm.quick((row, b), LINK)
    assert got is not None and got[1] == []
    out = got[0]
    assert out[0] is row and type(out[1]) is Ref and (out[1].kind, out[1].key) == ("op", key)
    again = comm.quick((row, b), LINK)
    assert again is not None and again[0][1] is out[1]  # one Ref a key (encoded once)
    assert comm.quick((row,), LINK) == ([row], [])  # (no argument at the cached position)


def test_what_only_the_general_path_does_is_left_to_it() -> None:
    comm, b = _comm(), _frozen(start=100.0)
    key = content_key(b)
    assert comm.quick((0, b), LINK) is None  # never written to that replica: its Held made there
    comm.known.of(LINK).add(key)  # type: ignore[arg-type]
    assert comm.quick((0, b), LINK) is not None
    writable = np.arange(100.0, 108.0)
    assert content_key(writable) == key
    assert comm.quick((0, writable), LINK) is None  # could change: kept as it is now
    view = _frozen(16, start=300.0)[2:10]  # (a view of a frozen array: named per place)
    assert comm.quick((0, view), LINK) is not None
    assert comm.quick((0, np.array([object()], dtype=object)), LINK) is None  # by value
    b.flags.writeable = True  # unfrozen since: hashed again (and maybe sent again)
    assert comm.quick((0, b), LINK) is None
    assert comm.quick((0, 7), LINK) is None  # not an array: the general path decides
    two = _comm(positions=frozenset({0, 1}))
    two.known.of(LINK)
    # a Put beside another operand: they might not fit the cache together (Comm._apart)
    assert two.quick((_frozen(start=400.0), _frozen(start=500.0)), LINK) is None


def test_another_plan_takes_the_general_path() -> None:
    b = _frozen(start=200.0)
    key = content_key(b)
    for plan in ({"auto": True}, {"prefetch_all": True}, {"rest_from": 1},
                 {"positions": frozenset()}, {"aggregator": object()}):
        comm = _comm(**plan)
        comm.known.of(LINK).add(key)  # type: ignore[arg-type]
        assert comm.quick((0, b), LINK) is None, plan


def test_drops_waiting_go_before_the_call() -> None:
    comm = _comm()
    b, gone = _frozen(start=600.0), _frozen(start=700.0)
    key, old = content_key(b), content_key(gone)
    comm.known.of(LINK).add(key)  # type: ignore[arg-type]
    comm.known.of(LINK).add(old)  # type: ignore[arg-type]
    del gone
    gc.collect()
    got = comm.quick((0, b), LINK)
    assert got is not None and _shown(got[1]) == [("drop", [old])]
    again = comm.quick((0, b), LINK)
    assert again is not None and again[1] == []  # told once


def test_puts_not_written_are_not_held() -> None:
    class Refusing:
        def flush(self, link: Any) -> None:
            pass

        def send_many(self, link: Any, msgs: list[Message]) -> None:
            raise ValueError("cannot be encoded")

    comm = _comm()
    comm.reactor = Refusing()  # type: ignore[assignment]
    comm.known.of(LINK)
    b = _frozen(start=800.0)
    got = comm.quick((0, b), LINK)
    assert got is not None and [type(m) for m in got[1]] == [Put]
    with pytest.raises(ValueError):
        comm.send_quick(LINK, got[1], Call(1, "f", got[0], None, 0.0))
    assert content_key(b) not in comm.known.by_replica[LINK.name]
    again = comm.quick((0, b), LINK)
    assert again is not None and [type(m) for m in again[1]] == [Put]  # put again
