"""CallQueue: priority then FIFO, bounded, steal from the back, cancel. Pure."""

from __future__ import annotations

from polybus.wire.messages import Call
from polybus.worker.servicing import CallQueue


def call(i: int, prio: float = 0.0) -> Call:
    return Call(i, "f", [], None, prio)


def drain(q: CallQueue) -> list[int]:
    out = []
    while (job := q.pop()) is not None:
        out.append(job.call.id)
    return out


def test_priority_then_first_come_first_served() -> None:
    q = CallQueue(bound=100)
    for i, p in enumerate([0, 5, 0, 5, 1, 0]):
        q.push(call(i, p), "ch", now=float(i))
    assert len(q) == 6
    assert drain(q) == [1, 3, 4, 0, 2, 5]
    assert q.pop() is None and len(q) == 0


def test_job_keeps_channel_and_enqueue_time() -> None:
    q = CallQueue(4)
    job = q.push(call(1), "chan", now=12.5)
    assert (job.channel, job.enqueued, job.dead) == ("chan", 12.5, False)


def test_bound_and_full() -> None:
    q = CallQueue(bound=2)
    assert not q.full()
    q.push(call(1), "c", 0)
    q.push(call(2), "c", 0)
    assert q.full()
    q.pop()
    assert not q.full()


def test_the_bound_is_on_what_waits_after_the_free_handlers_take_theirs() -> None:
    q = CallQueue(bound=2)
    for i in range(6):
        assert not q.full(free=4), i
        q.push(call(i), "c", 0)
    assert q.full(free=4) and not q.full(free=5)
    assert q.full(free=-1) == q.full()  # (never fewer than none free)


def test_steal_takes_from_the_back_of_one_channels_jobs() -> None:
    q = CallQueue(100)
    q.push(call(1, prio=9), "a", 0)
    for i in range(2, 6):
        q.push(call(i), "a", 0)
    q.push(call(99), "b", 0)
    stolen = q.steal("a", 2)
    assert [j.call.id for j in stolen] == [5, 4]  # the last ones to run
    assert all(j.dead for j in stolen)
    assert q.waiting("a") == 3 and q.waiting("b") == 1 and len(q) == 4
    assert q.steal("a", 0) == [] and q.steal("a", -3) == []
    assert [j.call.id for j in q.steal("a", 10)] == [3, 2, 1]
    assert drain(q) == [99]


def test_cancel_by_ids_on_a_channel() -> None:
    q = CallQueue(100)
    for i in range(5):
        q.push(call(i), "a", 0)
    q.push(call(2), "b", 0)  # the same id from another client is not touched
    removed = q.remove_ids("a", {1, 2, 42})
    assert sorted(j.call.id for j in removed) == [1, 2]
    assert len(q) == 4
    assert [(j.call.id, j.channel) for j in iter(q.pop, None)] == [
        (0, "a"), (3, "a"), (4, "a"), (2, "b")]


def test_remove_channel() -> None:
    q = CallQueue(1000)
    for i in range(100):
        q.push(call(i), "gone" if i % 2 else "kept", 0)
    assert len(q.remove_channel("gone")) == 50
    assert len(q) == 50 and q.waiting() == 50 and q.waiting("gone") == 0
    assert drain(q) == list(range(0, 100, 2))  # compaction kept the order
