"""A private Ray's directory, removed once the daemons that write in it have ended.

``ray.shutdown`` signals Ray's daemons and returns before they have ended, and a
``ray.init`` cut short (a SIGTERM while Ray starts) leaves the daemons it had started
running until the run's process exits. A daemon still running when the run removed the
directory made its own again (Ray's GCS, starting, makes ``session_*/logs/events`` as
it goes), and the run left a ``polybus-ray-*`` directory behind. So the processes whose
command line names the directory (every Ray daemon's names its session's), the run's own
(its descendants) are told to end (SIGTERM, then SIGKILL), each waited for on its pidfd for a bounded
time, and only then is the directory removed. Linux; elsewhere the directory is removed
at once, as before.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import time
from pathlib import Path

__all__ = ["KILL_S", "TERM_S", "end_naming", "naming", "remove_private"]

TERM_S = 5.0  # for Ray's daemons to end on SIGTERM before they are killed
KILL_S = 2.0  # for them to be gone once killed


def naming(path: str) -> list[int]:
    """This process's descendants whose command line names ``path`` (a directory only
    this run made: only its Ray's daemons name it). Descendants only: a process of the
    user's own that names it (a ``tail -f`` of a log there) is never told to end."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    me, uid, needle = os.getpid(), os.getuid(), os.fsencode(path)
    parents: dict[int, int] = {}
    named = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            # (the parent: the field after the state, after the command's parenthesis)
            parents[int(entry.name)] = int((entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            if needle in (entry / "cmdline").read_bytes():
                named.append(int(entry.name))
        except (OSError, IndexError, ValueError):  # (ended meanwhile)
            continue
    return [pid for pid in named if _descends(pid, me, parents)]


def _descends(pid: int, me: int, parents: dict[int, int]) -> bool:
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid]
        if pid == me:
            return True
    return False


def _open(pid: int, path: str) -> int | None:
    """A pidfd of ``pid`` if it is still the process that names ``path`` (checked after
    the pidfd is open: a pid taken again by another process is never signalled)."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # (ended already)
        return None
    try:
        if os.fsencode(path) in Path(f"/proc/{pid}/cmdline").read_bytes():
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _wait(fds: list[int], seconds: float) -> list[int]:
    """Wait until every process of ``fds`` has ended (its pidfd readable), at most
    ``seconds``: the pidfds of those still running."""
    left = set(fds)
    deadline = time.monotonic() + seconds
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        poller = select.poll()
        for fd in left:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(remaining * 1000):
            left.discard(fd)
    return [fd for fd in fds if fd in left]


def _signal(fds: list[int], sig: int) -> None:
    for fd in fds:
        try:
            signal.pidfd_send_signal(fd, sig)
        except OSError:  # (ended meanwhile)
            pass


def end_naming(path: str, term_s: float = TERM_S, kill_s: float = KILL_S) -> list[int]:
    """End the processes that name ``path``: SIGTERM, up to ``term_s`` for them to end,
    then SIGKILL and up to ``kill_s``. The pids of those still there after that."""
    if not hasattr(os, "pidfd_open"):
        return []
    opened = {fd: pid for pid in naming(path) if (fd := _open(pid, path)) is not None}
    try:
        fds = list(opened)
        _signal(fds, signal.SIGTERM)
        left = _wait(fds, term_s)
        _signal(left, signal.SIGKILL)
        return [opened[fd] for fd in _wait(left, kill_s)]
    finally:
        for fd in opened:
            os.close(fd)


def remove_private(path: str) -> list[int]:
    """Remove a private Ray's directory ``path`` once the daemons that name it have
    ended; the pids of any still there (the directory is removed all the same)."""
    left = end_naming(path)
    shutil.rmtree(path, ignore_errors=True)
    return left
