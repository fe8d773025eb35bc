"""Promises forwarded from inside list, tuple and dict arguments, at the client: left as
``Ref("fwd", key)`` in a copy of the containers on the way to them (wireargs.inside with
a ``forward``), their places kept beside the handles' (client/nested.py), the argument
marked in ``Call.inside`` whether or not its handles are named (Comm.messages), and
renamed in a copy for a call sent again (client/fwdlost.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from polybus.client.calls import CallRecord
from polybus.client.fwdlost import _forwarded, _renamed
from polybus.client.nested import FWD, HANDLE, Nested
from polybus.client.operands import Comm, Known
from polybus.client.shared import Shared
from polybus.client.snapshot import snapshot
from polybus.client.wireargs import inside
from polybus.wire.codec import Ref
from polybus.wire.messages import Call
from unit.ready import LINK, Ready


def _handle() -> Shared:
    a = np.arange(4.0)
    a.flags.writeable = False
    return Shared("key0", a)


def _comm() -> Comm:
    comm = Comm(None, None, Known())  # type: ignore[arg-type]
    comm.known.drops_for(LINK)
    return comm


class Unsent(Ready):
    """A promise a forwarding call forwards (the test's ``forward`` gives its Ref)."""


def _forward(p: Any) -> Ref | None:
    return Ref("fwd", f"k{p.v}") if type(p) is Unsent else None


def test_forwarded_promises_are_left_as_refs_the_others_answered() -> None:
    h = _handle()
    arg = [Unsent(1), Ready(2), (Unsent(3), h), {"a": Unsent(4), "b": 5}]
    got = inside(arg, _forward)
    assert type(got) is Nested and got.fwd
    assert got.places == {0: FWD, 2: {0: FWD, 1: HANDLE}, 3: {"a": FWD}}
    assert [r.key for r in got.refs()] == ["k1", "k3", "k4"] and got.handles() == [h]
    assert got.value[1] == 2 and type(got.value[2]) is tuple and got.value[3]["b"] == 5
    assert type(arg[0]) is Unsent  # (the program's container is left as it was)
    # Without a forward (forwarding off), every promise is answered, as before
    plain = inside([Unsent(1), {"a": Unsent(4)}])
    assert plain == [1, {"a": 4}]


def test_a_container_of_forwarded_promises_alone_is_marked_sent_named_or_with_values() -> None:
    for inline in (False, True):
        comm = _comm()
        d: Any = SimpleNamespace(interface="f", timeout=None)
        rec = CallRecord(1, d, [inside([Unsent(1), 2], _forward), 3],
                         {"d": inside({"x": (Unsent(2),)}, _forward)}, 0.0)
        call = comm.messages(rec, LINK, inline=inline)[-1]
        assert type(call) is Call and call.inside == [0, "d"], (inline, call.inside)
        assert call.args[0][0].key == "k1" and call.args[1] == 3
        assert call.kwargs is not None and call.kwargs["d"]["x"][0].key == "k2"


def test_a_call_sent_again_names_its_values_inside_under_their_new_keys() -> None:
    got = inside([Unsent(1), {"a": [Unsent(2)], "b": np.ones(2)}], _forward)
    assert _forwarded(got) and not _forwarded(inside([Ready(1)], _forward))
    again = _renamed(got, {"k1": Ref("fwd", "k1+2"), "k2": Ref("fwd", "k2+2")})
    assert [r.key for r in again.refs()] == ["k1+2", "k2+2"]
    assert [r.key for r in got.refs()] == ["k1", "k2"]  # (a copy: the first is as it was)
    assert again.value[1]["b"] is got.value[1]["b"] and again.fwd


def test_a_held_call_keeps_its_refs_and_mark() -> None:
    got = inside([Unsent(1), np.zeros(2)], _forward)
    kept = snapshot([got])[0]
    assert type(kept) is Nested and kept.fwd and kept.refs()[0].key == "k1"
