"""Promise: behaves like its value for ordinary use; no network (a fake reactor)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from polybus.client.calls import CallRecord
from polybus.client.promise import CallPromise, wait
from polybus.errors import RemoteException


class FakeReactor:
    """Answers a record when someone waits on it, and counts the waits."""

    def __init__(self) -> None:
        self.answers: dict[int, Any] = {}
        self.waits = 0
        self.polls = 0

    def poll(self, batches: bool = True) -> None:
        """What `p.done` does when the answer is not here: look, never wait."""
        self.polls += 1

    def wait(self, rec: CallRecord, timeout: float | None = None) -> Any:
        self.waits += 1
        answer = self.answers[rec.id]
        if isinstance(answer, Exception):
            rec.set_error(answer)  # type: ignore[arg-type]
        else:
            rec.set_value(answer)
        return rec.outcome()


_reactor = FakeReactor()
_dispatcher = SimpleNamespace(interface="f", timeout=None)
_next = [0]


def P(value: Any) -> Any:
    _next[0] += 1
    rec = CallRecord(_next[0], _dispatcher, [], None, 0.0)  # type: ignore[arg-type]
    _reactor.answers[rec.id] = value
    return CallPromise(rec, _reactor)  # type: ignore[arg-type]


def test_not_waited_for_until_used() -> None:
    before, looked = _reactor.waits, _reactor.polls
    p = P(5)
    assert not p.done and _reactor.waits == before and _reactor.polls == looked + 1
    assert p + 1 == 6
    assert p.done and _reactor.waits == before + 1
    assert p * 2 == 10 and _reactor.waits == before + 1  # answered once, kept


def test_arithmetic_both_sides() -> None:
    assert P(7) + 3 == 10 and 3 + P(7) == 10
    assert P(7) - 3 == 4 and 10 - P(7) == 3
    assert P(7) * 2 == 14 and 2 * P(7) == 14
    assert P(7) / 2 == 3.5 and 14 / P(7) == 2
    assert P(7) // 2 == 3 and 15 // P(7) == 2
    assert P(7) % 4 == 3 and 15 % P(7) == 1
    assert P(2) ** 3 == 8 and 3 ** P(2) == 9
    assert divmod(P(7), 2) == (3, 1) and divmod(7, P(2)) == (3, 1)
    assert P(6) & 3 == 2 and P(6) | 1 == 7 and P(6) ^ 2 == 4 and 1 << P(3) == 8
    assert P(3) + P(4) == 7
    assert -P(3) == -3 and +P(3) == 3 and abs(P(-3)) == 3 and ~P(0) == -1
    assert round(P(2.5)) == 2 and round(P(2.567), 1) == 2.6


def test_comparison() -> None:
    assert P(3) < 4 and P(3) <= 3 and P(3) > 2 and P(3) >= 3
    assert P(3) == 3 and P(3) != 4 and 4 > P(3)  # noqa: SIM300 - the reflected side
    assert P(2) < P(3)
    assert sorted([P(3), P(1), P(2)]) == [1, 2, 3]
    assert max(P(1), P(9)) == 9


def test_indexing_iteration_len_contains() -> None:
    assert P([10, 20, 30])[1] == 20
    assert P({"a": 1})["a"] == 1
    assert P([1, 2, 3])[P(0)] == 1
    assert list(P([1, 2, 3])) == [1, 2, 3]
    assert list(reversed(P([1, 2]))) == [2, 1]
    a, b = P((4, 5))
    assert (a, b) == (4, 5)
    assert len(P("abcd")) == 4
    assert 2 in P([1, 2]) and "x" not in P("abc")
    assert [0, 1, 2][P(2)] == 2  # __index__
    assert P({"k": "v"}).get("k") == "v"  # attributes of the value


def test_str_repr_format_conversions() -> None:
    assert str(P(3.5)) == "3.5" and repr(P("x")) == "'x'"
    assert f"{P(3.14159):.2f}" == "3.14" and f"{P('ab')}" == "ab"
    assert int(P("12")) == 12 and float(P(2)) == 2.0 and complex(P(1)) == 1 + 0j
    assert hash(P("k")) == hash("k")


def test_bool() -> None:
    assert P([1]) and not P([]) and not P(0)
    seen = "yes" if P(1) else "no"
    assert seen == "yes"


def test_numpy_ops_with_arrays() -> None:
    a = np.arange(6.0).reshape(2, 3)
    p = P(a)
    np.testing.assert_array_equal(p + 1, a + 1)
    np.testing.assert_array_equal(np.ones(3) + P(np.arange(3.0)), 1 + np.arange(3.0))
    np.testing.assert_array_equal(P(a) @ np.ones(3), a @ np.ones(3))
    assert np.asarray(P(a)).shape == (2, 3)
    assert np.asarray(P(a), dtype=np.int32).dtype == np.int32
    assert P(a).shape == (2, 3) and P(a).sum() == 15.0
    np.testing.assert_array_equal(np.vstack([P(a[0]), P(a[1])]), a)
    assert float(np.sum(P(a))) == 15.0
    assert np.allclose(P(a), a)
    np.testing.assert_array_equal(P(a)[1], a[1])


def test_wait_on_nested_containers() -> None:
    data = {"xs": [P(1), (P(2), 3)], "y": P("s"), "plain": [4]}
    assert wait(data) == {"xs": [1, (2, 3)], "y": "s", "plain": [4]}
    assert type(wait(data)["xs"][1]) is tuple
    assert wait(P(5)) == 5 and wait(7) == 7 and wait([]) == []


def test_wait_rebuilds_namedtuples_ordered_and_default_dicts_sets_and_subclasses() -> None:
    """wait walked only exact lists, tuples and dicts: a namedtuple (a tuple), an
    OrderedDict, a defaultdict, a set or a list subclass came back still holding
    CallPromise objects. Each is rebuilt as its own type, with the waited values."""
    import collections

    NT = collections.namedtuple("NT", "a b")
    nt = wait(NT(P(4), [P(9)]))
    assert type(nt) is NT and nt == NT(4, [9]) and type(nt.a) is int
    od = wait(collections.OrderedDict(b=P(1), a=P(2)))
    assert type(od) is collections.OrderedDict and list(od.items()) == [("b", 1), ("a", 2)]
    dd: Any = collections.defaultdict(list, {"k": P(3)})
    got = wait(dd)
    assert type(got) is collections.defaultdict and got.default_factory is list
    assert type(got["k"]) is int and got["k"] == 3 and got["new"] == []
    assert type(dd["k"]) is CallPromise  # (a new container: the given one is unchanged)

    class Row(list[Any]):
        pass

    class Pair(tuple[Any, ...]):
        pass

    row = Row([P(5), NT(P(6), 0)])
    row.label = "x"  # type: ignore[attr-defined]
    got = wait({"r": row, "s": {P(7)}, "f": frozenset([P(8)]), "p": Pair([P(1)])})
    assert type(got["r"]) is Row and got["r"] == [5, NT(6, 0)] and got["r"].label == "x"
    assert type(got["r"][1].a) is int
    assert type(got["s"]) is set and got["s"] == {7} and type(next(iter(got["s"]))) is int
    assert type(got["f"]) is frozenset and type(next(iter(got["f"]))) is int
    assert type(got["p"]) is Pair and type(got["p"][0]) is int
    assert type(next(iter(wait({P(2)})))) is int


def test_wait_walks_deques_keeping_their_maxlen() -> None:
    """A deque of promises came back as it was, promises and all."""
    import collections

    got = wait({"q": collections.deque([P(1), [P(2)]], maxlen=5)})
    q = got["q"]
    assert type(q) is collections.deque and q.maxlen == 5 and list(q) == [1, [2]]
    assert type(q[0]) is int and type(q[1][0]) is int


def test_wait_leaves_a_container_it_cannot_rebuild_as_it_is() -> None:
    class Fussy(tuple[Any, ...]):
        def __new__(cls, a: Any, b: Any) -> Fussy:  # (not built from one iterable)
            return super().__new__(cls, (a, b))

    f = Fussy(1, 2)
    assert wait(f) is f
    assert wait([f])[0] is f


def test_wait_walks_containers_nested_past_the_recursion_limit() -> None:
    """A sync call's answer 500 lists deep (two frames a level when wait recursed) was a
    RecursionError in wait; it walks with a stack of its own, to any depth, promises
    deep inside included, and the kinds of its containers kept."""
    v: Any = [P(7), (P(8),), {"k": P(9)}]
    for i in range(5000):
        v = [v] if i % 3 == 0 else (v,) if i % 3 == 1 else {"d": v}
    out = wait(v)
    for i in reversed(range(5000)):
        assert type(out) is (list if i % 3 == 0 else tuple if i % 3 == 1 else dict)
        out = out[0] if i % 3 != 2 else out["d"]
    assert out == [7, (8,), {"k": 9}]


def test_wait_through_a_container_holding_itself_is_refused() -> None:
    """A list that holds itself (as deep as the walk goes): a ValueError saying so, where
    the walk's own stack would grow until memory ran out."""
    a: list[Any] = [P(1)]
    a.append(a)
    with pytest.raises(ValueError, match="a list that contains itself"):
        wait([a])
    d: dict[str, Any] = {"xs": []}
    d["xs"].append((d,))
    with pytest.raises(ValueError, match="contains itself"):
        wait(d)
    shared = [P(2)]  # (the same list twice, not inside itself: waited for twice)
    assert wait([[shared, shared]] * 3) == [[[2], [2]]] * 3


