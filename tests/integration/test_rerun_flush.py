"""A call sent again after a replica that held it was lost (``Call.again``) is never
corked with others (worker/runtime.py): its replica writes every answer it holds
before running it, and writes its own answer at once. A poison call that kills each
replica it runs on then takes no finished answer with it the second time, and only
it is named as what ends them. (The first death still takes the answers corked
with it: those calls run again, once.)"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import polybus
from polybus.testing.apps import write_bound_app
from polybus.testing.peers import next_message
from polybus.transport.channel import Channel
from polybus.transport.endpoints import connect
from polybus.wire.codec import Codec
from polybus.wire.messages import Batch, Call, Result
from polybus.worker.options import ServeOptions
from polybus.worker.runtime import WorkerRuntime

TOKEN = b"rerun-flush-token-0123456789abcdef"


class Looked:
    """``look`` notes how many answers its replica held unwritten when it began."""

    def __init__(self) -> None:
        self.rt: WorkerRuntime | None = None
        self.held: list[int] = []
        self.lock = threading.Lock()

    def echo(self, i: int) -> int:
        return i

    def look(self, i: int) -> int:
        assert self.rt is not None
        with self.lock:
            self.held.append(sum(map(len, self.rt._corked.held.values())))
        return i


@pytest.fixture
def served() -> Iterator[tuple[WorkerRuntime, Looked]]:
    looked = Looked()
    rt = WorkerRuntime("w", {"echo": looked.echo, "look": looked.look}, TOKEN,
                       options=ServeOptions(pool=1))
    looked.rt = rt.start()
    try:
        yield rt, looked
    finally:
        rt.stop(grace=0.5)


def _answers(ch: Channel, n: int) -> list[int]:
    got: list[int] = []
    while len(got) < n:
        msg = next_message(ch, limit=10)
        assert msg is not None, f"answers {got} only"
        for m in msg.items if isinstance(msg, Batch) else [msg]:
            assert isinstance(m, Result) and m.value == m.id, m
            got.append(m.id)
    return got


def test_a_call_sent_again_is_run_with_no_answer_held(served: tuple[WorkerRuntime, Looked]) -> None:
    rt, looked = served
    ch = connect(rt.address, TOKEN, Codec())
    try:
        ch.send_many([Call(i, "echo", [i]) for i in range(200)])  # (tiny calls: corked from now)
        assert _answers(ch, 200) == list(range(200))
        for n in range(5):
            base = 1000 + n * 100
            # Tiny calls answered while more wait are held; the one sent again is not
            # run until they are written. Then its own answer is not held either: the
            # next call (not marked) finds nothing held.
            calls = [Call(base + i, "echo", [base + i]) for i in range(20)]
            calls += [Call(base + 20, "look", [base + 20], again=True),
                      Call(base + 21, "echo", [base + 21], again=True),
                      Call(base + 22, "look", [base + 22])]
            ch.send_many(calls)
            assert _answers(ch, len(calls)) == [c.id for c in calls]
        assert looked.held == [0, 0] * 5, looked.held
        # Without the mark, answers are held as before (corking is kept).
        ch.send_many([Call(2000 + i, "echo", [2000 + i]) for i in range(20)]
                     + [Call(2020, "look", [2020])])
        assert _answers(ch, 21)[-1] == 2020
        assert looked.held[-1] > 0, looked.held
    finally:
        ch.close()


SERVER = """
    import os

    POISON = 7

    def f(x):
        if x == POISON:
            os._exit(3)  # (the poison: it ends every replica that runs it)
        return x
"""

CLIENT = """
    from polybus import use, wait

    f = use("f")

    def main():
        wait([f(i) for i in range(100, 300)])  # (each replica has run tiny calls: it corks)
        ps = [f(i) for i in range(8)]  # (the poison last: no call waits behind it)
        out = []
        for p in ps:
            try:
                out.append(wait(p))
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc}")
        return out
"""


def test_a_poison_call_takes_no_finished_answer_with_it(tmp_path: Path) -> None:
    app = write_bound_app(tmp_path, server=SERVER, client=CLIENT, names=("f",),
                          server_keys="replication = 2",
                          client_keys='use.f = { callstyle = "async" }')
    out = polybus.run(app, {}).result
    assert isinstance(out, list) and len(out) == 8, out
    assert out[:7] == list(range(7)), out
    assert isinstance(out[7], str) and "f(7)" in out[7] and "may be what ends them" in out[7], out
