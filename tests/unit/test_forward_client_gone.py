"""Forwarded values of a client that is gone go from the consumer's replica.

A client's keys begin with its session's nonce. The replica notes the nonces its held
calls name, per connection; when that connection ends and no other live one named the
nonce, the values waiting for its keys go at once, and those that come later are let
go as they come. They were kept until the bound on unclaimed values pushed them out.
(The client process killed: tests/integration/test_forward_client_killed.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from polybus.client.forward import Forwarder
from polybus.wire.codec import Ref
from polybus.wire.messages import DIALS_AGAIN, Call
from polybus.worker.fwdgone import GONE_BOUND, LAPSE_S
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"forward-client-gone-token-0123456789"


class Conn:
    """A client's connection, as far as the forwarding state looks at one."""


@pytest.fixture
def fwd() -> Iterator[Any]:
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN)
    try:
        yield rt.forwarding
    finally:
        rt.stop()


def held(fwd: Any, ch: Conn, cid: int, *keys: str) -> None:
    assert fwd.hold(ch, Call(cid, "echo", [[Ref("fwd", k) for k in keys]], inside=[0]),
                    [((0, i), k) for i, k in enumerate(keys)])


def test_a_gone_clients_values_go_then_and_later(fwd: Any) -> None:
    a, b = Conn(), Conn()
    held(fwd, a, 1, "na.1.0", "na.1.1")
    held(fwd, b, 1, "nb.1.0")
    fwd.arrive("na.1.0", True, b"x" * 1000)  # (into its held call)
    fwd.arrive("na.2.0", True, b"y" * 1000)  # (before its call: waits)
    fwd.arrive("nb.2.0", True, b"z" * 1000)
    assert len(fwd._arrived) == 2 and fwd.held_calls() == 2 and fwd._holding_bytes > 1000
    fwd.dropped(a)
    assert list(fwd._arrived) == ["nb.2.0"] and fwd.held_calls() == 1
    fwd.arrive("na.1.1", True, b"w" * 1000)  # (its call went with its client)
    fwd.arrive("na.3.0", True, b"v" * 1000)
    assert list(fwd._arrived) == ["nb.2.0"] and fwd.gone_dropped == 3
    fwd.arrive("nb.3.0", True, 1)  # (another client's: waits, as ever)
    assert list(fwd._arrived) == ["nb.2.0", "nb.3.0"]


def test_a_nonce_another_live_connection_named_is_kept(fwd: Any) -> None:
    # (a session that dialled this replica again: its new connection names its nonce)
    old, new = Conn(), Conn()
    held(fwd, old, 1, "n.1.0")
    held(fwd, new, 2, "n.2.0")
    fwd.arrive("n.3.0", True, 3)
    fwd.dropped(old)
    fwd.arrive("n.4.0", True, 4)
    assert list(fwd._arrived) == ["n.3.0", "n.4.0"] and fwd.held_calls() == 1
    fwd.dropped(new)
    assert not fwd._arrived and fwd._arrived.nbytes == 0 and fwd.held_calls() == 0
    # Gone, then named again by a connection made since: its values wait again.
    again = Conn()
    held(fwd, again, 5, "n.5.0")
    fwd.arrive("n.6.0", True, 6)
    assert list(fwd._arrived) == ["n.6.0"]
    fwd.arrive("n.5.0", True, 5)  # (its held call takes it)
    assert fwd.held_calls() == 0 and not fwd._sessions.nonces.get(id(old))


def test_the_nonces_of_clients_gone_are_bounded(fwd: Any) -> None:
    for i in range(GONE_BOUND + 5):
        ch = Conn()
        held(fwd, ch, 1, f"g{i}.1.0")
        fwd.dropped(ch)
    assert len(fwd._sessions.gone) == GONE_BOUND and not fwd._sessions.named_by and not fwd._sessions.nonces
    assert "g0" not in fwd._sessions.gone and f"g{GONE_BOUND + 4}" in fwd._sessions.gone


def test_a_call_naming_a_value_let_go_so_fails_at_once(fwd: Any, monkeypatch: Any) -> None:
    # A session that dials again after its connection ended, and whose value came
    # before its call: the value was let go, so the call is answered at once with a
    # Fail saying why, not held for a value that will never come again.
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(fwd.rt, "_send_quietly", lambda ch, msg: sent.append((ch, msg)))
    old = Conn()
    held(fwd, old, 1, "s.1.0")
    fwd.arrive("s.2.0", True, b"a" * 100)  # (waits for its call, then its client goes)
    fwd.dropped(old)
    fwd.arrive("s.3.0", True, b"b" * 100)  # (comes after: let go as it comes)
    for cid, key in ((2, "s.2.0"), (3, "s.3.0")):
        new = Conn()
        held(fwd, new, cid, key)
        ch, msg = sent.pop()
        assert ch is new and msg.id == cid and msg.kind == "forward-dropped"
        assert key in msg.message and "connection" in msg.message, msg.message
    assert fwd.held_calls() == 0 and not sent


