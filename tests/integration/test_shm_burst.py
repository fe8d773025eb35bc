"""Calls waiting in an shm ring behind the one a replica's lone thread has just taken run
right there, one after another, not through the queue (worker/direct.py): in order, a
failing one alone; not where the module's interfaces have a priority (in_order) or its
client asks for ``coalesce``; and frames the decoder holds are never left unseen.

Made deterministic where the path is checked: the replica has no standby (no one reads
the ring while the first call runs), the first call waits until the test has written
the rest, and the fairness window is long, so what direct.py does with a ring of waiting
calls is all that varies."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from polybus.config import load
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec, Ref
from polybus.wire.messages import Batch, Call, Drop, Fail, Message, Put, Result
from polybus.worker import direct
from polybus.worker.main import options_for
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"b" * 32


class Replica:
    """A runtime of one thread and no standby, with ``gate`` (waits for `opened`), ``log``
    (notes its argument) and ``boom`` (raises); `waiting` notes the calls direct.py ran
    while more frames waited in their ring."""

    def __init__(self, where: str, in_order: bool, monkeypatch: pytest.MonkeyPatch,
                 standby: bool = False) -> None:
        self.opened = threading.Event()
        self.entered = threading.Event()
        self.ran: list[int] = []
        self.waiting: list[int] = []

        def boom(x: int) -> None:
            raise ValueError(f"no {x}")

        def gate() -> bool:
            self.entered.set()
            return self.opened.wait(10)

        def slow(x: Any) -> Any:  # (long enough for the standby to look meanwhile)
            time.sleep(0.03)
            return x if isinstance(x, int) else -1

        def has(key: str) -> bool:  # (what the cache holds as the call runs)
            return key in self.rt.cache

        self.rt = WorkerRuntime("w", {"gate": gate, "log": self._log, "boom": boom,
                                      "slow": slow, "has": has}, TOKEN, where,
                                ServeOptions(pool=1, in_order=in_order))
        if not standby:
            self.rt._threads = [t for t in self.rt._threads
                                if not t.name.endswith("standby")]
            monkeypatch.setattr(direct, "_FAIR_S", 60.0)
        answer = direct._answer

        def counted(rt: Any, ch: Any, call: Call, fn: Any) -> None:
            if ch.buffered():
                self.waiting.append(call.id)
            answer(rt, ch, call, fn)

        monkeypatch.setattr(direct, "_answer", counted)
        self.rt.start()

    def _log(self, x: int) -> int:
        self.ran.append(x)
        return x

    def burst(self, calls: Sequence[Message], ready: Callable[[Any], None] = lambda ch: None,
              within: float = 10.0) -> dict[int, Message]:
        """Connect, send ``gate`` and, while it runs (``ready(ch)`` first), ``calls``;
        then open the gate: the answers that came within ``within`` s, by call id."""
        ch = connect(str(self.rt.address), TOKEN, Codec())
        got: dict[int, Message] = {}
        try:
            ch.send(Call(0, "gate", []))
            assert self.entered.wait(10)  # the one thread is in it: no one reads the ring
            ready(ch)
            for c in calls:
                ch.send(c)
            self.opened.set()
            deadline = time.monotonic() + within
            answered = sum(type(c) is Call for c in calls) + 1
            while len(got) < answered and time.monotonic() < deadline:
                msg = ch.next_message()
                if msg is None:
                    ch.fill(wait=False)
                    time.sleep(0.0005)
                    continue  # (answers written together come in a Batch)
                got.update((m.id, m) for m in (msg.items if isinstance(msg, Batch) else [msg]))
        finally:
            ch.close()
            self.rt.stop()
        return got


@pytest.fixture(params=[True, False], ids=["in_order", "priorities"])
def replica(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Replica]:
    r = Replica(f"shm://{tmp_path}/w.sock", request.param, monkeypatch)
    try:
        yield r
    finally:
        r.rt.stop()


def test_calls_waiting_in_the_ring_run_as_they_come_unless_ordered(replica: Replica) -> None:
    # behind the gate, 30 calls of rising priority, the 20th failing
    prio = (lambda i: 0.0) if replica.rt.options.in_order else float
    got = replica.burst([Call(i, "boom" if i == 20 else "log", [i], prio=prio(i))
                         for i in range(1, 31)])
    assert got[0] == Result(0, True)
    fail = got[20]
    assert isinstance(fail, Fail) and fail.type == "ValueError" and "no 20" in fail.traceback
    assert all(got[i] == Result(i, i) for i in range(1, 31) if i != 20)
    others = [i for i in range(1, 31) if i != 20]
    if replica.rt.options.in_order:
        assert replica.ran == others  # as they came
        assert replica.waiting == list(range(1, 30))  # each run here, the next waiting
    else:
        assert replica.ran == others[::-1]  # queued together: highest priority first
        assert replica.waiting == []


def test_operands_put_between_calls_keep_the_burst(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached operand's Put (and a Drop) in the ring between calls is kept where the
    burst reads it: the calls behind it still run there, not through the queue (each
    round of a program sending a fresh B took the general path for all its calls)."""
    replica = Replica(f"shm://{tmp_path}/w.sock", True, monkeypatch)
    got = replica.burst([Call(1, "log", [1]), Drop(["old"]), Put("k1", b"operand"),
                         Call(2, "log", [Ref("op", "k1")]), Call(3, "has", ["k1"]),
                         Drop(["k1"]), Call(4, "has", ["k1"])])
    # (k1 asked of the cache by the calls themselves: once the connection closes, its
    # release evicts k1 whether or not the Drop was handled)
    assert [got[i] for i in range(1, 5)] == [Result(1, 1), Result(2, b"operand"),
                                             Result(3, True), Result(4, False)]
    assert replica.ran == [1, b"operand"]
    assert replica.waiting == [1, 2, 3]  # each run here, what followed it in the ring


