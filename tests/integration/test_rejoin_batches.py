"""A session whose workers were started apart (``rejoin``: a run at a shared registry)
with an aggregating binding (client/rejoin.py, client/batchsend.py): batches lost with
every replica wait for one to come back, as a plain binding's calls do; a replica taken
back is put in place under the binding's lock; and closing the session ends a look
still under way.

In-process (comm_harness), as test_rejoin_calls.py: a replica is stopped, and a new one
registered under its name as `polybus worker` would register.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import polybus
from polybus.client import rejoin as rejoin_module
from polybus.client.dispatch import Dispatcher
from polybus.client.revive import Halt, dial, wanted
from polybus.client.session import Session
from polybus.client.stubs import activate
from polybus.errors import ConnectionLostError, TransportError
from polybus.wire.messages import Message, Resolve

from .comm_harness import Cluster, cluster

TOML = """
[modules.server]
source = "server.py"
replication = 1

[modules.client]
source = "client.py"
entrypoint = "main"
use.until = {{ callstyle = "{style}", aggregate = {n}, linger = "{linger}" }}

[bind]
"client.until" = "server.until"
"""


def _session(c: Cluster, bound: float) -> Session:
    s = Session(c.app, str(c.registry.address), c.token, rejoin=True)
    c.sessions.append(s)
    activate(s)
    assert s.rejoin is not None
    s.rejoin.bound = bound
    return s


def _until(what: str, check: Any) -> None:
    deadline = time.monotonic() + 20
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within 20 s"
        time.sleep(0.01)


def _lose(c: Cluster, s: Session, i: int = 0) -> None:
    """server-i stopped, and found lost by the session."""
    c.runtimes[i].stop(grace=0.1)
    link = s.links["server"][i]

    def lost() -> bool:
        s.reactor.poll()
        return link.dead
    _until(f"server-{i} found lost", lost)


def _again(c: Cluster, i: int = 0) -> None:
    """A new server-i registered in the stopped one's place."""
    c.runtimes[i] = c.start_replica(f"server-{i}")
    c.runtimes.pop()  # (start_replica appended it; it is in the old one's place)


@pytest.fixture
def flag(tmp_path: Path) -> Path:
    """The file that ends the calls of ``until`` (`_cluster` makes it at the end)."""
    return tmp_path / "flag"


@contextmanager
def _cluster(tmp: Path, toml: str, flag: Path, replicas: int = 1) -> Iterator[Cluster]:
    """The cluster, its calls of ``until`` ended (``flag`` made) before it closes,
    whatever happened: a replica stopped waits for the calls it runs."""
    with cluster(tmp, toml, replicas) as c:
        try:
            yield c
        finally:
            flag.write_text("")


def test_a_batch_lost_with_every_replica_runs_on_the_one_that_comes_back(
        tmp_path: Path, flag: Path) -> None:
    """A batch held by the only replica when it went failed at once with
    ConnectionLostError, where a plain binding's calls wait: it waits for a live
    replica and runs there, and so does a batch closed while none is live."""
    with _cluster(tmp_path, TOML.format(style="async", n=2, linger="1ms"), flag) as c:
        s = _session(c, bound=30.0)
        p = [s.call("until", (x, str(flag)), {}) for x in (7, 8)]  # (one batch, sent)
        _lose(c, s)
        flag.write_text("")
        _again(c)
        assert [polybus.wait(x) for x in p] == [7, 8]
        assert c.runtimes[0].calls == 2  # (the new server-0's)


def test_a_batch_closed_while_no_replica_is_live_waits_for_one(
        tmp_path: Path, flag: Path) -> None:
    """A batch left open at the loss and closed while none is live (here: by a wait
    for its call) failed at once: it waits, and runs on the replica that comes back."""
    with _cluster(tmp_path, TOML.format(style="async", n=2, linger="30s"), flag) as c:
        s = _session(c, bound=30.0)
        bt = s.batchers[0]
        p = s.call("until", (9, str(flag)), {})  # (a batch left open)
        c.runtimes[0].stop(grace=0.1)
        link = s.links["server"][0]

        def lost() -> bool:
            s.reactor._poll(batches=False)  # (the open batch left open)
            return link.dead
        _until("server-0 found lost", lost)
        assert bt.open is not None
        flag.write_text("")
        out: list[Any] = []

        def wait() -> None:
            try:
                out.append(polybus.wait(p))
            except Exception as exc:  # (said below)
                out.append(exc)
        t = threading.Thread(target=wait)
        t.start()
        _until("the batch closed", lambda: bt.open is None and (bt.backlog or out))
        assert not out, out
        _again(c)
        t.join(20)
        assert out == [9]
        assert c.runtimes[0].calls == 1


def test_a_batch_lost_with_every_replica_fails_once_none_came_back(
        tmp_path: Path, flag: Path) -> None:
    """Past the bound, the error a run with its own workers gives at once, with what
    was waited for, for each call of the batch."""
    with _cluster(tmp_path, TOML.format(style="async", n=2, linger="1ms"), flag) as c:
        s = _session(c, bound=0.3)
        p = [s.call("until", (x, str(flag)), {}) for x in (7, 8)]
        _lose(c, s)
        for x in p:
            with pytest.raises(ConnectionLostError) as e:
                polybus.wait(x)
            text = str(e.value)
            assert text.startswith("every replica of until is gone (last: server-0: "), text
            assert "; lost replica(s) server-0 of module 'server' not back at" in text, text