def test_a_client_that_may_dial_again_keeps_its_values(fwd: Any) -> None:
    # A session that may dial this replica again (a run at a shared registry, the front
    # door: lost replicas are dialled again) marks its nonce so (client/forward.py): its
    # connection's end lets nothing go, since its calls lost with it are sent again, on
    # the next connection, naming the same keys, and their values may come before them.
    old = Conn()
    held(fwd, old, 1, "r~.1.0")
    fwd.arrive("r~.2.0", True, b"a" * 100)  # (its call unread when the connection ended)
    fwd.dropped(old)
    fwd.arrive("r~.3.0", True, b"b" * 100)  # (before its call, sent on the new connection)
    assert list(fwd._arrived) == ["r~.2.0", "r~.3.0"] and fwd.gone_dropped == 0
    new = Conn()
    held(fwd, new, 2, "r~.2.0", "r~.3.0")  # (both here: queued, not held)
    assert not fwd._arrived and fwd.held_calls() == 0 and not fwd._dropped


@pytest.mark.parametrize("dials_again", [True, False])
def test_a_session_that_may_dial_again_marks_its_nonce(dials_again: bool) -> None:
    reactor = SimpleNamespace(on_lost=lambda link, error: None, on_undelivered=None)
    f = Forwarder(SimpleNamespace(reactor=reactor, dials_again=dials_again))  # type: ignore[arg-type]
    assert f.nonce.endswith(DIALS_AGAIN) is dials_again and "." not in f.nonce


def test_a_call_sent_again_on_a_new_connection_takes_its_values_again(fwd: Any) -> None:
    # Held on a connection that ended (its client took this replica for lost) with one
    # of its two values here: sent again on the next connection, its values delivered
    # again are taken again, not dropped as duplicates of what the first copy took.
    old, new = Conn(), Conn()
    held(fwd, old, 1, "q~.1.0", "q~.1.1")
    fwd.arrive("q~.1.0", True, 1)
    fwd.dropped(old)
    held(fwd, new, 1, "q~.1.0", "q~.1.1")
    fwd.arrive("q~.1.0", True, 1)
    fwd.arrive("q~.1.1", True, 2)
    assert fwd.held_calls() == 0 and not fwd._arrived and fwd._holding_bytes == 0


def _clock(fwd: Any) -> list[float]:
    now = [1000.0]
    fwd._sessions.clock = lambda: now[0]
    return now


def test_a_client_that_may_dial_again_and_never_does_leaves_no_value(fwd: Any) -> None:
    # A run at a shared registry killed with its values on their way: its nonce lapses
    # when its connection ends, and once LAPSE_S has passed with no connection naming
    # it, the next connection's end lets its values go. They waited until the bound on
    # unclaimed values (512 MiB) pushed them out, so a replica serving such runs for
    # days held that much for runs long gone.
    now = _clock(fwd)
    for i in range(20):  # twenty runs killed, each with two values here
        ch = Conn()
        held(fwd, ch, 1, f"k{i}~.1.0")
        fwd.arrive(f"k{i}~.2.0", True, b"a" * 100)
        fwd.dropped(ch)
        fwd.arrive(f"k{i}~.3.0", True, b"b" * 100)
    assert len(fwd._arrived) == 40  # (within LAPSE_S: each may dial again)
    now[0] += LAPSE_S + 1
    other = Conn()
    held(fwd, other, 1, "live.1.0")
    fwd.dropped(other)
    assert not fwd._arrived and fwd._arrived.nbytes == 0 and not fwd._arrived.by_nonce
    assert not fwd._sessions.lapsed and not fwd._sessions.nonces and not fwd._sessions.named_by
    assert fwd.gone_dropped == 40


def test_a_lapsed_client_back_within_the_lapse_keeps_its_values(fwd: Any) -> None:
    now = _clock(fwd)
    old = Conn()
    held(fwd, old, 1, "b~.1.0")
    fwd.arrive("b~.2.0", True, 2)
    fwd.dropped(old)
    now[0] += LAPSE_S - 1
    new = Conn()
    held(fwd, new, 2, "b~.9.0")  # (dialled again: named on its new connection)
    now[0] += LAPSE_S + 1
    fwd.dropped(Conn())
    assert list(fwd._arrived) == ["b~.2.0"] and not fwd._sessions.lapsed
    # A value that comes while it has lapsed restarts the lapse: its values wait
    # LAPSE_S from the last one's arrival.
    fwd.dropped(new)
    now[0] += LAPSE_S - 1
    fwd.arrive("b~.3.0", True, 3)
    now[0] += 2
    fwd.dropped(Conn())
    assert list(fwd._arrived) == ["b~.2.0", "b~.3.0"]
    now[0] += LAPSE_S
    fwd.dropped(Conn())
    assert not fwd._arrived


