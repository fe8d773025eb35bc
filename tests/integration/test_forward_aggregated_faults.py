"""Forwarding an aggregated call's promise when something goes wrong: a batch with a call
that cannot be sent, a call given up on, a value the replica cannot send on, a replica
lost, a batch closed by the linger timer, and an answer read while a consuming call is
being made (test_forward_aggregated.py has the usual paths)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import polybus
import polybus.client.forward as forward_mod
from polybus.client import batchsend
from polybus.client.reactor import Reactor
from polybus.errors import CallTimeoutError, RemoteException, UnsendableError
from polybus.wire.codec import Ref
from polybus.wire.messages import Keep

from .comm_harness import Cluster, cluster
from .test_forward_aggregated import gated, inputs, toml

TOML = """
[modules.server]
source = "server.py"
replication = {replicas}
define.nap = {{ idempotent = true }}
define.scale = {{}}
define.double = {{}}

[modules.client]
source = "client.py"
entrypoint = "main"
use.agg = {{ callstyle = "async", aggregate = {count}, linger = "{linger}", forward = true{extra} }}
use.dbl = {{ callstyle = "async", forward = true }}
use.later = {{ callstyle = "async-demand(1)", forward = true }}
use.scaled = {{ callstyle = "async", aggregate = 4, linger = "2s", forward = true }}

