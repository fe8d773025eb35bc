"""A cancel's late answer, read while the call is given up on (its timeout passed) on
another thread: whichever comes first, its place in its replica's window is freed
once (client/cancel.py `released`, client/calls.py `give_up`). The give-up fails the
call, then lets it go (`abandon`); a reader that filed the ``Released`` between the
two left the call alone, finding it failed, and the give-up then kept its place for a
late answer that never comes (the replica dropped the call): under async-demand(1)
that replica took no call of the binding again. (A real Dispatcher over fake links,
no network, as test_migrate_given_up.py.)"""

from __future__ import annotations

import pytest
from test_migrate_given_up import _Noting, _Reactor, given_up_reading_between  # tests/unit

from polybus.client.calls import CallRecord, ReplicaLink, give_up
from polybus.client.cancel import Asked, released
from polybus.client.dispatch import Dispatcher
from polybus.config.model import CallStyle
from polybus.wire.messages import Released


class _Revoking(_Reactor):
    def __init__(self) -> None:
        super().__init__()
        self.revoking: dict[int, Asked] = {}
        self.replies: dict[int, object] = {}


def _setup(window: int = 1) -> tuple[list[ReplicaLink], Dispatcher, _Revoking, CallRecord]:
    links = [ReplicaLink(f"r{i}", "server", channel=None) for i in range(2)]  # type: ignore[arg-type]
    reactor = _Revoking()
    d = Dispatcher("f", reactor, links, CallStyle("async-demand", window),  # type: ignore[arg-type]
                   timeout=0.1)
    rec = CallRecord(1, d, [1], None, 0.0)
    d._send(rec, links[0])
    asked = Asked(links[0], rec)
    asked.late = True  # (the cancel stopped waiting: it said False)
    reactor.revoking[9] = asked
    return links, d, reactor, rec


def test_a_late_release_read_between_the_failure_and_the_let_go_frees_the_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    links, d, reactor, rec = _setup()
    # (r0 dropped it: the Revoke's late answer)
    given_up_reading_between(monkeypatch, rec, links[0],
                             lambda: released(reactor, links[0], Released([1], 9)))
    assert d.inflight == [0, 0]  # (r0's place free: the next call of f may go there)
    assert not links[0].outstanding and not links[0].abandoned
    assert not reactor.revoking


def test_a_late_release_read_inside_the_let_go_frees_the_place_once() -> None:
    links, d, reactor, rec = _setup(window=2)
    other = CallRecord(2, d, [2], None, 0.0)
    d._send(other, links[0])
    links[0].abandoned = _Noting(lambda: released(reactor, links[0], Released([rec.id], 9)))
    assert give_up(rec, 0.1)
    assert d.inflight == [1, 0]  # (other's place alone taken)
    assert not links[0].abandoned and links[0].outstanding == {other.id: other}


def test_a_late_release_after_the_give_up_frees_the_place() -> None:
    links, d, reactor, rec = _setup()
    assert give_up(rec, 0.1)
    assert d.inflight == [1, 0] and rec.id in links[0].abandoned  # (kept till it is known)
    released(reactor, links[0], Released([rec.id], 9))
    assert d.inflight == [0, 0] and not links[0].abandoned
    assert not d._backlog  # (given up on: not placed again)
