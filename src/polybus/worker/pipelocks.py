"""A process pool's locks and semaphores made of pipes: nothing of it named in /dev/shm.

multiprocessing's spawn context makes the locks of a pool's queues named POSIX
semaphores (``/dev/shm/sem.mp-*``): a spawned child opens them by name, so the name
stays until multiprocessing's resource tracker unlinks it at the pool's end or the
replica's death. The tracker is in the replica's process group; a SIGKILL of the whole
group (a supervisor's, ``kill -9 -PGID``) ended it too, and every such kill left the
pool's five names in /dev/shm for good. Here a semaphore is a pipe whose bytes are its
count: acquire reads one, release writes one. A child gets its two descriptors as it
gets a queue's own pipe (passed at its spawn, numbered the same), and the kernel frees
the pipe with the last process that holds it, however each ended.

`PIPE_LOCKS` is the spawn context with these in place of its ``Lock``, ``Semaphore``
and ``BoundedSemaphore`` (what ``Queue`` and ``SimpleQueue`` use, and so
``ProcessPoolExecutor``). Its other primitives (``RLock``, ``Condition``, ``Event``) are
spawn's own: a pool does not use them. A release past the bound is not refused (the
executor makes none).
"""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import select
import struct
import sys
import termios
import time
from multiprocessing import context, reduction
from typing import Any

__all__ = ["MOST", "PIPE_LOCKS", "PipeSemaphore", "pool_context"]

# The most a semaphore holds: a pipe's room (64 KiB on Linux), which a count past it
# would fill, its writer then waiting for ever. (A pool's queue needs its size + 1.)
MOST = 65536
_LONGEST_POLL_S = 86400.0  # (one poll's; a longer timeout polls again: poll's is a C int)


class PipeSemaphore:
    """A counting semaphore shared with spawned children: ``value`` bytes in a pipe."""

    def __init__(self, value: int = 1) -> None:
        if not 0 <= value <= MOST:  # (an unbounded Queue asks for 2**31 - 1: refused)
            raise ValueError(f"a pipe semaphore holds 0 to {MOST}, not {value}")
        r, w = os.pipe()  # (close-on-exec: a child gets them only when passed at its spawn)
        self._r, self._w = r, w
        self._nb = _not_blocking(r)
        room = _room(w, value)  # (grown if need be, and it can be)
        if value > room:  # (its write would wait for ever)
            raise OSError(errno.ENOSPC, f"a pipe semaphore of {value}: its pipe holds "
                          f"{room} bytes, and could not be made to hold more (a user "
                          f"past /proc/sys/fs/pipe-user-pages-soft gets small pipes)")
        if value:
            os.write(w, b"\0" * value)

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        """Take one (True); False if none came: at once (not ``block``), or within
        ``timeout`` seconds. A plain wait (the executor's, but for its last
        ``put_nowait``) is a blocking read, of which the kernel wakes one per byte
        written (Linux 5.5 and later): not every idle child for each call.

        A signal handler that raises as the byte is read (Python runs it right after
        the read returns, before its result is kept) gets the byte given back: the
        exception comes with none taken, as from multiprocessing's own (whose ``with``
        is entered at once). A lock kept so was the child's result queue's, which the
        executor's retry of its ``put`` then waited on for ever."""
        taken = bytearray(b"\1")  # (the read puts the pipe's b"\0" here)
        try:
            return self._take(block, timeout, taken)
        except BaseException:
            if taken[0] == 0:
                self.release()
            raise

    def _take(self, block: bool, timeout: float | None, taken: bytearray) -> bool:
        if block and timeout is None:
            while not os.readv(self._r, [taken]):  # (no end of file: ``_w`` is ours)
                pass
            return True
        deadline = time.monotonic() + max(0.0, timeout or 0.0)
        while True:
            try:
                if os.readv(self._nb, [taken]):
                    return True
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if not block or left <= 0:
                return False
            poll = select.poll()  # (several takers may wake for one: each that finds
            poll.register(self._nb, select.POLLIN)  # none waits again)
            poll.poll(max(1, int(min(left, _LONGEST_POLL_S) * 1000)))  # (then again)

    def release(self) -> None:
        os.write(self._w, b"\0")

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def get_value(self) -> int:
        """How many can be taken now."""
        got = fcntl.ioctl(self._r, termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", got)[0])

    # multiprocessing's Queue asks its semaphore's ``_semlock`` whether it is full
    # (the executor does, before it queues a call) and how full.
    @property
    def _semlock(self) -> PipeSemaphore:
        return self

    def _is_zero(self) -> bool:
        return self.get_value() == 0

    def _get_value(self) -> int:
        return self.get_value()

    def __getstate__(self) -> tuple[Any, Any]:
        context.assert_spawning(self)  # (pickled only to go to a child at its spawn)
        return reduction.DupFd(self._r), reduction.DupFd(self._w)

    def __setstate__(self, state: tuple[Any, Any]) -> None:
        self._r, self._w = (int(fd.detach()) for fd in state)
        for fd in (self._r, self._w):  # (not passed on to what the child runs)
            os.set_inheritable(fd, False)
        self._nb = _not_blocking(self._r)

    def __del__(self, _close: Any = os.close) -> None:  # (os may be gone at exit)
        for fd in (getattr(self, n, -1) for n in ("_r", "_w", "_nb")):
            if fd >= 0:
                try:
                    _close(fd)
                except OSError:
                    pass


def _room(w: int, need: int) -> int:
    """What the pipe of write end ``w`` holds, grown to ``need`` if it held less (a
    pipe may hold 1 or 2 pages: a user past the system's pipe-user-pages-soft gets no
    more, unless grown). 64 KiB where the size cannot be read or set (not Linux)."""
    get, set_ = getattr(fcntl, "F_GETPIPE_SZ", None), getattr(fcntl, "F_SETPIPE_SZ", None)
    if get is None or set_ is None:
        return MOST
    room = int(fcntl.fcntl(w, get))
    if room < need:
        try:
            room = int(fcntl.fcntl(w, set_, need))
        except OSError:  # (EPERM: the user is past the hard limit)
            pass
    return room


def _not_blocking(r: int) -> int:
    """A file of this process's own on the pipe whose read end is ``r``, not blocking
    (/proc, Linux): a take that must not wait reads there, leaving ``r``'s open file,
    shared with the children, blocking."""
    return os.open(f"/proc/self/fd/{r}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)


class _PipeLockContext(context.SpawnContext):
    """The spawn context, its locks and semaphores pipes (`PipeSemaphore`)."""

    def Lock(self) -> Any:  # (multiprocessing's names)
        return PipeSemaphore(1)

    def Semaphore(self, value: int = 1) -> Any:
        return PipeSemaphore(value)

    def BoundedSemaphore(self, value: int = 1) -> Any:
        return PipeSemaphore(value)


PIPE_LOCKS = _PipeLockContext()


def pool_context() -> context.BaseContext:
    """`PIPE_LOCKS` on Linux; elsewhere spawn's own, whose semaphores are not files (a
    pipe's non-blocking twin is opened through /proc, which only Linux has)."""
    if sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd"):
        return PIPE_LOCKS
    return multiprocessing.get_context("spawn")
