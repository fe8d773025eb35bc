"""``p.cancel()`` (client/cancel.py): a call that has not started never runs, and leaves
nothing behind; one that has run, runs or is answered is left as it is (False).

The replicas here run one call at a time (``pool = 1``): a call that runs until the test
makes a flag file (``until``) keeps the next ones queued, so "not started" holds without
timing anything. Which calls ran is the replica's own count (``ReplicaLink.calls``, the
calls it answered, and ``WorkerRuntime.calls``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client import cancel
from polybus.client.session import Session
from polybus.client.stubs import activate
from polybus.errors import CancelledError

from .comm_harness import cluster

TOML = """
[modules.server]
source = "server.py"
define.until = {{ pool = 1{queue} }}
define.double = {{ pool = 1{queue} }}
define.echo = {{ pool = 1{queue} }}

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = {{ callstyle = "{style}" }}
use.double = {{ callstyle = "{style}"{double} }}
use.echo = {{ callstyle = "async", aggregate = 4, linger = "30s" }}

[bind]
"client.until" = "server.until"
"client.double" = "server.double"
"client.echo" = "server.echo"
"""


def _toml(style: str = "async", double: str = "", queue: str = "") -> str:
    return TOML.format(style=style, double=double, queue=queue)


def _settled(s: Any) -> None:
    """Nothing of the session's calls is left in flight or waiting."""
    (link,) = s.links["server"]
    assert not link.outstanding and not link.held and not link.abandoned
    for d in s.dispatchers.values():
        assert d.backlogged == 0 and not any(d.inflight), (d.interface, d.inflight)
    assert not s.reactor.revoking


