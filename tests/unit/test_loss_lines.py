"""A replica's loss, heard on the client's reactor path (client/lossline.py): the calls
it held are handed on at once, and the loss line waits for the engine's word on how
the worker ended on a thread of its own, not on that path (the thread reading every
connection, which every other call waits on). Under mpi that word is the rank's report
(engines/mpireports.py), which may never come; under Ray, its answer about the actor.

Here the engine's word comes only once the lost replica's calls were handed on, so a
session that waits for it on the reactor path before handing them on (as it did, up to
0.5 s for a report, for every loss) says the loss without it, and after them. A real
Session and Reactor, with no replica: the loss is the reactor's, as a closed connection
makes it; the dispatcher is a stand-in that only notes that it was told."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.lossline import LossLines
from polybus.client.session import Session
from polybus.config import load
from polybus.engines.mpireports import TAG_FAILED, Reports
from polybus.engines.ray import RayEngine
from polybus.errors import ConnectionLostError
from polybus.testing.apps import write_one_call_app

BOUND_S = 60.0  # (a hang's bound, never reached when all goes well: not a timing)
WHY = ("worker server-0 stopped: its thread polybus-server-0-0 ended by RuntimeError: "
       "boom (a fault in polybus; its log above says where)")
LOST = "polybus: warning: replica server-0 of module 'server' was lost: server-0 is gone"


class _Said(logging.Handler):
    """The session's warnings, noted in ``events`` as they are said."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.events = events
        self.lost = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append(record.getMessage())
        self.lost.set()


class _Calls:
    """A binding's dispatcher, as far as a loss goes: told of it, it notes so, then runs
    ``then`` (the engine's word comes from then on)."""

    def __init__(self, events: list[str], then: Callable[[], None]) -> None:
        self.events = events
        self.then = then

    def lost(self, link: ReplicaLink, error: Exception) -> None:
        self.events.append("calls handed on")
        self.then()


class _Channel:
    sock = None  # (no socket: nothing to unregister)
    untracked = False

    def stop_writes(self) -> set[int] | None:  # (nothing written: client/unwritten.py)
        return set()

    def close(self) -> None:
        pass


@pytest.fixture
def said() -> Iterator[_Said]:
    handler = _Said([])
    logger = logging.getLogger("polybus.client")
    logger.addHandler(handler)
    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def _session(tmp_path: Path, said: _Said, then: Callable[[], None], **how: Any) -> Session:
    """A session with no replica (its registry never dialled), ``how`` the cluster's
    ways of saying how a worker ended, and a binding told of losses."""
    app = load(write_one_call_app(tmp_path))
    session = Session(app, "127.0.0.1:1", b"t" * 32, bindings=[], pump=False, **how)
    session.dispatchers["f"] = _Calls(said.events, then)  # type: ignore[assignment]
    return session


def _lose(session: Session, dialling: int | None = None) -> None:
    """The reactor finds replica server-0's connection closed (on this thread: the
    reactor's path): one dialled now (of the name's latest dialling), or of
    ``dialling``."""
    if dialling is None:
        dialling = session.losses.dialling("server-0")
    link = ReplicaLink("server-0", "server", _Channel(), dialling=dialling)  # type: ignore[arg-type]
    session.reactor._lost(link, ConnectionLostError("server-0 is gone"))


class _Comm:
    """MPI's side of rank 0's reports: what `send` put here, taken in order."""

    def __init__(self) -> None:
        self.sent: deque[tuple[int, str]] = deque()

    def send(self, rank: int, why: str) -> None:
        self.sent.append((rank, why))

    def improbe(self, source: int, tag: int, status: Any) -> Any:
        assert tag == TAG_FAILED
        if not self.sent:
            return None
        status.source, payload = self.sent.popleft()
        return type("_Message", (), {"recv": lambda self: payload})()


class _MPI:
    ANY_SOURCE = -1

    class Status:
        source = -1

        def Get_source(self) -> int:
            return self.source


