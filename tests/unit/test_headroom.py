"""client/headroom.py: the recursion limit raised while polybus works under a program's
call, and put back as it was."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from polybus.client import headroom
from polybus.client.headroom import HEADROOM, enter, leave, roomy

T = TypeVar("T")


@pytest.fixture(autouse=True)
def _limit_kept() -> Iterator[int]:
    base = sys.getrecursionlimit()
    yield base
    sys.setrecursionlimit(base)
    headroom.LIMITS[:] = [base, base + HEADROOM]
    headroom.OPEN.clear()


def test_nested_ways_in_raise_the_limit_once_and_the_last_puts_it_back() -> None:
    base = sys.getrecursionlimit()
    enter()
    enter()
    assert sys.getrecursionlimit() == base + HEADROOM
    leave()
    assert sys.getrecursionlimit() == base + HEADROOM
    leave()
    assert sys.getrecursionlimit() == base and not headroom.OPEN


def test_a_limit_the_program_set_meanwhile_is_kept() -> None:
    enter()
    sys.setrecursionlimit(5000)
    leave()
    assert sys.getrecursionlimit() == 5000
    enter()  # (and the next way in raises from there)
    assert sys.getrecursionlimit() == 5000 + HEADROOM
    leave()
    assert sys.getrecursionlimit() == 5000


def _dive(n: int, f: Callable[[], T]) -> T:
    return f() if n == 0 else _dive(n - 1, f)


def _room() -> int:
    """The deepest ``_dive`` from here that can still call a function."""
    lo, hi = 0, sys.getrecursionlimit()
    while lo < hi:  # (measured: C calls count toward the depth too, not only frames)
        mid = (lo + hi + 1) // 2
        try:
            _dive(mid, lambda: None)
            lo = mid
        except RecursionError:
            hi = mid - 1
    return lo


def _needs(k: int) -> int:  # k frames more
    return 0 if k == 0 else 1 + _needs(k - 1)


def test_roomy_gives_its_function_room_the_program_lacks() -> None:
    base = sys.getrecursionlimit()
    room = _room() - 5
    with pytest.raises(RecursionError):  # the program, that deep, has no room for 50
        _dive(room, lambda: _needs(50))
    assert _dive(room, lambda: roomy(_needs)(50)) == 50
    assert sys.getrecursionlimit() == base and not headroom.OPEN


def test_a_way_in_that_leaves_too_deep_to_lower_the_limit_leaves_it_for_the_next() -> None:
    base = sys.getrecursionlimit()
    room = _room()
    kept = 0
    for k in range(0, 6):  # ways in opened (and left) within a few frames of the limit
        seen: list[int] = []

        def at_limit(seen: list[int] = seen) -> None:
            enter()
            seen.append(sys.getrecursionlimit())
            leave()

        try:
            _dive(room - k, at_limit)
        except RecursionError:
            assert not seen  # (refused at its way in: nothing raised)
            continue
        assert seen == [base + HEADROOM]
        if sys.getrecursionlimit() == base + HEADROOM:  # Python refused to lower it there
            kept += 1
            enter()
            leave()  # the next way in, from up the stack, puts it back
        assert sys.getrecursionlimit() == base
    assert kept > 0


def test_threads_entering_together_leave_the_limit_as_it_was() -> None:
    base = sys.getrecursionlimit()
    go = threading.Barrier(4)

    def work() -> None:
        go.wait()
        for _ in range(2000):
            enter()
            leave()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sys.getrecursionlimit() == base


def test_a_thread_waiting_inside_keeps_its_room_when_another_s_call_ends() -> None:
    """Thread B came in while A's way in was open; A's ended and put the limit back
    while B still waited inside, and B's answer was then filed with no room."""
    base = sys.getrecursionlimit()
    inside, done = threading.Event(), threading.Event()
    seen: list[int] = []

    def b() -> None:
        enter()
        inside.set()
        done.wait(10)
        seen.append(sys.getrecursionlimit())
        leave()

    enter()  # A
    t = threading.Thread(target=b)
    t.start()
    assert inside.wait(10)
    leave()  # A's call ends; B still inside
    assert sys.getrecursionlimit() == base + HEADROOM
    done.set()
    t.join(10)
    assert seen == [base + HEADROOM] and sys.getrecursionlimit() == base


def test_a_send_s_reads_cut_short_at_its_call_leave_nothing_set() -> None:
    """`_drain` marked its thread as reading before it entered, and a RecursionError
    at the entry left the mark: every later send of that thread was queued for good."""
    from polybus.client.reactor import Reactor

    r = Reactor()
    try:
        room = _room()
        cut = 0
        for k in range(0, 8):
            try:
                _dive(room - k, r._drain)
            except RecursionError:
                cut += 1
            assert r.later.reader is None, k
            assert not headroom.OPEN, k
        assert cut > 0
        enter()
        leave()  # (one left too deep kept it raised: put back from up here)
        assert sys.getrecursionlimit() == headroom.LIMITS[0] and not headroom.OPEN
    finally:
        r.close()
