"""Priority order: the client's backlog and the replica's queue serve highest first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.params import priority_fn
from polybus.config.model import CallStyle
from polybus.errors import PriorityError, UsageError
from polybus.wire.messages import Call
from polybus.worker.servicing import CallQueue


class FakeReactor:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.gate = None  # (no pump: client/pump.py)

    def work_left(self) -> None:
        pass

    def send(self, link: ReplicaLink, msg: Any) -> None:
        self.sent.append(msg)

    def hold(self, link: ReplicaLink, msg: Any) -> None:
        self.sent.append(msg)

    def send_many(self, link: ReplicaLink, msgs: list[Any]) -> None:
        self.sent.extend(msgs)

    def poll(self) -> None:
        pass

    def step(self) -> None:
        pass


def test_client_backlog_hands_out_the_highest_priority_first(tmp_path: Any) -> None:
    reactor = FakeReactor()
    link = ReplicaLink("r", "m", channel=None)  # type: ignore[arg-type]
    (tmp_path / "server.py").write_text("def compare(query):\n    return 0\n")
    prio = priority_fn("len(query)", tmp_path / "server.py", "compare")
    d = Dispatcher("compare", reactor, [link], CallStyle("async-demand", 1),  # type: ignore[arg-type]
                   priority=prio)
    for q in ["a", "aaaaa", "aa", "aaaa", "aaa"]:
        d((q,), {})
    assert [m.args[0] for m in reactor.sent] == ["a"]  # window 1: the rest wait
    for _ in range(4):
        rec = link.outstanding.pop(next(iter(link.outstanding)))
        rec.set_value(0)
        d.completed(rec, link)
        d.refill()
    assert [m.args[0] for m in reactor.sent] == ["a", "aaaaa", "aaaa", "aaa", "aa"]
    assert [m.prio for m in reactor.sent] == [1, 5, 4, 3, 2]


def test_priority_binds_arguments_as_the_function_does_defaults_included(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(
        "def sample(seed, n, tag=0, *rest, scale=1.5, **kw):\n    return 0\n")
    prio = priority_fn("tag * scale + len(rest) + len(kw)", tmp_path / "server.py", "sample")
    assert prio((1, 2), {}) == 0.0                 # tag and scale left out: their defaults
    assert prio((1, 2, 4), {}) == 6.0
    assert prio((1,), {"n": 2, "tag": 2, "scale": 3}) == 6.0
    assert prio((1, 2, 3, "x", "y"), {"z": 0}) == 7.5


def test_priority_over_a_missing_argument_names_interface_and_expression(tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text("SIZE = 3\n\n\ndef sample(seed, n=SIZE):\n    return 0\n")
    prio = priority_fn("seed + n", tmp_path / "server.py", "sample")
    assert prio((1, 2), {}) == 3.0
    with pytest.raises(TypeError, match=r"^sample\(\) missing 1 required positional "
                       r"argument: 'seed' \(the function is sample\(seed, n=SIZE\)\)$"):
        prio((), {"n": 1})  # (the call's mistake, not the expression's: as below)
    with pytest.raises(TypeError, match=r"reads 'n', which this call leaves out, and its "
                       r"default SIZE is not a literal .* pass n in the call"):
        prio((1,), {})


def test_a_priority_the_calls_values_fail_is_a_priority_error_naming_its_key(
        tmp_path: Path) -> None:
    """Whatever the expression raises on a call's values (or a result that is not a
    number) is the configuration's mistake for that call, not the program's own
    exception: a PriorityError (a UsageError, and a TypeError as before) naming the
    interface, the expression, its key and what went wrong."""
    (tmp_path / "server.py").write_text("def slow(t, n=1):\n    return t\n")
    key = "modules.srv.define.slow.priority"
    prio = priority_fn("len(t)", tmp_path / "server.py", "slow", key)
    assert prio(("abc",), {}) == 3.0
    with pytest.raises(PriorityError, match=r"^interface 'slow': priority 'len\(t\)' "
                       r"\(modules\.srv\.define\.slow\.priority\) cannot be computed for this "
                       r"call: TypeError: object of type 'float' has no len\(\)$") as e:
        prio((0.5,), {})
    assert isinstance(e.value, UsageError) and isinstance(e.value, TypeError)
    assert e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(PriorityError, match=r"cannot be computed for this call: "
                       r"ZeroDivisionError: division by zero$"):
        priority_fn("1 / n", tmp_path / "server.py", "slow", key)((1,), {"n": 0})
    with pytest.raises(PriorityError, match=r"^interface 'slow': priority 't' \(modules\.srv"
                       r"\.define\.slow\.priority\) gave str 'abc', not a number$"):
        priority_fn("t", tmp_path / "server.py", "slow", key)(("abc",), {})



def test_a_call_the_function_cannot_take_is_said_as_without_priority(
        tmp_path: Path) -> None:
    """Too many arguments (or one missing, above) is the call's mistake, said as it is without
    a priority (the replica's "(the function is ...)"), not blamed on the expression (a
    new-user trial got "priority 'cost_ms' ... cannot be computed for this call")."""
    (tmp_path / "server.py").write_text("def work(i, cost_ms):\n    return i\n")
    prio = priority_fn("cost_ms", tmp_path / "server.py", "work", "k")
    with pytest.raises(PriorityError) as e:
        prio((1, 2, 3), {})
    assert str(e.value) == ("work() takes 2 positional arguments but 3 were given "
                            "(the function is work(i, cost_ms))")


def test_replica_queue_serves_highest_priority_first_fifo_among_equals() -> None:
    q = CallQueue(10)
    for i, p in enumerate([1.0, 3.0, 3.0, 2.0]):
        q.push(Call(i, "f", [], None, p), channel="c", now=0.0)
    order = []
    while (job := q.pop()) is not None:
        order.append(job.call.id)
    assert order == [1, 2, 3, 0]


def test_steal_takes_the_last_to_run() -> None:
    q = CallQueue(10)
    for i, p in enumerate([5.0, 1.0, 3.0]):
        q.push(Call(i, "f", [], None, p), channel="c", now=0.0)
    assert [j.call.id for j in q.steal("c", 1)] == [1]
    assert q.steal("other", 5) == []
    assert len(q) == 2


@given(st.lists(st.tuples(st.sampled_from(["push", "pop", "steal", "drop"]),
                          st.sampled_from([0.0, 0.0, 0.0, 1.0, -1.0, 2.5]),
                          st.sampled_from(["a", "b"]), st.integers(0, 3)), max_size=60))
def test_replica_queue_runs_in_the_order_of_a_sorted_list(ops: list[tuple[str, float, str, int]]) -> None:
    """Priority 0 waits in a FIFO, the rest in a heap: together they keep one order,
    highest priority first and first come first among equals, through pops, steals
    and a client's calls dropped (checked against a plain sorted list)."""
    q = CallQueue(1000)
    ref: list[tuple[float, int, str]] = []  # (-prio, id, channel): sorted = run order
    for i, (op, prio, ch, n) in enumerate(ops):
        if op == "push":
            q.push(Call(i, "f", [], None, prio), channel=ch, now=0.0)
            ref.append((-prio, i, ch))
        elif op == "pop":
            job = q.pop()
            ref.sort()
            want = ref.pop(0) if ref else None
            assert (job.call.id if job else None) == (want[1] if want else None)
        elif op == "steal":
            got = [j.call.id for j in q.steal(ch, n)]
            mine = sorted((e for e in ref if e[2] == ch), reverse=True)[:n]
            assert got == [e[1] for e in mine]
            ref = [e for e in ref if e not in mine]
        else:
            assert sorted(j.call.id for j in q.remove_channel(ch)) == sorted(
                e[1] for e in ref if e[2] == ch)
            ref = [e for e in ref if e[2] != ch]
        assert len(q) == len(ref)
        assert q.waiting("a") == sum(1 for e in ref if e[2] == "a")
    ref.sort()
    assert [j.call.id for j in iter(q.pop, None)] == [e[1] for e in ref]
