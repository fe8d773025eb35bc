"""Waits on a descriptor past 1,023 (a process whose module holds many files): a TLS
connection's reads and writes, the pump's sleeps, a stop signal's wait. ``select()``
cannot watch such a descriptor (FD_SETSIZE) and raised ValueError; these are polls.
The whole run: tests/integration/test_many_descriptors.py."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_pump import FakeReactor  # tests/unit
from test_security_tls import TOKEN, cfg, echo_twenty, make_pki  # tests/unit

from polybus.client.pump import Gate, Pump, gated
from polybus.stopsignals import StopSignals
from polybus.transport import tls
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.transport.wake import Wake
from polybus.wire.codec import Codec
from polybus.wire.messages import Call
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

HOLD = 1100


@pytest.fixture
def held() -> Iterator[None]:
    """1,100 descriptors held: those made from here on are numbered past 1,023."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * HOLD
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"needs {want} descriptors (the hard limit is {hard})")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(HOLD)]
    try:
        yield
    finally:
        for fd in fds:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_tls_connection_past_1023_waits_reads_and_writes(
        held: None, tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    tls.configure(cfg(pki))
    rt = WorkerRuntime("t0", {"echo": lambda x: x}, TOKEN,
                       options=ServeOptions(handshake_timeout=2.0)).start()
    ch = connect(rt.address, TOKEN, Codec())
    wake = Wake()
    ringer = threading.Timer(0.1, wake.ring)
    try:
        assert ch.tls and ch.fileno() > 1023
        ch.wake = wake
        ringer.start()
        assert ch.fill(wait=True) == 0  # asleep until rung (it raised ValueError)
        echo_twenty(ch)  # (its 300 KB calls: a send that waits for room)
    finally:
        ringer.cancel()
        ch.close()
        wake.close()
        rt.stop()
        tls.configure(None)


def test_an_idle_pump_with_its_bell_past_1023_sleeps(held: None) -> None:
    r = FakeReactor()
    g = r.gate = Gate()
    r.read = gated(g, r.read)  # type: ignore[method-assign]
    p = Pump(r, g, lambda: r.left > 0)  # type: ignore[arg-type]
    sleeps = [0]
    sleep = p._sleep

    def counted(seconds: float | None) -> None:
        sleeps[0] += 1
        sleep(seconds)

    p._sleep = counted  # type: ignore[method-assign]
    try:
        g.enter()
        g.dirty = True
        g.leave()  # work left: the pump takes it in, then has none
        end = time.monotonic() + 5
        while not (r.taken == 3 and p.idle) and time.monotonic() < end:
            time.sleep(0.002)
        assert r.taken == 3 and p.idle
        time.sleep(0.05)
        before = sleeps[0]
        time.sleep(0.2)
        assert sleeps[0] - before <= 1  # asleep until woken (it looped, each sleep failing)
    finally:
        p.stop()


def test_a_stop_wait_past_1023_times_out(held: None) -> None:
    old = {s: signal.getsignal(s) for s in (signal.SIGUSR1,)}
    try:
        with StopSignals((signal.SIGUSR1,)) as stop:
            assert stop.wait(0.05) is False  # (it raised ValueError)
            stop.request()
            assert stop.wait(1.0) is True
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_a_send_past_1023_waits_for_room(held: None) -> None:
    """A send that finds the socket full waits for room (reading meanwhile, through
    ``on_blocked``) on a descriptor past 1,023 too."""
    a, b = socket.socketpair()
    ch, peer = Channel(a, Codec(), "peer"), Channel(b, Codec(), "us")
    big = b"y" * 4_000_000  # far more than a socket pair holds
    got: list[object] = []
    reader = threading.Timer(0.1, lambda: got.extend(_receive_one(peer)))
    try:
        assert ch.fileno() > 1023
        reader.start()
        ch.send(Call(1, "echo", [big]), on_blocked=lambda: None)  # (it raised ValueError)
        reader.join(10)
        assert got == [Call(1, "echo", [big])]
    finally:
        reader.cancel()
        ch.close()
        peer.close()


def _receive_one(ch: Channel) -> list[object]:
    got: list[object] = []
    while not got:
        got += ch.receive()
    return got
