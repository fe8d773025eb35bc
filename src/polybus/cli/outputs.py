"""Output files named on the command line (--json, --csv): refused before anything runs,
so a mistyped directory does not cost a whole run and end in a traceback."""

from __future__ import annotations

import os
from pathlib import Path

from polybus.errors import UsageError


def check_writable(path: str | None, option: str) -> None:
    """UsageError naming ``option`` if ``path`` could not be written (None: not asked)."""
    if path is None:
        return
    p = Path(path)
    parent = p.parent
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable by this user")
