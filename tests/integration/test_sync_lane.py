"""The sync lanes (client/lane.py over shm, client/socketlane.py over tcp): a plain sync
call over a lone link in one frame. Each must give what the general path gives in every
case, and hand anything unusual over to it: errors, answers that are not plain, slow
calls, other threads, a lost replica."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polybus.client.calls import ReplicaLink
from polybus.client.dispatch import Dispatcher
from polybus.client.reactor import Reactor
from polybus.config.model import CallStyle
from polybus.errors import ConnectionLostError, RemoteException
from polybus.token import make_token
from polybus.transport import ring as ring_mod
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.transport.shm import ShmChannel
from polybus.wire.codec import Codec
from polybus.worker.runtime import WorkerRuntime

_SHM = pytest.param("shm", marks=pytest.mark.skipif(not ring_mod.supported(),
                                                    reason="the ring needs x86-64"))
TOKEN = make_token()


def _boom(x: int) -> int:
    raise ValueError(f"no {x}")


FUNCTIONS = {"echo": lambda x: x, "boom": _boom, "nap": lambda s: time.sleep(s) or s,
             "pair": lambda a, b=0: (a, b)}


class Lane:
    """A one-replica session over ``transport``: a dispatcher per function, the replica
    in this process."""

    def __init__(self, tmp_path: Path, transport: str) -> None:
        address = f"shm://{tmp_path}/w.sock" if transport == "shm" else "tcp://127.0.0.1:0"
        self.rt = WorkerRuntime("w", FUNCTIONS, TOKEN, address).start()
        self.reactor = Reactor()
        ch = connect(self.rt.address, TOKEN, Codec())
        assert type(ch) is (ShmChannel if transport == "shm" else Channel)
        self.shm = transport == "shm"
        ch.spin_s = 100e-6
        self.channel = ch
        self.link = ReplicaLink("w", "server", ch)
        self.reactor.add(self.link)
        self.reactor.refills = False
        self.d = {name: Dispatcher(name, self.reactor, [self.link], CallStyle("sync"))
                  for name in FUNCTIONS}
        self.reactor.on_lost = lambda link, err: [d.lost(link, err) for d in self.d.values()]
        self.general = 0  # calls the general path (Reactor.call_alone) took
        alone = self.reactor.call_alone

        def counted(rec: Any, link: ReplicaLink) -> Any:
            self.general += 1
            return alone(rec, link)
        self.reactor.call_alone = counted  # type: ignore[method-assign]

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.d[name].call_sync(args, kwargs)

    def close(self) -> None:
        self.reactor.close()
        self.rt.stop()


@pytest.fixture(params=[_SHM, "tcp"])
def lane(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Lane]:
    s = Lane(tmp_path, request.param)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def shm_lane(tmp_path: Path) -> Iterator[Lane]:
    if not ring_mod.supported():
        pytest.skip("the ring needs x86-64")
    s = Lane(tmp_path, "shm")
    try:
        yield s
    finally:
        s.close()


def test_plain_calls_go_by_the_lane_and_count_as_calls(lane: Lane) -> None:
    assert lane("echo", 0) == 0  # (the replica's ring arrives with its first frame)
    sent, received = lane.channel.bytes_sent, lane.channel.bytes_received
    before = lane.general
    values: list[Any] = [1, -2**40, 2.5, "text", b"bytes", None, True]
    assert [lane("echo", v) for v in values] == values
    assert lane.general == before  # none went the general way
    assert lane.channel.bytes_sent > sent and lane.channel.bytes_received > received
    assert lane.d["echo"].calls == 1 + len(values) and lane.link.calls == 1 + len(values)
    assert not lane.link.outstanding and lane.d["echo"].inflight == [0]
    if lane.shm:
        rx = lane.channel._rx  # type: ignore[attr-defined]
        assert rx is not None and rx.reader_awake()  # left up: the client runs on


def test_an_error_is_raised_and_the_next_call_goes_by_the_lane(lane: Lane) -> None:
    lane("echo", 0)
    with pytest.raises(RemoteException, match="no 3") as info:
        lane("boom", 3)
    assert info.value.remote_type.endswith("ValueError")
    before = lane.general
    assert [lane("echo", i) for i in range(50)] == list(range(50))
    assert lane.general == before
    assert not lane.link.outstanding and lane.d["boom"].inflight == [0]


def test_what_the_lane_does_not_take_the_general_path_does(lane: Lane) -> None:
    lane("echo", 0)
    before = lane.general
    assert lane("pair", 1, b=2) == [1, 2]  # keywords: the general path
    assert lane.general == before + 1
    a = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(lane("echo", a), a)  # an array: sent and answered with buffers
    big = bytes(range(256)) * 1024  # 256 KiB: out of band, both ways
    assert lane("echo", big) == big
    assert lane("echo", [1, (2, 3), {"k": b"v"}]) == [1, [2, 3], {"k": b"v"}]
    assert lane.general == before + 1
    assert not lane.link.outstanding and lane.d["echo"].inflight == [0]


def test_a_call_longer_than_the_spin_is_waited_for_the_general_way(lane: Lane) -> None:
    lane("echo", 0)
    assert lane("nap", 0.05) == 0.05  # the lane spins 100 us, then the general wait blocks
    assert [lane("echo", i) for i in range(20)] == list(range(20))
    assert not lane.link.outstanding and lane.d["nap"].inflight == [0]


def test_frames_that_wrap_round_the_rings(shm_lane: Lane) -> None:
    lane = shm_lane
    payloads = [bytes([i % 251]) * (900 + i % 300) for i in range(3000)]  # ~3 MB each way
    assert all(lane("echo", p) == p for p in payloads)
    tx, rx = lane.channel._tx, lane.channel._rx
    assert tx is not None and rx is not None
    assert tx.written > 2 * tx.capacity and rx.read > 2 * rx.capacity


def test_threads_calling_at_once_each_get_their_own_answers(lane: Lane) -> None:
    lane("echo", 0)
    out: dict[int, list[Any]] = {}

    def run(t: int) -> None:
        out[t] = [lane("echo", (t, i)) for i in range(300)]
    threads = [threading.Thread(target=run, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert {t: v for t, v in out.items()} == {t: [[t, i] for i in range(300)] for t in range(3)}
    assert not lane.link.outstanding


def test_a_replica_lost_during_a_call_fails_it_with_a_clear_error(lane: Lane) -> None:
    lane("echo", 0)

    def cut() -> None:
        time.sleep(0.05)
        for ch in list(lane.rt._channels):  # the replica's end goes, mid-call
            ch.close()
    threading.Thread(target=cut).start()
    with pytest.raises(ConnectionLostError, match="every replica of nap is gone"):
        lane("nap", 0.5)
    assert lane.link.dead and not lane.link.outstanding


def test_a_replica_asleep_is_woken_by_the_lane_call(shm_lane: Lane) -> None:
    lane = shm_lane
    assert [lane("echo", i) for i in range(10)] == list(range(10))
    tx = lane.channel._tx
    assert tx is not None
    deadline = time.monotonic() + 5
    while tx.reader_awake() and time.monotonic() < deadline:
        time.sleep(0.005)  # the replica past its spin, asleep, its flag down
    assert not tx.reader_awake()
    before = lane.general
    assert [lane("echo", i) for i in range(10)] == list(range(10))  # (a lost bell: a hang)
    assert lane.general == before


class _Interrupt(BaseException):
    """Stands for a KeyboardInterrupt arriving while the lane waits."""


def test_an_interrupt_while_waiting_lets_the_reader_lock_go(lane: Lane) -> None:
    assert lane("echo", 0) == 0
    sl = lane.d["echo"]._lane
    assert sl is not None
    # An interrupt where the lane meets the answer (its decode over shm; over tcp, its
    # look at the socket that finds the answer there).
    target: Any = sl
    name = "_decode" if lane.shm else "_poll"
    original = getattr(target, name)

    def interrupted(*args: Any) -> Any:
        if lane.shm or original(*args):
            raise _Interrupt
        return []
    setattr(target, name, interrupted)
    lane.channel.spin_s = 10.0  # the lane meets the answer (on a loaded machine too)
    with pytest.raises(_Interrupt):
        lane("echo", 1)
    lane.channel.spin_s = 100e-6
    setattr(target, name, original)
    assert not lane.reactor._lock.locked()
    # The interrupted call's answer is dropped (over shm the next call meets it first, no
    # one waits for it); each next call gets its own.
    assert [lane("echo", i) for i in range(5, 10)] == list(range(5, 10))
    assert not lane.link.outstanding



def test_bad_bytes_from_the_replica_fail_the_call_and_drop_the_link(tmp_path: Path) -> None:
    lane = Lane(tmp_path, "tcp")  # (bytes written straight into the replica's socket)
    try:
        assert lane("echo", 0) == 0

        def garble() -> None:
            time.sleep(0.05)
            for ch in list(lane.rt._channels):  # a frame length no encoder makes, mid-call
                ch.sock.send(b"\xff\xff\xff\x7f" + bytes(12))
        threading.Thread(target=garble).start()
        with pytest.raises(ConnectionLostError, match="every replica of nap is gone") as info:
            lane("nap", 0.5)
        assert "over the limit" in str(info.value)
        assert lane.link.dead and not lane.link.outstanding
    finally:
        lane.close()
