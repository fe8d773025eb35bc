"""What a worker says about its registration (registry/client.Membership): once per change
of state, never once per retry."""

from __future__ import annotations

import threading
import time

import pytest

from polybus.errors import AuthenticationError, TransportError
from polybus.registry.client import Membership, RegistrationRefused
from polybus.wire.messages import Replica


class FakeRegistry:
    """Stands in for a RegistryClient: heartbeats and registrations fail or succeed as
    scripted (an exception to raise, or None; for a heartbeat also False, "the registry
    does not hold this name"), then succeed."""

    address = "127.0.0.1:7700"

    def __init__(self, heartbeats: list[Exception | bool | None],
                 registrations: list[Exception | None]) -> None:
        self.heartbeats = heartbeats
        self.registrations = registrations
        self.registered: list[Replica] = []  # every registration that succeeded
        self.done = threading.Event()  # the script has run out and a heartbeat followed

    def register(self, replica: Replica) -> None:
        if self.registrations:
            exc = self.registrations.pop(0)
            if exc is not None:
                raise exc
        self.registered.append(replica)

    def heartbeat(self, name: str) -> bool:
        if self.heartbeats:
            answer = self.heartbeats.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer is not False
        if not self.registrations:
            self.done.set()
        return True

    def close(self) -> None:
        pass

    def interrupt(self) -> None:  # (Membership.stop ends a request under way)
        pass


ME = Replica("w0", "server", "tcp://127.0.0.1:1", ["f"], 1.0, 1, [])


def run(fake: FakeRegistry) -> list[str]:
    """What the worker said while ``fake`` played its script."""
    said: list[str] = []
    me = ME
    m = Membership(fake, me, 0.001, say=said.append)  # type: ignore[arg-type]
    m.start()
    try:
        assert fake.done.wait(20), "the scripted registry never saw the end of its script"
    finally:
        m.stop()
    return said


def test_a_restart_with_another_token_is_said_once_and_so_is_the_recovery() -> None:
    down = TransportError("cannot connect")
    wrong = AuthenticationError("server refused this connection: wrong cluster token")
    fake = FakeRegistry([None, TransportError("broken pipe")],
                        [None, down, down, wrong, wrong, wrong, down, down])
    # (the first registration is start()'s)
    said = run(fake)
    assert len(said) == 4, said
    assert said[0] == ("polybus worker w0: lost the registry at 127.0.0.1:7700; serving "
                       "on, and registering again when a registry answers there")
    assert said[1].startswith("polybus worker w0: the registry at 127.0.0.1:7700 refused "
                              "this worker's cluster token; was it restarted with another "
                              "token?")
    assert "--token-file" in said[1] and "$POLYBUS_TOKEN" in said[1]
    assert said[2] == said[0]
    assert said[3] == "polybus worker w0: registered again with the registry at 127.0.0.1:7700"


def test_a_name_taken_meanwhile_is_said_with_the_registry_s_reason() -> None:
    taken = RegistrationRefused("registry refused w0: the name 'w0' is held by a live "
                                "replica at tcp://127.0.0.1:2")
    fake = FakeRegistry([OSError("reset")], [None, taken, taken])
    said = run(fake)
    assert [s.split(": ", 1)[1][:20] for s in said] == [
        "lost the registry at", "registry refused w0:", "registered again wit"]
    assert "held by a live replica" in said[1]


def test_a_worker_that_stays_registered_says_nothing() -> None:
    assert run(FakeRegistry([None, None, None], [None])) == []


def test_a_worker_the_registry_dropped_registers_again_and_says_so_once() -> None:
    # The registry dropped it (missed heartbeats, connection still open): its heartbeat
    # is answered "not registered". It registers again, as itself, at once.
    fake = FakeRegistry([None, False, None, None], [None])
    said = run(fake)
    assert fake.registered == [ME, ME]  # start()'s, then the one after the drop
    assert said == ["polybus worker w0: the registry at 127.0.0.1:7700 had dropped this "
                    "worker (no heartbeat reached it within its ttl: was this process "
                    "stopped or starved?); registered again"]


def test_a_dropped_worker_whose_name_was_taken_meanwhile_says_so_and_retries() -> None:
    taken = RegistrationRefused("registry refused w0: the name 'w0' is held by a live "
                                "replica at tcp://127.0.0.1:2")
    fake = FakeRegistry([False], [None, taken, taken])
    said = run(fake)
    assert [s.split(": ", 1)[1][:20] for s in said] == [
        "registry refused w0:", "registered again wit"]
    assert fake.registered == [ME, ME]


def test_stop_ends_the_pause_between_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker whose registry is gone pauses between its attempts to register again;
    stop() (its SIGTERM) ends that pause, and the heartbeat thread with it. The pause
    was a sleep stop() did not end: a worker stopped with its registry gone said
    "terminated" only once it was over. Here a sleep of that thread never ends until the
    test does, so a pause that is such a sleep leaves the thread running after stop()."""
    seen: list[threading.Thread] = []
    failed = threading.Event()
    released = threading.Event()
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if threading.current_thread() in seen:
            released.wait()  # (a pause stop() cannot end)
        else:
            real_sleep(seconds)

    class Gone(FakeRegistry):
        def heartbeat(self, name: str) -> bool:
            seen.append(threading.current_thread())
            failed.set()
            raise TransportError("connection reset")

    monkeypatch.setattr(time, "sleep", sleep)
    m = Membership(Gone([], [None]), ME, 0.001)  # type: ignore[arg-type]
    m.start()
    try:
        assert failed.wait(20), "the heartbeat never ran"
        m.stop()
        assert not seen[0].is_alive(), "the heartbeat thread outlived stop()"
    finally:
        released.set()
        m.stop()


def test_a_registry_ttl_shorter_than_the_heartbeat_is_said_once_as_such() -> None:
    # A registry whose ttl (0.6 s) is shorter than the worker's heartbeat (1 s) drops it
    # between every two heartbeats: look-ups miss it about 40% of the time. The worker
    # said at every heartbeat that it had been dropped, "was this process stopped or
    # starved?", a cause it was not; the registry said its drops as ever.
    from polybus.registry.client import RegistryClient
    from polybus.registry.service import RegistryService

    token = b"ttl-short-token-" + b"t" * 24
    drops: list[str] = []
    said: list[str] = []
    with RegistryService(token, ttl=0.6, say=drops.append) as reg:
        client = RegistryClient(f"127.0.0.1:{reg.address.port}", token)
        m = Membership(client, Replica("w0", "server", "tcp://127.0.0.1:5", ["f"]), 1.0,
                       say=said.append)
        try:
            m.start()
            deadline = time.monotonic() + 30
            while sum("dropped w0" in d for d in drops) < 3 or len(
                    [d for d in drops if "w0 registered" in d]) < 4:
                assert time.monotonic() < deadline, drops
                time.sleep(0.05)
        finally:
            m.stop()
            client.close()
    # (the first drop said as ever: one alone cannot be told from a process stopped)
    assert len(said) == 2, said
    assert "stopped or starved?); registered again" in said[0], said
    assert "this worker heartbeats every 1 s: the registry's ttl is shorter" in said[1]
    assert "--ttl 3s" in said[1] and "stopped or starved" not in said[1], said[1]