def test_a_queued_call_cancelled_never_runs_and_a_running_one_is_left(
        tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        running = s.call("until", (0, str(hang)), {})
        queued = s.call("double", (21,), {})
        after = s.call("double", (5,), {})
        assert queued.cancel() is True
        assert queued.cancelled() and queued.done is True
        assert queued.cancel() is True  # (again: it is cancelled, as concurrent.futures says)
        assert running.cancel() is False and not running.cancelled() and not running.done
        hang.touch()
        assert polybus.wait([running, after]) == [0, 10]  # (after ran: it was behind it)
        with pytest.raises(CancelledError, match=r"the call double\(21\) was cancelled "
                                                 "before it ran") as e:
            polybus.wait(queued)
        assert e.value.interface == "double" and e.value.call == "double(21)"
        with pytest.raises(CancelledError):
            queued.result(timeout=5)
        with pytest.raises(CancelledError):  # (concurrent.futures' exception() raises it)
            queued.exception()
        assert c.runtimes[0].calls == 2  # (running and after: double(21) never ran)
        assert s.stats().interfaces["client.double"]["cancelled"] == 1
        assert s.stats().interfaces["client.double"]["calls"] == 2
        _settled(s)


def test_cancel_after_the_answer_says_false_and_the_value_stays(tmp_path: Path) -> None:
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        p = s.call("double", (4,), {})
        assert polybus.wait(p) == 8
        assert p.cancel() is False
        assert not p.cancelled() and p.done and p.result() == 8 and p.exception() is None
        assert s.stats().interfaces["client.double"]["cancelled"] == 0
        _settled(s)


def test_under_async_demand_a_cancel_frees_the_place_for_the_next_calls(
        tmp_path: Path) -> None:
    """async-demand(2), one replica running one call at a time: the second call is
    queued there, the rest wait at the client. Cancelling the one queued there gives its
    place to the next; cancelling one in the backlog takes it out; all the others run."""
    hang, go = tmp_path / "hang", tmp_path / "go"
    go.touch()
    with cluster(tmp_path, _toml(style="async-demand(2)")) as c:
        s = c.session()
        d = s.dispatchers["until"]
        (link,) = s.links["server"]
        blocker = s.call("until", (1, str(hang)), {})
        ps = [s.call("until", (i, str(go)), {}) for i in range(2, 7)]
        assert d.inflight == [2] and d.backlogged == 4
        s.reactor.poll()  # (ps[0], held to be written with the next: written now)
        assert not link.held
        assert ps[0].cancel() is True  # (written to the replica, queued behind blocker)
        # Its place went to the next call, ps[1]: still two in flight, three waiting.
        assert d.inflight == [2] and d.backlogged == 3
        assert set(link.outstanding) == {blocker._rec.id, ps[1]._rec.id}
        assert ps[2].cancel() is True  # (in the backlog)
        assert d.inflight == [2] and d.backlogged == 2
        hang.touch()
        assert polybus.wait([blocker, ps[1], ps[3], ps[4]]) == [1, 3, 5, 6]
        assert link.calls == 4 and c.runtimes[0].calls == 4  # (neither cancelled call ran)
        assert d.counts.cancelled == 2
        _settled(s)


def test_a_call_held_to_be_written_is_taken_out_unwritten(tmp_path: Path) -> None:
    """async-demand(2): the second call to a replica with one in flight is held, to be
    written with the next (no pump here to write it meanwhile)."""
    hang, go = tmp_path / "hang", tmp_path / "go"
    with cluster(tmp_path, _toml(style="async-demand(2)")) as c:
        s = Session(c.app, str(c.registry.address), c.token, pump=False)
        c.sessions.append(s)
        activate(s)
        go.touch()
        blocker = s.call("until", (0, str(hang)), {})
        (link,) = s.links["server"]
        p = s.call("until", (3, str(go)), {})
        assert [m.id for m in link.held] == [p._rec.id]
        assert p.cancel() is True
        assert not link.held and list(link.outstanding) == [blocker._rec.id]
        hang.touch()
        assert polybus.wait(blocker) == 0
        assert c.runtimes[0].calls == 1
        with pytest.raises(CancelledError):
            polybus.wait(p)
        _settled(s)


def test_a_call_in_an_open_aggregation_batch_is_taken_out_of_it(tmp_path: Path) -> None:
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        ps = [s.call("echo", (i,), {}) for i in range(3)]  # (open: 4 calls, 30 s linger)
        assert ps[1].cancel() is True
        assert ps[1].cancelled() and ps[1].done and not ps[0].cancelled()
        assert [polybus.wait(p) for p in (ps[0], ps[2])] == [0, 2]
        with pytest.raises(CancelledError, match=r"the call echo\(1\) was cancelled"):
            polybus.wait(ps[1])
        assert ps[0].cancel() is False and polybus.wait(ps[0]) == 0  # (answered)
        counts = s.stats().interfaces["client.echo"]
        assert (counts["calls"], counts["batches"], counts["batched_calls"],
                counts["cancelled"]) == (3, 1, 2, 1)
        assert c.runtimes[0].calls == 2
        # A batch all of whose calls are cancelled is never sent.
        qs = [s.call("echo", (i,), {}) for i in range(2)]
        assert all(q.cancel() for q in qs)
        assert polybus.wait(s.call("echo", (9,), {})) == 9
        assert c.runtimes[0].calls == 3
        counts = s.stats().interfaces["client.echo"]
        assert (counts["batches"], counts["cancelled"]) == (2, 3)
        _settled(s)


def test_a_call_of_a_batch_placed_on_its_replica_is_not_cancelled(tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        blocker = s.call("until", (0, str(hang)), {})
        ps = [s.call("echo", (i,), {}) for i in range(4)]  # (full: closed and sent)
        assert ps[2].cancel() is False  # (its batch is one job there, run whole)
        hang.touch()
        assert polybus.wait([blocker, *ps]) == [0, 0, 1, 2, 3]
        assert not ps[2].cancelled()


@pytest.mark.parametrize("forward", ["", ", forward = false"])
def test_a_cancelled_promise_passed_to_a_call_raises_at_that_call(
        tmp_path: Path, forward: str) -> None:
    hang = tmp_path / "hang"
    with cluster(tmp_path, _toml(double=forward)) as c:
        s = c.session()
        blocker = s.call("until", (0, str(hang)), {})
        p = s.call("double", (1,), {})
        assert p.cancel() is True
        with pytest.raises(CancelledError, match=r"the call double\(1\) was cancelled"):
            s.call("double", (p,), {})
        with pytest.raises(CancelledError):
            s.call("double", ([p, 2],), {})  # (inside a list too)
        hang.touch()
        assert polybus.wait(blocker) == 0
        _settled(s)


def test_a_revoke_answered_after_the_cancel_stopped_waiting_runs_the_call_after_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replica whose queue is full under ``overflow = "block"`` reads nothing more of
    the connection: the Revoke waits behind the call it holds back. The cancel stops
    waiting and says False; the replica, reading it later, drops the call, and the
    client places it again, so that it runs as the cancel said."""
    monkeypatch.setattr(cancel, "CANCEL_WAIT_S", 0.3)
    first, second = tmp_path / "first", tmp_path / "second"
    with cluster(tmp_path, _toml(queue=", queue = 1")) as c:
        s = c.session()
        a = s.call("until", (0, str(first)), {})  # running
        b = s.call("until", (1, str(second)), {})  # queued: the queue is full
        p = s.call("double", (4,), {})  # held back by the replica: not read further
        assert p.cancel() is False
        assert not p.done and not p.cancelled()
        first.touch()  # a runs out: b starts, p is read and queued, then the Revoke
        assert polybus.wait(a) == 0
        second.touch()
        assert polybus.wait([b, p]) == [1, 8]
        assert not p.cancelled() and s.dispatchers["double"].counts.cancelled == 0
        _settled(s)


def test_a_cancel_interrupted_while_asking_leaves_the_call_to_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (KeyboardInterrupt) while cancel() waits for the replica's answer: the
    cancel said nothing, so the call runs, as after a False. The replica dropped it
    (queued behind a long call); its answer, read later, places it again."""
    from polybus.client import control
    from polybus.wire.messages import Revoke

    hang = tmp_path / "hang"
    request = control.request

    def interrupted(r: Any, link: Any, msg: Any, req: int, timeout: float) -> Any:
        if type(msg) is Revoke:
            r.send(link, msg)
            raise KeyboardInterrupt
        return request(r, link, msg, req, timeout)

    with cluster(tmp_path, _toml()) as c:
        s = c.session()
        try:
            running = s.call("until", (0, str(hang)), {})
            p = s.call("double", (4,), {})
            # p queued behind `running` at the replica before the Revoke is sent: were p
            # still on its way, the wait below for the queue to empty ended at once, and
            # `running`, let go, could take p before the Revoke was read (its answer then
            # unread when both calls were: the Asked left in `revoking`)
            rt = c.runtimes[0]
            deadline = time.monotonic() + 10
            while not (rt._running == 1 and len(rt._queue) == 1):
                assert time.monotonic() < deadline, "p never queued behind `running`"
                time.sleep(0.002)
            monkeypatch.setattr(control, "request", interrupted)
            with pytest.raises(KeyboardInterrupt):
                p.cancel()
            monkeypatch.undo()
            # (its standby thread reads the Revoke while `running` runs: dropped; else,
            # were `running` let go first, its one thread could take p before reading
            # it, and the answer to the Revoke might come after p's own)
            deadline = time.monotonic() + 10
            while len(rt._queue):
                assert time.monotonic() < deadline, "the replica never dropped the call"
                time.sleep(0.002)
        finally:
            hang.touch()
        assert polybus.wait([running, p], timeout=10) == [0, 8]
        assert not p.cancelled() and s.dispatchers["double"].counts.cancelled == 0
        _settled(s)
