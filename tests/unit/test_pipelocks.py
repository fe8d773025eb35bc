"""worker/pipelocks.py: a process pool's locks and semaphores as pipes, nothing named
in /dev/shm, shared with spawned children as multiprocessing's own are."""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from polybus.worker.pipelocks import MOST, PIPE_LOCKS, PipeSemaphore, pool_context


def _named_here() -> set[str]:
    """What of /dev/shm this process maps now."""
    return set(re.findall(r"/dev/shm/\S+", Path(f"/proc/{os.getpid()}/maps").read_text()))


def test_a_semaphore_counts_what_is_taken_and_given_back() -> None:
    s = PipeSemaphore(2)
    assert s.get_value() == 2
    assert s.acquire(False) and s.acquire(False)
    assert not s.acquire(False)
    assert s._semlock._is_zero() and s._semlock._get_value() == 0
    assert not s.acquire(True, 0.01)  # (none comes: False once the timeout passed)
    s.release()
    assert s.acquire(True, 0.01)
    with PipeSemaphore(1) as got:
        assert got


def test_a_count_past_a_pipe_s_room_is_refused_not_left_to_hang() -> None:
    assert PipeSemaphore(MOST).get_value() == MOST
    with pytest.raises(ValueError, match="holds 0 to"):
        PIPE_LOCKS.Queue()  # (unbounded: multiprocessing's SEM_VALUE_MAX)


def test_a_waiting_acquire_takes_one_released_by_another_thread() -> None:
    s = PipeSemaphore(0)
    t = threading.Timer(0.05, s.release)
    t.start()
    try:
        assert s.acquire()
    finally:
        t.join()


def test_a_lock_lets_one_thread_in_at_a_time() -> None:
    lock = PIPE_LOCKS.Lock()
    inside: list[int] = []
    most = [0]

    def work() -> None:
        for _ in range(200):
            with lock:
                inside.append(1)
                most[0] = max(most[0], len(inside))
                time.sleep(0)
                inside.pop()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert most[0] == 1


def _twice(x: int) -> int:
    return 2 * x


def test_a_process_pool_of_spawned_children_runs_with_nothing_in_dev_shm() -> None:
    before = _named_here()
    with ProcessPoolExecutor(2, mp_context=PIPE_LOCKS) as pool:
        assert list(pool.map(_twice, range(20))) == [2 * x for x in range(20)]
        assert {n for n in _named_here() - before if "/sem." in n} == set()
        q = PIPE_LOCKS.Queue(3)  # (put/get with the bound, as the executor's call queue)
        for x in range(3):
            q.put(x)
        assert q.full() and q.qsize() == 3
        assert [q.get(timeout=5) for _ in range(3)] == [0, 1, 2]
        assert q.empty()
        q.close()
        q.join_thread()


def test_a_system_without_proc_gets_spawn_s_own_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipes' non-blocking twin is opened through /proc/self/fd: on macOS the pool
    would not start; there spawn's semaphores are not files in /dev/shm anyway."""
    assert pool_context() is PIPE_LOCKS
    monkeypatch.setattr(sys, "platform", "darwin")
    other = pool_context()
    assert other is not PIPE_LOCKS and other.get_start_method() == "spawn"
