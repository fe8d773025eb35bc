"""The slots of a replica's process pool (worker/poolslots.py): at most N calls in it,
and a call run again after a child died alone in it, before the calls that came after."""

from __future__ import annotations

import threading
import time

from polybus.worker.lifetime import how_it_ended
from polybus.worker.poolslots import Slots


def test_at_most_n_calls_are_in_and_one_alone_is_alone() -> None:
    slots = Slots(2)
    lock = threading.Lock()
    now = {"shared": 0, "alone": 0}
    seen: list[tuple[int, int]] = []  # (shared, alone) in, as each call came in

    def enter(kind: str) -> None:
        with lock:
            now[kind] += 1
            seen.append((now["shared"], now["alone"]))
        time.sleep(0.002)
        with lock:
            now[kind] -= 1

    def shared() -> None:
        with slots.shared():
            enter("shared")

    def alone() -> None:
        with slots.alone():
            enter("alone")

    threads = [threading.Thread(target=alone if i % 5 == 0 else shared) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 40
    assert all((n <= 2 and a == 0) or (n, a) == (0, 1) for n, a in seen), seen


def test_a_call_waiting_to_run_alone_goes_before_the_calls_that_come_after_it() -> None:
    slots = Slots(2)
    order: list[str] = []
    release = threading.Event()

    def first() -> None:
        with slots.shared():
            order.append("first")
            release.wait()

    def alone() -> None:
        with slots.alone():
            order.append("alone")

    def later() -> None:
        with slots.shared():
            order.append("later")

    a = threading.Thread(target=first)
    a.start()
    while not order:
        time.sleep(0.001)
    b = threading.Thread(target=alone)
    b.start()
    while not slots._want_alone:  # (it waits for the first call to be out)
        time.sleep(0.001)
    c = threading.Thread(target=later)  # (a slot is free, but the one alone goes first)
    c.start()
    release.set()
    for t in (a, b, c):
        t.join()
    assert order == ["first", "alone", "later"]


def test_how_a_process_ended_is_said_as_the_engine_says_it() -> None:
    assert how_it_ended(3) == "exited with status 3"
    assert how_it_ended(-9) == "was killed by signal 9 (SIGKILL)"
    assert how_it_ended(-200) == "was killed by signal 200"
