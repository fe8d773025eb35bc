"""Spin-then-block waits: data that comes during the spin or after it is read, and the
``spin`` setting reaches both the replica and the client's connections."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from polybus.config import validate
from polybus.testing.apps import write_one_call_app
from polybus.transport.channel import Channel
from polybus.transport.spinning import SPIN_S, spin_until
from polybus.wire.codec import Codec
from polybus.wire.messages import Ping
from polybus.worker.main import options_for
from polybus.worker.poller import ReadPoller


def test_spin_until_returns_the_first_true_answer() -> None:
    answers = iter([0, [], 3, 4])
    assert spin_until(lambda: next(answers), 1.0) == 3


def test_spin_until_gives_up_with_the_last_answer() -> None:
    looks: list[int] = []

    def look() -> list[int]:
        looks.append(1)
        return []

    assert spin_until(look, 0.0) == []
    assert looks == [1]  # a zero window looks once


def _pair(spin_s: float) -> tuple[Channel, socket.socket]:
    a, b = socket.socketpair()
    ch = Channel(a, Codec(), "peer")
    ch.spin_s = spin_s
    return ch, b


def _frame(msg: Ping) -> bytes:
    return b"".join(bytes(p) for p in Codec().encode(msg))


def test_a_spinning_fill_reads_what_is_there_and_what_comes_after_the_spin() -> None:
    ch, peer = _pair(spin_s=1e-4)
    try:
        peer.sendall(_frame(Ping(1)))
        assert ch.fill(wait=True) > 0
        assert ch.next_message() == Ping(1)
        # Nothing yet: the spin runs out, then the blocking read takes the late frame.
        later = threading.Timer(0.05, lambda: peer.sendall(_frame(Ping(2))))
        later.start()
        try:
            assert ch.fill(wait=True) > 0
        finally:
            later.join()
        assert ch.next_message() == Ping(2)
        assert ch.fill(wait=False) == 0  # not waiting: no spin, nothing read
    finally:
        ch.sock.close()
        peer.close()


def test_a_spinning_poll_returns_what_became_ready_and_blocks_after() -> None:
    poller = ReadPoller()
    a, b = socket.socketpair()
    try:
        poller.register(a, "it")
        assert poller.poll(0.01, spin=1e-4) == []  # spun, then blocked, nothing came
        later = threading.Timer(0.05, lambda: b.send(b"x"))
        later.start()
        try:
            assert poller.poll(2.0, spin=1e-4) == ["it"]
        finally:
            later.join()
        assert poller.poll(0.0, spin=1e-4) == ["it"]  # no timeout: no spin, one look
    finally:
        poller.close()
        a.close()
        b.close()


def test_the_spin_setting_reaches_the_replica_options(tmp_path: Path) -> None:
    for line, expected in (("", SPIN_S), ('spin = "0"', 0.0), ('spin = "250us"', 250e-6)):
        write_one_call_app(tmp_path, server_keys=line)
        config, problems = validate(str(tmp_path / "app.toml"))
        assert not problems and config is not None
        spec = config.modules["server"]
        assert abs(spec.spin - expected) < 1e-12
        assert abs(options_for(spec, None, 1 << 20).spin_s - expected) < 1e-12
