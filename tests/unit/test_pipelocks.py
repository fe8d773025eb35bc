"""worker/pipelocks.py: a process pool's locks and semaphores as pipes, nothing named
in /dev/shm, shared with spawned children as multiprocessing's own are."""

from __future__ import annotations

import os
import re
import signal
import subprocess
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


SMALL_PIPES = """
import fcntl, os
from polybus.worker import pipelocks
real = os.pipe


def small():  # (a user past /proc/sys/fs/pipe-user-pages-soft gets pipes of 1 page)
    r, w = real()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
    return r, w


def no_more(fd, cmd, arg=0):  # (past pipe-user-pages-hard: no pipe grows)
    if cmd == fcntl.F_SETPIPE_SZ:
        raise PermissionError(1, "Operation not permitted")
    return fcntl.fcntl(fd, cmd, arg)


pipelocks.os.pipe = small
for n in (4096, 4097, 20000):
    if n == 20000:
        pipelocks.fcntl = type("F", (), {"fcntl": staticmethod(no_more),
                                         "F_GETPIPE_SZ": fcntl.F_GETPIPE_SZ,
                                         "F_SETPIPE_SZ": fcntl.F_SETPIPE_SZ})
    try:
        s = pipelocks.PipeSemaphore(n)
        print(n, s.get_value(), flush=True)
    except OSError as exc:
        print(n, "refused", flush=True)
"""


def test_a_count_past_a_small_pipe_s_room_grows_it_or_is_refused_not_left_to_hang() -> None:
    """A pipe may hold less than 64 KiB (1 or 2 pages, for a user past the system's
    pipe-user-pages-soft): a count past its room is written only once the pipe grew
    to hold it, else refused (its write waited for ever: a pool's start hung)."""
    out = subprocess.run([sys.executable, "-c", SMALL_PIPES], capture_output=True,
                         text=True, timeout=60)
    assert out.stdout.splitlines() == ["4096 4096", "4097 4097", "20000 refused"], out.stderr


def test_a_wait_with_a_timeout_of_years_takes_one_released_meanwhile() -> None:
    """As multiprocessing's own semaphore does (its poll was given the timeout whole, in
    milliseconds: OverflowError)."""
    s = PipeSemaphore(0)
    t = threading.Timer(0.05, s.release)
    t.start()
    try:
        assert s.acquire(True, 1e10)
    finally:
        t.join()


class _Raised(Exception):
    pass


def test_a_signal_whose_handler_raises_as_the_byte_is_read_gives_it_back() -> None:
    """A signal handler that raises (an alarm's timeout, Ctrl-C's KeyboardInterrupt)
    and runs just as a waiting ``with lock`` reads its byte, before the ``with`` is in:
    the lock was taken for good (a child's ``result_queue.put``, retried by the
    executor after the exception, then waited on itself: the pool hung). As
    multiprocessing's own, the lock is not taken."""
    lock = PipeSemaphore(0)

    def raising(signum: int, frame: object) -> None:
        raise _Raised

    def trip() -> None:  # (given to this thread: the waiting one runs the handler once
        time.sleep(0.2)  # its read returns, with the byte)
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR2)
        lock.release()

    before = signal.signal(signal.SIGUSR2, raising)
    t = threading.Thread(target=trip)
    try:
        t.start()
        with pytest.raises(_Raised), lock:
            pytest.fail("the with was entered")  # (the handler runs first)
        assert lock.get_value() == 1
    finally:
        t.join(30)
        signal.signal(signal.SIGUSR2, before)
