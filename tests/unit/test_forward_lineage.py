"""What a call answered ``Ref`` keeps to run again (client/fwdlost.py): its own
producers and their values' keys, bounded, and a run again that connects them under
new keys."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from polybus.client.calls import CallRecord
from polybus.client.fwdedge import Edge, edge_of
from polybus.client.fwdlost import Lineage, rerun, runnable, spent
from polybus.wire.codec import Ref


def dispatcher(idempotent: bool = True) -> Any:
    ran: list[CallRecord] = []  # (what is run again)
    return SimpleNamespace(timeout=None, idempotent=idempotent, keep_args=False,
                           interface="k", ran=ran, again=ran.append)


def record(cid: int, *args: Any, idempotent: bool = True) -> CallRecord:
    return CallRecord(cid, dispatcher(idempotent), list(args), None, 0.0)  # type: ignore[arg-type]


def consumer_of(cid: int, producer: CallRecord, *more: Any,
                idempotent: bool = True) -> tuple[CallRecord, Edge]:
    """Call ``cid`` naming ``producer``'s value, answered Ref."""
    rec = record(cid, Ref("fwd", f"n.{cid}.0"), *more, idempotent=idempotent)
    e = Edge(producer, rec, f"n.{cid}.0")
    rec.set_value(Ref("fwd", []))
    return rec, e


def test_the_last_calls_keep_their_inputs_the_older_cannot_run_again() -> None:
    lineage = Lineage(calls=2)
    f = record(1, 5)
    f.set_value(Ref("fwd", []))
    recs = []
    for cid in (2, 3, 4):
        rec, e = consumer_of(cid, f)
        lineage.keep(rec, [e])
        recs.append(rec)
    assert lineage.cut == 1
    assert [runnable(r) for r in recs] == [False, True, True]
    assert recs[0].inputs == [] and recs[2].inputs == [(f, "n.4.0")]
    assert runnable(f)  # (names no forwarded value: nothing to keep)


def test_arguments_past_the_byte_bound_let_the_oldest_go() -> None:
    big = np.zeros(1 << 17)  # 1 MiB
    lineage = Lineage(nbytes=(3 << 20) // 2)
    f = record(1, 5)
    f.set_value(Ref("fwd", []))
    a, ea = consumer_of(2, f, big)
    lineage.keep(a, [ea])
    b, eb = consumer_of(3, f, big.copy())
    lineage.keep(b, [eb])
    assert not runnable(a) and runnable(b) and lineage.cut == 1
    c, ec = consumer_of(4, f, np.zeros((3 << 20) // 8))  # over the bound alone: kept
    lineage.keep(c, [ec])
    assert runnable(c) and not runnable(b)


def test_only_an_idempotent_call_answered_ref_keeps_them() -> None:
    f = record(1, 5)
    f.set_value(Ref("fwd", []))
    fwd: Any = SimpleNamespace(lineage=Lineage())
    once, e1 = consumer_of(2, f, idempotent=False)
    spent(fwd, once, [e1])
    by_value = record(3, Ref("fwd", "n.3.0"))
    e3 = Edge(f, by_value, "n.3.0")
    by_value.set_value(7)
    spent(fwd, by_value, [e3])
    assert getattr(once, "inputs", None) is None and getattr(by_value, "inputs", None) is None
    again, e4 = consumer_of(4, f)
    spent(fwd, again, [e4])
    assert again.inputs == [(f, e4.key)]


def test_run_again_its_edges_are_connected_anew_under_new_keys() -> None:
    f = record(1, 5)
    f.set_value(Ref("fwd", []))
    fwd: Any = SimpleNamespace(lineage=Lineage(), edges={}, deps={}, rerunning=None)
    k, e = consumer_of(2, f, 3)
    k.kwargs = {"also": Ref("fwd", "n.2.0"), "plain": 1}
    k.attempts = 1
    e.to, e.failed, e.asked, e.kept = object(), "x", True, True  # type: ignore[assignment]
    spent(fwd, k, [e])
    rerun(fwd, k)
    assert not k.done and k.dispatcher.ran == [k]  # type: ignore[attr-defined]
    # a new edge from the same producer, under a new key, none of the old one's state
    [new] = fwd.deps[2]
    assert new is not e and (new.producer, new.consumer) == (f, k)
    assert new.key == "n.2.0+1" and new.to is None and not (new.failed or new.asked or new.kept)
    assert fwd.edges == {1: [new]}
    assert [type(a) for a in k.args] == [Ref, int] and k.args[0].key == "n.2.0+1"
    assert k.kwargs["also"].key == "n.2.0+1" and k.kwargs["plain"] == 1
    assert getattr(k, "inputs", None) is None
    # the client knows the edge by its new key, and by no other
    assert edge_of(fwd.deps, "n", "n.2.0+1") is new
    assert edge_of(fwd.deps, "n", "n.2.0") is None
    assert edge_of(fwd.deps, "m", "m.2.0+1") is None
    assert edge_of(fwd.deps, "n", "n.2.x+1") is None


def test_a_call_run_again_leaves_nothing_in_the_lineage_to_cut() -> None:
    f = record(1, 5)
    f.set_value(Ref("fwd", []))
    fwd: Any = SimpleNamespace(lineage=Lineage(calls=1), edges={}, deps={},
                           rerunning=None)
    k, e = consumer_of(2, f)
    spent(fwd, k, [e])
    rerun(fwd, k)
    other, e2 = consumer_of(3, f)
    spent(fwd, other, [e2])  # pushes k's entry out: emptied by its run again, not cut
    assert fwd.lineage.cut == 0 and [x.key for x in fwd.deps[2]] == [e.key + "+0"]


def test_the_lineage_keeps_no_call_alive_that_nothing_else_does() -> None:
    import gc
    import weakref

    f = record(1, 5)
    f.set_value(Ref("fwd", []))
    lineage = Lineage()
    k, e = consumer_of(2, f)
    lineage.keep(k, [e])
    assert k.inputs is not None
    kept = weakref.ref(k.inputs)  # (and through it, the producers)
    gc.disable()  # (freed as the program lets it go: no cycle left for the collector)
    try:
        del k, e
        assert kept() is None and lineage.cut == 0
    finally:
        gc.enable()


def test_arguments_large_bytes_and_containers_count_whole_against_the_byte_bound() -> None:
    # A call's large bytes travel out of band (kept so in its arguments), and a list or
    # dict holds its items: each counts as the bytes it holds, not as its wrapper's or
    # outer container's few, or the bound let any number of MiB through.
    from polybus.wire.codec import OutOfBand

    blob = b"x" * (1 << 20)  # 1 MiB
    for arg in (OutOfBand(blob), [blob], {"a": np.zeros(1 << 17)}, (blob,)):
        lineage = Lineage(nbytes=(3 << 20) // 2)
        f = record(1, 5)
        f.set_value(Ref("fwd", []))
        a, ea = consumer_of(2, f, arg)
        lineage.keep(a, [ea])
        assert lineage.bytes >= 1 << 20, (type(arg), lineage.bytes)
        b, eb = consumer_of(3, f, arg)
        lineage.keep(b, [eb])
        assert not runnable(a) and runnable(b) and lineage.cut == 1, type(arg)