def test_calls_behind_a_large_one_in_the_decoder_are_answered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame too large to decode where it lies in the ring is copied out into the
    decoder with the frames behind it; run as a burst, those were seen by no poller (it
    looks at rings, not decoders) and waited for the client's next frame: for ever, here
    (found by review). The standby runs, as in any replica, and looks while call 1 runs."""
    replica = Replica(f"shm://{tmp_path}/w.sock", True, monkeypatch, standby=True)
    polled = threading.Event()
    poll_once = replica.rt._poll_once

    def noted() -> None:
        # During the gate the standby looks once, and no more: the calls sent after it
        # wait for the thread that ran the gate, whatever the standby's timing.
        if (threading.current_thread().name.endswith("standby")
                and replica.entered.is_set() and not replica.opened.is_set()):
            if not polled.is_set():
                poll_once()
                polled.set()
            return
        poll_once()

    def spent(ch: Any) -> None:
        assert polled.wait(10)  # the standby's look during the gate is spent

    replica.rt._poll_once = noted  # type: ignore[method-assign]
    got = replica.burst([Call(1, "slow", [np.zeros(200 * 1024, np.uint8)])]  # the decoder's way
                        + [Call(i, "slow", [i]) for i in range(2, 6)], ready=spent)
    assert sorted(got) == list(range(6))
    assert [got[i] for i in range(1, 6)] == [Result(1, -1)] + [Result(i, i) for i in range(2, 6)]


def test_no_burst_for_a_client_that_asks_to_coalesce(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Answered one by one in a burst, each answer would ring the sleeping client's bell;
    its calls go through the queue, whose answers' bells are held back (bells.py)."""
    replica = Replica(f"shm://{tmp_path}/w.sock", True, monkeypatch)

    def coalescing(ch: Any) -> None:
        deadline = time.monotonic() + 10
        channels = replica.rt._channels
        while not (channels and all(c.coalesce_s() for c in channels)):  # (its ring is up)
            assert time.monotonic() < deadline, "the replica never saw coalesce"
            ch.coalesce(0.05)
            ch.fill(wait=False)
            time.sleep(0.001)

    got = replica.burst([Call(i, "log", [i]) for i in range(1, 11)], ready=coalescing)
    assert [got[i] for i in range(1, 11)] == [Result(i, i) for i in range(1, 11)]
    assert replica.waiting == []


def test_a_module_whose_interfaces_have_a_priority_is_served_in_its_order(tmp_path: Path) -> None:
    for name, define in (("plain", "{}"), ("ordered", '{ priority = "x" }')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "server.py").write_text("def f(x):\n    return x\n")
        (tmp_path / name / "client.py").write_text("def main():\n    return None\n")
        (tmp_path / name / "app.toml").write_text(
            f'[modules.server]\nsource = "server.py"\ndefine.f = {define}\n\n'
            f'[modules.client]\nsource = "client.py"\nentrypoint = "main"\n'
            f'use.f = {{ callstyle = "async" }}\n\n[bind]\n"client.f" = "server.f"\n')
    spec = {n: load(tmp_path / n / "app.toml").modules["server"] for n in ("plain", "ordered")}
    assert options_for(spec["plain"], None, 1 << 20).in_order
    assert not options_for(spec["ordered"], None, 1 << 20).in_order
    # a worker started by hand with no configuration cannot know: its clients' may order
    assert not options_for(None, None, 1 << 20).in_order
