"""Large messages reuse their memory: glibc's allocator is told to keep freed blocks.

Every large value a process receives (a 1 MB bytes echo, a block of a matrix) lands in
fresh memory of its own, and is freed when the program is done with it. With glibc's
defaults that memory goes back to the kernel on free: blocks above the mmap threshold
are unmapped, and a thread's arena gives its freed top back (the replicas receive in
pool threads). The next message's block is then faulted in again, page by page, as
it is received: measured, ~200 page faults per 1 MB round trip, and 640-695 us for a
1 MB sync echo over a Unix socket where the raw socket takes ~320 us.

So each polybus process (replicas, and the client when its session starts) raises
the mmap threshold to its maximum (32 MiB: blocks up to it come from the heap and are
reused) and the trim threshold to 128 MiB (a process keeps up to that much freed
memory for its next messages). Same 1 MB echo, alternating runs: Unix socket 638-695
-> 230-241 us, TCP 663 -> 235 us, shm 429 -> 194 us (split CPUs). Values above 32 MiB
are mapped and unmapped as before.

A replica, which serves for as long as it runs, also caps its arenas (`REPLICA_ARENAS`).
glibc gives threads arenas of their own, up to 8 per CPU, and each keeps the freed
memory its threads leave in it, up to the trim threshold: a replica's pool threads,
poller and readers each filled one, and its memory grew with the clients it served.
With one arena it stays flat; no benchmark measured a cost (design.md, "A long-lived
replica's memory"). ``MALLOC_ARENA_MAX`` in a replica's environment is left to glibc.

``POLYBUS_MALLOC=system`` leaves the allocator as it was; other C libraries (musl) and
other systems are left alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["REPLICA_ARENAS", "keep_freed_memory"]

_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
MMAP_THRESHOLD = 32 << 20  # glibc's largest allowed value on 64-bit systems
TRIM_THRESHOLD = 128 << 20
REPLICA_ARENAS = 1  # every thread of a replica in the main arena

_done: list[bool] = []


def keep_freed_memory(arenas: int | None = None) -> bool:
    """Tune this process's allocator once (see above); True if it was tuned. With
    ``arenas`` (a replica: `REPLICA_ARENAS`), glibc makes at most that many arenas,
    unless ``MALLOC_ARENA_MAX`` is set."""
    if _done:
        return _done[0]
    _done.append(False)
    if not sys.platform.startswith("linux") or os.environ.get("POLYBUS_MALLOC") == "system":
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    if ok and arenas is not None and "MALLOC_ARENA_MAX" not in os.environ:
        ok = bool(mallopt(_M_ARENA_MAX, arenas))
    _done[0] = ok
    return ok
