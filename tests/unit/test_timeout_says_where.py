"""A call's CallTimeoutError says which replica it was written to and what that
replica was still busy with: a trivial call that waits behind a call given up at its
own deadline (which its replica runs to its end) timed out saying only "no answer from
balance within 1 s", and nothing told the program's author why a call that takes a
microsecond had not been answered."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from polybus.client.calls import CallRecord, ReplicaLink, give_up
from polybus.client.dispatch import Dispatcher
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.errors import CallTimeoutError
from polybus.transport.channel import Channel
from polybus.wire.codec import Codec


@pytest.fixture
def link() -> Iterator[tuple[Reactor, ReplicaLink]]:
    reactor = Reactor()
    a, b = socket.socketpair()
    lk = ReplicaLink("bank-0", "bank", Channel(a, Codec(), "bank-0"))
    reactor.add(lk)
    try:
        yield reactor, lk
    finally:
        reactor.close()
        b.close()


def _sent(d: Dispatcher, lk: ReplicaLink, cid: int, *args: object) -> CallRecord:
    rec = CallRecord(cid, d, list(args), None, 0.0)
    d._send(rec, lk)
    return rec


def test_a_timeout_names_its_replica(link: tuple[Reactor, ReplicaLink]) -> None:
    reactor, lk = link
    d = Dispatcher("balance", reactor, [lk], CallStyle("async"), timeout=1.0)
    rec = _sent(d, lk, 1, "alice")
    assert give_up(rec, 1.0)
    assert isinstance(rec.error, CallTimeoutError)
    assert str(rec.error) == "no answer from balance within 1 s (sent to bank-0)"
    assert rec.error.replica == "bank-0" and rec.error.interface == "balance"


def test_a_timeout_behind_a_call_given_up_on_says_so(link: tuple[Reactor, ReplicaLink]) -> None:
    reactor, lk = link
    audit = Dispatcher("audit", reactor, [lk], CallStyle("async"), timeout=0.5)
    balance = Dispatcher("balance", reactor, [lk], CallStyle("async"), timeout=1.0)
    long = _sent(audit, lk, 1, 3.0)
    assert give_up(long, 0.5)  # (the replica runs it on: its answer is still to come)
    slow = _sent(audit, lk, 2, 2.0)  # (within its deadline, unanswered)
    rec = _sent(balance, lk, 3, "alice")
    assert give_up(rec, 1.0)
    assert str(rec.error) == (
        "no answer from balance within 1 s (sent to bank-0, which had not yet answered 2 "
        "calls made before it: audit x2, 1 of them given up at its own deadline (a replica "
        "runs a call it began to its end))")
    assert not slow.done


def test_a_call_made_after_it_is_not_said_to_be_ahead(
        link: tuple[Reactor, ReplicaLink]) -> None:
    reactor, lk = link
    audit = Dispatcher("audit", reactor, [lk], CallStyle("async"), timeout=0.5)
    first = _sent(audit, lk, 1, 3.0)
    _sent(audit, lk, 2, 0.0)  # (made after it: not what it waited behind)
    assert give_up(first, 0.5)
    assert str(first.error) == "no answer from audit within 0.5 s (sent to bank-0)"
    rec = _sent(audit, lk, 3, 0.0)
    assert give_up(rec, 0.5)
    assert str(rec.error) == (
        "no answer from audit within 0.5 s (sent to bank-0, which had not yet answered 2 "
        "calls made before it: audit x2, 1 of them given up at its own deadline (a replica "
        "runs a call it began to its end))")


def test_a_burst_of_timeouts_looks_at_a_bounded_number_of_calls(
        link: tuple[Reactor, ReplicaLink]) -> None:
    """Each call timing out in a burst looked at every other unanswered or given up
    (8,000 took 25 s of the client's CPU): it looks at LOOKED_AT of each, and says so."""
    from polybus.client.timeoutwhere import LOOKED_AT

    reactor, lk = link
    d = Dispatcher("balance", reactor, [lk], CallStyle("async"), timeout=1.0)
    recs = [_sent(d, lk, i, i) for i in range(1, 3 * LOOKED_AT + 2)]
    for r in recs:
        assert give_up(r, 1.0)
    last = str(recs[-1].error)
    assert f"which had not yet answered {LOOKED_AT} calls or more made before it: " \
           f"balance x{LOOKED_AT}, all given up at their own deadlines" in last, last
