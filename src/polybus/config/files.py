"""The files a configuration names (a module's ``source``, ``[cluster]`` token_file and
TLS files): where each is, relative to the configuration's directory with ``~``
expanded, and why one cannot be read as a file, said in words.

A name no file can have (a NUL character in it, which TOML's ``"\\u0000"`` and ``--set``
can write) is refused before any path is made of it: ``Path`` raised ``ValueError:
embedded null byte`` from deep inside ``check`` and ``run``, a traceback. A source that
is a directory or a device was said "not found".
"""

from __future__ import annotations

import stat
from pathlib import Path

__all__ = ["CONFIG_SUFFIXES", "NUL_SAID", "config_file", "configurations_in", "has_nul",
           "not_a_file"]

NUL_SAID = "contains a NUL character, which no file name can hold"
CONFIG_SUFFIXES = (".toml", ".cfg", ".mil")
"""A configuration's: TOML's, then MIL's (config/mil.py)."""


def configurations_in(folder: Path) -> list[Path]:
    """The configuration files in ``folder`` (`CONFIG_SUFFIXES`; not a Python project's
    pyproject.toml), TOML's first, each kind by name; none if it cannot be read."""
    try:
        found = [f for f in folder.iterdir() if f.suffix in CONFIG_SUFFIXES and f.is_file()
                 and f.name != "pyproject.toml"]
    except OSError:
        return []
    return sorted(found, key=lambda f: (CONFIG_SUFFIXES.index(f.suffix), f.name))


def has_nul(name: str) -> bool:
    """Whether ``name`` holds a NUL character (no path can: the OS ends a name there)."""
    return "\0" in name


def config_file(base_dir: Path, written: str) -> Path:
    """The file ``written`` names, relative to ``base_dir`` (the configuration's
    directory), ``~`` expanded, symbolic links resolved. ``written`` holds no NUL
    (`has_nul`). A ``~user`` of no such user stays as written; a loop of links is left
    unresolved, for `not_a_file` to say."""
    try:
        path = base_dir / Path(written).expanduser()
    except RuntimeError:  # (~nosuchuser: no home directory to expand it to)
        path = base_dir / written
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # (a loop of symbolic links)
        return path


def not_a_file(path: Path) -> str | None:
    """Why ``path`` is not a regular file to read: "not found", "is a directory", "is not
    a regular file" (a device, a FIFO, a socket) or "cannot be read: <why>" (a loop of
    links, a name too long, a directory it may not look in); None if it is one."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "not found"
    except OSError as e:
        return f"cannot be read: {e.strerror or e}"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        return "is not a regular file"
    return None