def test_a_remote_error_is_raised_where_the_value_is_used() -> None:
    p = P(RemoteException("ValueError", "nope", "tb", interface="f"))
    with pytest.raises(RemoteException, match="nope"):
        p + 1
    with pytest.raises(RemoteException):
        wait([p])


def test_isinstance_sees_the_answers_class() -> None:
    # Counter.update(p) asks isinstance(p, Mapping): a dict's promise was taken for a
    # list of keys, and each word counted once (a word count over async calls was 100x
    # off, and said nothing).
    from collections import Counter
    from collections.abc import Mapping, Sequence
    from functools import singledispatch

    from polybus.client.promise import Promise

    counts = P({"the": 2, "cat": 1})
    before = _reactor.waits
    assert isinstance(counts, Promise) and type(counts) is CallPromise
    assert not counts.done and _reactor.waits == before  # (neither waited)
    assert isinstance(counts, dict) and isinstance(counts, Mapping)
    total: Counter[str] = Counter({"the": 1})
    total.update(counts)
    assert total == Counter({"the": 3, "cat": 1})
    assert Counter(P({"a": 5})) == Counter({"a": 5})
    assert isinstance(P([1, 2]), list) and isinstance(P((1,)), Sequence)
    assert not isinstance(P([1, 2]), dict)
    assert isinstance(P(np.arange(3)), np.ndarray) and isinstance(P(3), int)

    @singledispatch
    def kind(x: object) -> str:
        return "other"

    @kind.register
    def _(x: dict) -> str:  # type: ignore[type-arg]
        return "dict"

    assert kind(P({"k": 1})) == "dict"


def test_isinstance_of_a_failed_promise_raises_its_error() -> None:
    p = P(RemoteException("ValueError", "nope", "tb", interface="f"))
    with pytest.raises(RemoteException, match="nope"):
        isinstance(p, dict)
