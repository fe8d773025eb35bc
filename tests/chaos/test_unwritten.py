"""A call that never reached its replica whole is placed again when that replica dies,
idempotent or not (client/unwritten.py); one that may have reached it keeps the
at-most-once rule (`idempotent = false`: WorkerDiedError).

``once`` (tests/chaos/app) is not idempotent; the server writes ``run i`` to its side
file before it runs a call, so `Harness.executions` counts the runs outside polybus.
"""

from __future__ import annotations

import threading
import time

import pytest

from polybus.client.batching import Batcher
from polybus.client.promise import wait
from polybus.client.session import Session
from polybus.errors import ConnectionLostError, WorkerDiedError
from polybus.wire.messages import CallBatch

from .conftest import Harness

TWO = "modules.server.replication=2"


def _two_over_ipc(harness: Harness, style: str) -> Session:
    """A session of the TWO app, ``once`` called in ``style`` over ipc, at 2 workers."""
    harness.embedded_registry()
    app = harness.app(TWO, f'modules.client.use.once.callstyle="{style}"',
                      'modules.client.use.once.transport="ipc"')
    harness.workers(2)
    return harness.session(app)


def _gone(harness: Harness, session: Session, name: str) -> None:
    """SIGKILL replica ``name`` (by its PID) once the session's links to it are up."""
    assert any(lk.name == name for lk in session.reactor.links)
    harness.kill(name)
    time.sleep(0.2)  # (its sockets closed by the kernel)


def test_a_sync_call_whose_send_finds_its_replica_gone_runs_on_the_other_once(
        harness: Harness) -> None:
    # Over ipc a write to a dead peer's socket fails at once (EPIPE): not a byte of
    # the call's frame reached it, so it cannot have run there.
    session = _two_over_ipc(harness, "sync")
    assert [session.call("once", (i,), {}) for i in range(2)] == [0, 1]  # (one each)
    _gone(harness, session, "w0")
    assert [session.call("once", (i,), {}) for i in range(10, 14)] == [
        i * i for i in range(10, 14)]
    runs = harness.executions()
    assert all(runs[i] == 1 for i in range(10, 14)), runs
    d = session.dispatchers["once"]
    assert d.counts.run_again >= 1  # (the call sent to w0, counted as run again)
    assert [lk.dead for lk in d.links] == [True, False]


def test_a_call_that_began_on_a_replica_that_dies_still_fails(harness: Harness) -> None:
    session = _two_over_ipc(harness, "sync")
    assert session.call("once", (1,), {}) == 1  # (to w0: the next goes to w1)

    def kill_once_running() -> None:
        deadline = time.monotonic() + 10
        while harness.executions()[2] == 0:  # (it began: the server wrote so first)
            assert time.monotonic() < deadline
            time.sleep(0.01)
        harness.kill("w1")

    killer = threading.Thread(target=kill_once_running)
    killer.start()
    try:
        with pytest.raises(WorkerDiedError, match="not idempotent"):
            session.call("once", (2, 5000.0), {})
    finally:
        killer.join()
    assert harness.executions()[2] == 1
    assert session.call("once", (3,), {}) == 9  # (w0 left)


@pytest.mark.parametrize("style", ["async", "async-demand(4)"])
def test_async_calls_whose_send_finds_their_replica_gone_run_on_the_other_once(
        harness: Harness, style: str) -> None:
    session = _two_over_ipc(harness, style)
    assert [wait(session.call("once", (i,), {})) for i in range(4)] == [0, 1, 4, 9]
    _gone(harness, session, "w0")
    ps = [session.call("once", (i, 50.0), {}) for i in range(10, 20)]
    assert [wait(p) for p in ps] == [i * i for i in range(10, 20)]
    runs = harness.executions()
    assert all(runs[i] == 1 for i in range(10, 20)), runs
    assert session.dispatchers["once"].counts.run_again >= 1


def test_a_forwarded_pipeline_whose_sends_find_their_replica_gone_runs_once(
        harness: Harness) -> None:
    # once(once(i)): the consumer's promise argument is forwarded replica to replica
    session = _two_over_ipc(harness, "async")
    assert wait(session.call("once", (session.call("once", (2,), {}),), {})) == 16
    _gone(harness, session, "w0")
    outs = [session.call("once", (session.call("once", (i,), {}),), {}) for i in (3, 5, 7)]
    assert [wait(p) for p in outs] == [i ** 4 for i in (3, 5, 7)]
    runs = harness.executions()
    assert all(runs[i] == 1 and runs[i * i] == 1 for i in (3, 5, 7)), runs


