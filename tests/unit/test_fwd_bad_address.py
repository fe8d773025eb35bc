"""A Forward's ``to`` that is not an address, or names no one, costs the replica nothing.

A client's ``Forward(id, pkey, key, to)`` makes the producer's replica dial ``to``. Each
address it could not reach was remembered for good (to say it once), its dial's lock
too, and said in the log whole: a client sending values on to ever new made-up addresses
grew the replica's memory without end (1,000 of 100 KB each: +110 MB, kept after the
client went) and wrote 200 KB log lines (the address, twice). Now an address that does
not parse, or is longer than any address, is told to the client at once (``Undelivered``)
and neither dialled, remembered nor logged; the addresses remembered as unreachable are
the last `UNREACHED_BOUND`; nothing of a dial is kept once it ends; and the log quotes an
address cut short. tests/integration/test_fuzz_replica.py found it (a live replica).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import pytest

from polybus.wire.messages import Deliver, Undelivered
from polybus.worker import fwdpeers
from polybus.worker.runtime import WorkerRuntime
from unit.test_fwd_send_later import _Client  # (a live client: fwdpeers.py `_ending`)

TOKEN = b"fwd-bad-address-token-0123456789ab"


@pytest.fixture
def sender(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[WorkerRuntime, _Client]]:
    rt = WorkerRuntime("w0", {}, TOKEN).start()
    client = _Client()
    monkeypatch.setattr(rt, "_send_quietly", lambda ch, msg: client.told.append(msg))
    try:
        yield rt, client
    finally:
        rt.stop()


def _until(cond: Callable[[], bool], within: float = 20.0) -> bool:
    end = time.monotonic() + within
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_an_address_that_is_none_is_told_at_once_and_nothing_of_it_kept(
        sender: tuple[WorkerRuntime, _Client], caplog: pytest.LogCaptureFixture) -> None:
    rt, client = sender
    fwd = rt.forwarding
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    addresses = [f"{i:03d}" + "g" * 100_000 for i in range(20)]  # (no port: no address)
    addresses += ["tcp://127.0.0.1:" + "9" * 2000, "x" * 5000 + ":1"]  # (too long to be one)
    for i, to in enumerate(addresses):
        fwd.send_later(to, Deliver(f"k{i}", True, i), client)  # type: ignore[arg-type]
    assert _until(lambda: len(client.told) == len(addresses)), client.told
    for m in client.told:
        assert isinstance(m, Undelivered) and m.type == "TransportError", m
        assert "not an address" in m.message or "longer than" in m.message, m.message[:300]
    assert _until(lambda: not fwd._outbox)
    assert not fwd._unreached and not fwd._dialing  # nothing remembered of them
    assert all(len(r.getMessage()) < 500 for r in caplog.records), \
        [len(r.getMessage()) for r in caplog.records]


def test_the_unreachable_addresses_remembered_are_the_last_few(
        sender: tuple[WorkerRuntime, _Client], monkeypatch: pytest.MonkeyPatch,
        tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    rt, client = sender
    fwd = rt.forwarding
    monkeypatch.setattr(fwdpeers, "UNREACHED_BOUND", 8)
    caplog.set_level(logging.WARNING, logger="polybus.worker")
    n = 20
    for i in range(n):  # each parses, and no one listens there
        to = f"ipc://{tmp_path}/nobody-{i}-\n-" + "p" * 50
        fwd.send_later(to, Deliver(f"k{i}", True, i), client)  # type: ignore[arg-type]
    assert _until(lambda: len(client.told) == n), client.told
    assert all(isinstance(m, Undelivered) and "could not send" in m.message for m in client.told)
    assert _until(lambda: not fwd._outbox)
    assert len(fwd._unreached) <= 8 and not fwd._dialing
    said = [r.getMessage() for r in caplog.records if "cannot forward" in r.getMessage()]
    assert len(said) == n, said  # (each said once: none was reached meanwhile)
    for line in said:  # quoted: cut short, a newline as \n (no line of the peer's own)
        assert "\n" not in line and len(line) < 600, line


def test_a_host_that_is_no_name_fails_its_values_and_the_next_ones(
        sender: tuple[WorkerRuntime, _Client]) -> None:
    # A host IDNA cannot encode ("a..b", a label of 64 characters) made the dial raise a
    # UnicodeError, not a TransportError: the sending thread died (a traceback of the
    # replica's own) and what waited for it stayed, its consumers never told.
    rt, client = sender
    fwd = rt.forwarding
    for i, to in enumerate(["a..b:1", "a..b:1", "x" * 64 + ":1"]):
        fwd.send_later(to, Deliver(f"k{i}", True, i), client)  # type: ignore[arg-type]
        assert _until(lambda n=i + 1: len(client.told) == n), (to, client.told)  # type: ignore[misc]
        said = client.told[-1]
        assert isinstance(said, Undelivered) and said.type == "TransportError", said
        assert "its host is not a name" in said.message, said
    assert _until(lambda: not fwd._outbox) and not fwd._dialing


def test_a_fault_of_its_own_dialling_fails_what_waits_and_the_thread_goes_on(
        sender: tuple[WorkerRuntime, _Client], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # A dial that raises what no dial should (neither a PolybusError nor an OSError):
    # the values that wait for it are told, it is said with its traceback, and a value
    # asked for later dials again (it ended the sending thread, its values never told).
    rt, client = sender
    fwd = rt.forwarding
    dials: list[str] = []

    def connect(to: object, *args: object, **kwargs: object) -> None:
        dials.append(str(to))
        raise RuntimeError("a fault of its own")

    monkeypatch.setattr(fwdpeers, "connect", connect)
    to = "tcp://127.0.0.1:9"
    with caplog.at_level(logging.ERROR, logger="polybus.worker"):
        for i in range(2):
            fwd.send_later(to, Deliver(f"k{i}", True, i), client)  # type: ignore[arg-type]
            assert _until(lambda n=i + 1: len(client.told) == n), client.told  # type: ignore[misc]
            said = client.told[-1]
            assert isinstance(said, Undelivered) and said.type == "RuntimeError", said
            assert "a fault of its own" in said.message, said
    assert dials == [to, to]
    assert [r.exc_info is not None for r in caplog.records
            if f"dialling {to} failed" in r.getMessage()] == [True, True], caplog.text
    assert _until(lambda: not fwd._outbox) and not fwd._dialing and fwd._outbox_count == 0
