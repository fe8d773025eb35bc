"""Priority order: the client's backlog and the replica's queue serve highest first."""

from __future__ import annotations

from typing import Any

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.session import _priority_fn
from polybus.config.model import CallStyle
from polybus.wire.messages import Call
from polybus.worker.servicing import CallQueue


class FakeReactor:
    def __init__(self) -> None:
        self.sent: list[Any] = []

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
    prio = _priority_fn("len(query)", ["query"])
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
