"""The child's side of a replica's process pool (procpool.py): what runs in each child.

Light to import (a child imports this module, and what it names, before it loads the
user's module): polybus's replies are imported only when a call fails.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from types import ModuleType
from typing import Any

from polybus.usernames import key_of

__all__ = ["invoke", "load", "ready"]

_module: ModuleType | None = None


def load(path: str, name: str, replica: int) -> None:
    """The pool's initializer: import the module ``name`` from ``path``."""
    global _module
    from polybus.client.stubs import serving
    from polybus.worker.lifetime import die_with_parent
    from polybus.worker.module import load_module

    # Sent when the replica's thread that started this child ends: the thread that made
    # the pool (ProcessPool._start), which runs until the replica stops.
    die_with_parent(signal.SIGKILL, replica)
    serving(key_of(name))  # (as its replica: worker/main.py)
    _module = load_module(Path(path), name)


def ready() -> int:
    """Answered once the child is up, its module loaded."""
    return os.getpid()


def invoke(fn_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """One call: the module's ``fn_name`` on these arguments, its value pickled here.

    The replica unpickles it in the call's own thread (procpool.py), so a value that
    does not unpickle there fails its call alone: inside the executor's answer, it was
    unpickled by the executor's thread, whose error broke the whole pool."""
    assert _module is not None
    try:
        value = getattr(_module, fn_name)(*args, **kwargs)
    except BaseException as exc:  # (sys.exit() and KeyboardInterrupt too, as a thread's)
        # The user's frames are here; in the replica the exception has only the pool's
        # (the child's text rides as a __cause__ that replies.failure would not show).
        from polybus.worker.replies import CHILD_TRACEBACK, remote_traceback, stand_in

        with contextlib.suppress(Exception):  # (an exception that refuses attributes)
            setattr(exc, CHILD_TRACEBACK, remote_traceback(exc))
        other = stand_in(exc)  # (one that would not unpickle there broke the pool)
        if other is not None:
            raise other from None
        raise
    # (A value that does not pickle raises here, and comes back as the executor sent it
    # before: an exception of the call.)
    buf = io.BytesIO()
    ForkingPickler(buf).dump(value)  # (as the executor pickles an answer)
    return buf.getvalue()
