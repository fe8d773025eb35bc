"""A fault in polybus's own steps on a replica (not the user's function, whose errors are
answers) fails the call it met, or drops the one connection it met, and the replica
serves on: no pool thread ends with it, on the general path (the poller's read, a pool
thread's run) or on a lone client's inline loop (tcp: socketserve.py, shm: direct.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from integration.conftest import next_message
from polybus.errors import PolybusError
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Fail, Goodbye, Message, Result
from polybus.worker import direct, runtime, socketserve
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"f" * 32


def _boom(x: int) -> int:
    raise ValueError(f"no {x}")


class _Unsayable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no words")


def _unsayable(x: int) -> int:
    raise _Unsayable(x)


def _deep(n: int) -> list[object]:
    value: list[object] = []
    for _ in range(n):
        value = [value]
    return value


@pytest.fixture(params=["tcp", "shm"])
def worker(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[WorkerRuntime]:
    where = "tcp://127.0.0.1:0" if request.param == "tcp" else f"shm://{tmp_path}/w.sock"
    # (a long spin window: each next call comes within it, so it is answered inline)
    rt = WorkerRuntime("w", {"echo": lambda x: x, "boom": _boom, "unsayable": _unsayable,
                             "deep": _deep}, TOKEN, where,
                       ServeOptions(pool=1, spin_s=0.05)).start()
    try:
        yield rt
    finally:
        rt.stop()


def _client(rt: WorkerRuntime) -> Channel:
    ch = connect(str(rt.address), TOKEN, Codec())
    ch.spin_s = 100e-6
    return ch


def _serves(rt: WorkerRuntime, first: int = 100) -> None:
    """A new client's calls are answered, and every pool thread is alive."""
    other = _client(rt)
    try:
        for i in range(first, first + 5):
            other.send(Call(i, "echo", [i]))
            assert next_message(other, pause=0) == Result(i, i)
    finally:
        other.close()
    assert all(t.is_alive() for t in rt._threads)


def _broken_failure(where: str) -> Callable[..., Fail]:
    def broken(*_: Any) -> Fail:
        raise RuntimeError(f"injected: building the Fail broke in {where}")
    return broken


def test_a_fault_answering_a_call_fails_that_call_alone_on_every_path(
        worker: WorkerRuntime, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """Building a raising call's Fail is made to raise on each path that answers calls.
    The first call is read by the poller and run by a pool thread (`_run`); later ones
    are answered inline. Each such call gets a Fail naming the fault; the calls
    around them are answered as before."""
    for module in (runtime, direct, socketserve):
        monkeypatch.setattr(module, "failure", _broken_failure(module.__name__))
    monkeypatch.setattr(direct, "_FAIR_S", 60.0)  # (the inline loop keeps this client)
    seen: list[str] = []
    ch = _client(worker)
    try:
        with caplog.at_level(logging.ERROR, logger="polybus.worker"):
            for i in range(1, 31):
                ch.send(Call(i, "boom" if i % 3 == 1 else "echo", [i]))
                got = next_message(ch, pause=0)
                if i % 3 == 1:
                    assert isinstance(got, Fail) and got.id == i, got
                    assert got.type == "builtins.RuntimeError"
                    assert "failed while answering this call" in got.message
                    assert "injected: building the Fail broke in " in got.message
                    seen.append(got.message.rsplit(" ", 1)[1])
                else:
                    assert got == Result(i, i)
        assert sum("answering call" in r.getMessage() for r in caplog.records) == 10
        inline = "polybus.worker.direct" if worker.address.scheme == "shm" else \
            "polybus.worker.socketserve"
        # (a next call that came after the spin window went the general way: a loaded CI)
        assert seen[0] == "polybus.worker.runtime" and inline in seen[1:], seen
        assert set(seen) == {"polybus.worker.runtime", inline}, seen
        deadline = time.monotonic() + 5  # (the count drops just after the last answer's write)
        while worker._running and time.monotonic() < deadline:
            time.sleep(0.001)
        assert worker._running == 0
    finally:
        ch.close()
    _serves(worker)


def test_a_fault_in_the_inline_loop_drops_that_connection_and_serving_goes_on(
        worker: WorkerRuntime, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The inline loop raising an unexpected error (here at its start, holding the
    poller role) used to end the pool's only thread, and the replica never answered
    again. Now that client's connection is dropped, and a new client is served."""
    real: Callable[..., bool] = direct.serve
    raised: list[bool] = []

    def serve_once_broken(rt: WorkerRuntime, ch: Channel) -> bool:
        # (once the call has run: over shm the loop may first be entered before it,
        # and the client's send of it then found the connection dropped, EPIPE)
        if not raised and rt.calls:
            raised.append(True)
            raise RuntimeError("injected: the inline loop broke")
        return real(rt, ch)

    monkeypatch.setattr(direct, "serve", serve_once_broken)
    ch = _client(worker)
    try:
        with caplog.at_level(logging.ERROR, logger="polybus.worker"):
            ch.send(Call(1, "echo", [1]))
            assert next_message(ch, pause=0) == Result(1, 1)  # answered; the fault comes after
            deadline = time.monotonic() + 5
            while not raised and time.monotonic() < deadline:
                time.sleep(0.001)
            assert raised
            try:  # the connection was dropped: the client hears so
                ch.send(Call(2, "echo", [2]))
                got = next_message(ch, pause=0)
                assert isinstance(got, Goodbye), got
            except PolybusError:
                pass
        assert any("its connection is dropped" in r.getMessage() for r in caplog.records)
    finally:
        ch.close()
    _serves(worker)


def test_an_exception_whose_message_raises_is_answered_and_serving_goes_on(
        worker: WorkerRuntime) -> None:
    """str() of the user's exception raising made building its Fail raise, then the
    fault's own message raise: the pool thread died with its call counted as running,
    and the replica never answered again."""
    ch = _client(worker)
    try:
        for i in range(1, 9):
            ch.send(Call(i, "unsayable" if i % 2 else "echo", [i]))
            got = next_message(ch, pause=0)
            if i % 2:
                assert isinstance(got, Fail) and got.id == i, got
                assert got.type.endswith("_Unsayable")
                assert "its message could not be made: RuntimeError" in got.message
            else:
                assert got == Result(i, i)
    finally:
        ch.close()
    _serves(worker)


def test_an_answer_too_deep_to_send_among_corked_answers_fails_alone(
        worker: WorkerRuntime) -> None:
    """Tiny answers written together (64 at a time) while more calls wait: one whose
    value is too deep to encode (RecursionError, no UNSENDABLE error then) lost the
    whole write, and a Fail went to another call. Now that call fails alone, saying
    why, and every other call is answered."""
    ch = _client(worker)
    n, bad = 600, 300
    try:
        for i in range(n):  # sent before any answer is read: they queue, answers cork
            ch.send(Call(i, "deep" if i == bad else "echo", [3000 if i == bad else i]))
        answers: dict[int, Message] = {}
        batches = 0
        while len(answers) < n:
            msg = next_message(ch, pause=0)
            batches += isinstance(msg, Batch)
            items = msg.items if isinstance(msg, Batch) else [msg]
            for m in items:
                assert isinstance(m, Result | Fail), m
                assert m.id not in answers, m
                answers[m.id] = m
        fail = answers.pop(bad)
        assert isinstance(fail, Fail) and "cannot be sent" in fail.message, fail
        assert "recursion" in fail.message
        assert answers == {i: Result(i, i) for i in range(n) if i != bad}
        assert batches  # (answers were corked: the path this is about)
    finally:
        ch.close()
    _serves(worker)
