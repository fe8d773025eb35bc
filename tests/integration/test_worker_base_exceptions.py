"""A SystemExit, KeyboardInterrupt or other BaseException raised by a program's value
on a replica (as its argument unpickles, as its answer pickles, as its exception is put
into words) fails that call alone, and the replica serves on. Let through, it ended the
thread that read the connections: the worker stayed alive, registered and heartbeating,
and never answered again nor greeted a new connection. A thread that ends all the same
is said, and the runtime's owner told (serve() then stops the worker, loudly)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from integration.conftest import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Fail, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"b" * 32


class OwnBase(BaseException):
    pass


def _raise(kind: type[BaseException]) -> None:
    raise kind("raised by the value's own code")


class Unpickles:
    """Pickles fine; raising ``kind`` as it is unpickled (a class's __reduce__)."""

    def __init__(self, kind: type[BaseException]) -> None:
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:
        return _raise, (self.kind,)


class Unpicklable:
    """Raises SystemExit as it is pickled (the replica's answer)."""

    def __reduce__(self) -> tuple[Any, ...]:
        sys.exit("no pickle for you")


class Unsayable(Exception):
    def __str__(self) -> str:
        raise SystemExit(3)


def _unsayable() -> None:
    raise Unsayable()


@pytest.fixture(params=["tcp", "shm"])
def worker(request: pytest.FixtureRequest, tmp_path: object) -> Iterator[WorkerRuntime]:
    where = "tcp://127.0.0.1:0" if request.param == "tcp" else f"shm://{tmp_path}/w.sock"
    rt = WorkerRuntime("w", {"echo": lambda x: x, "unpicklable": Unpicklable,
                             "unsayable": _unsayable}, TOKEN, where,
                       ServeOptions(pool=1, allow_pickle=True)).start()
    try:
        yield rt
    finally:
        rt.stop()


def _client(rt: WorkerRuntime) -> Channel:
    return connect(str(rt.address), TOKEN, Codec(allow_pickle=True))


def _serves(rt: WorkerRuntime, ch: Channel | None = None) -> None:
    """``ch``'s next calls, and a new client's, are answered; every thread is alive."""
    fresh = _client(rt)
    try:
        for c in ([ch] if ch is not None else []) + [fresh]:
            for i in range(100, 103):
                c.send(Call(i, "echo", [i]))
                assert next_message(c) == Result(i, i)
    finally:
        fresh.close()
    assert all(t.is_alive() for t in rt._threads)
    assert rt.died is None


@pytest.mark.parametrize("kind", [SystemExit, KeyboardInterrupt, OwnBase])
def test_an_argument_whose_unpickling_raises_fails_its_call_alone(
        worker: WorkerRuntime, kind: type[BaseException]) -> None:
    ch = _client(worker)
    try:
        ch.send(Call(1, "echo", [Unpickles(kind)]))
        got = next_message(ch)
        assert isinstance(got, Fail) and got.id == 1 and got.kind == "bad-call", got
        assert got.type == kind.__name__
        assert got.message.startswith(
            f"an argument of this call could not be unpickled on the replica: "
            f"{kind.__name__}: raised by the value's own code; the value's own "
            "unpickling code"), got.message
        _serves(worker, ch)
    finally:
        ch.close()


def test_an_answer_whose_pickling_raises_system_exit_fails_its_call_alone(
        worker: WorkerRuntime) -> None:
    ch = _client(worker)
    try:
        ch.send(Call(1, "unpicklable", []))
        got = next_message(ch)
        assert isinstance(got, Fail) and got.id == 1, got
        assert got.type == "TypeError"
        assert "cannot be pickled: no pickle for you" in got.message
        _serves(worker, ch)
    finally:
        ch.close()


def test_an_exception_whose_message_raises_system_exit_is_answered(
        worker: WorkerRuntime) -> None:
    ch = _client(worker)
    try:
        ch.send(Call(1, "unsayable", []))
        got = next_message(ch)
        assert isinstance(got, Fail) and got.id == 1, got
        assert got.type.endswith("Unsayable")
        assert "its message could not be made: SystemExit" in got.message
        _serves(worker, ch)
    finally:
        ch.close()


def test_a_thread_that_ends_all_the_same_is_said_and_its_owner_told(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A pool thread's loop made to raise SystemExit outside any call's steps: not a
    silent end (threading says nothing of a SystemExit), but logged, ``died`` set, and
    ``on_died`` called (serve() stops the worker on it: worker/main.py)."""
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, "tcp://127.0.0.1:0",
                       ServeOptions(pool=1))
    told = threading.Event()
    rt.on_died = told.set
    real = rt._release_held

    def broken(*, every: bool) -> None:
        if not threading.current_thread().name.endswith("standby"):
            raise SystemExit("injected")
        real(every=every)

    monkeypatch.setattr(rt, "_release_held", broken)
    try:
        with caplog.at_level(logging.CRITICAL, logger="polybus.worker"):
            rt.start()
            assert told.wait(5)
        assert rt.died == "its thread polybus-w-0 ended by SystemExit: injected"
        deadline = time.monotonic() + 5
        while not any("it stops serving" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        rt.stop()


def test_when_threads_die_one_after_another_the_first_is_the_one_said(
        caplog: pytest.LogCaptureFixture) -> None:
    """``died`` (what the worker's stop says, worker/main.py) is the first thread's end:
    those after it may be its effects (a standby left alone); each is still logged."""
    rt = WorkerRuntime("w", {"echo": lambda x: x}, TOKEN, "tcp://127.0.0.1:0",
                       ServeOptions(pool=1))
    told: list[str | None] = []
    rt.on_died = lambda: told.append(rt.died)

    def first() -> None:
        raise RuntimeError("the cause")

    def second() -> None:
        raise RuntimeError("an effect")

    try:
        with caplog.at_level(logging.CRITICAL, logger="polybus.worker"):
            for name, main in (("t-first", first), ("t-second", second)):
                t = threading.Thread(target=rt._guarded(main), name=name)
                t.start()
                t.join(5)
        assert rt.died == "its thread t-first ended by RuntimeError: the cause"
        assert told == [rt.died, rt.died]
        said = [r.getMessage() for r in caplog.records if "it stops serving" in r.getMessage()]
        assert len(said) == 2 and "an effect" in said[1], said
    finally:
        rt.stop()