def test_a_call_naming_a_lapsed_clients_value_fails_saying_why(fwd: Any, monkeypatch: Any) -> None:
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(fwd.rt, "_send_quietly", lambda ch, msg: sent.append((ch, msg)))
    now = _clock(fwd)
    old = Conn()
    held(fwd, old, 1, "c~.1.0")
    fwd.arrive("c~.2.0", True, b"a" * 100)
    fwd.dropped(old)
    now[0] += LAPSE_S + 1
    fwd.dropped(Conn())
    # Back after the lapse: its value went, and its call is told so at once.
    new = Conn()
    held(fwd, new, 2, "c~.2.0")
    ch, msg = sent.pop()
    assert ch is new and msg.kind == "forward-dropped" and "c~.2.0" in msg.message
    assert f"within {LAPSE_S:g} s" in msg.message, msg.message
    # Its later values wait for their calls as any do.
    fwd.arrive("c~.3.0", True, 3)
    held(fwd, new, 3, "c~.3.0")
    assert not sent and not fwd._arrived and fwd.held_calls() == 0


def test_a_client_that_may_dial_again_live_on_a_connection_keeps_its_values(fwd: Any) -> None:
    # Two connections of one client to this replica (a binding over a transport of its
    # own), both naming it: one ends, the other lives, so its nonce does not lapse, and
    # its values wait however long and however many connections end meanwhile. So do
    # those of a live client whose calls were all answered and whose next consumer has
    # not come yet.
    now = _clock(fwd)
    one, two, idle = Conn(), Conn(), Conn()
    held(fwd, one, 1, "e~.1.0")
    held(fwd, two, 2, "e~.2.0")
    held(fwd, idle, 1, "f~.1.0")
    fwd.arrive("f~.1.0", True, 1)  # (its one call answered: it names nothing held now)
    fwd.arrive("e~.3.0", True, 3)
    fwd.dropped(one)
    assert not fwd._sessions.lapsed
    for _ in range(3):
        now[0] += LAPSE_S + 1
        fwd.arrive("e~.4.0" if _ == 0 else f"f~.{_}.9", True, 4)
        fwd.dropped(Conn())
    assert sorted(fwd._arrived) == ["e~.3.0", "e~.4.0", "f~.1.9", "f~.2.9"]
    assert fwd.gone_dropped == 0 and not fwd._sessions.lapsed and not fwd._sessions.spent
    held(fwd, two, 3, "e~.3.0", "e~.4.0")  # (its consumer comes: takes both, queued)
    held(fwd, idle, 2, "f~.1.9", "f~.2.9")
    assert not fwd._arrived and fwd.held_calls() == 1  # (two's first call: e~.2.0)


def test_lapsed_nonces_stay_bounded(fwd: Any, monkeypatch: Any) -> None:
    # Clients killed faster than they lapse, and late values for those whose values
    # went: the nonces remembered stay within the bound, whatever comes. (A value for
    # one forgotten past the bound waits as any unclaimed value does.)
    from polybus.worker import fwdgone

    monkeypatch.setattr(fwdgone, "GONE_BOUND", 5)
    now = _clock(fwd)
    for i in range(40):
        ch = Conn()
        held(fwd, ch, 1, f"g{i}~.1.0")
        fwd.arrive(f"g{i}~.2.0", True, i)
        fwd.dropped(ch)  # (past the bound, the oldest lapsed go at once: spent)
        for j in range(max(0, i - 8), i):  # (late values for earlier ones: lapsed again)
            fwd.arrive(f"g{j}~.{i}.1", True, j)
        sessions = fwd._sessions
        assert len(sessions.spent) <= 5 and len(sessions.lapsed) <= 10, (i, sessions.lapsed)
        if i == 20:
            now[0] += LAPSE_S + 1
    now[0] += LAPSE_S + 1
    fwd.dropped(Conn())
    assert not fwd._sessions.lapsed and len(fwd._sessions.spent) <= 5
    assert fwd._arrived and not [k for k in fwd._arrived
                                 if k.partition(".")[0] in fwd._sessions.spent]


def test_a_lapsed_value_delivered_again_is_kept_for_its_call(fwd: Any, monkeypatch: Any) -> None:
    # Its value went with its lapsed client; delivered again (its producer run again)
    # before the call that names it, it waits for that call, which takes it.
    sent: list[Any] = []
    monkeypatch.setattr(fwd.rt, "_send_quietly", lambda ch, msg: sent.append(msg))
    now = _clock(fwd)
    old = Conn()
    held(fwd, old, 1, "h~.1.0")
    fwd.arrive("h~.2.0", True, 2)
    fwd.dropped(old)
    now[0] += LAPSE_S + 1
    fwd.dropped(Conn())
    assert not fwd._arrived and fwd._dropped.get("h~.2.0") == "lapsed"
    fwd.arrive("h~.2.0", True, 2)
    assert list(fwd._arrived) == ["h~.2.0"] and "h~.2.0" not in fwd._dropped
    now[0] += LAPSE_S - 1  # (it waits LAPSE_S from its arrival, not from the lapse)
    fwd.dropped(Conn())
    new = Conn()
    held(fwd, new, 2, "h~.2.0")
    assert not sent and not fwd._arrived and fwd.held_calls() == 0
