"""Under ``overflow = "block"``, clients held back for a full queue take the room that
comes in turn: one client's burst does not keep another's call waiting until the whole
burst has been read. The held-back clients were kept in a set and resumed in its order,
so the one that came first in it (by its address in memory) took every room there was,
paused again at once behind its next call, and was first again: another client's one
call waited behind all 300 calls of the burst (in 3 runs of 4, with three other clients),
and behind a client that keeps sending, for ever."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Message, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"block-fair-token-0123456789abcdefg"
BURST = 300


class Ran:
    """A call that takes a little while, recording who ran it, in order."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.lock = threading.Lock()

    def work(self, who: str) -> str:
        with self.lock:
            self.order.append(who)
        time.sleep(0.002)
        return who


@pytest.fixture
def served() -> Iterator[tuple[WorkerRuntime, Ran]]:
    ran = Ran()
    rt = WorkerRuntime("w", {"work": ran.work}, TOKEN,
                       options=ServeOptions(pool=1, queue=2, overflow="block")).start()
    try:
        yield rt, ran
    finally:
        rt.stop(grace=0.5)


def _results(msg: Message | None) -> list[Result]:
    items = msg.items if isinstance(msg, Batch) else [msg]
    return [m for m in items if isinstance(m, Result)]  # (not the Pongs of a held client)


def test_a_burst_does_not_hold_back_another_clients_call(
        served: tuple[WorkerRuntime, Ran]) -> None:
    rt, ran = served
    burst = connect(rt.address, TOKEN, Codec())
    others = [connect(rt.address, TOKEN, Codec()) for _ in range(3)]
    channels: list[Channel] = [burst, *others]
    try:
        burst.send_many([Call(i, "work", ["a"]) for i in range(BURST)])
        deadline = time.monotonic() + 10
        while not rt._paused and time.monotonic() < deadline:
            time.sleep(0.005)  # (held back: the queue is full)
        assert rt._paused, "the burst never filled the queue"
        for k, ch in enumerate(others):
            ch.send(Call(k, "work", [f"b{k}"]))
        waiting = set(range(len(others)))
        deadline = time.monotonic() + 60
        while waiting and time.monotonic() < deadline:
            for k in list(waiting):
                others[k].fill_soon(0.01)
                while (m := others[k].next_message()) is not None:
                    if _results(m):
                        waiting.discard(k)
        assert not waiting, f"clients {sorted(waiting)} not answered within 60 s"
        before = {w: ran.order[:ran.order.index(w)].count("a") for w in ran.order if w != "a"}
        # Each took its turn: behind the few calls queued and running when it came and
        # a few held clients' (the burst's and the others'), never the whole burst.
        assert all(n < BURST // 3 for n in before.values()), (
            f"calls of the burst run before each other client's one: {before}")
    finally:
        for ch in channels:
            ch.close()