[bind]
"client.agg" = "server.nap"
"client.dbl" = "server.double"
"client.later" = "server.double"
"client.scaled" = "server.scale"
"""


def config(replicas: int = 1, count: int = 4, linger: str = "2s", extra: str = "") -> str:
    return TOML.format(replicas=replicas, count=count, linger=linger, extra=extra)


class Odd:
    """Not encodable (no pickle): its call of a batch cannot be sent."""


def settled(c: Cluster, s: Any) -> None:
    """After a round trip to each replica: every message sent before it was read there."""
    for _ in c.runtimes:
        assert polybus.wait(s.call("dbl", (1.0,), {})) == 2.0


def test_a_call_of_a_batch_with_a_refused_row_forwards_its_own_value(tmp_path: Path) -> None:
    # Row 0 cannot be sent: the CallBatch carries rows 1-3 only, and the Forward for
    # call 1 must name it by its place among them (0), not in the whole batch (1).
    with cluster(tmp_path, config()) as c:
        s = c.session()
        p0 = s.call("agg", (Odd(), 0.0), {})
        p1 = s.call("agg", (10.0, 0.0), {})
        q1 = s.call("dbl", (p1,), {})  # placed at once, its producer's batch still open
        p2 = s.call("agg", (20.0, 0.0), {})
        p3 = s.call("agg", (30.0, 0.0), {})  # the batch closes: rows 1-3 go
        assert polybus.wait(q1) == 20.0
        assert polybus.wait(p2) == 20.0 and polybus.wait(p3) == 30.0
        assert polybus.wait(p1) == 10.0
        with pytest.raises(UnsendableError):
            polybus.wait(p0)
        settled(c, s)
        assert not c.runtimes[0].forwarding.slots


def test_a_batch_refused_whole_leaves_no_request_on_its_replica(tmp_path: Path) -> None:
    with cluster(tmp_path, config(count=2)) as c:
        s = c.session()
        p0 = s.call("agg", (Odd(), 0.0), {})
        q0 = s.call("dbl", (p0,), {})
        s.call("agg", (Odd(), 0.0), {})  # full: placed, and refused whole when written
        with pytest.raises(RemoteException) as err:
            polybus.wait(q0)
        assert err.value.remote_type == "UnsendableError", err.value
        settled(c, s)
        assert not c.runtimes[0].forwarding.slots  # (the Forward went after its Cancel)


def test_a_keep_for_a_call_given_up_on_pins_nothing(tmp_path: Path) -> None:
    # p1 is kept for q1 (waiting at the client); the program gives up on p1 while its
    # batch runs: the replica must not pin p1's value for q1, who will never take it.
    with cluster(tmp_path, config(count=2, extra=', timeout = "200ms"')) as c:
        s = c.session()
        x = np.ones(1 << 14)
        p0 = s.call("agg", (x, 1.0), {})
        p1 = s.call("agg", (x, 1.0), {})  # full: placed
        q0 = s.call("later", (p0,), {})   # placed, held there for its value
        q1 = s.call("later", (p1,), {})   # waits at the client: Keep(batch, index 1)
        assert s.forwarder.keeps == 1  # type: ignore[attr-defined]
        with pytest.raises(CallTimeoutError):
            polybus.wait(p1)
        # A wait for q0 looks at the deadline of p0, whose value it needs (their batch
        # shares one): p0 is given up too, and q0 fails with it (client/upstreamdue.py).
        for q in (q0, q1):
            with pytest.raises(RemoteException) as err:
                polybus.wait(q)
            assert err.value.remote_type == "CallTimeoutError", err.value
        settled(c, s)
        kept = c.runtimes[0].forwarding.kept
        assert kept.pinned == 0 and kept.pinned_bytes == 0


def test_a_value_that_cannot_be_sent_on_fails_its_consumers_alone(tmp_path: Path) -> None:
    with cluster(tmp_path, config(replicas=2), replicas=2) as c:
        s = c.session()
        p0 = s.call("scaled", (1, 2), {})
        p1 = s.call("scaled", (2**40, 2**30), {})  # 2**70: no Deliver can carry it
        qs = [s.call("dbl", (p1,), {}) for _ in range(2)]
        p2 = s.call("scaled", (3, 2), {})
        p3 = s.call("scaled", (4, 2), {})  # full: placed with the Forwards
        assert [polybus.wait(p) for p in (p0, p2, p3)] == [2, 6, 8]
        for q in qs:
            with pytest.raises(RemoteException) as err:
                polybus.wait(q)
            assert "a fault in polybus" not in str(err.value), err.value
            assert "can't serialize" in str(err.value) or "cannot" in str(err.value)
            # as the same value answered to the client fails (forward = false): a new
            # user's int past 64 bits was an OverflowError forwarded, a TypeError not
            assert err.value.remote_type == "TypeError", err.value
            assert "the value it returned cannot be sent" in str(err.value), err.value


def test_the_linger_timer_never_sends_through_the_reactor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The timer closes a batch whose only call cannot be sent, and whose promise a
    # forwarding call placed already waits for: its consumer is failed, but not from
    # the timer's thread (which must never read, nor wait for room: client/linger.py).
    on_timer: list[str] = []
    refused: list[str] = []

    def spy(name: str, real: Any) -> Any:
        def send(self: Reactor, link: Any, msg: Any) -> None:
            if threading.current_thread().name.startswith("polybus-linger"):
                on_timer.append(name)
            real(self, link, msg)
        return send

    monkeypatch.setattr(Reactor, "send", spy("send", Reactor.send))
    monkeypatch.setattr(Reactor, "send_many", spy("send_many", Reactor.send_many))
    real_refuse = batchsend.refuse

    def refuse(*args: Any) -> bool:
        refused.append(threading.current_thread().name)
        return real_refuse(*args)

    monkeypatch.setattr(batchsend, "refuse", refuse)
    with cluster(tmp_path, config(count=8, linger="50ms")) as c:
        s = c.session()
        # (the batch stays open till its consumer is placed: the timer only tries the
        # Batcher's lock, and a program held up past the 50 ms linger found p0 failed
        # already, its dbl refused at the call)
        agg = s.entries["agg"]  # (its Batcher)
        assert agg in s.batchers
        with agg.lock:
            p0 = s.call("agg", (Odd(), 0.0), {})
            q0 = s.call("dbl", (p0,), {})
        deadline = time.monotonic() + 20
        while not refused and time.monotonic() < deadline:
            time.sleep(0.005)  # (the program stays out of polybus: the timer closes it)
        assert refused and refused[0].startswith("polybus-linger"), refused
        with pytest.raises(RemoteException) as err:
            polybus.wait(q0)
        assert err.value.remote_type == "UnsendableError", err.value
        assert not on_timer, on_timer
        settled(c, s)
        assert not c.runtimes[0].forwarding.slots


def test_a_batch_run_again_after_its_replica_died_is_asked_to_keep_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xs = inputs(4)
    with gated(tmp_path / "c", toml(), monkeypatch) as (c, g):
        s = c.session()
        ps = [s.call("s1", (x,), {}) for x in xs]  # one batch, sent once full
        qs = [s.call("later", (p,), {}) for p in ps]  # 3 placed, 1 kept for at the client
        f = s.forwarder  # type: ignore[attr-defined]
        before = f.keeps
        assert before == 1
        deadline = time.monotonic() + 10
        while not g["STARTED"] and time.monotonic() < deadline:
            time.sleep(0.005)  # (until the batch runs: its replica is then to die)
        name = ps[0]._rec.link.name  # type: ignore[attr-defined]
        rt = next(rt for rt in c.runtimes if rt.name == name)
        rt.stop(grace=0.05)
        g["GATE"].set()
        ok = 0
        for q, x in zip(qs, xs, strict=True):
            try:
                value = np.asarray(polybus.wait(q))
            except RemoteException as exc:  # (a consumer placed on the replica lost)
                assert exc.remote_type == "WorkerDiedError", exc
                continue
            assert np.array_equal(value, x * 4)
            ok += 1
        assert ps[0]._rec.link.name != name  # type: ignore[attr-defined]
        assert ok >= 1
        # Placed anew, the batch asked its new replica to keep p3's value for q3, still
        # at the client then, which took it from there: the batch answered it Ref("fwd").
        # (A consumer lost with the replica may be placed again only after the batch
        # answered: its value is then sent on from the client.)
        assert f.keeps == before + 1, f.keeps
        assert type(ps[3]._rec.values[3]) is Ref  # type: ignore[attr-defined]


def test_a_batch_answered_while_its_consumer_is_made_still_reaches_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The consuming call sees its producer's batch unanswered, and another thread files
    # the batch's answer before the call makes its producer's record (entry_of): the
    # window is widened here by answering the batch inside it.
    xs = inputs(4)
    with gated(tmp_path / "c", toml(), monkeypatch) as (c, g):
        s = c.session()
        ps = [s.call("s1", (x,), {}) for x in xs]  # one batch, sent once full
        real = forward_mod.entry_of

        def answered_first(p: Any) -> Any:
            g["GATE"].set()
            t = threading.Thread(target=polybus.wait, args=(p,))
            t.start()
            t.join(30)
            assert p._rec.done
            return real(p)

        monkeypatch.setattr(forward_mod, "entry_of", answered_first)
        q = s.call("double", (ps[1],), {})
        monkeypatch.setattr(forward_mod, "entry_of", real)
        got: list[Any] = []
        t = threading.Thread(target=lambda: got.append(polybus.wait(q)), daemon=True)
        t.start()
        t.join(20)  # (on the old code the consumer waited for ever: a failure, not a hang)
        assert got and np.array_equal(np.asarray(got[0]), xs[1] * 4)


def test_a_release_goes_after_its_batch_and_keep_held_back_at_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch placed on a busy replica is held back at the client with the Keep its
    # consumer (waiting at the client) asked for: the Keep's release must not overtake
    # them, or the replica, reading the release first, pins the value for ever.
    from polybus.client import linger

    monkeypatch.setattr(linger, "timer_flush", lambda bt, b: True)  # (held: stays so)
    direct: list[Any] = []
    real_send = Reactor.send

    def send(self: Reactor, link: Any, msg: Any) -> None:
        direct.append(msg)
        real_send(self, link, msg)

    monkeypatch.setattr(Reactor, "send", send)
    with cluster(tmp_path, config(count=2)) as c:
        s = c.session()
        busy = [s.call("agg", (float(k), 0.3), {}) for k in range(2)]
        q0 = s.call("later", (busy[0],), {})  # later's one place, held for its value
        qa = s.call("later", (busy[1],), {})  # (the first to wait at the client reads)
        p = s.call("agg", (7.0, 0.0), {})
        q1 = s.call("later", (p,), {})  # waits at the client
        bt = p._rec.batcher  # type: ignore[attr-defined]
        with bt.lock:
            bt.inflight[0] += 10  # (as if busy: the next batch placed there is held back)
        s.call("agg", (8.0, 0.0), {})  # full: placed with the Keep for q1, held back
        held = bt.held[0]
        assert sorted(type(m).__name__ for m in held) == ["CallBatch", "Keep"], held
        f = s.forwarder  # type: ignore[attr-defined]
        (e,) = f.deps[q1._rec.id]  # type: ignore[attr-defined]
        f._unkeep(e)  # (as when q1 ends unplaced)
        assert not [m for m in direct if type(m) is Keep and m.release], direct
        assert [(type(m).__name__, getattr(m, "release", None)) for m in bt.held[0]] == [
            ("Keep", False), ("CallBatch", None), ("Keep", True)], bt.held[0]
        with bt.lock:
            bt.inflight[0] -= 10
        assert polybus.wait(q0) == 0.0 and polybus.wait(qa) == 2.0
        assert polybus.wait(p) == 7.0 and polybus.wait(q1) == 14.0
