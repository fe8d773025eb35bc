"""memory.py: each polybus process tells glibc to keep freed blocks for its next large
message, unless POLYBUS_MALLOC=system; elsewhere nothing is changed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

_PROBE = "from polybus.memory import keep_freed_memory as k; print(k(), k())"
_GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"


def _probe(**env: str) -> str:
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**os.environ, **env},
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not _GLIBC, reason="the allocator is tuned on glibc only")
def test_a_process_tunes_its_allocator_once() -> None:
    assert _probe() == "True True"  # (the second call answers from the first)


def test_polybus_malloc_system_leaves_the_allocator_alone() -> None:
    assert _probe(POLYBUS_MALLOC="system") == "False False"


# Threads that each allocate a block from glibc (above pymalloc's 512 bytes, below the
# mmap threshold) and wait for the others, then glibc's own count of its arenas
# (malloc_stats, on stderr).
_ARENAS = """\
import ctypes, sys, threading
from polybus.memory import keep_freed_memory
print(keep_freed_memory({arenas}))
held, together = [], threading.Barrier(6)  # (alive at once: no arena freed for another)
threads = [threading.Thread(target=lambda: (held.append(bytes(200_000)), together.wait()))
           for _ in range(6)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sys.stdout.flush()
ctypes.CDLL(None).malloc_stats()
"""


def _arenas(arenas: int | None, **env: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _ARENAS.format(arenas=arenas)],
                         env={**os.environ, **env}, capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip(), out.stderr.count("Arena ")


@pytest.mark.skipif(not _GLIBC, reason="the allocator is tuned on glibc only")
def test_a_replica_caps_its_arenas_and_others_do_not() -> None:
    from polybus.memory import REPLICA_ARENAS

    tuned, capped = _arenas(REPLICA_ARENAS)
    assert tuned == "True"
    assert capped == REPLICA_ARENAS
    assert _arenas(None)[1] > REPLICA_ARENAS  # (a client: glibc's own limit, 8 a CPU)
    # the user's MALLOC_ARENA_MAX wins, and POLYBUS_MALLOC=system leaves glibc alone
    assert _arenas(REPLICA_ARENAS, MALLOC_ARENA_MAX="3")[1] == 3
    assert _arenas(REPLICA_ARENAS, POLYBUS_MALLOC="system")[1] > REPLICA_ARENAS
