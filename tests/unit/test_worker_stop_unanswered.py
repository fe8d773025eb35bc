"""`WorkerRuntime.stop` says how many calls it held go unanswered: those still running
after its grace, and those queued behind them (`polybus worker` says the count as it
stops, cli/cmd_worker.py)."""

from __future__ import annotations

import threading
import time

from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Call, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"unanswered-token-0123456789abcdef"


def test_stop_counts_the_calls_running_past_the_grace_and_those_queued() -> None:
    gate = threading.Event()

    def hold(x: int) -> int:
        gate.wait(60)
        return x

    rt = WorkerRuntime("w0", {"hold": hold, "echo": lambda x: x}, TOKEN,
                       options=ServeOptions(pool=1)).start()
    ch = connect(rt.address, TOKEN, Codec())
    try:
        ch.send(Call(0, "echo", [0]))
        got: list[object] = []
        while not got:  # (answered: stop counts no call once answered)
            got += ch.receive()
        assert got == [Result(0, 0)]
        for i in range(1, 4):  # one runs, two wait behind it (a pool of 1)
            ch.send(Call(i, "hold", [i]))
        deadline = time.monotonic() + 20
        while (s := rt.stats()).running + s.queued < 3:
            assert time.monotonic() < deadline, f"the calls never came: {s}"
            time.sleep(0.01)
        assert rt.stop(grace=0.1) == 3
    finally:
        gate.set()
        ch.close()
        rt.stop()


def test_an_idle_worker_stops_with_nothing_unanswered() -> None:
    rt = WorkerRuntime("w1", {"echo": lambda x: x}, TOKEN).start()
    assert rt.stop() == 0
