"""Client threads mixing sync calls and async bursts of ``square`` on one reactor: the
load both the client's thread-safety tests and the replica's backpressure tests drive."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from polybus.client.promise import wait


def square(i: int) -> int:
    return i * i


def run_threads(one: Any, burst: Any, *, threads: int, rounds: int, most: int,
                pauses: Sequence[float] = (), join_s: float = 60.0) -> tuple[list[int], list[str], bool]:
    """Each of ``threads`` threads makes ``rounds`` rounds: a sync call through ``one``, or
    a burst of 1..``most`` async calls through ``burst``, each answer checked against
    ``square``; with ``pauses``, a short sleep now and then. Returns the rounds each
    thread finished, the errors, and whether any thread was still running after
    ``join_s`` (a hang)."""
    done = [0] * threads
    errors: list[str] = []

    def client(seed: int) -> None:
        r = random.Random(seed)
        try:
            for _ in range(rounds):
                if r.random() < 0.5:
                    i = r.randrange(10**6)
                    assert one((i,), {}) == square(i)
                else:
                    xs = [r.randrange(10**6) for _ in range(r.randrange(1, most))]
                    ps = [burst((i,), {}) for i in xs]
                    assert [wait(p) for p in ps] == [square(i) for i in xs]
                done[seed] += 1
                if pauses and r.random() < 0.3:
                    time.sleep(r.choice(pauses))
        except Exception as exc:  # reported by the caller, with the thread's seed
            errors.append(f"thread {seed}: {exc!r}")

    ts = [threading.Thread(target=client, args=(s,), daemon=True) for s in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(join_s)
    return done, errors, any(t.is_alive() for t in ts)
