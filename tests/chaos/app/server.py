"""Chaos test server: every execution is recorded in a side file before it runs.

The side file (one per process, appended with O_APPEND writes that survive SIGKILL)
is how the tests count executions without trusting the runtime they test.
"""

import os
import signal
import time

_SIDE = os.environ.get("POLYBUS_CHAOS_DIR", "")
_fd = -1


def _record(tag: str, i: int, more: str = "") -> None:
    global _fd
    if not _SIDE:
        return
    if _fd < 0:
        _fd = os.open(os.path.join(_SIDE, f"{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(_fd, f"{tag} {i}{more}\n".encode())


def square(i: int, ms: float = 0.0) -> int:
    _record("run", i)
    if ms:
        time.sleep(ms / 1000)
    return i * i


def poison(i: int, bad: int, ms: float = 0.0) -> int:
    _record("run", i)
    if i == bad:
        os.kill(os.getpid(), signal.SIGKILL)
    if ms:
        time.sleep(ms / 1000)
    return i * i


def once(i: int, ms: float = 0.0) -> int:
    _record("run", i)
    if ms:
        time.sleep(ms / 1000)
    return i * i


def slow(i: int, seconds: float) -> int:
    _record("run", i)
    time.sleep(seconds)
    _record("done", i)
    return i


def span(i: int, seconds: float) -> int:
    """Sleeps ``seconds``; its side file says when each run began and ended, and where."""
    _record("begin", i, f" {os.getpid()} {time.time():.6f}")
    time.sleep(seconds)
    _record("end", i, f" {os.getpid()} {time.time():.6f}")
    return i
