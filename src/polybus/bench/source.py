"""The git commit of the polybus source a benchmark ran, for the JSON's ``machine``.

``{"hash": "b39bd5d", "dirty": false}`` when polybus runs from a git checkout (the
package's own files tracked there: an install into a virtualenv that happens to sit
inside some repository is not one); None otherwise, or when git is missing or slow.
``dirty``: tracked files differed from the commit (untracked files are not counted).
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import polybus

__all__ = ["GIT_TIMEOUT_S", "source_commit"]

GIT_TIMEOUT_S = 5.0
PACKAGE_DIR = Path(polybus.__file__).resolve().parent


def _git(directory: Path, *args: str) -> str | None:
    try:
        # (--no-optional-locks: status does not write the index back, under an
        # index.lock that the timeout's SIGKILL would leave behind in the user's checkout)
        done = subprocess.run(["git", "--no-optional-locks", "-C", str(directory), *args],
                              capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def commit_of(directory: Path) -> dict[str, str | bool] | None:
    """The short commit and dirtiness of the checkout ``directory``'s files are tracked
    in; None if they are not (or git cannot say)."""
    if _git(directory, "ls-files", "--error-unmatch", "--", "__init__.py") is None:
        return None
    short = _git(directory, "rev-parse", "--short", "HEAD")
    status = _git(directory, "status", "--porcelain", "--untracked-files=no")
    if not short or status is None:
        return None
    return {"hash": short.strip(), "dirty": bool(status.strip())}


@functools.cache
def source_commit() -> dict[str, str | bool] | None:
    """:func:`commit_of` the polybus package, asked once per process."""
    return commit_of(PACKAGE_DIR)
