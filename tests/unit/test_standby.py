"""A replica's standby thread (worker/standby.py): how long it sleeps between its looks.

Its loop runs here against a stand-in for the runtime, with a `Standby` that records
each nap instead of taking it, so the sequence of naps is the behaviour checked (no
clock is read by the test).
"""

from __future__ import annotations

import threading

from polybus.worker import standby

LOOK_S, IDLE_S = 0.002, 0.1
HELD_AT = 3  # (the look after which something is held)


class _Due:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def until_due(self) -> float:
        return self.seconds


class _Naps(standby.Standby):
    """Records each nap; stops the loop after ``limit`` of them."""

    def __init__(self, rt: _Runtime, limit: int) -> None:
        super().__init__()
        self.rt, self.limit, self.naps = rt, limit, list[float]()

    def sleep(self, seconds: float) -> None:
        self.naps.append(seconds)
        if len(self.naps) >= self.limit:
            self.rt._stop_event.set()


class _Runtime:
    """What `standby.run` reads of a WorkerRuntime: an idle replica (no call runs, none
    starts) that comes to hold something (as look HELD_AT ends), due already when the
    standby next looks (a bell or a corked answer whose time passed while the standby
    was kept off the CPU, the call that held it ended since), let go at that look."""

    standby_look_s, standby_idle_s = LOOK_S, IDLE_S

    def __init__(self) -> None:
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self._running = self._started = 0
        self._polling = False
        self.held = False
        self._bells = _Due(86400.0)  # (nothing owed)
        self._corked = _Due(86400.0)  # (nothing corked)
        self._standby = _Naps(self, limit=40)

    def _holding(self) -> bool:
        return self.held

    def _release_held(self, *, every: bool) -> None:
        self.held = False
        self._bells = _Due(86400.0)

    def _look_at_connections(self) -> None:
        pass

    def _assure_paused(self) -> None:  # (the look's last step: held as it ends)
        if len(self._standby.naps) == HELD_AT:
            self.held, self._bells = True, _Due(0.0)

    def _poll_and_release(self, *, takes_job: bool) -> None:
        raise AssertionError("no call runs: the standby has nothing to poll for")


def test_an_idle_standby_that_let_go_what_was_due_sleeps_longer_again() -> None:
    rt = _Runtime()
    standby.run(rt)  # type: ignore[arg-type]
    naps = rt._standby.naps
    assert naps[HELD_AT - 1] == LOOK_S * 2, f"naps: {naps}"  # (idle: growing)
    assert naps[HELD_AT] == 0.0  # (what was held was due: it looked at once)
    # Then each look twice as far apart as the one before, up to IDLE_S, as if nothing
    # had been held. (It slept 0 s each time from then on: the nap cut to what was due
    # was the one doubled, and 0 doubled is 0: a replica left idle so burnt a CPU.)
    after = naps[HELD_AT + 1:]
    assert all(n > 0 for n in after), f"naps: {naps}"
    assert after[-1] == IDLE_S, f"naps: {naps}"