def test_a_replica_taken_back_is_put_in_place_under_the_binding_lock(
        tmp_path: Path, flag: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch placed by another thread while the new server-0 was being put in place
    (its link already in the binding's list, the Batcher's counts not yet reset) lost
    its count in flight there: async-demand(1) then sent a second batch to that
    replica while the first still ran, and server-1 stood idle."""
    toml = TOML.format(style="async-demand(1)", n=1, linger="1ms")
    with _cluster(tmp_path, toml, flag, replicas=2) as c:
        s = _session(c, bound=30.0)
        bt = s.batchers[0]
        _lose(c, s)
        _again(c)
        made: list[Any] = []
        plain = Dispatcher.replace

        def replace(d: Dispatcher, old: Any, new: Any) -> None:
            plain(d, old, new)
            if d is bt.d and not made:  # (another thread places a batch now)
                t = threading.Thread(target=lambda: made.append(bt((9, str(flag)), {})))
                made.append(t)
                t.start()
                t.join(1.0)  # (it may wait for the lock: then it places after)
        monkeypatch.setattr(Dispatcher, "replace", replace)
        back = s.links["server"]

        def placed() -> bool:
            s.reactor.poll()
            return not back[0].dead
        _until("server-0 taken back", placed)
        made[0].join(20)
        first = made[1]
        assert first._rec.link is back[0]
        assert bt.inflight == [1, 0]
        second = s.call("until", (10, str(flag)), {})
        assert second._rec.link is back[1]  # (server-0's window is full)
        flag.write_text("")
        assert polybus.wait(first) == 9
        assert polybus.wait(second) == 10


def test_closing_the_session_ends_a_look_under_way(tmp_path: Path) -> None:
    """A look waiting for a registry that does not answer (here: its Resolves held)
    went on after the session was closed, its connection to the registry open."""
    with cluster(tmp_path, TOML.format(style="async", n=2, linger="1ms")) as c:
        s = _session(c, bound=30.0)
        held = threading.Event()
        asked = threading.Event()
        handle = c.registry._handle

        def wedged(msg: Message, owner: int) -> Message | None:
            if isinstance(msg, Resolve):
                asked.set()
                held.wait(30)
            return handle(msg, owner)
        c.registry._handle = wedged  # type: ignore[method-assign]
        try:
            _lose(c, s)
            assert asked.wait(20), "no look asked the registry"
            rejoin = s.rejoin
            assert rejoin is not None and rejoin.thread is not None
            s.close()
            assert not rejoin.thread.is_alive(), "a look still under way after close"
        finally:
            held.set()


def test_a_look_halted_before_it_asks_asks_nothing(tmp_path: Path) -> None:
    """A session closed between a look's start and its question to the registry: the
    look raises at once (no connection is made, none is left open)."""
    with cluster(tmp_path, TOML.format(style="async", n=2, linger="1ms")) as c:
        s = _session(c, bound=30.0)
        _lose(c, s)
        w = wanted(s, "server")
        assert w is not None
        halt = Halt()
        halt.halt()
        with pytest.raises(TransportError, match=r"^the request to the registry at .* was "
                           r"interrupted \(the client is closing\)$"):
            dial(w, halt)


@contextmanager
def _found_while_held(c: Cluster, s: Session) -> Iterator[Any]:
    """server-0 lost, then found again while another thread holds the aggregating
    binding's lock: the replica found (not yet put in place), the lock let go at the end."""
    rejoin = s.rejoin
    assert rejoin is not None
    bt = s.batchers[0]
    _lose(c, s)
    took, free = threading.Event(), threading.Event()

    def hold() -> None:
        with bt.lock:
            took.set()
            free.wait(30)
    t = threading.Thread(target=hold)
    t.start()
    try:
        assert took.wait(20)
        _again(c)
        _until("server-0 found", lambda: rejoin.keys["server"].found)
        yield rejoin.keys["server"].found[0]
    finally:
        free.set()
        t.join(20)


def test_a_replica_found_while_the_binding_lock_is_held_elsewhere_waits_for_it(
        tmp_path: Path, flag: Path) -> None:
    """Its lock is only tried (its holder may wait for this thread): the replica found
    stays found, its connection open, and is put in place once the lock is free."""
    with _cluster(tmp_path, TOML.format(style="async", n=2, linger="1ms"), flag) as c:
        s = _session(c, bound=30.0)
        rejoin = s.rejoin
        assert rejoin is not None
        with _found_while_held(c, s) as found:
            rejoin.tick()
            assert s.links["server"][0].dead
            assert rejoin.keys["server"].found == [found]
            assert not found.channel.closed
        rejoin.tick()
        assert not s.links["server"][0].dead
        assert s.links["server"][0].channel is found.channel
        flag.write_text("")
        assert polybus.wait(s.call("until", (5, str(flag)), {})) == 5


def test_a_replica_left_for_a_held_lock_is_closed_if_the_session_closes_meanwhile(
        tmp_path: Path, flag: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session closed (on another thread) while a step was putting a found replica in
    place, and the binding's lock was held elsewhere: the replica was kept for later after
    the close had closed what was kept, its connection left open for good."""
    with _cluster(tmp_path, TOML.format(style="async", n=2, linger="1ms"), flag) as c:
        s = _session(c, bound=30.0)
        rejoin = s.rejoin
        assert rejoin is not None
        with _found_while_held(c, s) as found:
            plain = rejoin_module.install

            def install(*args: Any) -> Any:
                rejoin.close()  # (the session closes while this step is under way)
                return plain(*args)
            monkeypatch.setattr(rejoin_module, "install", install)
            rejoin.tick()
            assert rejoin.keys["server"].found == []
            assert found.channel.closed