def test_an_mpi_replicas_loss_hands_its_calls_on_before_its_ranks_report_is_waited_for(
        tmp_path: Path, said: _Said) -> None:
    comm = _Comm()
    reports = Reports(comm, _MPI, {1: "server-0"})
    reports.watch()
    session = _session(tmp_path, said, partial(comm.send, 1, WHY),
                       how_ended=reports.said,
                       how_ended_later=partial(reports.how_ended, settle=BOUND_S))
    try:
        _lose(session)
        assert said.lost.wait(BOUND_S)
    finally:
        session.close()
        reports.unwatch()
    how = ("(mpi rank 1) stopped: its thread polybus-server-0-0 ended by RuntimeError: "
           "boom (a fault in polybus; its log above says where)")
    lost = [e for e in said.events if "was lost" in e]
    assert said.events.index("calls handed on") < said.events.index(lost[0]), said.events
    assert lost == [f"{LOST}; its worker {how}"]
    assert session.ended == {"server-0": how}


class _RayActorError(Exception):
    pass


class _Ray:
    """Ray's answer about an actor: it has died, said once ``told`` is set."""

    class exceptions:
        RayActorError = _RayActorError

    def __init__(self) -> None:
        self.told = threading.Event()

    def get(self, ref: object, timeout: float) -> object:
        if not self.told.wait(timeout):
            raise TimeoutError
        raise _RayActorError("The actor died unexpectedly before finishing this task. "
                             "Worker exit type: SYSTEM_ERROR Worker exit detail: killed")


class _Actor:
    class alive:
        @staticmethod
        def remote() -> object:
            return object()


def test_a_ray_replicas_loss_hands_its_calls_on_before_ray_is_asked_how_it_ended(
        tmp_path: Path, said: _Said) -> None:
    engine = RayEngine.__new__(RayEngine)  # (no Ray: its answer is the stand-in's)
    ray = engine.ray = _Ray()
    engine.actors = {"server-0": _Actor()}
    session = _session(tmp_path, said, ray.told.set,
                       how_ended_later=partial(engine.how_ended, settle=BOUND_S))
    try:
        _lose(session)
        assert said.lost.wait(BOUND_S)
    finally:
        session.close()
    lost = [e for e in said.events if "was lost" in e]
    assert said.events.index("calls handed on") < said.events.index(lost[0]), said.events
    assert lost == [f"{LOST}; its worker (a Ray actor) ended: killed (Ray: SYSTEM_ERROR)"]


def test_an_end_known_at_once_is_said_with_the_loss_before_the_calls_go_on(
        tmp_path: Path, said: _Said) -> None:
    """The local engine knows at once (the worker's exit status): said with the loss,
    as before, so the front door's 502 for those calls says it too."""
    session = _session(tmp_path, said, lambda: None,
                       how_ended=lambda name: "exited with status 3")
    try:
        _lose(session)
    finally:
        session.close()
    assert said.events == [f"{LOST}; its worker exited with status 3", "calls handed on"]


def _waits_for(word: threading.Event, asked: threading.Event) -> Callable[[str], str]:
    def later(name: str) -> str:
        asked.set()
        word.wait(BOUND_S)
        return "(mpi rank 1) stopped: here"

    return later


def test_a_loss_line_still_waiting_when_the_run_ends_is_said_with_the_word(
        tmp_path: Path, said: _Said) -> None:
    """(The word has come, its line maybe not yet said: close says it, once, with it.)"""
    word, asked = threading.Event(), threading.Event()
    session = _session(tmp_path, said, lambda: None, how_ended=lambda name: None,
                       how_ended_later=_waits_for(word, asked))
    try:
        _lose(session)
        assert asked.wait(BOUND_S)
        word.set()
    finally:
        session.close()
    assert said.events == ["calls handed on", f"{LOST}; its worker (mpi rank 1) stopped: here"]


