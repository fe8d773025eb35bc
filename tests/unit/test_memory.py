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
