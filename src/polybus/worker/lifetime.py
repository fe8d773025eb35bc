"""Processes polybus starts end with the process that started them (Linux)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal


def die_with_parent(sig: int = signal.SIGTERM, parent: int | None = None) -> None:
    """Have the kernel send ``sig`` to this process when its parent ends (no orphans).

    The kernel sends it when the parent *thread* that started this process ends. With
    ``parent`` (that process's pid), a parent that ended before this request was made
    (this process is then someone else's child) sends it at once, here.
    """
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, sig)  # PR_SET_PDEATHSIG
    except OSError:
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), sig)


def how_it_ended(code: int) -> str:
    """"exited with status 3", or "was killed by signal 9 (SIGKILL)" for a negative
    exit code (what subprocess and multiprocessing give for a signal)."""
    if code >= 0:
        return f"exited with status {code}"
    how = f"was killed by signal {-code}"
    with contextlib.suppress(ValueError):
        how += f" ({signal.Signals(-code).name})"
    return how
