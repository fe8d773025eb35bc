"""Which source files are polybus's own: frames a user cannot act on, left out of the
tracebacks and call sites polybus shows (usercode.py, callsite.py, worker/replies.py).
Also which are a library's (the standard library's, an installed package's): a frame of
the program's own is named in their place where there is one. Imports nothing of
polybus, so a process-pool child can use it cheaply."""

from __future__ import annotations

import os
import site
import sysconfig
from pathlib import Path
from types import TracebackType

__all__ = ["from_user_code", "is_library_file", "is_polybus_file", "to_user_code"]

_POLYBUS = str(Path(__file__).resolve().parent) + os.sep


def is_polybus_file(filename: str) -> bool:
    """True for a file of the polybus package itself."""
    return filename.startswith(_POLYBUS)


def _libraries() -> tuple[str, ...]:
    """Where the standard library and installed packages live: the interpreter's own
    folders, and `site`'s (a ``pip install --user``'s, a distribution's
    ``dist-packages``), each ending in a separator. The program's own lines are in none
    of them."""
    paths = {os.path.join(sysconfig.get_paths()[k], "")
             for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    for where in ("getsitepackages", "getusersitepackages"):
        try:  # (a site module without them: an embedded interpreter's, old virtualenv's)
            found = getattr(site, where)()
        except (AttributeError, OSError):
            continue
        paths.update(os.path.join(f, "") for f in ([found] if isinstance(found, str)
                                                   else found))
    return tuple(paths)


_LIBRARIES = ("<frozen ", *_libraries())


def is_library_file(filename: str) -> bool:
    """True for a file of the standard library or of an installed package (numpy's
    ``_methods.py``), importlib's frozen ones too: not the program's own code."""
    return filename.startswith(_LIBRARIES)


def from_user_code(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` from its first frame that is not polybus's own (the frames that called the
    user's function say nothing the user can act on); all of it if none is."""
    t = tb
    while t is not None:
        if not is_polybus_file(t.tb_frame.f_code.co_filename):
            return t
        t = t.tb_next
    return tb


def to_user_code(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` up to its last frame that is not polybus's own (for an error polybus raised
    inside the user's function: the user's line that called polybus ends it, as the
    user's function's own frame ends one it raised); all of it if none is."""
    kept: list[TracebackType] = []
    t = tb
    while t is not None:
        kept.append(t)
        t = t.tb_next
    while kept and is_polybus_file(kept[-1].tb_frame.f_code.co_filename):
        kept.pop()
    if not kept or kept[-1].tb_next is None:
        return tb
    out: TracebackType | None = None
    for t in reversed(kept):  # (new links: the exception's own traceback stays whole)
        out = TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out
