"""Who may put a call into a replica's process pool now (procpool.py).

A call takes one of the pool's slots, as many as it has children, so every call in the
pool is running (or about to, on an idle child): one waiting for a child waits here, in
the replica, and a child's death touches only the calls the pool was running. A call
run again after a child died takes the pool ``alone``: no other call is in it, so if a
child dies again, that call was in it. One waiting to run alone goes before calls that
come after it (they wait for it too), so it never waits for ever behind a stream.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Slots"]


class Slots:
    def __init__(self, n: int) -> None:
        self._n = n
        self._used = 0
        self._alone = False       # a call runs alone
        self._want_alone = 0      # calls waiting to run alone
        self._cv = threading.Condition(threading.Lock())

    @contextmanager
    def shared(self) -> Iterator[None]:
        """One slot, beside other calls (none while a call runs or waits to run alone)."""
        with self._cv:
            while self._used >= self._n or self._alone or self._want_alone:
                self._cv.wait()
            self._used += 1
        try:
            yield
        finally:
            with self._cv:
                self._used -= 1
                self._cv.notify_all()

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Every slot: once the calls in the pool are out, and no other runs alone."""
        with self._cv:
            self._want_alone += 1
            try:
                while self._used or self._alone:
                    self._cv.wait()
            finally:
                self._want_alone -= 1
            self._alone = True
        try:
            yield
        finally:
            with self._cv:
                self._alone = False
                self._cv.notify_all()
