"""The promise of an aggregated call: behaves like its value as any promise does, and is
never tracked by the cyclic garbage collector (no network: a batch answered by hand)."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace
from typing import Any

import pytest

from polybus.client.batchcalls import BatchPromise, Pending
from polybus.client.promise import CallPromise, Promise, wait
from polybus.errors import RemoteException


def _answered(values: list[Any]) -> Pending:
    batcher: Any = SimpleNamespace(interface="f", timeout=None, failed=weakref.WeakSet())
    b = Pending(batcher, 0.0)
    b.values, b.done, b.clean = values, True, True
    return b


class Box:
    def __init__(self) -> None:
        self.size = 3


def test_is_a_promise_and_untracked() -> None:
    p = BatchPromise(_answered([5]), 0)
    assert isinstance(p, Promise) and not isinstance(p, CallPromise)
    assert not gc.is_tracked(p)
    assert p.done and wait(p) == 5 and wait([p, (p,)]) == [5, (5,)]


def test_behaves_like_its_value() -> None:
    b = _answered([7, "ab", [1, 2], Box()])
    seven, text, items, box = (BatchPromise(b, i) for i in range(4))
    # What a msgspec Struct defines itself (equality, order, hash, repr, str) is the
    # value's here, as for every promise.
    assert seven == 7 and seven != 8 and seven < 8 and seven >= 7
    assert hash(seven) == hash(7) and {seven: 1}[7] == 1
    assert repr(text) == "'ab'" and str(seven) == "7" and f"{seven:03d}" == "007"
    assert seven + 1 == 8 and 1 + seven == 8 and -seven == -7 and int(seven) == 7
    assert len(items) == 2 and list(items) == [1, 2] and items[1] == 2 and 2 in items
    assert text.upper() == "AB"
    assert box.size == 3
    # isinstance sees the value's class (Counter.update(p) asks for a Mapping)
    assert isinstance(items, list) and isinstance(text, str) and not isinstance(text, list)
    assert type(items) is BatchPromise and isinstance(items, Promise)
    box.size = 4  # set on the value, not on the promise
    assert b.values[3].size == 4


def test_one_failing_call_raises_alone() -> None:
    b = _answered([1, None, 3])
    b.clean = False
    b.fails = {1: RemoteException("ValueError", "boom", "", interface="f", replica="r")}
    assert wait(BatchPromise(b, 0)) == 1 and wait(BatchPromise(b, 2)) == 3
    with pytest.raises(RemoteException, match="boom"):
        wait(BatchPromise(b, 1))


def test_a_batch_failed_whole_drops_its_arguments_once_sealed() -> None:
    batcher: Any = SimpleNamespace(interface="f", timeout=None, failed=weakref.WeakSet())
    open_batch = Pending(batcher, 0.0)
    open_batch.args.append((1,))
    open_batch.set_error(RemoteException("ValueError", "x", ""))
    assert open_batch.args == [(1,)]  # still open (no id yet): calls may be appended
    sealed = Pending(batcher, 0.0)
    sealed.args.append((1,))
    sealed.id = 7
    assert sealed.set_error(RemoteException("ValueError", "gone", ""))
    assert sealed.args == [] and not sealed.set_error(RemoteException("ValueError", "y", ""))
    with pytest.raises(RemoteException, match="gone"):
        wait(BatchPromise(sealed, 0))


def test_giving_up_on_one_call_of_a_batch_leaves_the_others() -> None:
    # (the HTTP front door's deadline for one request)
    from polybus.errors import CallTimeoutError
    from polybus.http.calls import _give_up

    forgotten: list[Any] = []
    polls: list[int] = []
    reactor = SimpleNamespace(poll=lambda batches=True: polls.append(1))  # (nothing comes)
    batcher: Any = SimpleNamespace(interface="f", timeout=None, forget=forgotten.append,
                                   failed=weakref.WeakSet(), reactor=reactor)
    b = Pending(batcher, 0.0)
    b.id = 1  # sent, not answered yet
    first, second = BatchPromise(b, 0), BatchPromise(b, 1)
    late = CallTimeoutError("no answer from f within 1 s", interface="f")
    assert _give_up(first, late) and len(forgotten) == 1
    assert first.done and not second.done and b.error is None
    assert polls == [1]  # (the unanswered one looked for answers; the failed one did not)
    b.values, b.done = [None, 2], True  # the batch's answer comes after all
    assert wait(second) == 2
    with pytest.raises(CallTimeoutError):
        wait(first)
    assert not _give_up(second, late)  # answered: nothing to give up


def test_inside_a_value_it_travels_as_its_answer() -> None:
    # msgspec encodes a Struct itself, field by field (no hook): a promise in a list,
    # tuple or dict argument must still go as its value, not fail on its batch.
    from polybus.wire.codec import Codec
    from polybus.wire.framing import FrameDecoder
    from polybus.wire.messages import Call

    b = _answered([5, "x"])
    five, x = BatchPromise(b, 0), BatchPromise(b, 1)
    codec = Codec()
    dec = FrameDecoder()
    for piece in codec.encode(Call(1, "f", [[five, 1], {"k": (x,)}], {"y": [five]})):
        dec.feed(piece)
    frame = dec.next_frame()
    assert frame is not None
    msg: Any = codec.decode(frame)
    assert msg.args == [[5, 1], {"k": [x.__polybus_value__()]}] and msg.kwargs == {"y": [5]}


def test_pickled_and_copied_as_its_value() -> None:
    import copy
    import pickle

    b = _answered([[1, 2], 9])
    items = BatchPromise(b, 0)
    assert pickle.loads(pickle.dumps(items)) == [1, 2]
    assert pickle.loads(pickle.dumps({"n": BatchPromise(b, 1)})) == {"n": 9}
    deep = copy.deepcopy(items)
    assert deep == [1, 2] and type(deep) is list and deep is not b.values[0]
