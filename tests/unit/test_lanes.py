"""LimitedQueue: a call of an interface at its own pool waits in the queue, counted,
in its order, until a call of that interface is done. Pure (worker/lanes.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from polybus.config.model import DefineSpec, ModuleSpec
from polybus.wire.messages import Call
from polybus.worker.lanes import LimitedQueue
from polybus.worker.limits import own_limits
from polybus.worker.main import options_for
from polybus.worker.servicing import CallQueue, Job


def call(i: int, iface: str = "slow", prio: float = 0.0) -> Call:
    return Call(i, iface, [], None, prio)


def queue(bound: int = 100, limit: int = 1) -> LimitedQueue:
    return LimitedQueue(bound, [(("slow", "slow@http"), limit)])


def take(q: CallQueue) -> Job:
    job = q.pop()
    assert job is not None
    return job


def ids(jobs: list[Job]) -> list[int]:
    return [j.call.id for j in jobs]


def drain(q: CallQueue) -> list[int]:
    return ids(list(iter(q.pop, None)))


def test_a_call_past_its_limit_waits_counted_and_the_next_that_may_run_is_taken() -> None:
    q = queue()
    for i, iface in enumerate(["slow", "slow", "fast", "slow@http", "fast"]):
        q.push(call(i, iface), "c", 0)
    first = take(q)
    assert first.call.id == 0
    assert drain(q) == [2, 4] and not q.runnable()
    assert len(q) == 2 and q.waiting() == 2 and q.waiting("c") == 2
    q.done(first)  # the slow call ended: the next waiting one (its @http form shares it)
    assert q.runnable()
    nxt = take(q)
    assert nxt.call.id == 1 and q.pop() is None
    q.done(nxt)
    assert drain(q) == [3] and len(q) == 0


def test_order_among_the_calls_that_may_run_is_priority_then_arrival() -> None:
    q = queue(limit=2)
    for i, (iface, prio) in enumerate([("slow", 0), ("slow", 0), ("slow", 1), ("slow", 9),
                                       ("fast", 0), ("fast", 5), ("slow", 0)]):
        q.push(call(i, iface, prio), "c", 0)
    s9, f5, s1 = take(q), take(q), take(q)
    assert ids([s9, f5, s1]) == [3, 5, 2]
    assert drain(q) == [4]  # slow 0, 1 and 6 wait: two slow calls run already
    q.push(call(7, "fast", -1), "c", 0)
    assert drain(q) == [7]  # lower than theirs, but it may run
    q.done(s1)
    q.push(call(8, "slow", 0), "c", 0)
    s0 = take(q)
    assert s0.call.id == 0 and q.pop() is None  # the first come of those waiting
    q.done(s9)
    q.push(call(9, "slow", 2), "c", 0)
    s2 = take(q)
    assert s2.call.id == 9  # a higher priority still goes first
    q.done(s0)
    s1b = take(q)
    q.done(s2)
    s6 = take(q)
    q.done(s1b)
    assert ids([s1b, s6, take(q)]) == [1, 6, 8] and len(q) == 0


@pytest.mark.parametrize("seed", range(20))
def test_the_order_is_that_of_a_plain_queue_among_the_calls_that_may_run(seed: int) -> None:
    """Random pushes, pops, ends and drops, against the rule written out: the next call
    is the first by (-prio, arrival) of those whose interface has room."""
    rnd = random.Random(seed)
    limits = {"a": 1, "b": 2}
    q = LimitedQueue(1000, [(("a",), 1), (("b",), 2)])
    waiting: list[tuple[float, int, str, str]] = []  # (-prio, arrival, iface, channel)
    running: list[Job] = []
    for n in range(400):
        op = rnd.random()
        if op < 0.45:
            c = call(n, rnd.choice("abc"), rnd.choice([0.0, 0.0, 1.0, -1.0, 3.0]))
            ch = rnd.choice(("x", "y"))  # (these very strings: a channel is known by identity)
            q.push(c, ch, 0)
            waiting.append((-c.prio, n, c.iface, ch))
        elif op < 0.8:
            busy = {i: sum(j.call.iface == i for j in running) for i in limits}
            may = sorted(w for w in waiting if busy.get(w[2], 0) < limits.get(w[2], 9))
            assert q.runnable() == bool(may)
            job = q.pop()
            assert (job.call.id if job else None) == (may[0][1] if may else None)
            if job is not None:
                waiting.remove(may[0])
                running.append(job)
        elif op < 0.95 and running:
            q.done(running.pop(rnd.randrange(len(running))))
        else:
            gone = sorted(ids(q.remove_channel("x")))
            assert gone == sorted(w[1] for w in waiting if w[3] == "x")
            waiting = [w for w in waiting if w[3] != "x"]
        assert len(q) == len(waiting)


def test_cancel_steal_and_drop_reach_the_calls_waiting_for_their_interface() -> None:
    q = queue()
    for i in range(5):
        q.push(call(i), "a", 0)
    q.push(call(5, "fast"), "a", 0)
    q.push(call(6), "b", 0)
    s0 = take(q)
    assert ids([s0, take(q)]) == [0, 5]  # 1 to 4 set aside, waiting
    assert ids(q.remove_ids("a", {2})) == [2]
    assert ids(q.steal("a", 1)) == [4]  # the last to run
    assert ids(q.remove_channel("b")) == [6]
    assert len(q) == 2 and q.waiting("a") == 2
    q.done(s0)
    assert drain(q) == [1]


def test_the_bound_counts_a_call_that_may_not_run_as_waiting_whatever_is_free() -> None:
    """Two handlers, ``queue = 1``, ``slow`` one at a time; a burst, none taken yet."""
    q = queue(bound=1)
    for i, iface in enumerate(["slow", "slow", "slow", "fast", "fast"]):
        if i in (2, 4):
            assert q.full(2, call(i, iface)), i  # the second slow waits: the queue is full
        else:
            assert not q.full(2, call(i, iface)), i
            q.push(call(i, iface), "c", 0)
    assert q.full(2)  # (any call: both handlers will be taken)
    s0 = take(q)
    assert ids([s0, take(q)]) == [0, 3] and q.pop() is None
    # One slow call runs and one waits, a handler is free: for a fast call, not a slow one.
    assert not q.full(1, call(5, "fast")) and not q.full(1)
    assert q.full(1, call(6)) and q.full(1, call(7, "slow@http"))
    q.done(s0)  # the one waiting may run now: the free handler takes it, another may wait
    assert not q.full(1, call(8))


def test_without_limits_it_is_the_plain_queue() -> None:
    q, plain = LimitedQueue(2, []), CallQueue(2)
    for i, p in enumerate([0, 5, 0, -1, 5]):
        for x in (q, plain):
            x.push(call(i, prio=p), "c", 0)
    for free in range(5):
        assert q.full(free, call(9)) == plain.full(free) == plain.full(free, call(9))
    assert drain(q) == drain(plain) == [1, 4, 0, 2, 3]
    assert not plain.runnable() and not q.runnable()


def test_an_interfaces_own_pool_is_a_limit_shared_with_its_http_form() -> None:
    spec = ModuleSpec("srv", Path("srv.py"), define={
        "incr": DefineSpec(pool=1), "page": DefineSpec(pool=2), "wide": DefineSpec(pool=4),
        "procs": DefineSpec(pool=2, pool_kind="processes")})
    assert own_limits(spec, 4, ["incr"]) == ((("incr", "incr@http"), 1), (("page",), 2),
                                             (("procs",), 2))
    opts = options_for(spec, None, 1 << 20, http=["page"])
    assert opts.pool == 4 and opts.limits == ((("incr",), 1), (("page", "page@http"), 2),
                                              (("procs",), 2))
    alone = ModuleSpec("one", Path("one.py"), define={"f": DefineSpec(pool=3)})
    assert options_for(alone, None, 1 << 20).limits == ()
