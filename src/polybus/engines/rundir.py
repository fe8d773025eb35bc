"""A run's own directory in ``$TMPDIR``, and the removal of those whose run is gone.

The local engine keeps what it makes on disk (each worker's log, the ipc/shm socket
files) in one directory per run, ``polybus-<pid>-<random>`` (0700, as ``mkdtemp`` makes
it), and removes it when it stops. A run killed outright (SIGKILL) cannot: its
directory stays. So each run first removes the directories of runs that are gone,
which bounds what dead runs leave to the ones killed since the last run started.

A directory is removed only when it can be shown to be one of these whose run is gone:
its name has that form, it is a directory (not a link to one) owned by this user, it
holds the mark a run writes, a file naming the same pid, and no process has that pid.
Anything else in ``$TMPDIR`` is left as it is, whatever its name: one whose pid was
taken by another process since waits for that process to end. An empty directory of
that name and owner whose pid is gone goes too (a run killed between making it and
writing its mark left one; removing an empty directory cannot remove anything else).

A Unix socket's path is at most 107 bytes. When ``$TMPDIR`` is so long that a socket
file in a run's directory would pass that, the run's directory is made in ``/tmp``
instead (the first of ``/tmp``, ``/dev/shm``, ``/var/tmp`` that is a writable
directory), as Ray does for its own sockets; with none, in ``$TMPDIR``, and the listen
error says what to do (transport/endpoints.py).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

__all__ = ["MARK", "SOCKET_PATH_MAX", "make_run_dir", "remove_stale_run_dirs", "run_base"]

MARK = "polybus-run"  # the file in a run's directory that names the run's pid
_NAME = re.compile(r"polybus-([1-9][0-9]*)-[a-z0-9_]+")
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path, less its NUL)
# What a run's directory adds to its base: "/polybus-<pid>-<8 random>/<index>.<scheme>",
# with a pid of up to 7 digits and an index of up to 5.
_IN_RUN_DIR = len("/polybus-4194304-abcdefgh/99999.ipc")
_SHORT_BASES = ("/tmp", "/dev/shm", "/var/tmp")


def run_base() -> Path:
    """Where runs' directories go: ``$TMPDIR``, unless a socket file in one would make
    too long a path (module docstring)."""
    base = tempfile.gettempdir()
    if len(os.fsencode(base)) + _IN_RUN_DIR <= SOCKET_PATH_MAX:
        return Path(base)
    for short in _SHORT_BASES:
        if os.path.isdir(short) and os.access(short, os.W_OK | os.X_OK):
            return Path(short)
    return Path(base)


def make_run_dir() -> Path:
    """A new directory for this run's files, marked with this process's pid."""
    pid = os.getpid()
    d = Path(tempfile.mkdtemp(prefix=f"polybus-{pid}-", dir=run_base()))
    (d / MARK).write_text(f"{pid}\n")
    return d


def remove_stale_run_dirs(where: Path | None = None) -> list[Path]:
    """Remove the run directories in ``where`` (``$TMPDIR``) whose run is gone; the
    paths removed."""
    base = Path(where) if where is not None else run_base()
    try:
        names = [e.name for e in os.scandir(base)]
    except OSError:
        return []
    removed = []
    for name in names:
        m = _NAME.fullmatch(name)
        if m is None:
            continue
        path, pid = base / name, int(m.group(1))
        if pid == os.getpid() or not _own_dir(path) or _alive(pid):
            continue
        if _marked(path, pid):
            shutil.rmtree(path, ignore_errors=True)  # (never follows a link inside)
        else:
            try:
                os.rmdir(path)  # (only if empty: one with anything in it is not ours to say)
            except OSError:
                continue
        removed.append(path)
    return removed


def _own_dir(path: Path) -> bool:
    """``path`` is a directory of this user's, not a link to one."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def _marked(path: Path, pid: int) -> bool:
    """``path``, a directory of this user's (not a link: `_own_dir`), holds a mark for
    ``pid``."""
    uid = os.getuid()
    try:
        mark = path / MARK
        mt = os.lstat(mark)
        if not stat.S_ISREG(mt.st_mode) or mt.st_uid != uid or mt.st_size > 32:
            return False
        return mark.read_text(encoding="ascii").strip() == str(pid)
    except (OSError, UnicodeDecodeError):
        return False


def _alive(pid: int) -> bool:
    """Whether a process has ``pid`` (one this user may not signal counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (EPERM: someone else's process)
        return True
    return True
