"""``p.cancel()`` of a call that moves while its replica is asked (client/cancel.py): a
``Steal`` gives it back (migration) or its replica is lost, and the call is placed
again, at the client (an ``async-demand`` backlog) or on a replica. The cancel asks
where it now is: True, and it runs nowhere.

As in test_cancel.py, the replicas run one call at a time (``pool = 1``): a call that
runs until the test makes a flag file keeps the next ones queued, so "not started"
holds without timing anything. The Steal is the one migration sends (client/migrate.py),
sent by hand with no other replica planned for what it gives back: its binding places
the call again (client/giveback.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client import cancel, control, migrate
from polybus.client.migrate import Migrator
from polybus.errors import CancelledError, ConnectionLostError
from polybus.wire.messages import Revoke, Steal

from .comm_harness import cluster
from .test_cancel import _settled, _toml
from .test_forward_migration import wait_until


def _queued(rt: Any, s: Any, n: int = 1) -> None:
    """Until ``rt`` runs one call and ``n`` wait in its queue."""
    wait_until(lambda: rt._running == 1 and len(rt._queue) == n, s,
               state=lambda: f"running {rt._running}, queued {len(rt._queue)}")


def _cancel_queued_on_server_0(c: Any, monkeypatch: pytest.MonkeyPatch, asking: Any,
                               hang: Path) -> tuple[Any, Any, list[Any], bool]:
    """Two blockers hold both replicas (until ``hang`` exists), ``double(21)`` is queued
    on server-0, and its ``cancel()`` asks through ``asking`` in place of
    `control.request`; the blockers let go after. (session, promise, blockers, said)."""
    s = c.session()
    blockers = [s.call("until", (i, str(hang)), {}) for i in range(2)]
    p = s.call("double", (21,), {})
    assert p._rec.link.name == "server-0"
    _queued(c.runtimes[0], s)
    monkeypatch.setattr(control, "request", asking)
    try:
        said = p.cancel()
    finally:
        hang.touch()
    return s, p, blockers, said


@pytest.mark.parametrize("style", ["async-demand(2)", "async"])
def test_a_call_given_back_by_a_steal_while_asked_is_cancelled_where_it_went(
        tmp_path: Path, style: str) -> None:
    """The Steal is written before the Revoke, so the replica gives the call back to it
    and then knows nothing of it: placed again (into the backlog, or written anew to the
    one replica), it has still not started, and the cancel says True."""
    hang, go = tmp_path / "hang", tmp_path / "go"
    go.touch()
    with cluster(tmp_path, _toml(style=style)) as c:
        s = c.session()
        rt = c.runtimes[0]
        (link,) = s.links["server"]
        d = s.dispatchers["until"]
        blocker = s.call("until", (1, str(hang)), {})
        p = s.call("until", (2, str(go)), {})
        s.reactor.poll()  # (p, held to be written with the next: written now)
        _queued(rt, s)
        m = Migrator(d, [])  # (nowhere planned: p's binding places it again)
        s.migrators.append(m)
        req = next(migrate._reqs)
        m._pending[req] = (link, link, 1)
        assert s.gate is not None
        s.gate.enter()  # (the pump does not read the Steal's answer before the cancel)
        try:
            s.reactor.send(link, Steal(1, req))
            said = p.cancel()
        finally:
            s.gate.leave()
            hang.touch()  # (blocker ends, whatever happened: the cluster closes at once)
        assert said is True
        assert p.cancelled() and not m._pending  # (the Steal's answer taken in)
        assert m.moved_out["server-0"] == 0  # (placed again by its binding: not moved)
        assert polybus.wait(blocker) == 1
        with pytest.raises(CancelledError):
            polybus.wait(p)
        s.reactor.poll()
        assert rt.calls == 1 and not len(rt._queue)  # (p never ran)
        _settled(s)


def test_a_call_whose_replica_is_lost_while_asked_is_cancelled_where_it_runs_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client finds server-0 gone while it waits for the answer to its Revoke: the
    call, run again on server-1 (queued behind that one's own long call), is asked
    there, and never runs anywhere; nor is it run again when server-1 goes too."""
    hang = tmp_path / "hang"
    asked: list[str] = []
    request = control.request

    def lost_on_asking(r: Any, link: Any, msg: Any, req: int, timeout: float) -> Any:
        asked.append(link.name)
        if type(msg) is Revoke and link.name == "server-0":
            r.send(link, msg)
            r._lost(link, ConnectionLostError("server-0 is gone (the test)"))
            # server-0 is alive (only its connection was closed here): it drops
            # double(21) when it reads the Revoke or the connection's end. Nothing says
            # it reads either before blocker 0 ends, and then its one thread would take
            # double(21) first: the blockers are let go only once it has dropped it.
            rt0 = c.runtimes[0]
            deadline = time.monotonic() + 10
            while len(rt0._queue):
                assert time.monotonic() < deadline, "server-0 never dropped double(21)"
                time.sleep(0.002)
            return None  # (as a request whose replica went returns)
        return request(r, link, msg, req, timeout)

    with cluster(tmp_path, _toml(), replicas=2) as c:
        s, p, blockers, said = _cancel_queued_on_server_0(c, monkeypatch, lost_on_asking,
                                                          hang)
        assert said is True
        assert asked == ["server-0", "server-1"]
        assert p.cancelled()
        # blocker 0, lost with server-0, ran again on server-1
        assert polybus.wait(blockers) == [0, 1]
        assert not any(p._rec.id in lk.outstanding for lk in s.links["server"])
        assert s.dispatchers["double"].backlogged == 0
        rt0, rt1 = c.runtimes
        wait_until(lambda: not rt0._running, s)  # (blocker 0 there too: its flag is made)
        assert (rt0.calls, rt1.calls) == (1, 2)  # (the blockers; never double(21))
        assert not len(rt0._queue) and not len(rt1._queue)
        with pytest.raises(CancelledError):
            polybus.wait(p)