def test_a_loss_line_still_waiting_when_the_run_is_interrupted_is_said_at_once(
        tmp_path: Path, said: _Said) -> None:
    """Interrupted (under mpi, the launcher ending the job kills rank 0 a quarter of a
    second after its SIGTERM): the line is said with what is known then, once; the word
    that comes later is not said again."""
    word, asked = threading.Event(), threading.Event()
    session = _session(tmp_path, said, lambda: None, how_ended=lambda name: None,
                       how_ended_later=_waits_for(word, asked))
    try:
        _lose(session)
        assert asked.wait(BOUND_S)
    finally:
        session.close(wait=False)
    assert said.events == ["calls handed on", LOST]
    word.set()
    for thread in threading.enumerate():  # (the waiting one, done: it said nothing more)
        if thread.name == "polybus-loss-server-0":
            thread.join(BOUND_S)
    assert said.events == ["calls handed on", LOST] and session.ended == {}


def test_a_name_lost_again_after_it_was_dialled_again_is_said_with_its_second_end(
        tmp_path: Path, said: _Said) -> None:
    """Once a name (however many links it had), until the front door dials it again
    (client/revive.py, `LossLines.again`): its worker started again in between, the
    second loss was not said, and `ended` (the 502's text) kept how the first ended."""
    ends = iter(["exited with status 1", "exited with status 3"])
    session = _session(tmp_path, said, lambda: None, how_ended=lambda name: next(ends))
    try:
        _lose(session)
        _lose(session)  # (another link of the same worker: not said again)
        assert session.ended == {"server-0": "exited with status 1"}
        session.losses.again("server-0")
        assert session.ended == {}
        _lose(session)
    finally:
        session.close()
    assert [e for e in said.events if "was lost" in e] == [
        f"{LOST}; its worker exited with status 1",
        f"{LOST}; its worker exited with status 3"]
    assert session.ended == {"server-0": "exited with status 3"}


def test_a_connection_of_the_worker_said_lost_is_not_said_once_its_name_is_back(
        tmp_path: Path, said: _Said) -> None:
    """A second connection of a lost worker (a binding's other transport), not read
    until its name was dialled again over the first, was said lost again for the one
    loss (test_run_rejoin_said.py); one dialled since is said."""
    ends = iter(["exited with status 1", "exited with status 3"])
    session = _session(tmp_path, said, lambda: None, how_ended=lambda name: next(ends))
    try:
        _lose(session)
        assert session.losses.again("server-0")  # (the first connection's place)
        _lose(session, dialling=0)  # (the other, found lost only now)
        assert not session.losses.again("server-0")  # (its place: not said back)
        _lose(session)
    finally:
        session.close()
    assert [e for e in said.events if "was lost" in e] == [
        f"{LOST}; its worker exited with status 1",
        f"{LOST}; its worker exited with status 3"]


def test_the_late_word_on_a_first_worker_leaves_the_second_ones_end(
        tmp_path: Path, said: _Said) -> None:
    """The engine's word on the first worker comes after its name was dialled again and
    lost again: its line is said, but `ended` keeps how the second worker ended."""
    word, asked = threading.Event(), threading.Event()
    session = _session(tmp_path, said, lambda: None, how_ended=lambda name: None,
                       how_ended_later=_waits_for(word, asked))
    try:
        _lose(session)
        assert asked.wait(BOUND_S)
        session.losses.again("server-0")
        session.losses.how_ended = lambda name: "exited with status 3"
        _lose(session)
        word.set()
    finally:
        session.close()
    assert [e for e in said.events if "was lost" in e] == [
        f"{LOST}; its worker exited with status 3",
        f"{LOST}; its worker (mpi rank 1) stopped: here"]
    assert session.ended == {"server-0": "exited with status 3"}


def test_a_name_lost_and_dialled_again_over_and_over_keeps_no_ended_threads(
        said: _Said) -> None:
    """A long-lived front door whose replica is lost and dialled again, time after time,
    under an engine whose word comes later: each loss asks on a thread of its own, and
    the ended ones were kept for `close` to join, one more at each loss."""
    losses = LossLines(how_ended_later=lambda name: "exited with status 1")
    try:
        for _ in range(20):
            losses.lost("server-0", "server", ConnectionLostError("server-0 is gone"))
            for thread in list(losses._threads):
                thread.join(BOUND_S)
            losses.again("server-0")
        assert len(losses._threads) <= 1
    finally:
        losses.close()
    assert said.events.count(f"{LOST}; its worker exited with status 1") == 20
