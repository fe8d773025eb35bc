"""Which source files are polybus's own: frames a user cannot act on, left out of the
tracebacks and call sites polybus shows (usercode.py, callsite.py, worker/replies.py).
Imports nothing of polybus, so a process-pool child can use it cheaply."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["is_polybus_file"]

_POLYBUS = str(Path(__file__).resolve().parent) + os.sep


def is_polybus_file(filename: str) -> bool:
    """True for a file of the polybus package itself."""
    return filename.startswith(_POLYBUS)