def test_a_call_placed_again_by_a_late_answer_while_asked_again_is_cancelled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first cancel stops waiting (the replica, its queue full under ``overflow =
    "block"``, reads nothing of the connection) and says False. A second one is asked
    as the replica reads again: the first Revoke's answer comes, dropping the call, so
    the client writes it again, behind the second Revoke; the second answer, that the
    replica has no such call, is then no answer for where the call now is. It is asked
    again there, queued, and cancelled."""
    monkeypatch.setattr(cancel, "CANCEL_WAIT_S", 0.3)
    first, second = tmp_path / "first", tmp_path / "second"
    request = control.request

    def room_on_asking(r: Any, link: Any, msg: Any, req: int, timeout: float) -> Any:
        if type(msg) is Revoke and len(r.revoking) == 2:  # (the second cancel's)
            cancel.CANCEL_WAIT_S = 10.0
            first.touch()  # a ends: b starts, then p is read and queued, then the Revokes
        return request(r, link, msg, req, cancel.CANCEL_WAIT_S)

    with cluster(tmp_path, _toml(queue=", queue = 1")) as c:
        s = c.session()
        try:
            a = s.call("until", (0, str(first)), {})  # running
            b = s.call("until", (1, str(second)), {})  # queued: the queue is full
            p = s.call("double", (4,), {})  # held back by the replica: not read further
            assert p.cancel() is False  # (no answer within 0.3 s)
            monkeypatch.setattr(control, "request", room_on_asking)
            said = p.cancel()
        finally:
            first.touch()
            second.touch()
        assert said is True
        assert polybus.wait([a, b]) == [0, 1]
        with pytest.raises(CancelledError):
            polybus.wait(p)
        s.reactor.poll()
        assert c.runtimes[0].calls == 2  # (a and b: p never ran)
        assert s.dispatchers["double"].counts.cancelled == 1
        _settled(s)


def test_a_call_dropped_by_a_replica_then_lost_with_it_is_not_run_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """server-0 drops the call and says so, and is lost before the cancel looks at its
    answer (the answer and the end of the connection read together): the call, put
    back by the loss to run again (on server-1, queued behind its long call), is asked
    there, and never runs."""
    hang = tmp_path / "hang"
    request = control.request

    def lost_after_answering(r: Any, link: Any, msg: Any, req: int, timeout: float) -> Any:
        got = request(r, link, msg, req, timeout)
        if type(msg) is Revoke and link.name == "server-0":
            assert got is not None and msg.ids[0] in got.ids  # (dropped there)
            r._lost(link, ConnectionLostError("server-0 is gone (the test)"))
        return got

    with cluster(tmp_path, _toml(), replicas=2) as c:
        s, p, blockers, said = _cancel_queued_on_server_0(c, monkeypatch,
                                                          lost_after_answering, hang)
        assert said is True
        assert polybus.wait(blockers) == [0, 1]
        rt0, rt1 = c.runtimes
        wait_until(lambda: not rt0._running, s)
        assert (rt0.calls, rt1.calls) == (1, 2)  # (the blockers; never double(21))
        with pytest.raises(CancelledError):
            polybus.wait(p)


def test_a_lost_call_cancelled_in_the_backlog_leaves_no_suspicion_behind(
        tmp_path: Path) -> None:
    """async-demand(1) on two replicas, each busy: a call lost with server-0 waits in
    the backlog to run again, counted as a suspect (client/backlog.py). Cancelled
    there, it is no longer one: nothing of it is left in its binding."""
    hang = tmp_path / "hang"
    with cluster(tmp_path, _toml(style="async-demand(1)"), replicas=2) as c:
        s = c.session()
        d = s.dispatchers["until"]
        try:
            blockers = [s.call("until", (i, str(hang)), {}) for i in range(2)]
            link0 = blockers[0]._rec.link
            s.reactor._lost(link0, ConnectionLostError("server-0 is gone (the test)"))
            assert d.backlogged == 1 and blockers[0]._rec.id in d._suspects
            said = blockers[0].cancel()
        finally:
            hang.touch()
        assert said is True
        assert polybus.wait(blockers[1]) == 1
        assert not d._suspects and not d._isolated and d.backlogged == 0
        assert not any(d.inflight)
