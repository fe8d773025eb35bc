"""Comm.quick: a plain async call's cached operands named without the general path, and
only when naming is all that path would do (else None: the call takes that path)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from polybus.client.naming import content_key
from polybus.client.operands import Comm, Known
from polybus.wire.codec import Ref

LINK: Any = SimpleNamespace(name="server-0")


def _comm(**plan: Any) -> Comm:
    comm = Comm(None, None, Known(), **{"positions": frozenset({1}), **plan})  # type: ignore[arg-type]
    comm.known.drops_for(LINK)  # (arrays other tests freed: counted, as a first call would)
    return comm


def _frozen(n: int = 8, start: float = 0.0) -> np.ndarray:
    b = np.arange(start, start + n)
    b.flags.writeable = False
    return b


def test_a_held_frozen_operand_is_named_by_a_ref_and_the_rest_kept() -> None:
    comm, b, row = _comm(), _frozen(), np.ones(3)
    key = content_key(b)
    assert key is not None
    assert comm.quick((row, b), LINK) is None  # the replica has not been sent it yet
    comm.known.of(LINK).add(key)
    out = comm.quick((row, b), LINK)
    assert out is not None and out[0] is row
    assert type(out[1]) is Ref and (out[1].kind, out[1].key) == ("op", key)
    assert comm.quick((row, b), LINK)[1] is out[1]  # type: ignore[index]  # one Ref a key
    assert comm.quick((row,), LINK) == [row]  # (no argument at the cached position)


def test_what_the_general_path_must_do_is_left_to_it() -> None:
    comm, b = _comm(), _frozen(start=100.0)
    comm.known.of(LINK).add(content_key(b))  # type: ignore[arg-type]
    assert comm.quick((0, b), LINK) is not None
    assert comm.quick((0, _frozen(start=100.0)), LINK) is None  # never hashed: same bytes
    other: Any = SimpleNamespace(name="server-1")
    assert comm.quick((0, b), other) is None  # another replica: a Put first
    writable = np.arange(100.0, 108.0)
    assert content_key(writable) == content_key(b)
    assert comm.quick((0, writable), LINK) is None  # could change: hashed at each call
    b.flags.writeable = True  # unfrozen since: hashed again (and maybe sent again)
    assert comm.quick((0, b), LINK) is None
    assert comm.quick((0, 7), LINK) is None  # not an array: the general path decides


def test_drops_waiting_or_another_plan_take_the_general_path() -> None:
    b = _frozen(start=200.0)
    key = content_key(b)
    for plan in ({"auto": True}, {"prefetch_all": True}, {"rest_from": 1},
                 {"positions": frozenset()}, {"aggregator": object()}):
        comm = _comm(**plan)
        comm.known.of(LINK).add(key)  # type: ignore[arg-type]
        assert comm.quick((0, b), LINK) is None, plan
    comm = _comm()
    comm.known.of(LINK).add(key)  # type: ignore[arg-type]
    assert comm.quick((0, b), LINK) is not None
    comm.known.dead.append("f" * 32)  # a freed content to tell the replicas of
    assert comm.quick((0, b), LINK) is None
    comm.known.drops_for(LINK)  # told (in the next general message)
    assert comm.quick((0, b), LINK) is not None