def test_a_batch_held_for_its_linger_when_its_replica_dies_runs_on_the_other_once(
        harness: Harness) -> None:
    # aggregate = 1, a long linger: each call a batch; the third and later batches for
    # a replica with two sent still running are held at the client (batchplace.py),
    # which the linger timer writes only a linger later, and a look at what has
    # arrived (Promise.done's) never; over tcp, where a write to a dead peer may pass
    harness.embedded_registry()
    app = harness.app(TWO, 'modules.client.use.once.callstyle="async"',
                      "modules.client.use.once.aggregate=1",
                      'modules.client.use.once.linger="60s"')
    harness.workers(2)
    session = harness.session(app)
    bt = session.entries["once"]
    assert isinstance(bt, Batcher)
    ps = [session.call("once", (i, 1500.0), {}) for i in range(6)]
    held = {bt.links[i].name: [m.id for m in h if type(m) is CallBatch]
            for i, h in enumerate(bt.held)}
    assert all(held.values()), held  # (one batch held for each replica)
    _gone(harness, session, "w0")
    deadline = time.monotonic() + 5
    while not all(lk.dead for lk in bt.links if lk.name == "w0"):
        assert time.monotonic() < deadline, "w0's loss not seen"
        # (a look at what has arrived that leaves batches held, as Promise.done's: it
        # reads w0's end, the batch still held for it)
        session.reactor.poll(batches=False)
        time.sleep(0.01)
    outcomes: list[object] = []
    for p in ps:
        try:
            outcomes.append(wait(p))
        except WorkerDiedError as exc:
            outcomes.append(exc)
    runs = harness.executions()
    died = [i for i, o in enumerate(outcomes) if isinstance(o, WorkerDiedError)]
    # the two batches written to w0 may have run there (the first began; the second
    # may have waited its turn): failed; the one held, never written, ran on w1, once
    assert len(died) == 2 and all(runs[i] <= 1 for i in died), (outcomes, runs)
    assert all(outcomes[i] == i * i and runs[i] == 1 for i in range(6) if i not in died), \
        (outcomes, runs)
    assert bt.d.counts.run_again == 1


def test_calls_held_for_a_replica_taken_for_dead_run_on_the_other_never_there(
        harness: Harness) -> None:
    # async-demand: a call for a replica that is busy anyway is held, written with the
    # next ones (Sending.hold); the program inside polybus (the gate entered), the pump
    # leaves them. w0, alive, is taken for dead (as a heartbeat's silence takes it):
    # what it was sent fails (it may run there), what was held for it runs on w1, and
    # never on w0, whose connection is closed before anything more is written.
    harness.embedded_registry()
    app = harness.app(TWO, 'modules.client.use.once.callstyle="async-demand(4)"')
    harness.workers(2)
    session = harness.session(app)
    assert [wait(session.call("once", (i,), {})) for i in range(2)] == [0, 1]
    gate = session.gate
    assert gate is not None
    gate.enter()
    try:
        ps = [session.call("once", (i, 300.0), {}) for i in range(10, 16)]
        w0 = next(lk for lk in session.reactor.links if lk.name == "w0")
        held = {m.id for m in w0.held}
        sent = {rid for rid in w0.outstanding if rid not in held}
        assert held and sent, (held, sent)
        session.reactor._lost(w0, ConnectionLostError("w0 taken for dead (the test)"))
    finally:
        gate.leave()
    outcomes: dict[int, object] = {}
    for i, p in zip(range(10, 16), ps, strict=True):
        try:
            outcomes[i] = wait(p)
        except WorkerDiedError as exc:
            outcomes[i] = exc
    time.sleep(0.5)  # (w0 alive: what it was sent runs to its end there)
    runs = harness.executions()
    died = [i for i, o in outcomes.items() if isinstance(o, WorkerDiedError)]
    assert len(died) == len(sent) and all(runs[i] == 1 for i in died), (outcomes, runs)
    assert all(outcomes[i] == i * i and runs[i] == 1 for i in outcomes if i not in died), \
        (outcomes, runs)
