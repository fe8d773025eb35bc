"""Sends a read decided on inside a send wait for that send (client/later.py)."""

from __future__ import annotations

import threading
from typing import Any

from polybus.client.later import Later, get_ident
from polybus.errors import MessageTooLarge
from polybus.wire.messages import Call


class _Owner:
    """A call record's part `Later` uses: its outcome, and who is told of it."""

    def __init__(self) -> None:
        self.error: Exception | None = None
        self.dispatcher = self
        self.completed_by: list[Any] = []

    def set_error(self, exc: Exception) -> bool:
        self.error = exc
        return True

    def completed(self, owner: Any, link: Any) -> None:
        self.completed_by.append(link)


class _Link:
    def __init__(self) -> None:
        self.dead = False
        self.outstanding: dict[int, Any] = {}


class _Reactor:
    def __init__(self, too_large: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.sent: list[tuple[_Link, list[int]]] = []
        self.too_large = too_large

    def send(self, link: _Link, msg: Call) -> None:
        self.send_many(link, [msg])

    def send_many(self, link: _Link, msgs: list[Call]) -> None:
        if any(m.id in self.too_large for m in msgs):
            raise MessageTooLarge("a frame of 9 GB is over max_frame")
        self.sent.append((link, [m.id for m in msgs]))


def _call(i: int) -> Call:
    return Call(i, "f", [i], None, 0.0)


def test_only_the_thread_reading_inside_a_send_defers() -> None:
    later, link = Later(), _Link()
    assert not later.defer(link, [_call(1)])  # no read inside a send: sent at once
    later.reader = get_ident()
    assert later.defer(link, [_call(2)])
    other: list[bool] = []
    t = threading.Thread(target=lambda: other.append(later.defer(link, [_call(3)])))
    t.start()
    t.join()
    assert other == [False]  # another thread's send waits for the lock, as before
    assert [[m.id for m in msgs] for _, msgs in later.queue] == [[2]]


def test_written_in_order_once_the_read_is_over() -> None:
    later, a, b, reactor = Later(), _Link(), _Link(), _Reactor()
    later.reader = get_ident()
    later.defer(a, [_call(1), _call(2)])
    later.defer(b, [_call(3)])
    later.write(reactor)  # type: ignore[arg-type]
    assert reactor.sent == []  # still inside the read: nothing nests
    later.reader = None
    later.write(reactor)  # type: ignore[arg-type]
    assert reactor.sent == [(a, [1, 2]), (b, [3])] and not later.queue


def test_one_too_large_fails_its_own_calls_and_the_rest_go() -> None:
    later, link, reactor = Later(), _Link(), _Reactor(too_large={2})
    owners = {i: _Owner() for i in (1, 2)}
    link.outstanding.update(owners)
    later.reader = get_ident()
    later.defer(link, [_call(2)])
    later.defer(link, [_call(1)])
    later.reader = None
    later.write(reactor)  # type: ignore[arg-type]
    assert isinstance(owners[2].error, MessageTooLarge) and owners[2].completed_by == [link]
    assert owners[1].error is None and reactor.sent == [(link, [1])]
    assert 2 not in link.outstanding and 1 in link.outstanding


def test_a_dead_replicas_sends_are_dropped() -> None:
    later, link, reactor = Later(), _Link(), _Reactor()
    later.reader = get_ident()
    later.defer(link, [_call(1)])
    later.reader = None
    link.dead = True  # (its calls went elsewhere, or failed, when it was lost)
    later.write(reactor)  # type: ignore[arg-type]
    assert reactor.sent == [] and not later.queue


class _Deferring(_Reactor):
    """Sends as `Sending`'s do: deferred while this thread gathers or reads in a send."""

    def __init__(self) -> None:
        super().__init__()
        self.later = Later()

    def send_many(self, link: _Link, msgs: list[Call]) -> None:
        if self.later.reader is not None and self.later.defer(link, msgs):  # type: ignore[arg-type]
            return
        super().send_many(link, msgs)


def test_gathered_sends_go_each_replicas_as_one_write_in_order() -> None:
    # A moved call and what is asked of its answer (client/migrate.py): one write, so
    # its replica cannot answer it before it reads the Forward; a send to another
    # replica between (the Cancel to the one it left) does not split them.
    r, a, b = _Deferring(), _Link(), _Link()
    with r.later.gathered(r):  # type: ignore[arg-type]
        r.send_many(a, [_call(1), _call(2)])
        r.send(a, _call(3))
        assert r.sent == []  # (nothing written inside the block)
        r.send(b, _call(4))
        r.send(a, _call(5))
    assert r.sent == [(a, [1, 2, 3, 5]), (b, [4])]
    assert r.later.reader is None and r.later.queue == []
    r.send(a, _call(6))  # after the block: at once
    assert r.sent[-1] == (a, [6])


def test_gathered_inside_a_read_inside_a_send_leaves_them_to_that_send() -> None:
    r, a, b = _Deferring(), _Link(), _Link()
    r.later.reader = get_ident()  # (a read inside a send: its sends wait for it)
    r.send(a, _call(0))  # (the read's, before the block)
    with r.later.gathered(r):  # type: ignore[arg-type]
        r.send(a, _call(1))
        r.send(b, _call(2))
        r.send(a, _call(3))
    assert r.sent == [] and r.later.reader == get_ident()
    r.later.reader = None
    r.later.write(r)  # type: ignore[arg-type]
    assert r.sent == [(a, [0]), (a, [1, 3]), (b, [2])]  # (the block's gathered too)


def test_gathered_writes_what_it_has_when_the_block_raises() -> None:
    r, a = _Deferring(), _Link()
    try:
        with r.later.gathered(r):  # type: ignore[arg-type]
            r.send(a, _call(1))
            raise RuntimeError("a step after the send failed")
    except RuntimeError:
        pass
    assert r.sent == [(a, [1])] and r.later.reader is None


def test_a_write_too_large_fails_its_calls_not_the_calls_its_requests_name() -> None:
    """A Forward or Keep in a joined write names another call (its producer's, on this
    replica) by ``id``: the write failing fails the calls it carries, a held Batch's
    among them, never a producer it only asks something of."""
    from polybus.wire.messages import Batch, Forward, Keep

    later, link, reactor = Later(), _Link(), _Reactor(too_large={1})
    owners = {i: _Owner() for i in (1, 2, 3, 7, 8)}
    link.outstanding.update(owners)
    later.reader = get_ident()
    later.defer(link, [_call(1), Forward(7, "p7", "k", "tcp://127.0.0.1:1"), Keep(8, "p8", "k8"),
                       Batch([_call(2), _call(3)])])
    later.reader = None
    later.write(reactor)  # type: ignore[arg-type]
    assert [i for i, o in owners.items() if o.error is not None] == [1, 2, 3]
    assert sorted(link.outstanding) == [7, 8]  # the producers: still in flight
